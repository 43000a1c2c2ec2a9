#!/bin/sh
# run-programs.sh: runs every program listed (one path per line) in a file
# that the build writes (stress-programs.txt, bench-programs.txt).
#
#   run-programs.sh stress <list> <timeout-s> [args...]
#       each program with args under `timeout`, through run-test.sh (TSan
#       start-up fallback) with the sanitizer options of the tests; runs
#       them all, then fails if any failed.
#   run-programs.sh bench <list> <timeout-s, 0 = none> [args...]
#       each program with args; stdout (one JSON object per result line) is
#       printed and the JSON lines are also collected into
#       <build dir>/bench-results.jsonl (the list's parent folder).
set -u

mode=${1:?usage: run-programs.sh stress|bench <list> <timeout> [args...]}
list=${2:?missing program list}
limit=${3:?missing timeout}
shift 3

here=$(cd "$(dirname "$0")" && pwd)

if [ ! -f "$list" ]; then
    echo "run-programs: $list not found (no library sources yet, or the build did not run)" >&2
    exit 1
fi
if ! grep -q . "$list"; then
    echo "run-programs: no $mode programs (nothing in $list)"
    exit 0
fi

with_timeout() {
    if [ "$limit" -gt 0 ]; then
        timeout --kill-after=30 "$limit" "$@"
    else
        "$@"
    fi
}

failed=""
case "$mode" in
stress)
    TSAN_OPTIONS=${TSAN_OPTIONS:-halt_on_error=1:second_deadlock_stack=1}
    ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
    UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
    export TSAN_OPTIONS ASAN_OPTIONS UBSAN_OPTIONS
    while IFS= read -r prog; do
        [ -n "$prog" ] || continue
        echo "== stress: $prog $* (timeout ${limit}s)"
        s=$(date +%s)
        with_timeout sh "$here/run-test.sh" "$prog" "$@" </dev/null
        rc=$?
        t=$(( $(date +%s) - s ))
        if [ "$rc" -eq 0 ]; then
            echo "== stress: $(basename "$prog") passed in ${t}s"
        else
            [ "$rc" -eq 124 ] && echo "== stress: $(basename "$prog") timed out after ${limit}s" >&2
            echo "== stress: $(basename "$prog") FAILED (exit $rc) after ${t}s" >&2
            failed="$failed $(basename "$prog")"
        fi
    done <"$list"
    ;;
bench)
    out="$(cd "$(dirname "$list")/.." && pwd)/bench-results.jsonl"
    : >"$out"
    while IFS= read -r prog; do
        [ -n "$prog" ] || continue
        echo "== bench: $(basename "$prog")" >&2
        tmp=$(mktemp -d)
        # Stream stdout and keep it; the exit status survives the pipe.
        { with_timeout "$prog" "$@" </dev/null; echo $? >"$tmp/rc"; } | tee "$tmp/out"
        rc=$(cat "$tmp/rc" 2>/dev/null || echo 1)
        grep '^[[:space:]]*{' "$tmp/out" >>"$out" || true
        rm -rf "$tmp"
        if [ "$rc" -ne 0 ]; then
            echo "== bench: $(basename "$prog") FAILED (exit $rc)" >&2
            failed="$failed $(basename "$prog")"
        fi
    done <"$list"
    echo "== bench: JSON lines collected in $out" >&2
    ;;
*)
    echo "run-programs: unknown mode '$mode'" >&2
    exit 2
    ;;
esac

if [ -n "$failed" ]; then
    echo "== $mode: failed:$failed" >&2
    exit 1
fi
exit 0
