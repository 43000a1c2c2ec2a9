#!/bin/sh
# run-test.sh: runs one test program for ctest (and `make stress`).
# Usage: run-test.sh [--expect <extended regex>] <program> [args...]
#
# Output is streamed as usual and also kept, for two checks:
# - TSan builds: when TSan could not even start the program (its first
#   line of output is "FATAL: ThreadSanitizer: unexpected memory mapping",
#   which happens with some kernels' address-space randomisation), the
#   program is run again under `setarch <arch> -R` (randomisation off).
#   Nothing of the program ran in that case, so the retry is safe. Any
#   other failure, TSan's own fatal errors during a run included, is
#   returned as it is: a retry could hide it.
# - --expect: the program must also print a line matching the pattern.
#   ctest's PASS_REGULAR_EXPRESSION alone would ignore the exit status, so
#   a program that printed the right line and then failed (a leak report,
#   a sanitizer abort) would pass.
# Exits with the program's status (1 when it exited 0 without the line).
set -u

pattern=
if [ "${1:-}" = --expect ] && [ $# -ge 2 ]; then
    pattern=$2
    shift 2
fi
if [ $# -lt 1 ]; then
    echo "usage: $0 [--expect <regex>] <program> [args...]" >&2
    exit 2
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/stagehand-run.XXXXXX") || exit 2
trap 'rm -rf "$tmp"' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

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
    [ -z "$pattern" ] || echo "run-test.sh: $1 exited with status $rc" >&2
    exit "$rc"
fi
if [ -n "$pattern" ] && ! grep -E -q -e "$pattern" "$tmp/out"; then
    echo "run-test.sh: no line of $1's output matches: $pattern" >&2
    exit 1
fi
exit 0
