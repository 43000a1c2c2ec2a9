#!/bin/sh
# install-consumer-test.sh: ctest test `install_consumer`, in every build
# (release, debug, asan, tsan). Installs the build's flavour into a scratch
# prefix and checks that a separate project can use it both ways a user
# would. The prefix holds other flavours first, so that flavours are
# checked side by side:
#   - release: it also builds the debug flavour's library (the library
#     alone, `cmake --preset debug` into <work-dir>/debug-build, kept
#     between runs; about 20 s of CPU from scratch) and installs it too;
#   - the others start from a copy of the fullest prefix a sibling build's
#     install_consumer left (`make test`: asan from release's, so release,
#     debug and asan; tsan from asan's, so all four), when its shared
#     files are this build's (see the seed below).
# Then, for every flavour in the prefix:
#   0. each install adds only files named for its flavour (libstagehand-F.*,
#      stagehand-F.pc, stagehandTargets_F*.cmake; no -F for release) and
#      the ones all flavours share (include/stagehand/, the config and
#      version files), and changes no file already in the prefix;
#   1. CMake: tests/consumer/CMakeLists.txt does one
#      find_package(stagehand 0.1 COMPONENTS <flavours>) and links each
#      flavour's shared and static targets (stagehand::ecs,
#      stagehand::ecs_static, stagehand::ecs_debug, ...);
#   2. pkg-config: the same main.c built with `pkg-config --cflags --libs
#      stagehand-F` (shared) and with --static (the .a and Libs.private);
#      the Cflags point at include/stagehand and carry none of ck's.
# Every program is run (through cmake/run-test.sh, which retries under
# `setarch -R` when TSan cannot start) and must print "consumer: ok" with
# the sanitizer it was compiled with (the flavour's: the targets and the
# .pc carry -fsanitize=...). Run again with --undeclared-read (a system
# reading a component it did not declare), the debug, asan and tsan
# flavours must abort with the library's message and release must not.
#
# Usage: install-consumer-test.sh <cmake> <build-dir> <config> <source-dir>
#            <work-dir> <c-compiler> <libdir> <includedir> <flavour>
set -eu

