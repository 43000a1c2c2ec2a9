#!/bin/sh
# expect-output.sh: runs one test program for ctest and passes only when it
# exits 0 and its output (stdout and stderr) has a line matching a pattern.
# ctest's PASS_REGULAR_EXPRESSION alone ignores the exit status, so a
# program that printed the right line and then failed (a leak report, a
# sanitizer abort turned into an exit code by run-test.sh) would pass.
# Usage: expect-output.sh <extended regex> <program> [args...]
set -u

if [ $# -lt 2 ]; then
    echo "usage: $0 <regex> <program> [args...]" >&2
    exit 2
fi
pattern=$1
shift

tmp=$(mktemp -d "${TMPDIR:-/tmp}/stagehand-expect.XXXXXX") || exit 2
trap 'rm -rf "$tmp"' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# Keep the exit status across the pipe (POSIX sh has no pipefail).
{ "$@" 2>&1; echo $? >"$tmp/rc"; } | tee "$tmp/out"
rc=$(cat "$tmp/rc" 2>/dev/null || echo 1)
if [ "$rc" -ne 0 ]; then
    echo "expect-output.sh: $1 exited with status $rc" >&2
    exit "$rc"
fi
if ! grep -E -q -e "$pattern" "$tmp/out"; then
    echo "expect-output.sh: no line of $1's output matches: $pattern" >&2
    exit 1
fi
exit 0
