#!/usr/bin/env bash
# SQLite on txvfs versus SQLite's own unix VFS, same disk, same run, same synchronous setting:
#  1. speedtest1 (from SQLite's Debian source package; built once into ~/.cache/txvfs) TOTAL;
#  2. multi-database transactions (benches/sqlite/multidb.py), K = 1, 3, 5, 9.
#   benches/sqlite/run.sh [SPEEDTEST_SIZE] [MULTIDB_TRANSACTIONS]     (defaults 50 and 200)
# Besides the tables, the measurements go to benches/results/sqlite-speedtest1.csv and
# sqlite-multidb.csv (`workload,system,role,seconds,per`), which benches/charts.py draws.
set -euo pipefail
cd "$(dirname "$0")/../.."
. scripts/env.sh
size="${1:-50}"; ntx="${2:-200}"
cargo build --release -q -p txvfs-sqlite
T="$CARGO_TARGET_DIR/release"
C="$HOME/.cache/txvfs/sqlite-bench"
mkdir -p "$C"
SRC="$HOME/.cache/txvfs/sqlite-src"
[ -f "$SRC/deb/src/test/speedtest1.c" ] || benches/sqlite/fetch-sqlite-source.sh "$SRC/deb" >/dev/null
gcc -O2 -w -c -Dmain=speedtest1_main "$SRC/deb/src/test/speedtest1.c" -o "$C/speedtest1.o"
gcc -O2 -o "$C/speedtest1" benches/sqlite/speedtest1_txvfs.c "$C/speedtest1.o" -L"$T" -ltxvfs_sqlite -lsqlite3 -lm -Wl,-rpath,"$T"
W="$C/run"; rm -rf "$W"; mkdir -p "$W"

total() { grep -E '^ *TOTAL' | grep -oE '[0-9]+\.[0-9]+s' | tr -d s; }
echo "speedtest1 --size $size (seconds, TOTAL; ratio = txvfs / unix, lower is better)"
echo "| synchronous | unix VFS | txvfs | txvfs / unix |"
echo "|---|---|---|---|"
R=benches/results
mkdir -p "$R"
csv="workload,system,role,seconds,per"
# full and off in the default (rollback journal) mode; full-wal: synchronous=FULL with
# --journal wal (stock SQLite's WAL on unix; on txvfs the VFS answers journal_mode=WAL).
for sync in full off full-wal; do
  flags=()
  [ "$sync" = off ] && flags=(--nosync)
  [ "$sync" = full-wal ] && flags=(--journal wal)
  u=$("$C/speedtest1" --size "$size" "${flags[@]}" "$W/unix-$sync.db" | total)
  x=$(SPEEDTEST_TXVFS=1 TXVFS_SQLITE_STORE="$W/store-$sync" "$C/speedtest1" --size "$size" "${flags[@]}" "/speed-$sync.db" | total)
  echo "| $sync | $u | $x | $(python3 -c "print(f'{$x/$u:.2f}x')") |"
  csv+=$'\n'"speedtest1 --size $size synchronous=$sync,unix VFS,baseline,$u,run"
  csv+=$'\n'"speedtest1 --size $size synchronous=$sync,txvfs,txvfs,$x,run"
done
echo "$csv" >"$R/sqlite-speedtest1.csv"
echo
/usr/bin/python3 benches/sqlite/multidb.py "$T/libtxvfs_sqlite.so" "$W/multi" "$ntx" "$R/sqlite-multidb.csv"
rm -rf "$W"
