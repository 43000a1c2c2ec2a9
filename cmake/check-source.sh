#!/bin/sh
# check-source.sh: the two structural rules of the sources that a reader
# relies on and a compiler does not check (docs/architecture.md, "Layers").
#
#   check-source.sh <repository root>
#
# 1. The include graph: each folder of src/ includes only the folders below
#    it (the table below, the same as the one in docs/architecture.md), and
#    the contract tests (tests/test_*.c not named *_internals.c) include
#    only the public header and the tests' own helpers, never src/.
# 2. No function in src/ runs to 100 lines or more.
# Prints every violation and exits 1 if there is any.
set -u

root=${1:?usage: check-source.sh <repository root>}
cd "$root" || exit 2

# folder: the folders its files may include (its own included). "top" is
# src/ itself (the scheduler, the frame and the world's lifecycle).
allowed() {
    case "$1" in
    base) echo "base" ;;
    changes) echo "base changes" ;;
    relation) echo "base relation" ;;
    trace) echo "base trace" ;;
    jobs) echo "base trace jobs" ;;
    world) echo "base changes relation world" ;;
    top) echo "base changes relation trace jobs world top" ;;
    *) echo "" ;;
    esac
}

# The folder a path under src/ belongs to.
folder_of() {
    case "$1" in
    */*) echo "${1%%/*}" ;;
    *) echo top ;;
    esac
}

bad=0
for f in $(find src -name '*.c' -o -name '*.h' | sort); do
    rel=${f#src/}
    from=$(folder_of "$rel")
    ok=$(allowed "$from")
    if [ -z "$ok" ]; then
        echo "check-source: $f: folder src/$from is not in the layer table" >&2
        bad=1
        continue
    fi
    # Quoted includes name a header relative to src/ (or include/ for ecs.h).
    for inc in $(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$f"); do
        [ "$inc" = "ecs.h" ] && continue
        if [ ! -f "src/$inc" ]; then
            echo "check-source: $f includes \"$inc\", which is not under src/" >&2
            bad=1
            continue
        fi
        to=$(folder_of "$inc")
        case " $ok " in
        *" $to "*) ;;
        *)
            echo "check-source: $f (src/$from) includes $inc (src/$to): $from may include only: $ok" >&2
            bad=1
            ;;
        esac
    done
done

# Contract tests: the public header and the tests' helpers only.
for f in tests/test_*.c; do
    case "$f" in *_internals.c) continue ;; esac
    for inc in $(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$f"); do
        if [ "$inc" != "ecs.h" ] && [ ! -f "tests/$inc" ]; then
            echo "check-source: $f is a contract test but includes \"$inc\" (name it *_internals.c if it needs the internals)" >&2
            bad=1
        fi
    done
done

# Function length: a definition starts at a line in column 0 that opens a
# parameter list and is not a declaration, and ends at the next "}" in
# column 0 (the style puts both braces of a function there).
long=$(for f in $(find src -name '*.c' -o -name '*.h' | sort); do
    awk -v file="$f" '
        start == 0 && /^[A-Za-z_][^;]*\(/ && !/^(typedef|struct|enum|union|#)/ { start = NR; name = $0; next }
        start && /;[[:space:]]*$/ && body == 0 { start = 0; next }
        start && /^\{/ { body = 1; next }
        start && body && /^\}/ {
            n = NR - start + 1
            if (n >= 100) { sub(/\(.*/, "", name); printf "%s:%d: %s is %d lines\n", file, start, name, n }
            start = 0; body = 0
        }' "$f"
done)
if [ -n "$long" ]; then
    echo "$long" | sed 's/^/check-source: function of 100 lines or more: /' >&2
    bad=1
fi

if [ "$bad" -ne 0 ]; then
    exit 1
fi
echo "check-source: include graph follows the layers; contract tests use ecs.h only; every function in src/ is under 100 lines"
