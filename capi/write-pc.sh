#!/usr/bin/env bash
# Writes txvfs.pc for the build tree, so a C or C++ project finds the library the usual way:
#   capi/write-pc.sh            -> $CARGO_TARGET_DIR/release/pkgconfig/txvfs.pc
#   capi/write-pc.sh DIR        -> DIR/txvfs.pc
#   export PKG_CONFIG_PATH=$CARGO_TARGET_DIR/release/pkgconfig
#   cc main.c $(pkg-config --cflags --libs txvfs)
# The library is the one `cargo build --release -p txvfs-capi` (or --workspace) leaves in
# $CARGO_TARGET_DIR/release (libtxvfs.so, libtxvfs.a). Libs carries an rpath to that directory,
# so programs run without LD_LIBRARY_PATH. Static linking: link libtxvfs.a and add
# `pkg-config --libs --static txvfs`'s private libraries (RocksDB needs the C++ runtime).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
. "$root/scripts/env.sh"
libdir="$CARGO_TARGET_DIR/release"
out="${1:-$libdir/pkgconfig}"
version="$(sed -n 's/^#define TXVFS_VERSION "\(.*\)"$/\1/p' "$root/capi/include/txvfs.h")"
mkdir -p "$out"
cat >"$out/txvfs.pc.tmp" <<PC
prefix=$root/capi
includedir=\${prefix}/include
libdir=$libdir

Name: txvfs
Description: Embeddable transactional virtual file system (C API; C++ wrapper txvfs.hpp)
Version: $version
Cflags: -I\${includedir}
Libs: -L\${libdir} -Wl,-rpath,\${libdir} -ltxvfs
Libs.private: -lstdc++ -lgcc_s -lutil -lrt -lpthread -lm -ldl -lc
PC
mv "$out/txvfs.pc.tmp" "$out/txvfs.pc"
echo "$out/txvfs.pc"
