"""The SQLite workload of the power-cut test (tests/powercut/run): a database in
journal_mode=WAL, synchronous=FULL, on a RocksDB store on txvfs-lazyfs, through the SQLite
extension loaded into Python's sqlite3.

    python3 sqlite_cycle.py check|cycle|cycle-nosync LIB STORE ACKLOG

check: the database (once there is one) passes PRAGMA integrity_check, holds every
       transaction acknowledged in ACKLOG, and every transaction whole: rows 1..N with no
       gap, the counter row equal to N, and the ledger's total zero. Exit 3 when an
       acknowledged transaction is missing, 4 for anything else.
cycle: check, then commit transactions until killed: each inserts row N (a random-sized blob,
       sometimes a hundred rows of padding besides), moves an amount between two ledger rows
       and sets the counter, and after COMMIT returns appends `ack N` to ACKLOG, fsynced.
       Prints `running from N` once the first transaction after the check committed.
cycle-nosync: the negative control: the same with synchronous=OFF (commits not durable, still
       acknowledged), which a cut must be able to catch (exit 3 at a later check).
"""

import os
import random
import sqlite3
import sys
import urllib.parse


def connect(lib, store, sync="FULL"):
    boot = sqlite3.connect(":memory:")
    boot.enable_load_extension(True)
    boot.load_extension(lib)
    boot.close()
    uri = f"file:/pc/app.db?vfs=txvfs&store={urllib.parse.quote(store, safe='/:=')}"
    con = sqlite3.connect(uri, uri=True, isolation_level=None, timeout=30)
    assert con.execute("PRAGMA journal_mode=WAL").fetchone()[0] == "wal"
    con.execute(f"PRAGMA synchronous={sync}")
    con.executescript(
        """
        CREATE TABLE IF NOT EXISTS t(id INTEGER PRIMARY KEY, pad BLOB);
        CREATE TABLE IF NOT EXISTS c(k INTEGER PRIMARY KEY, n INTEGER);
        INSERT OR IGNORE INTO c VALUES (0, 0);
        CREATE TABLE IF NOT EXISTS ledger(id INTEGER PRIMARY KEY, bal INTEGER);
        INSERT OR IGNORE INTO ledger VALUES (0, 0), (1, 0), (2, 0), (3, 0);
        CREATE TABLE IF NOT EXISTS big(id INTEGER PRIMARY KEY, pad BLOB);
        """
    )
    return con


def acked(path):
    """The acknowledged transaction numbers (complete lines only)."""
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [int(ln.split()[1]) for ln in f.read().split("\n")[:-1] if ln.startswith("ack ")]


def check(con, acklog):
    """Returns the last committed transaction number, or exits 3 or 4."""
    ok = con.execute("PRAGMA integrity_check").fetchone()[0]
    if ok != "ok":
        print(f"check: integrity_check: {ok}")
        sys.exit(4)
    count, top = con.execute("SELECT count(*), coalesce(max(id), 0) FROM t").fetchone()
    n = con.execute("SELECT n FROM c WHERE k = 0").fetchone()[0]
    total = con.execute("SELECT sum(bal) FROM ledger").fetchone()[0]
    if count != top or n != top or total != 0:
        print(f"check: torn: {count} rows, max id {top}, counter {n}, ledger total {total}")
        sys.exit(4)
    acks = acked(acklog)
    if acks and max(acks) > top:
        print(f"check: LOST acknowledged transactions: acknowledged up to {max(acks)}, {top} there")
        sys.exit(3)
    print(f"check: ok, {top} transactions, {len(acks)} acknowledged")
    return top


def cycle(con, acklog, start):
    rnd = random.Random(start)
    fd = os.open(acklog, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    n = start + 1
    while True:
        con.execute("BEGIN IMMEDIATE")
        con.execute("INSERT INTO t(id, pad) VALUES (?, randomblob(?))", (n, rnd.randrange(1, 6000)))
        if rnd.random() < 0.05:
            con.execute(
                "WITH RECURSIVE s(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM s WHERE i < 100) "
                "INSERT INTO big(pad) SELECT randomblob(2000) FROM s"
            )
        a, b = rnd.sample(range(4), 2)
        amount = rnd.randrange(1, 100)
        con.execute("UPDATE ledger SET bal = bal - ? WHERE id = ?", (amount, a))
        con.execute("UPDATE ledger SET bal = bal + ? WHERE id = ?", (amount, b))
        con.execute("UPDATE c SET n = ? WHERE k = 0", (n,))
        con.execute("COMMIT")
        os.write(fd, f"ack {n}\n".encode())
        os.fsync(fd)
        if n == start + 1:
            print(f"running from {start}", flush=True)
        n += 1


def main():
    mode, lib, store, acklog = sys.argv[1:5]
    try:
        con = connect(lib, store, "OFF" if mode == "cycle-nosync" else "FULL")
        top = check(con, acklog)
    except sqlite3.Error as e:
        print(f"check: {type(e).__name__}: {e}")
        sys.exit(4)
    if mode in ("cycle", "cycle-nosync"):
        cycle(con, acklog, top)


if __name__ == "__main__":
    main()
