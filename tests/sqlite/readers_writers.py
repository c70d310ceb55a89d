"""Readers never block writers, writers never block readers: SQLite's read transactions read
txvfs snapshots. Real processes on one shared store, ordered by messages (no timing
assertions):

1. A reader process holds a read transaction open (BEGIN; SELECT) until told to go on; a
   writer process's INSERT commits meanwhile (the reader's transaction is still open when the
   writer reports its commit, since the reader ends it only after that report); the reader
   still sees its snapshot; its write then fails at once with SQLITE_BUSY_SNAPSHOT ("database
   is locked"); after ROLLBACK it sees the new row and may write.
2. A writer holding EXCLUSIVE (BEGIN EXCLUSIVE, uncommitted rows) does not keep a reader out,
   even without a busy timeout; the reader sees the committed state.
3. The same between two connections of one process.
4. A writer in locking_mode=EXCLUSIVE commits while another process reads (no busy timeout
   to wait on the reader) and then keeps new readers of other processes out until it leaves
   exclusive mode; the reader keeps its snapshot.
5. A connection that commits while one of its statements still reads (SQLite then keeps its
   read transaction) reads the state of its own commit until that statement ends, though
   another process commits right after it: a client process of the store (this process owns
   it) commits a row while its SELECT over a table of many pages has read one row; another
   process then changes every row and commits; the first one's SELECT reads the rest of the
   table as its commit left it (pages it never read before: a snapshot taken at any other
   version shows the change, or misses its own row), and its next read transaction sees the
   other's commit.
1-5 run in each journal mode (DELETE, TRUNCATE, PERSIST, MEMORY, OFF, WAL: every connection
sets it, as applications do), each on a store of its own.
6. What a process that is a client of the store (another process owns it) costs in round
   trips to the owner (`PRAGMA txvfs_stats`): per durable one-row commit and per short read
   transaction (a count, not a time).

    python3 readers_writers.py LIBPATH WORKDIR [JOURNAL_MODE ...]
    python3 readers_writers.py stock WORKDIR [JOURNAL_MODE ...]

With "stock" instead of the library, 1-3 run on stock SQLite with a host file, the reference:
they pass in WAL mode and fail in the rollback modes (the reader blocks the writer).
"""

import os
import sqlite3
import subprocess
import sys
import urllib.parse

SQLITE_BUSY_SNAPSHOT = 517
MODES = ["delete", "truncate", "persist", "memory", "off", "wal"]
JOURNAL_MODE = None  # set by main() and in each child from its arguments
STOCK = False  # stock SQLite on a host file (the library argument "stock")


def load(lib):
    if lib == "stock":
        return
    boot = sqlite3.connect(":memory:")
    boot.enable_load_extension(True)
    boot.load_extension(lib)
    boot.close()


def connect(store, timeout, set_mode=True):
    if STOCK:
        os.makedirs(store, exist_ok=True)
        uri = f"file:{store}/host.db"
        timeout = min(timeout, 3)  # a blocked stock writer fails sooner
    else:
        uri = f"file:/rw/shared.db?vfs=txvfs&store={urllib.parse.quote(store, safe='/:=')}"
    con = sqlite3.connect(uri, uri=True, isolation_level=None, timeout=timeout)
    if JOURNAL_MODE and set_mode:
        assert con.execute(f"PRAGMA journal_mode={JOURNAL_MODE}").fetchone()[0] == JOURNAL_MODE
    return con


def count(con):
    return con.execute("SELECT count(*) FROM t").fetchone()[0]


def say(*words):
    print(*words, flush=True)


def expect(stream, want):
    line = stream.readline().strip()
    assert line == want, f"expected {want!r}, got {line!r}"


def reader(store):
    """Holds BEGIN; SELECT open until the parent's 'check' line, then checks its snapshot
    and that its write fails with SQLITE_BUSY_SNAPSHOT."""
    con = connect(store, timeout=5)
    con.execute("BEGIN")
    say("reading", count(con))
    expect(sys.stdin, "check")
    say("snapshot", count(con))
    try:
        con.execute("INSERT INTO t(v) VALUES ('from the stale reader')")
        say("write accepted")
    except sqlite3.OperationalError as e:
        say("write refused", e.sqlite_errorcode, str(e).replace(" ", "_"))
    con.execute("ROLLBACK")
    say("after", count(con))
    con.execute("INSERT INTO t(v) VALUES ('from the reader')")
    say("wrote", count(con))


def keeper(store):
    """Commits a row while its SELECT over `big` has read one row (the read transaction goes
    on), then, told that another process committed, reads the rest: see 5 above."""
    con = connect(store, timeout=30)
    cur = con.execute("SELECT id, v FROM big ORDER BY id")
    first = cur.fetchone()
    con.execute("INSERT INTO t(v) VALUES ('kept')")
    say("committed", count(con))
    expect(sys.stdin, "check")
    say("still", count(con))
    rows = [first, *cur.fetchall()]
    say("rows", len(rows), "changed", sum(v != "old" * 100 for _, v in rows))
    say("next", count(con), con.execute("SELECT count(*) FROM big WHERE v = 'new'").fetchone()[0])


