#!/bin/sh
# Installs the built tree into a temporary prefix, then builds and runs a
# small C program against it twice: with pkg-config and with
# find_package(Tickgate). Usage: check.sh BUILD_DIR SOURCE_DIR
set -eu
build=$1
here=$2/Tests/install
prefix=$(mktemp -d)
trap 'rm -rf "$prefix"' EXIT
cmake --install "$build" --prefix "$prefix" >/dev/null
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
echo "install test: pkg-config and find_package both work"
