#!/usr/bin/env bash
# Readers never block writers, writers never block readers, writers exclude each other: through
# the sqlite3 shell, each connection its own shell process on one database. Steps are ordered by
# marker files a shell touches (`.shell touch`) once its statements before it ran; nothing is
# timed (a wait for a marker gives up after 120 s, a writer's busy timeout is 30 s).
#   1. A shell holds a read transaction (BEGIN; SELECT) open; another shell's INSERT commits
#      meanwhile; the reader still sees its snapshot, its write is refused ("database is
#      locked": the shell prints the primary code, 5; the extended SQLITE_BUSY_SNAPSHOT is
#      checked by the Python, C and rusqlite tests); after ROLLBACK it sees the row and writes.
#   2. A shell holds BEGIN EXCLUSIVE with an uncommitted row; another shell with no busy timeout
#      reads the committed state; a third's BEGIN IMMEDIATE is refused (writers exclude each
#      other); a fourth, with a busy timeout, waits and commits after the holder commits.
#
#   shell_readers.sh LIB WORKDIR JOURNAL_MODE     txvfs (LIB: libtxvfs_sqlite.so)
#   shell_readers.sh stock WORKDIR JOURNAL_MODE   stock SQLite on a host file, the reference:
#                                                 passes in WAL mode, fails in rollback modes
#                                                 (a reader blocks the writer in step 1)
set -euo pipefail
LIB=$1 WORK=$2 JM=$3
D="$WORK/shell-rw-$JM"
rm -rf "$D"
mkdir -p "$D"
if [ "$LIB" = stock ]; then
  PRE="" DB="$D/host.db" WAIT=${TXVFS_SHELL_BUSY_MS:-3000}
else
  PRE=".load ${LIB%.so}" DB="file:/shell/rw.db?vfs=txvfs&store=$D/store" WAIT=30000
fi

fail() { echo "shell_readers ($LIB, $JM): $*" >&2; exit 1; }

# The lines every shell starts with: the database, the journal mode (its answer not printed).
head_lines() {
  printf '%s\n.open "%s"\n.output /dev/null\nPRAGMA journal_mode=%s;\n.output stdout\n.timeout %s\n' \
    "$PRE" "$DB" "$JM" "$1"
}

# once BUSY_MS SQL: a shell that runs SQL and exits; prints its output and errors.
once() { { head_lines "$1"; printf "%s\n" "$2"; } | sqlite3 -batch 2>&1 || true; }

# start NAME BUSY_MS: a shell reading its statements from a FIFO (send, mark, stop).
declare -A FD PID
start() {
  mkfifo "$D/$1.in"
  # The new shell must not hold the other shells' FIFOs open (they would never see their end).
  (
    for f in "${FD[@]}"; do eval "exec $f>&-"; done
    exec sqlite3 -batch <"$D/$1.in" >"$D/$1.out" 2>"$D/$1.err"
  ) &
  PID[$1]=$!
  local fd
  exec {fd}>"$D/$1.in"
  FD[$1]=$fd
  head_lines "$2" >&"$fd"
}
send() { printf '%s\n' "$2" >&"${FD[$1]}"; }
# mark NAME STEP: waits until NAME ran everything sent before.
mark() {
  send "$1" ".shell touch '$D/$1.$2'"
  local i=0
  until [ -e "$D/$1.$2" ]; do
    kill -0 "${PID[$1]}" 2>/dev/null || fail "$1 ended before $2: $(cat "$D/$1.err")"
    i=$((i + 1))
    [ $i -lt 2400 ] || fail "$1 did not reach $2"
    sleep 0.05
  done
}
stop() {
  local fd=${FD[$1]}
  exec {fd}>&-
  wait "${PID[$1]}" || true
}

out=$(once "$WAIT" "CREATE TABLE t(id INTEGER PRIMARY KEY, v TEXT); INSERT INTO t(v) VALUES ('one'), ('two');")
[ -z "$out" ] || fail "setup: $out"

# 1. A reader's open transaction and a writer's commit.
start R "$WAIT"
send R "BEGIN; SELECT 'r1', count(*) FROM t;"
mark R 1
out=$(once "$WAIT" "INSERT INTO t(v) VALUES ('from the writer'); SELECT 'w', count(*) FROM t;")
[ "$out" = "w|3" ] || fail "the writer, while another shell reads: $out"
send R "SELECT 'r2', count(*) FROM t;"
send R "INSERT INTO t(v) VALUES ('from the stale reader');"
send R "ROLLBACK; SELECT 'r3', count(*) FROM t;"
send R "INSERT INTO t(v) VALUES ('from the reader'); SELECT 'r4', count(*) FROM t;"
stop R
[ "$(cat "$D/R.out")" = $'r1|2\nr2|2\nr3|3\nr4|4' ] || fail "the reader saw: $(cat "$D/R.out")"
grep -q "database is locked" "$D/R.err" || fail "the stale reader's write: $(cat "$D/R.err")"
echo "ok: shell ($JM): a reader's open transaction does not block another shell's commit"
echo "ok: shell ($JM): the reader keeps its snapshot; its write is refused; after ROLLBACK it writes"

# 2. A writer holding EXCLUSIVE, a reader, a second writer without and a third with busy timeout.
start W "$WAIT"
send W "BEGIN EXCLUSIVE; INSERT INTO t(v) VALUES ('held');"
mark W 1
out=$(once 0 "SELECT 'c', count(*) FROM t;")
[ "$out" = "c|4" ] || fail "a reader under BEGIN EXCLUSIVE: $out"
out=$(once 0 "BEGIN IMMEDIATE;")
grep -q "database is locked" <<<"$out" || fail "a second writer got the write lock: $out"
start B "$WAIT"
mark B 1
send B "INSERT INTO t(v) VALUES ('waited'); SELECT 'b', count(*) FROM t;"
sleep 0.5 # B is most likely waiting in its busy handler now (it passes either way)
send W "COMMIT; SELECT 'w', count(*) FROM t;"
stop W
stop B
[ "$(cat "$D/W.out")" = "w|5" ] || fail "the holder: $(cat "$D/W.out") $(cat "$D/W.err")"
[ "$(cat "$D/B.out")" = "b|6" ] || fail "the waiting writer: $(cat "$D/B.out") $(cat "$D/B.err")"
out=$(once 0 "PRAGMA integrity_check; SELECT count(*) FROM t;")
[ "$out" = $'ok\n6' ] || fail "at the end: $out"
echo "ok: shell ($JM): BEGIN EXCLUSIVE keeps a second writer out, not a reader; busy_timeout waits"
