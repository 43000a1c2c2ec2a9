#!/bin/sh
# deps.sh: `make deps`. Checks for cmake (>= 3.21, for CMakePresets.json
# version 3), gcc, make, pkg-config and the pkg-config modules ck and
# cmocka, and for the fuzz phase clang with its libFuzzer runtime
# (libclang_rt.fuzzer); installs only what is missing, with apt-get, as
# root or through passwordless sudo (libc6-dev too, which gcc only
# recommends). Does nothing (and never calls apt-get) when all is
# present.
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
    else
        # Without pkg-config the modules cannot be checked; installing an
        # already-installed package is a no-op for apt-get.
        add pkg-config
        add libck-dev
        add libcmocka-dev
    fi
}

check
if [ -z "$missing" ]; then
    if cmake_too_old; then
        echo "deps: $(cmake --version | head -n 1) is too old: the presets need cmake >= 3.21" >&2
        exit 1
    fi
    echo "deps: ok (cmake, gcc, make, pkg-config, ck, cmocka, clang, libFuzzer)"
    exit 0
fi

echo "deps: missing Debian packages: $missing"
if [ "$(id -u)" -eq 0 ]; then
    as_root=""
elif have sudo && sudo -n true >/dev/null 2>&1; then
    as_root="sudo -n"
else
    echo "deps: cannot install them: not root and no passwordless sudo." >&2
    echo "deps: please run as root:  apt-get update && apt-get install -y $missing" >&2
    exit 1
fi
if ! have apt-get; then
    echo "deps: apt-get not found; install these (or their equivalents) by hand: $missing" >&2
    exit 1
fi

# shellcheck disable=SC2086 # $as_root and $missing are word lists
$as_root env DEBIAN_FRONTEND=noninteractive apt-get update
# shellcheck disable=SC2086
$as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends $missing

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
