#!/bin/sh
# run-programs.sh: runs every program listed (one path per line) in a file
# that the build writes (stress-programs.txt, bench-programs.txt).
#
#   run-programs.sh stress <list> <timeout-s> [args...]
#       each program with args under `timeout`, through run-test.sh (TSan
#       start-up fallback) with the sanitizer options of the tests, first
#       with its default seed, then (STRESS_SEEDS=n) with seeds 1..n
#       (STAGEHAND_SEED=k, which also replays one); runs them all, then
#       prints one line per run and fails if any failed.
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
    seeds=${STRESS_SEEDS:-0}
    case "$seeds" in
    '' | *[!0-9]*)
        echo "run-programs: STRESS_SEEDS must be a number of extra seeds (got '$seeds')" >&2
        exit 2
        ;;
    esac
    summary=""
    # run_one <program> <seed or "default"> [args...]
    run_one() {
        prog=$1 seed=$2
        shift 2
        echo "== stress: $prog $* (seed $seed, timeout ${limit}s)"
        s=$(date +%s)
        if [ "$seed" = default ]; then
            (unset STAGEHAND_SEED; with_timeout sh "$here/run-test.sh" "$prog" "$@" </dev/null)
        else
            STAGEHAND_SEED=$seed with_timeout sh "$here/run-test.sh" "$prog" "$@" </dev/null
        fi
        rc=$?
        t=$(( $(date +%s) - s ))
        name=$(basename "$prog")
        if [ "$rc" -eq 0 ]; then
            result=passed
        else
            [ "$rc" -eq 124 ] && echo "== stress: $name timed out after ${limit}s" >&2
            result="FAILED (exit $rc)"
            failed="$failed $name:$seed"
        fi
        echo "== stress: $name seed $seed $result in ${t}s"
        summary="$summary
$(printf '%-12s seed %-8s %-18s %6ss' "$name" "$seed" "$result" "$t")"
    }
    while IFS= read -r prog; do
        [ -n "$prog" ] || continue
        run_one "$prog" default "$@"
        k=1
        while [ "$k" -le "$seeds" ]; do
            run_one "$prog" "$k" "$@"
            k=$((k + 1))
        done
    done <"$list"
    echo "== stress: summary$summary"
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
