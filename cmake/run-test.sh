#!/bin/sh
# run-test.sh: runs one test program for ctest (and `make stress`) in TSan
# builds. Usage: run-test.sh <program> [args...]
#
# Output is streamed as usual and also kept. When TSan could not even start
# the program (its first line of output is "FATAL: ThreadSanitizer:
# unexpected memory mapping", which happens with some kernels' address-space
# randomisation), the program is run again under `setarch <arch> -R`
# (randomisation off). Nothing of the program ran in that case, so the
# retry is safe. Any other failure, TSan's own fatal errors during a run
# included, is returned as it is: a retry could hide it. Exits with the
# program's status.
set -u

if [ $# -lt 1 ]; then
    echo "usage: $0 <program> [args...]" >&2
    exit 2
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/stagehand-run.XXXXXX") || exit 2
trap 'rm -rf "$tmp"' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# Keep the exit status across the pipe (POSIX sh has no pipefail).
{ "$@" 2>&1; echo $? >"$tmp/rc"; } | tee "$tmp/out"
rc=$(cat "$tmp/rc" 2>/dev/null || echo 1)

if [ "$rc" -ne 0 ] && head -n 1 "$tmp/out" | grep -q -e '^FATAL: ThreadSanitizer: unexpected memory mapping'; then
    echo "run-test.sh: ThreadSanitizer could not start $1; retrying under setarch $(uname -m) -R" >&2
    setarch "$(uname -m)" -R "$@"
    exit $?
fi
exit "$rc"
