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
# rss FILE: the max RSS (MiB) that /usr/bin/time wrote to FILE, "-" without /usr/bin/time.
TIME=(); [ -x /usr/bin/time ] && TIME=(/usr/bin/time -f %M -o "$W/rss")
rss() { if [ -s "$W/rss" ]; then echo "$(( $(tail -1 "$W/rss") / 1024 ))"; else echo -; fi; rm -f "$W/rss"; }
echo "speedtest1 --size $size (seconds, TOTAL; ratio = txvfs / unix, lower is better; max RSS in MiB)"
echo "| synchronous | unix VFS | txvfs | txvfs / unix | unix RSS | txvfs RSS |"
echo "|---|---|---|---|---|---|"
R=benches/results
mkdir -p "$R"
csv="workload,system,role,seconds,per"
# full and off in the default (rollback journal) mode; full-wal: synchronous=FULL with
# --journal wal (stock SQLite's WAL on unix; on txvfs the VFS answers journal_mode=WAL);
# full-mmap: synchronous=FULL with mmap_size 256 MiB (txvfs lends pages instead of copying).
for sync in full off full-wal full-mmap; do
  flags=()
  [ "$sync" = off ] && flags=(--nosync)
  [ "$sync" = full-wal ] && flags=(--journal wal)
  [ "$sync" = full-mmap ] && flags=(--mmap 268435456)
  u=$("${TIME[@]}" "$C/speedtest1" --size "$size" "${flags[@]}" "$W/unix-$sync.db" | total)
  ur=$(rss)
  x=$(SPEEDTEST_TXVFS=1 TXVFS_SQLITE_STORE="$W/store-$sync" "${TIME[@]}" "$C/speedtest1" --size "$size" "${flags[@]}" "/speed-$sync.db" | total)
  xr=$(rss)
  echo "| $sync | $u | $x | $(python3 -c "print(f'{$x/$u:.2f}x')") | $ur | $xr |"
  csv+=$'\n'"speedtest1 --size $size synchronous=$sync,unix VFS,baseline,$u,run"
  csv+=$'\n'"speedtest1 --size $size synchronous=$sync,txvfs,txvfs,$x,run"
done
echo "$csv" >"$R/sqlite-speedtest1.csv"
echo
/usr/bin/python3 benches/sqlite/multidb.py "$T/libtxvfs_sqlite.so" "$W/multi" "$ntx" "$R/sqlite-multidb.csv"
rm -rf "$W"