def writer(store, mode):
    """'insert': one INSERT (busy timeout 30 s: a blocked writer fails instead of hanging).
    'hold': BEGIN EXCLUSIVE and an uncommitted INSERT until told to commit.
    'exclusive': locking_mode=EXCLUSIVE, one INSERT with no busy timeout, then keeps its
    lock until told to leave exclusive mode.
    'update': every row of `big` changed and one INSERT, in one transaction."""
    con = connect(store, timeout=0 if mode == "exclusive" else 30)
    if mode == "exclusive":
        con.execute("PRAGMA locking_mode=EXCLUSIVE")
        con.execute("INSERT INTO t(v) VALUES ('from the exclusive writer')")
        say("committed", count(con))
        expect(sys.stdin, "leave")
        con.execute("PRAGMA locking_mode=NORMAL")
        count(con)  # the next transaction gives the lock back
        say("left")
        return
    if mode == "insert":
        con.execute("INSERT INTO t(v) VALUES ('from the writer')")
        say("committed", count(con))
        return
    if mode == "update":
        con.execute("BEGIN IMMEDIATE")
        con.execute("UPDATE big SET v = 'new'")
        con.execute("INSERT INTO t(v) VALUES ('from the writer')")
        con.execute("COMMIT")
        say("committed", count(con))
        return
    con.execute("BEGIN EXCLUSIVE")
    con.execute("INSERT INTO t(v) VALUES ('uncommitted')")
    say("holding")
    expect(sys.stdin, "commit")
    con.execute("COMMIT")
    say("committed", count(con))


def round_trips(con):
    stats = con.execute("PRAGMA txvfs_stats").fetchone()[0]
    return int(dict(kv.split("=") for kv in stats.split())["round_trips"])


def costs(store):
    """Round trips per one-row commit and per read transaction, as a client (averages: the
    lease renewal thread adds a few of its own)."""
    con = connect(store, timeout=30)
    con.execute("PRAGMA synchronous=FULL")
    for _ in range(5):  # warm the cache, the connection pool and the page cache
        con.execute("INSERT INTO t(v) VALUES ('warm-up')")
        count(con)
    n = 100
    before = round_trips(con)
    for _ in range(n):
        con.execute("INSERT INTO t(v) VALUES ('costed')")
    mid = round_trips(con)
    for _ in range(n):
        con.execute("BEGIN")
        con.execute("SELECT v FROM t WHERE id = 1").fetchone()
        con.execute("COMMIT")
    say("costs", (mid - before) / n, (round_trips(con) - mid) / n)


