#!/bin/sh
# install-consumer-test.sh: ctest test `install_consumer`. Installs the
# build into a scratch prefix and checks that a separate project can use
# it both ways a user would:
#   1. CMake: tests/consumer/CMakeLists.txt does find_package(stagehand 0.1)
#      and links stagehand::ecs (consumer_shared) and stagehand::ecs_static
#      (consumer_static);
#   2. pkg-config: the same main.c built with
#      `pkg-config --cflags --libs stagehand` (consumer_pkgconfig).
# All three programs are run and must exit 0.
#
# Usage: install-consumer-test.sh <cmake> <build-dir> <config> <consumer-src>
#                                 <work-dir> <c-compiler> <libdir>
set -eu

if [ $# -ne 7 ]; then
    echo "usage: $0 <cmake> <build-dir> <config> <consumer-src> <work-dir> <c-compiler> <libdir>" >&2
    exit 2
fi
cmake=$1 build=$2 config=$3 src=$4 work=$5 cc=$6 libdir=$7

prefix="$work/prefix"
rm -rf "$work"
mkdir -p "$work"

echo "== install into $prefix"
"$cmake" --install "$build" --config "$config" --prefix "$prefix"

case "$libdir" in
/*) pcdir="$libdir/pkgconfig" libpath="$libdir" ;;
*) pcdir="$prefix/$libdir/pkgconfig" libpath="$prefix/$libdir" ;;
esac

echo "== find_package consumer"
"$cmake" -S "$src" -B "$work/build" \
    -DCMAKE_C_COMPILER="$cc" \
    -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_PREFIX_PATH="$prefix"
"$cmake" --build "$work/build"
"$work/build/consumer_shared"
"$work/build/consumer_static"

echo "== pkg-config consumer"
PKG_CONFIG_PATH="$pcdir${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
export PKG_CONFIG_PATH
pkg-config --exists --print-errors stagehand
flags=$(pkg-config --cflags --libs stagehand)
echo "pkg-config --cflags --libs stagehand: $flags"
# shellcheck disable=SC2086 # $flags is a list of compiler arguments
"$cc" -std=c11 -o "$work/consumer_pkgconfig" "$src/main.c" $flags
LD_LIBRARY_PATH="$libpath${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" "$work/consumer_pkgconfig"

echo "== install_consumer: ok"