if [ $# -ne 9 ]; then
    echo "usage: $0 <cmake> <build-dir> <config> <source-dir> <work-dir> <c-compiler> <libdir> <includedir> <flavour>" >&2
    exit 2
fi
cmake=$1 build=$2 config=$3 srcdir=$4 work=$5 cc=$6 libdir=$7 includedir=$8 flavour=$9
src="$srcdir/tests/consumer"
runner="$srcdir/cmake/run-test.sh"

prefix="$work/prefix"
# The debug build is kept, so a second run rebuilds only what changed.
rm -rf "$prefix" "$work/snapshots" "$work/consumer" "$work/pkgconfig"
mkdir -p "$work/snapshots" "$work/pkgconfig"

case "$libdir" in
/*) libpath="$libdir" ;;
*) libpath="$prefix/$libdir" ;;
esac
case "$includedir" in
/*) incpath="$includedir" ;;
*) incpath="$prefix/$includedir" ;;
esac
pcdir="$libpath/pkgconfig"
cmakedir="$libpath/cmake/stagehand"

fail() {
    echo "install_consumer: FAILED: $*" >&2
    exit 1
}

file_suffix() { [ "$1" = release ] || echo "-$1"; }
target_suffix() { [ "$1" = release ] || echo "_$1"; }

# snapshot <file>: one line per installed file of the package, its path
# and content hash (a link: its target).
snapshot() {
    find "$prefix" "$libpath" "$incpath" \( -type f -o -type l \) 2>/dev/null | sort -u |
        while IFS= read -r f; do
            if [ -L "$f" ]; then
                printf '%s -> %s\n' "$f" "$(readlink "$f")"
            else
                printf '%s %s\n' "$f" "$(cksum <"$f" | tr ' ' :)"
            fi
        done >"$1"
}

# owned_by <path> <flavour>: the path is one of the flavour's files, or
# one every flavour installs.
owned_by() {
    fs=$(file_suffix "$2") ts=$(target_suffix "$2")
    case "$1" in
    "$incpath/stagehand/ecs.h" | "$incpath/stagehand/ecs/private.h") return 0 ;;
    "$cmakedir/stagehand-config.cmake" | "$cmakedir/stagehand-config-version.cmake") return 0 ;;
    "$libpath/libstagehand$fs.so" | "$libpath/libstagehand$fs.so".* | "$libpath/libstagehand$fs.a") return 0 ;;
    "$pcdir/stagehand$fs.pc") return 0 ;;
    "$cmakedir/stagehandTargets$ts.cmake" | "$cmakedir/stagehandTargets$ts-"*.cmake) return 0 ;;
    esac
    return 1
}

# install_flavour <build-dir> <flavour> [--config <config>]: cmake
# --install, then the checks of step 0. (--config must name the build's
# own type, if any: the export's per-build-type file is installed only for
# it.)
install_flavour() {
    echo "== install the $2 flavour ($1) into $prefix"
    snapshot "$work/snapshots/before-$2"
    "$cmake" --install "$1" --prefix "$prefix" ${3:+"$3"} ${4:+"$4"}
    snapshot "$work/snapshots/after-$2"
    changed=$(comm -23 "$work/snapshots/before-$2" "$work/snapshots/after-$2")
    [ -z "$changed" ] || fail "installing the $2 flavour changed or removed files already installed:
$changed"
    comm -13 "$work/snapshots/before-$2" "$work/snapshots/after-$2" | sed 's/ [^ ]*$//; s/ ->$//' |
        while IFS= read -r f; do
            owned_by "$f" "$2" || fail "the $2 flavour installed $f, not named for it"
        done
    fs=$(file_suffix "$2") ts=$(target_suffix "$2")
    for f in "$incpath/stagehand/ecs.h" "$incpath/stagehand/ecs/private.h" \
        "$libpath/libstagehand$fs.so" "$libpath/libstagehand$fs.a" "$pcdir/stagehand$fs.pc" \
        "$cmakedir/stagehandTargets$ts.cmake" "$cmakedir/stagehand-config.cmake"; do
        [ -e "$f" ] || fail "the $2 flavour did not install $f"
    done
    [ ! -e "$incpath/ecs.h" ] || fail "ecs.h installed outside include/stagehand"
}

# sanitizer <flavour>: what main.c reports it was compiled with.
sanitizer() {
    case "$1" in
    asan) echo address ;;
    tsan) echo thread ;;
    *) echo none ;;
    esac
}

# check_program <program> <flavour>: runs it, then its --undeclared-read.
check_program() {
    echo "-- $1"
    sh "$runner" --expect "^consumer: ok \\(sanitizer: $(sanitizer "$2")\\)\$" "$1"
    rc=0
    out=$(sh "$runner" "$1" --undeclared-read 2>&1) || rc=$?
    if [ "$2" = release ]; then
        [ "$rc" -eq 0 ] || fail "$1 --undeclared-read exited with $rc (release: no check):
$out"
    else
        # 134: SIGABRT, from the library's debug check.
        if [ "$rc" -ne 134 ] || ! printf '%s\n' "$out" | grep -q 'did not declare'; then
            fail "$1 --undeclared-read: expected the $2 flavour's debug check to abort (status 134), got status $rc:
$out"
        fi
    fi
    echo "   --undeclared-read: $( [ "$2" = release ] && echo 'not checked, as in release' || echo 'aborted by the debug check')"
}

# flavours_in <prefix>: the flavours installed there, in the order
# release debug asan tsan.
flavours_in() {
    held=
    for f in release debug asan tsan; do
        [ ! -f "$1/$libdir/cmake/stagehand/stagehandTargets$(target_suffix "$f").cmake" ] || held="$held $f"
    done
    echo "${held# }"
}

# The sanitizer builds (and debug) start from the fullest prefix another
# build's install_consumer left beside this build (in `make test`: asan
# from release's, tsan from asan's), so that they install into a prefix
# already holding other flavours. Only a prefix whose shared files are
# those this build installs (the same headers: the flavours' libraries
# agree with them) and which does not hold this flavour qualifies; none
# (`make asan` alone): this flavour alone.
seed=
seed_count=0
if [ "$flavour" != release ] && [ "${libdir#/}" = "$libdir" ] && [ "${includedir#/}" = "$includedir" ]; then
    for other in "$(dirname "$build")"/*/install-consumer/prefix; do
        if [ ! -d "$other" ] || [ "$other" = "$prefix" ] ||
            ! cmp -s "$other/$includedir/stagehand/ecs.h" "$srcdir/include/ecs.h" ||
            ! cmp -s "$other/$includedir/stagehand/ecs/private.h" "$srcdir/include/ecs/private.h" ||
            ! cmp -s "$other/$libdir/cmake/stagehand/stagehand-config.cmake" "$build/stagehand-config.cmake" ||
            ! cmp -s "$other/$libdir/cmake/stagehand/stagehand-config-version.cmake" "$build/stagehand-config-version.cmake"; then
            continue
        fi
        held=$(flavours_in "$other")
        case " $held " in *" $flavour "*) continue ;; esac
        n=$(echo "$held" | wc -w)
        if [ "$n" -gt "$seed_count" ]; then
            seed=$other seed_count=$n
        fi
    done