def spawn(lib, store, *args):
    return subprocess.Popen(
        [sys.executable, __file__, "--role", lib, store, JOURNAL_MODE or "-", *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )


def send(p, line):
    p.stdin.write(line + "\n")
    p.stdin.flush()


def finish(p):
    out, _ = p.communicate(timeout=120)
    assert p.returncode == 0, f"child failed with status {p.returncode}"
    return out


def reader_does_not_block_writer(lib, store):
    r = spawn(lib, store, "reader")
    expect(r.stdout, "reading 2")
    w = spawn(lib, store, "writer", "insert")
    # The reader's transaction stays open until it reads "check", sent only now.
    assert finish(w).strip() == "committed 3", "the writer commits while the reader reads"
    send(r, "check")
    lines = finish(r).split("\n")
    assert lines[0] == "snapshot 2", f"the reader keeps its snapshot: {lines[0]}"
    assert lines[1] == f"write refused {SQLITE_BUSY_SNAPSHOT} database_is_locked", lines[1]
    assert lines[2] == "after 3", lines[2]
    assert lines[3] == "wrote 4", lines[3]
    print("ok: a reader's open transaction does not block another process's commit")
    print("ok: the reader keeps its snapshot and its write gets SQLITE_BUSY_SNAPSHOT")


def writer_does_not_block_reader(lib, store):
    w = spawn(lib, store, "writer", "hold")
    expect(w.stdout, "holding")
    con = connect(store, timeout=0)
    assert count(con) == 4, "a reader under a writer's EXCLUSIVE lock sees the committed state"
    con.execute("BEGIN")
    assert count(con) == 4
    send(w, "commit")
    assert finish(w).strip() == "committed 5"
    assert count(con) == 4, "still the snapshot"
    con.execute("COMMIT")
    assert count(con) == 5
    assert con.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    con.close()
    print("ok: a writer holding EXCLUSIVE does not keep a reader out (no busy timeout)")


def connections_of_one_process(store):
    a = connect(store, timeout=0)
    b = connect(store, timeout=0)
    a.execute("BEGIN")
    n = count(a)
    b.execute("INSERT INTO t(v) VALUES ('from b')")
    assert count(a) == n and count(b) == n + 1
    try:
        a.execute("INSERT INTO t(v) VALUES ('from stale a')")
        raise AssertionError("a stale reader wrote")
    except sqlite3.OperationalError as e:
        assert e.sqlite_errorcode == SQLITE_BUSY_SNAPSHOT, e.sqlite_errorcode
    a.execute("ROLLBACK")
    assert count(a) == n + 1
    assert a.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    a.close()
    b.close()
    print("ok: the same between two connections of one process")


def exclusive_writer_keeps_new_readers_out(lib, store):
    r = spawn(lib, store, "reader")
    line = r.stdout.readline().split()
    assert line[0] == "reading", line
    n = int(line[1])
    w = spawn(lib, store, "writer", "exclusive")
    line = w.stdout.readline().strip()
    assert line == f"committed {n + 1}", f"the exclusive writer commits while r reads: {line!r}"
    con = connect(store, timeout=0, set_mode=False)  # setting a mode reads the database
    try:
        count(con)
        raise AssertionError("a new reader read under locking_mode=EXCLUSIVE")
    except sqlite3.OperationalError as e:
        assert e.sqlite_errorcode == 5, e.sqlite_errorcode  # SQLITE_BUSY
    send(w, "leave")
    assert finish(w).strip() == "left"
    assert count(con) == n + 1
    con.close()
    send(r, "check")
    lines = finish(r).split("\n")
    assert lines[0] == f"snapshot {n}", f"the reader keeps its snapshot: {lines[0]}"
    assert lines[1] == f"write refused {SQLITE_BUSY_SNAPSHOT} database_is_locked", lines[1]
    print("ok: a writer in locking_mode=EXCLUSIVE commits while another process reads")
    print("ok: then it keeps new readers of other processes out until it leaves that mode")


def a_commit_keeps_its_own_state(lib, store):
    owner = connect(store, timeout=5)  # this process owns the store: the children are clients
    owner.execute("CREATE TABLE big(id INTEGER PRIMARY KEY, v TEXT)")
    owner.execute(  # 300 bytes a row: about 150 pages
        "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 2000) "
        f"INSERT INTO big(v) SELECT '{'old' * 100}' FROM c"
    )
    n = count(owner)
    k = spawn(lib, store, "keeper")
    expect(k.stdout, f"committed {n + 1}")
    w = spawn(lib, store, "writer", "update")
    assert finish(w).strip() == f"committed {n + 2}", "the writer commits while k reads"
    send(k, "check")
    lines = finish(k).split("\n")
    assert lines[0] == f"still {n + 1}", f"k's read transaction is at its commit: {lines[0]}"
    assert lines[1] == "rows 2000 changed 0", f"k reads its commit's pages: {lines[1]}"
    assert lines[2] == f"next {n + 2} 2000", f"then it sees the other commit: {lines[2]}"
    assert owner.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    owner.close()
    print("ok: a connection that commits while it reads keeps reading its commit's state")


def client_round_trips(lib, store):
    owner = connect(store, timeout=5)
    count(owner)  # this process owns the store: the child is a client
    out = finish(spawn(lib, store, "costs")).split()
    owner.close()
    assert out[0] == "costs", out
    commit, read = float(out[1]), float(out[2])
    print(f"round trips of a client: {commit:.2f} per commit, {read:.2f} per read transaction")
    assert 0 < commit <= 2.5, f"a client's one-row commit takes {commit} round trips"
    assert read <= 0.5, f"a client's read transaction takes {read} round trips"
    print("ok: a client's commit costs at most 2.5 round trips, its read transaction 0.5")


def main():
    global JOURNAL_MODE, STOCK
    if sys.argv[1] == "--role":
        lib, store, mode, role, *rest = sys.argv[2:]
        JOURNAL_MODE = None if mode == "-" else mode
        STOCK = lib == "stock"
        load(lib)
        if role == "costs":
            costs(store)
        elif role == "keeper":
            keeper(store)
        elif role == "reader":
            reader(store)
        else:
            writer(store, rest[0])
        return
    lib, work, *modes = sys.argv[1:]
    STOCK = lib == "stock"
    load(lib)
    for mode in modes or MODES:
        JOURNAL_MODE = mode
        print(f"journal_mode={mode}:")
        store = os.path.join(work, f"rw-store-{mode}")
        con = connect(store, timeout=5)
        con.execute("CREATE TABLE t(id INTEGER PRIMARY KEY, v TEXT)")
        con.execute("INSERT INTO t(v) VALUES ('one'), ('two')")
        con.close()
        reader_does_not_block_writer(lib, store)
        writer_does_not_block_reader(lib, store)
        connections_of_one_process(store)
        a_commit_keeps_its_own_state(lib, store)
        if not STOCK:
            exclusive_writer_keeps_new_readers_out(lib, store)
    if STOCK:
        return
    JOURNAL_MODE = None
    client_round_trips(lib, os.path.join(work, "rw-store-delete"))


if __name__ == "__main__":
    main()
