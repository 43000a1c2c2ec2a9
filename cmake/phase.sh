#!/bin/sh
# phase.sh: one `make test` phase: configure, build and ctest one preset
# (release, debug, asan or tsan), then print a one-line timing summary,
# also appended to build/phases.txt. Stops at the first failing step and
# exits non-zero.
#
# Usage: phase.sh <preset> [build|test]   (test, the default, also builds)
# Environment: JOBS (parallel build/test jobs; default: nproc).
set -u

preset=${1:?usage: phase.sh <preset> [build|test]}
what=${2:-test}
jobs=${JOBS:-$(nproc 2>/dev/null || echo 2)}

t_configure=- t_build=- t_test=-
result=FAILED
start=$(date +%s)

summary() {
    total=$(( $(date +%s) - start ))
    if [ "$what" = test ]; then
        line=$(printf 'phase %-7s %-6s configure %4ss  build %4ss  test %4ss  total %4ss' \
            "$preset" "$result" "$t_configure" "$t_build" "$t_test" "$total")
    else
        line=$(printf 'phase %-7s %-6s configure %4ss  build %4ss  total %4ss' \
            "$preset" "$result" "$t_configure" "$t_build" "$total")
    fi
    echo "== $line"
    mkdir -p build && echo "$line" >>build/phases.txt
}

step() { # step <var> <command...>: runs the command, stores seconds in <var>
    var=$1
    shift
    # shellcheck disable=SC2034 # read by the eval below
    s=$(date +%s)
    "$@"
    rc=$?
    eval "$var=\$(( \$(date +%s) - s ))"
    return $rc
}

# Keep the CMake build independent of an outer make (`make test`): no
# inherited jobserver or "Entering directory" noise.
unset MAKEFLAGS MFLAGS MAKELEVEL

if [ "$preset" = tsan ]; then
    ECS_SPIN_US=0
    export ECS_SPIN_US
fi

if step t_configure cmake --preset "$preset" &&
    step t_build cmake --build --preset "$preset" -j "$jobs" &&
    { [ "$what" != test ] || step t_test ctest --preset "$preset" -j "$jobs"; }; then
    result=PASSED
fi
summary
[ "$result" = PASSED ]
