#!/bin/sh
# run-test.sh: runs one test program for ctest (and `make stress`).
# Usage: run-test.sh [--expect <extended regex>]... <program> [args...]
#
# Output is streamed as usual and also kept, for two checks:
# - TSan builds: when TSan could not even start the program (its first
#   line of output is "FATAL: ThreadSanitizer: unexpected memory mapping",
#   which happens with some kernels' address-space randomisation), the
#   program is run again under `setarch <arch> -R` (randomisation off).
#   Nothing of the program ran in that case, so the retry is safe. Any
#   other failure, TSan's own fatal errors during a run included, is
#   returned as it is: a retry could hide it.
# - --expect (may be given several times): for each pattern, the program
#   must also print a line matching it (the user guide's examples check
#   every line they print this way).
#   ctest's PASS_REGULAR_EXPRESSION alone would ignore the exit status, so
#   a program that printed the right line and then failed (a leak report,
#   a sanitizer abort) would pass.
# Exits with the program's status (1 when it exited 0 without a line).
set -u

tmp=$(mktemp -d "${TMPDIR:-/tmp}/stagehand-run.XXXXXX") || exit 2
trap 'rm -rf "$tmp"' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# The patterns, one per line (a regex never holds a newline).
: >"$tmp/patterns"
while [ "${1:-}" = --expect ] && [ $# -ge 2 ]; do
    printf '%s\n' "$2" >>"$tmp/patterns"
    shift 2
done
if [ $# -lt 1 ]; then
    echo "usage: $0 [--expect <regex>]... <program> [args...]" >&2
    exit 2
fi

# Keep the exit status across the pipe (POSIX sh has no pipefail).
run() {
    { "$@" 2>&1; echo $? >"$tmp/rc"; } | tee "$tmp/out"
    rc=$(cat "$tmp/rc" 2>/dev/null || echo 1)
}

run "$@"
if [ "$rc" -ne 0 ] && head -n 1 "$tmp/out" | grep -q -e '^FATAL: ThreadSanitizer: unexpected memory mapping'; then
    echo "run-test.sh: ThreadSanitizer could not start $1; retrying under setarch $(uname -m) -R" >&2
    run setarch "$(uname -m)" -R "$@"
fi
if [ "$rc" -ne 0 ]; then
    [ ! -s "$tmp/patterns" ] || echo "run-test.sh: $1 exited with status $rc" >&2
    exit "$rc"
fi
missing=0
while IFS= read -r pattern; do
    if ! grep -E -q -e "$pattern" "$tmp/out"; then
        echo "run-test.sh: no line of $1's output matches: $pattern" >&2
        missing=1
    fi
done <"$tmp/patterns"
exit "$missing"
