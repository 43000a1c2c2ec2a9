#!/bin/sh
# run.sh: the ways the fuzzer is run, for ctest (fuzz/CMakeLists.txt) and
# the Makefile (`make fuzz`, `make fuzz-merge`).
#
#   run.sh corpus  <fuzzer> <corpus> <out>            every corpus file once
#   run.sh fuzz    <fuzzer> <corpus> <out> <seconds>  fuzz from the corpus;
#                  new inputs go to <out>/new, crashes to <out>/artifacts
#   run.sh slice   <fuzzer> <corpus> <out> <seconds>  the same, with <out>/new
#                  emptied first
#   run.sh planted <fuzzer> <corpus> <out>            passes only when the
#                  (planted-bug) fuzzer reports a model mismatch: on the
#                  corpus, else within 60 seconds of fuzzing
#   run.sh merge   <fuzzer> <corpus> <dir>...         minimizes the corpus
#                  together with the inputs in <dir>... (libFuzzer -merge=1,
#                  new edges only) and replaces <corpus> with the result,
#                  plus the scenario inputs
set -u

mode=${1:?usage: run.sh corpus|fuzz|planted|merge <fuzzer> <corpus> ...}
fuzzer=${2:?fuzzer}
corpus=${3:?corpus}
shift 3

# Every input must pass on its own; the figures of a run go to stderr.
run_files() {
    # shellcheck disable=SC2086 # the corpus names have no blanks
    set -- "$corpus"/*
    if [ ! -e "$1" ]; then
        echo "run.sh: no corpus files in $corpus" >&2
        return 1
    fi
    echo "run.sh: running $# corpus files once"
    "$fuzzer" -artifact_prefix="$out/" "$@"
}

case "$mode" in
corpus)
    out=${1:?out}
    mkdir -p "$out"
    run_files >"$out/log.txt" 2>&1
    rc=$?
    if [ "$rc" -ne 0 ]; then
        tail -n 40 "$out/log.txt"
        echo "run.sh: FAILED: a corpus file fails (exit $rc); the input is under $out/" >&2
        exit "$rc"
    fi
    grep -c '^Executed ' "$out/log.txt" | sed 's/^/run.sh: executed /; s/$/ files, all passed/'
    ;;
fuzz | slice)
    out=${1:?out}
    seconds=${2:?seconds}
    # A slice (make test) starts from the corpus alone each time, so that
    # its start-up does not grow with the inputs earlier slices found.
    [ "$mode" = fuzz ] || rm -rf "$out/new"
    mkdir -p "$out/new" "$out/artifacts"
    exec "$fuzzer" -max_total_time="$seconds" -timeout=20 -rss_limit_mb=4096 -print_final_stats=1 \
        -artifact_prefix="$out/artifacts/" "$out/new" "$corpus"
    ;;
planted)
    out=${1:?out}
    mkdir -p "$out/new" "$out/artifacts"
    log="$out/log.txt"
    run_files >"$log" 2>&1
    rc=$?
    if [ "$rc" -ne 0 ] && grep -q '^fuzz mismatch: ' "$log"; then
        grep '^fuzz mismatch: ' "$log" | head -n 1
        echo "run.sh: the planted bug was caught by the corpus (exit $rc)"
        exit 0
    fi
    echo "run.sh: the corpus did not catch the planted bug (exit $rc); fuzzing for 60 s"
    "$fuzzer" -max_total_time=60 -timeout=20 -artifact_prefix="$out/artifacts/" "$out/new" "$corpus" >"$log" 2>&1
    rc=$?
    if [ "$rc" -ne 0 ] && grep -q '^fuzz mismatch: ' "$log"; then
        grep '^fuzz mismatch: ' "$log" | head -n 1
        echo "run.sh: the planted bug was caught by fuzzing (exit $rc)"
        exit 0
    fi
    tail -n 20 "$log"
    echo "run.sh: FAILED: the planted bug went unnoticed (exit $rc)" >&2
    exit 1
    ;;
merge)
    [ $# -gt 0 ] || { echo "run.sh merge: no input directories" >&2; exit 1; }
    tmp="$corpus.merge.$$"
    rm -rf "$tmp"
    mkdir -p "$tmp"
    # Edges only (-use_counters=0): counting hit buckets as features kept
    # five times the files (2200, 337 KB), which the corpus replay and
    # the fuzzing slice of make test then spend a third of their time on.
    if ! "$fuzzer" -merge=1 -use_counters=0 "$tmp" "$corpus" "$@"; then
        rm -rf "$tmp"
        exit 1
    fi
    rm -f "$corpus"/*
    mv "$tmp"/* "$corpus"/ 2>/dev/null
    rmdir "$tmp"
    # The scenario inputs stay, whether or not they still add coverage: the
    # planted-bug tests count on them.
    "$fuzzer" --make-corpus="$corpus" || exit 1
    echo "run.sh: $corpus now holds $(ls "$corpus" | wc -l) files, $(du -sk "$corpus" | cut -f1) KB"
    ;;
*)
    echo "run.sh: unknown mode $mode" >&2
    exit 2
    ;;
esac
