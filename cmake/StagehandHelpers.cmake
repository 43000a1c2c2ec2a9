# StagehandHelpers.cmake: how the project's programs become ctest tests.
#
# Every test gets the same environment (no worker spinning, sanitizers that
# stop at the first report) and, in TSan builds, runs through
# cmake/run-test.sh, which retries a binary under `setarch -R` when TSan
# cannot start because of the kernel's address-space layout (so does a
# test that checks its output, in any build).

set(STAGEHAND_TEST_ENVIRONMENT
    "ECS_SPIN_US=0"
    "TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1"
    "ASAN_OPTIONS=detect_leaks=1:abort_on_error=1"
    "UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1")

# The sanitizer options without ECS_SPIN_US: stress programs keep the
# default spinning, so both the spin and the sleep paths get exercised,
# except in the TSan phase, whose preset (and `make test`) exports
# ECS_SPIN_US=0, which stress/env.h then applies as a cap.
set(STAGEHAND_SANITIZER_ENVIRONMENT
    "TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1"
    "ASAN_OPTIONS=detect_leaks=1:abort_on_error=1"
    "UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1")

set(STAGEHAND_TEST_LAUNCHER "${CMAKE_CURRENT_LIST_DIR}/run-test.sh")

# stagehand_add_test(<name> TARGET <target> [ARGS ...] TIMEOUT <s>
#                    [ENVIRONMENT <VAR=value> ...] [EXPECT_OUTPUT <regex> ...])
# Registers target as ctest test <name>; ENVIRONMENT defaults to
# STAGEHAND_TEST_ENVIRONMENT. EXPECT_OUTPUT: the test also needs, for each
# (extended) regex, a line of output matching it (a regex may not contain
# ';', CMake's list separator); it still fails on a non-zero exit
# (through cmake/run-test.sh), which PASS_REGULAR_EXPRESSION would ignore.
function(stagehand_add_test name)
    cmake_parse_arguments(PARSE_ARGV 1 arg "" "TARGET;TIMEOUT" "ARGS;ENVIRONMENT;EXPECT_OUTPUT")
    if(NOT arg_TARGET OR NOT arg_TIMEOUT)
        message(FATAL_ERROR "stagehand_add_test(${name}): TARGET and TIMEOUT are required")
    endif()
    if(NOT DEFINED arg_ENVIRONMENT)
        set(arg_ENVIRONMENT ${STAGEHAND_TEST_ENVIRONMENT})
    endif()
    set(cmd "$<TARGET_FILE:${arg_TARGET}>" ${arg_ARGS})
    if(DEFINED arg_EXPECT_OUTPUT)
        set(expects "")
        foreach(pattern IN LISTS arg_EXPECT_OUTPUT)
            list(APPEND expects --expect "${pattern}")
        endforeach()
        set(cmd sh "${STAGEHAND_TEST_LAUNCHER}" ${expects} ${cmd})
    elseif(ECS_SANITIZE STREQUAL "thread")
        set(cmd sh "${STAGEHAND_TEST_LAUNCHER}" ${cmd})
    endif()
    add_test(NAME ${name} COMMAND ${cmd})
    set_tests_properties(${name} PROPERTIES
        TIMEOUT ${arg_TIMEOUT}
        ENVIRONMENT "${arg_ENVIRONMENT}")
endfunction()

# stagehand_program_list(<file> <target>...): writes the paths of the
# targets' executables, one per line, to <file> at generate time (the
# Makefile's `stress` and `bench` targets read these lists).
function(stagehand_program_list file)
    set(lines "")
    foreach(t IN LISTS ARGN)
        string(APPEND lines "$<TARGET_FILE:${t}>\n")
    endforeach()
    file(GENERATE OUTPUT "${file}" CONTENT "${lines}")
endfunction()
