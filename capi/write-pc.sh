#!/usr/bin/env bash
# Writes txvfs.pc from capi/txvfs.pc.in, for the build tree or for an installed prefix:
#   capi/write-pc.sh                 -> $CARGO_TARGET_DIR/release/pkgconfig/txvfs.pc (build tree)
#   capi/write-pc.sh DIR             -> DIR/txvfs.pc (build tree)
#   capi/write-pc.sh --prefix P DIR  -> DIR/txvfs.pc for files installed under P (`make install`)
# Build tree: headers in capi/include, the library `cargo build --release -p txvfs-capi` leaves in
# $CARGO_TARGET_DIR/release (plus the link libtxvfs.so.MAJOR, its SONAME, written here), and an
# rpath to that directory so programs run without LD_LIBRARY_PATH. Installed: ${prefix}/include and ${prefix}/lib, no rpath (the loader finds a
# system prefix; for another prefix use LD_LIBRARY_PATH or your own rpath).
#   export PKG_CONFIG_PATH=$CARGO_TARGET_DIR/release/pkgconfig
#   cc main.c $(pkg-config --cflags --libs txvfs)
# Static linking: link libtxvfs.a and add `pkg-config --libs --static txvfs`'s private
# libraries (RocksDB needs the C++ runtime).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
version="$(sed -n 's/^#define TXVFS_VERSION "\(.*\)"$/\1/p' "$root/capi/include/txvfs.h")"
# What `rustc --print native-static-libs` lists for libtxvfs.a on Linux.
static_libs="-lstdc++ -lgcc_s -lutil -lrt -lpthread -lm -ldl -lc"
if [ "${1:-}" = --prefix ]; then
  [ $# = 3 ] || { echo "usage: $0 --prefix PREFIX DIR" >&2; exit 2; }
  prefix=$2 out=$3 includedir='${prefix}/include' libdir='${prefix}/lib' rpath=''
else
  . "$root/scripts/env.sh"
  prefix="$root/capi" includedir='${prefix}/include' libdir="$CARGO_TARGET_DIR/release"
  out="${1:-$libdir/pkgconfig}" rpath=' -Wl,-rpath,${libdir}'
fi
if [ -n "$rpath" ]; then
  # Programs linked against the build tree's libtxvfs.so look for its SONAME, libtxvfs.so.MAJOR
  # (capi/build.rs), at run time: give that name in the build tree too.
  mkdir -p "$libdir"
  ln -sfn libtxvfs.so "$libdir/libtxvfs.so.${version%%.*}"
fi
mkdir -p "$out"
sed -e "s|@PREFIX@|$prefix|" -e "s|@INCLUDEDIR@|$includedir|" -e "s|@LIBDIR@|$libdir|" \
    -e "s|@RPATH@|$rpath|" -e "s|@VERSION@|$version|" -e "s|@STATIC_LIBS@|$static_libs|" \
    "$root/capi/txvfs.pc.in" >"$out/txvfs.pc.tmp"
mv "$out/txvfs.pc.tmp" "$out/txvfs.pc"
echo "$out/txvfs.pc"
