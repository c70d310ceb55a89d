#!/usr/bin/env bash
# SQLite's mptest (several processes running scripts against one database, from SQLite's
# source) on txvfs, in the journal modes given (default: wal; about 90 s a mode). The mptest program is
# SQLite's own, linked against the host's libsqlite3 with a main that registers txvfs first
# (mptest spawns its clients as new processes of the same program, which register it too).
#   usage: [TXVFS_SQLITE_MMAP=BYTES] tests/sqlite/mptest.sh LIBPATH WORKDIR [MODE ...]
# Exits 77 (skipped, counted as such) when SQLite's source cannot be fetched, 1 (failed) then
# with TXVFS_SQLITE_TCL_REQUIRE=1 (scripts/test sets it where Debian's apt sources are).
set -euo pipefail
cd "$(dirname "$0")/../.."
LIB=${1:?usage: mptest.sh LIBPATH WORKDIR}
WORK=${2:?usage: mptest.sh LIBPATH WORKDIR}
shift 2
MODES=("${@:-wal}")
CACHE="$HOME/.cache/txvfs/sqlite-tcl"
if [ ! -f "$CACHE/src/mptest/mptest.c" ]; then
  benches/sqlite/fetch-sqlite-source.sh "$CACHE" >/dev/null || {
    if [ "${TXVFS_SQLITE_TCL_REQUIRE:-0}" = 1 ]; then
      echo "mptest: FAILED: cannot fetch Debian's sqlite3 source package (TXVFS_SQLITE_TCL_REQUIRE=1)"; exit 1
    fi
    echo "mptest: SKIPPED: cannot fetch Debian's sqlite3 source package"; exit 77; }
fi
MP="$CACHE/src/mptest"
# TXVFS_SQLITE_MMAP=N: every connection starts with mmap_size N (SQLITE_CONFIG_MMAP_SIZE, set
# before SQLite initializes; the clients mptest spawns inherit the variable).
MMAP=${TXVFS_SQLITE_MMAP:-0}
cat >"$WORK/mptest_main.c" <<'C'
#include <stdlib.h>
#include <sqlite3.h>
int txvfs_sqlite_register(const char *);
int mptest_main(int argc, char **argv);
int main(int argc, char **argv) {
  const char *m = getenv("TXVFS_SQLITE_MMAP");
  sqlite3_int64 n = m ? atoll(m) : 0;
  if (n > 0 && sqlite3_config(SQLITE_CONFIG_MMAP_SIZE, n, n) != SQLITE_OK) return 1;
  if (txvfs_sqlite_register(0) != 0) return 1;
  return mptest_main(argc, argv);
}
C
gcc -O1 -w -Dmain=mptest_main -c "$MP/mptest.c" -o "$WORK/mptest.o"
gcc -O1 -o "$WORK/mptest" "$WORK/mptest_main.c" "$WORK/mptest.o" -L"$(dirname "$LIB")" -ltxvfs_sqlite \
  -lsqlite3 -Wl,-rpath,"$(dirname "$LIB")"
for jm in "${MODES[@]}"; do
  store="$WORK/mptest-store-$jm-mmap$MMAP"
  out=$(cd "$MP" && TXVFS_SQLITE_STORE="$store" timeout 300 "$WORK/mptest" "/mptest-$jm.db" \
    --vfs txvfs --journalmode "$jm" --timeout 30000 config02.test 2>&1) || { echo "mptest $jm failed:"; tail -20 <<<"$out"; exit 1; }
  summary=$(grep -E "Summary: [0-9]+ errors out of [0-9]+ tests" <<<"$out" | tail -1)
  grep -q "Summary: 0 errors" <<<"$summary" || { echo "mptest $jm: $summary"; tail -20 <<<"$out"; exit 1; }
  echo "mptest config02.test, journal_mode=$jm, mmap_size=$MMAP: $summary"
done
