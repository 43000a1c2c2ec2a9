#!/bin/sh
# deps.sh: `make deps`. Checks for cmake (>= 3.21, for CMakePresets.json
# version 3), gcc, make, pkg-config and the pkg-config modules ck and
# cmocka, and for the fuzz phase clang with its libFuzzer runtime
# (libclang_rt.fuzzer), cJSON (libcjson-dev: the tests parse trace files
# with it); installs only what is missing, with apt-get, as root or
# through passwordless sudo (libc6-dev too, which gcc only recommends).
# Two more are wanted but not required: Chromium (the timeline page's test
# in a real browser) and Graphviz (the schedule drawn as SVG, and its DOT
# checked): installed with the rest when missing; where they cannot be,
# a line says so and the tests that need them skip with a message. Does
# nothing (and never calls apt-get) when all is present.
set -eu

missing=""
add() {
    case " $missing " in
    *" $1 "*) ;;
    *) missing="${missing:+$missing }$1" ;;
    esac
}

have() { command -v "$1" >/dev/null 2>&1; }

cmake_too_old() {
    v=$(cmake --version 2>/dev/null | sed -n 's/^cmake version \([0-9]*\)\.\([0-9]*\).*/\1 \2/p')
    [ -n "$v" ] || return 1
    # shellcheck disable=SC2086 # split "major minor" into $1 $2
    set -- $v
    [ "$1" -lt 3 ] || { [ "$1" -eq 3 ] && [ "$2" -lt 21 ]; }
}

# libFuzzer's runtime, where this clang looks for its runtimes (older
# layouts name it by architecture, newer ones by directory).
fuzzer_runtime_found() {
    dir=$(clang --print-runtime-dir 2>/dev/null) || return 1
    [ -f "$dir/libclang_rt.fuzzer-$(uname -m).a" ] || [ -f "$dir/libclang_rt.fuzzer.a" ]
}

check() {
    missing=""
    have cmake || add cmake
    have gcc || add gcc
    # gcc only recommends the C library headers; installs below skip
    # recommends, so ask for them by name.
    [ -f /usr/include/stdio.h ] || add libc6-dev
    have make || add make
    # The fuzz phase: Debian ships libFuzzer in libclang-rt-<major>-dev;
    # libclang-rt-dev follows the default clang.
    if have clang; then
        fuzzer_runtime_found || add "libclang-rt-$(clang -dumpversion | cut -d. -f1)-dev"
    else
        add clang
        add libclang-rt-dev
    fi
    if have pkg-config; then
        pkg-config --exists ck || add libck-dev
        pkg-config --exists cmocka || add libcmocka-dev
        pkg-config --exists libcjson || add libcjson-dev
    else
        # Without pkg-config the modules cannot be checked; installing an
        # already-installed package is a no-op for apt-get.
        add pkg-config
        add libck-dev
        add libcmocka-dev
        add libcjson-dev
    fi
}

# The optional ones, in $optional.
check_optional() {
    optional=""
    have chromium || have chromium-browser || optional="chromium"
    have dot || optional="${optional:+$optional }graphviz"
}

check
check_optional
if [ -z "$missing" ] && [ -z "$optional" ]; then
    if cmake_too_old; then
        echo "deps: $(cmake --version | head -n 1) is too old: the presets need cmake >= 3.21" >&2
        exit 1
    fi
    echo "deps: ok (cmake, gcc, make, pkg-config, ck, cmocka, cJSON, clang, libFuzzer, chromium, graphviz)"
    exit 0
fi

[ -z "$missing" ] || echo "deps: missing Debian packages: $missing"
[ -z "$optional" ] || echo "deps: missing optional Debian packages: $optional"
as_root=none
if [ "$(id -u)" -eq 0 ]; then
    as_root=""
elif have sudo && sudo -n true >/dev/null 2>&1; then
    as_root="sudo -n"
fi
if [ "$as_root" = none ] || ! have apt-get; then
    why="not root and no passwordless sudo"
    have apt-get || why="apt-get not found"
    if [ -n "$missing" ]; then
        echo "deps: cannot install them: $why." >&2
        echo "deps: please run as root:  apt-get update && apt-get install -y $missing $optional" >&2
        exit 1
    fi
    echo "deps: cannot install $optional ($why): the tests that need them will skip"
    exit 0
fi

# shellcheck disable=SC2086 # $as_root and $missing are word lists
$as_root env DEBIAN_FRONTEND=noninteractive apt-get update
if [ -n "$missing" ]; then
    # shellcheck disable=SC2086
    $as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends $missing
fi
# Each optional package on its own: one that cannot be had leaves the
# other installed (Chromium's fonts come with its fontconfig dependency).
for pkg in $optional; do
    # shellcheck disable=SC2086
    $as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends $pkg ||
        echo "deps: could not install $pkg: the tests that need it will skip"
done

check
if [ -n "$missing" ]; then
    echo "deps: still missing after apt-get install: $missing" >&2
    exit 1
fi
if cmake_too_old; then
    echo "deps: $(cmake --version | head -n 1) is too old: the presets need cmake >= 3.21" >&2
    exit 1
fi
echo "deps: ok"