fi
if [ -n "$seed" ]; then
    echo "== start from $seed ($(flavours_in "$seed"))"
    mkdir -p "$prefix"
    cp -a "$seed/." "$prefix/"
fi

install_flavour "$build" "$flavour" --config "$config"

if [ "$flavour" = release ]; then
    echo "== build the debug flavour's library ($work/debug-build, preset debug)"
    (
        cd "$srcdir"
        "$cmake" --preset debug -B "$work/debug-build" \
            -DCMAKE_C_COMPILER="$cc" \
            -DECS_BUILD_TESTS=OFF -DECS_BUILD_BENCH=OFF -DECS_BUILD_EXAMPLES=OFF \
            -DCMAKE_INSTALL_LIBDIR="$libdir" -DCMAKE_INSTALL_INCLUDEDIR="$includedir" >/dev/null
    )
    "$cmake" --build "$work/debug-build" -j 2 --target stagehand_shared stagehand_static >/dev/null
    install_flavour "$work/debug-build" debug
fi
flavours=$(flavours_in "$prefix")
flavour_list=$(echo "$flavours" | tr ' ' ';')

echo "== find_package consumer (flavours: $flavours)"
"$cmake" -S "$src" -B "$work/consumer" \
    -DCMAKE_C_COMPILER="$cc" \
    -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_PREFIX_PATH="$prefix" \
    -DCONSUMER_FLAVOURS="$flavour_list"
"$cmake" --build "$work/consumer"
for f in $flavours; do
    check_program "$work/consumer/consumer_${f}_shared" "$f"
    check_program "$work/consumer/consumer_${f}_static" "$f"
done

echo "== pkg-config consumer"
PKG_CONFIG_PATH="$pcdir${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
export PKG_CONFIG_PATH
ck_cflags=$(pkg-config --cflags ck 2>/dev/null || true)
for f in $flavours; do
    pc=stagehand$(file_suffix "$f")
    pkg-config --exists --print-errors "$pc"
    cflags=$(pkg-config --cflags "$pc")
    libs=$(pkg-config --libs "$pc")
    static_libs=$(pkg-config --libs --static "$pc")
    echo "pkg-config --cflags $pc: $cflags"
    echo "pkg-config --libs $pc: $libs"
    echo "pkg-config --libs --static $pc: $static_libs"
    incdir=
    for t in $cflags; do
        case "$t" in -I*) incdir=${t#-I} ;; esac
        for c in $ck_cflags; do
            [ "$t" != "$c" ] || fail "$pc's Cflags carry ck's flag $c"
        done
    done
    if [ -z "$incdir" ] || [ ! -f "$incdir/ecs.h" ] || [ "$(basename "$incdir")" != stagehand ]; then
        fail "$pc's Cflags do not name the include/stagehand directory"
    fi
    # The static library by its path, the rest of the static flags as given.
    static_link=
    for t in $static_libs; do
        [ "$t" = "-l$pc" ] && t="$libpath/lib$pc.a"
        static_link="$static_link $t"
    done
    # shellcheck disable=SC2086 # flag lists
    "$cc" -std=c11 -o "$work/pkgconfig/consumer_${f}_shared" "$src/main.c" $cflags $libs
    # shellcheck disable=SC2086
    "$cc" -std=c11 -o "$work/pkgconfig/consumer_${f}_static" "$src/main.c" $cflags $static_link
    (
        LD_LIBRARY_PATH="$libpath${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
        export LD_LIBRARY_PATH
        check_program "$work/pkgconfig/consumer_${f}_shared" "$f"
    )
    check_program "$work/pkgconfig/consumer_${f}_static" "$f"
done

echo "== install_consumer: ok (flavours in $prefix: $flavours)"
