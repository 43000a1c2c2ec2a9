# scene_checksums.cmake: the scene example's determinism test. Runs the
# program once per worker count and fails unless every run exits 0 and
# prints the same `checksum 0x...` line: transform propagation split into
# jobs depth by depth must give the same World matrices on any number of
# workers.
#
# Usage: cmake -DPROGRAM=<scene> -DWORKERS=1,2,4 [-DFRAMES=<n>]
#              [-DLAUNCHER=<run-test.sh>] -P scene_checksums.cmake
# LAUNCHER (TSan builds): each run goes through cmake/run-test.sh, which
# retries a program TSan could not start.

if(NOT PROGRAM OR NOT WORKERS)
    message(FATAL_ERROR "scene_checksums.cmake: PROGRAM and WORKERS are required")
endif()
if(NOT FRAMES)
    set(FRAMES 120)
endif()
string(REPLACE "," ";" worker_counts "${WORKERS}")

set(first "")
foreach(n IN LISTS worker_counts)
    set(cmd "${PROGRAM}" ${n} ${FRAMES})
    if(LAUNCHER)
        set(cmd sh "${LAUNCHER}" ${cmd})
    endif()
    execute_process(COMMAND ${cmd} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
    message("---- ${n} workers\n${out}${err}")
    if(NOT rc EQUAL 0)
        message(FATAL_ERROR "scene with ${n} workers exited with status ${rc}")
    endif()
    if(NOT out MATCHES "checksum (0x[0-9a-f]+)")
        message(FATAL_ERROR "scene with ${n} workers printed no checksum line")
    endif()
    set(sum "${CMAKE_MATCH_1}")
    if(first STREQUAL "")
        set(first "${sum}")
        set(first_n ${n})
    elseif(NOT sum STREQUAL first)
        message(FATAL_ERROR "checksums differ: ${first} with ${first_n} workers, ${sum} with ${n}")
    endif()
endforeach()
message("checksum ${first} with every worker count (${WORKERS})")
