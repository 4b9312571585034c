#!/bin/sh
# `make install PREFIX=...` into a temporary prefix, then builds and runs a
# small C program against it twice: with pkg-config and with
# find_package(Tickgate); then `make uninstall` must leave the prefix empty.
# Usage: check.sh BUILD_DIR SOURCE_DIR
set -eu
build=$(cd "$1" && pwd)
source=$(cd "$2" && pwd)
here=$source/Tests/install
prefix=$(mktemp -d)
trap 'rm -rf "$prefix"' EXIT
make -s -C "$source" install BUILD_DIR="$build" PREFIX="$prefix" >"$prefix.log" || { cat "$prefix.log"; exit 1; }
grep -q "not searched by the dynamic loader: link with -Wl,-rpath,$prefix/lib" "$prefix.log"
rm -f "$prefix.log"
test -f "$prefix/include/tickgate_version.h"
test -f "$prefix/include/tickgate_status.h"
libdir=$(ls -d "$prefix"/lib*/ | head -1)
libdir=${libdir%/}
ls "$libdir"/libtickgate.so "$libdir"/libtickgate.so.0 "$libdir"/libtickgate.so.0.*
test -f "$prefix/include/tickgate.h"

# pkg-config
PKG_CONFIG_PATH=$libdir/pkgconfig
export PKG_CONFIG_PATH
cc -o "$prefix/app-pkgconfig" "$here/app.c" $(pkg-config --cflags --libs tickgate) \
    -Wl,-rpath,"$libdir"
"$prefix/app-pkgconfig"

# find_package
cmake -S "$here/consumer" -B "$prefix/consumer-build" -G Ninja \
    -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_BUILD_RPATH="$libdir" >/dev/null
cmake --build "$prefix/consumer-build" >/dev/null
"$prefix/consumer-build/app"
rm -rf "$prefix/app-pkgconfig" "$prefix/consumer-build"

# uninstall: everything installed goes, and nothing else was there
make -s -C "$source" uninstall BUILD_DIR="$build" >/dev/null
left=$(find "$prefix" -type f -o -type l)
[ -z "$left" ] || { echo "make uninstall left: $left" >&2; exit 1; }
test ! -e "$build/install_manifest.txt"
echo "install test: make install PREFIX, pkg-config, find_package and make uninstall all work"
