"""SQLite through txvfs from Python's sqlite3 module (extension loaded, URI filenames).

Run by tests/sqlite/run as: python3 test_python.py LIBPATH WORKDIR. Each test ends with
PRAGMA integrity_check on every database it touched.
"""

import os
import sqlite3
import subprocess
import sys
import threading
import time
import urllib.parse

LIB = sys.argv[1]
WORK = sys.argv[2]
STORE = os.path.join(WORK, "pystore")  # RocksDB store shared by the tests in this process
passed = []
# Every test names its store: none may open (and so create) the default store ./txvfs-store.
CWD = os.path.join(WORK, "pycwd")
os.makedirs(CWD)
os.chdir(CWD)


def connect(name, store=STORE, extra="", **kw):
    # The store URI is one URI parameter: its own '&' and '?' must be %-escaped.
    uri = f"file:{name}?vfs=txvfs&store={urllib.parse.quote(store, safe='/:=')}{extra}"
    return sqlite3.connect(uri, uri=True, isolation_level=None, **kw)


def check(con, schema="main"):
    assert con.execute(f"PRAGMA {schema}.integrity_check").fetchone()[0] == "ok"


def test(f):
    f()
    passed.append(f.__name__)
    return f


def stats(con):
    row = con.execute("PRAGMA txvfs_stats").fetchone()[0]
    return {k: int(v) for k, v in (kv.split("=") for kv in row.split())}


# Load once on a plain in-memory connection; the VFS stays registered (LOAD_PERMANENTLY).
boot = sqlite3.connect(":memory:")
boot.enable_load_extension(True)
boot.load_extension(LIB)
boot.close()


@test
def database_blocks_are_its_pages():
    # The database file gets its page size as its block size (a page write stores one page,
    # not a 64 KiB block); seen by the CLI, a second process on the same store.
    cli = os.path.join(os.environ["CARGO_TARGET_DIR"], "release", "txvfs")
    for page in (4096, 1024):
        con = connect(f"/pages/p{page}.db")
        con.execute(f"PRAGMA page_size={page}")
        con.execute("CREATE TABLE t(x)")
        con.execute("INSERT INTO t VALUES (randomblob(500))")
        for _ in range(6):
            con.execute("INSERT INTO t SELECT randomblob(500) FROM t")
        check(con)
        out = subprocess.run(
            [cli, "--store", STORE, "stat", f"/pages/p{page}.db"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
        assert f"IO Block: {page}\t" in out, out
        con.close()


@test
def workload_and_reopen():
    con = connect("/py/work.db")
    con.execute("CREATE TABLE t(id INTEGER PRIMARY KEY, v TEXT, b BLOB)")
    con.execute("BEGIN")
    con.executemany(
        "INSERT INTO t(v, b) VALUES (?, randomblob(300))", [(f"row{i}",) for i in range(3000)]
    )
    con.execute("COMMIT")
    con.execute("UPDATE t SET v = v || '!' WHERE id % 3 = 0")
    con.execute("DELETE FROM t WHERE id % 5 = 0")
    con.execute("CREATE INDEX tv ON t(v)")
    n = con.execute("SELECT count(*) FROM t").fetchone()[0]
    assert n == 2400, n
    check(con)
    con.execute("VACUUM")
    check(con)
    con.close()
    con = connect("/py/work.db")
    assert con.execute("SELECT count(*), sum(v LIKE '%!') FROM t").fetchone() == (2400, 800)
    check(con)
    con.close()


@test
def rollback_after_cache_spill():
    # A tiny cache makes SQLite write pages to the database file before COMMIT; ROLLBACK must
    # leave the committed state.
    con = connect("/py/spill.db")
    con.execute("PRAGMA cache_size=5")
    con.execute("CREATE TABLE t(x)")
    con.execute("INSERT INTO t VALUES (1)")
    con.execute("BEGIN")
    con.executemany("INSERT INTO t VALUES (randomblob(1000))", [()] * 500)
    con.execute("ROLLBACK")
    assert con.execute("SELECT count(*) FROM t").fetchone()[0] == 1
    check(con)
    other = connect("/py/spill.db")
    assert other.execute("SELECT count(*) FROM t").fetchone()[0] == 1
    check(other)
    other.close()
    con.close()


@test
def journal_modes_and_synchronous():
    for mode in ["delete", "truncate", "persist", "memory", "off"]:
        for sync in ["full", "normal", "off"]:
            con = connect(f"/py/jm-{mode}-{sync}.db")
            got = con.execute(f"PRAGMA journal_mode={mode}").fetchone()[0]
            assert got == mode, (got, mode)
            con.execute(f"PRAGMA synchronous={sync}")
            con.execute("CREATE TABLE t(x)")
            con.execute("BEGIN")
            con.executemany("INSERT INTO t VALUES (?)", [(i,) for i in range(200)])
            con.execute("COMMIT")
            check(con)
            con.close()
            con = connect(f"/py/jm-{mode}-{sync}.db")
            assert con.execute("SELECT count(*) FROM t").fetchone()[0] == 200
            con.close()


PEER_JOURNAL_MODE = """
import sqlite3, sys, urllib.parse
boot = sqlite3.connect(":memory:")
boot.enable_load_extension(True)
boot.load_extension(sys.argv[1])
store = urllib.parse.quote(sys.argv[2], safe="/:=")
con = sqlite3.connect(f"file:/py/wal.db?vfs=txvfs&store={store}", uri=True)
mode = con.execute("PRAGMA journal_mode").fetchone()[0]
print(mode, con.execute("SELECT count(*) FROM t").fetchone()[0])
"""


@test
def wal_is_accepted_remembered_and_switched_back():
    con = connect("/py/wal.db")
    con.execute("CREATE TABLE t(x)")
    con.execute("INSERT INTO t VALUES (1)")
    assert con.execute("PRAGMA journal_mode=WAL").fetchone()[0] == "wal"
    con.execute("INSERT INTO t VALUES (2)")
    assert con.execute("PRAGMA wal_checkpoint").fetchone() == (0, -1, -1)
    assert con.execute("PRAGMA journal_size_limit=1048576").fetchone()[0] == 1048576
    con.close()
    # Another connection (and process) sees the mode, as with SQLite's own WAL.
    con = connect("/py/wal.db")
    assert con.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    out = subprocess.run(
        [sys.executable, "-c", PEER_JOURNAL_MODE, LIB, STORE],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert out == "wal 2", out
    assert con.execute("PRAGMA journal_mode=DELETE").fetchone()[0] == "delete"
    assert con.execute("PRAGMA journal_mode").fetchone()[0] == "delete"
    assert con.execute("SELECT count(*) FROM t").fetchone()[0] == 2
    assert con.execute("PRAGMA journal_mode=wal").fetchone()[0] == "wal"
    assert con.execute("SELECT count(*) FROM t").fetchone()[0] == 2
    check(con)
    con.close()


@test
def two_connections_contend_for_the_write_lock():
    setup = connect("/py/lock.db")
    setup.execute("CREATE TABLE t(who, n)")
    setup.close()
    a = connect("/py/lock.db", check_same_thread=False)
    b = connect("/py/lock.db", timeout=30)  # busy_timeout 30 s
    c = connect("/py/lock.db", timeout=0)  # no busy handler
    a.execute("BEGIN IMMEDIATE")  # RESERVED
    a.execute("INSERT INTO t VALUES ('a', 1)")
    # A reader still sees the committed state while a writes.
    assert c.execute("SELECT count(*) FROM t").fetchone()[0] == 0
    try:
        c.execute("BEGIN IMMEDIATE")
        raise AssertionError("second writer got the lock")
    except sqlite3.OperationalError as e:
        assert "locked" in str(e), e
    c.execute("ROLLBACK") if c.in_transaction else None

    def finish():
        time.sleep(0.3)
        a.execute("COMMIT")

    t = threading.Thread(target=finish)
    t.start()
    b.execute("BEGIN IMMEDIATE")  # waits in the busy handler until a commits
    b.execute("INSERT INTO t VALUES ('b', 2)")
    b.execute("COMMIT")
    t.join()
    assert c.execute("SELECT who FROM t ORDER BY n").fetchall() == [("a",), ("b",)]
    # A reader does not hold up a commit: c reads its snapshot while b2 commits.
    c.execute("BEGIN")
    assert c.execute("SELECT count(*) FROM t").fetchone()[0] == 2
    b2 = connect("/py/lock.db", timeout=0)
    b2.execute("BEGIN IMMEDIATE")
    b2.execute("INSERT INTO t VALUES ('x', 3)")
    b2.execute("COMMIT")
    assert c.execute("SELECT count(*) FROM t").fetchone()[0] == 2, "c keeps its snapshot"
    c.execute("COMMIT")
    assert c.execute("SELECT count(*) FROM t").fetchone()[0] == 3
    for con in (a, b, c, b2):
        check(con)
        con.close()


@test
def large_transaction_commits_under_foundationdb_limits():
    # FoundationDB allows 10 MB per transaction; txvfs writes larger data ahead as chunks, so
    # a 15 MB SQLite transaction still commits as one txvfs transaction.
    store = "memory:?limits=foundationdb"
    con = connect("/py/large.db", store=store)
    con.execute("CREATE TABLE t(x)")
    con.execute("BEGIN")
    con.executemany("INSERT INTO t VALUES (randomblob(100000))", [()] * 150)  # ~15 MB
    con.execute("COMMIT")
    other = connect("/py/large.db", store=store)
    assert other.execute("SELECT count(*), sum(length(x)) FROM t").fetchone() == (150, 15000000)
    check(other)
    other.close()
    con.close()


@test
def failing_commit_surfaces_as_an_error_and_changes_nothing():
    # A memory store of 3 MB refuses a 15 MB transaction at commit, as a full disk would:
    # a real backend failure (ENOSPC, reported by SQLite as SQLITE_FULL), not a mock.
    store = "memory:?limits=foundationdb&capacity=3000000"
    con = connect("/py/fail.db", store=store)
    con.execute("CREATE TABLE t(x)")
    con.execute("INSERT INTO t VALUES ('kept')")
    con.execute("BEGIN")
    con.executemany("INSERT INTO t VALUES (randomblob(100000))", [()] * 150)  # ~15 MB
    try:
        con.execute("COMMIT")
        raise AssertionError("15 MB transaction committed on a 3 MB store")
    except sqlite3.OperationalError as e:
        assert "database or disk is full" in str(e), e
    if con.in_transaction:
        con.execute("ROLLBACK")
    assert con.execute("SELECT x FROM t").fetchall() == [("kept",)]
    check(con)
    other = connect("/py/fail.db", store=store)
    assert other.execute("SELECT x FROM t").fetchall() == [("kept",)]
    check(other)
    # The connection keeps working.
    con.execute("INSERT INTO t VALUES ('after')")
    assert other.execute("SELECT count(*) FROM t").fetchone()[0] == 2
    other.close()
    con.close()


@test
def commit_group_across_attached_databases():
    con = connect("/py/g-main.db", extra="&group=g1")
    con.execute(f"ATTACH 'file:/py/g-other.db?vfs=txvfs&store={STORE}&group=g1' AS other")
    con.execute("CREATE TABLE main.a(x)")
    con.execute("CREATE TABLE other.b(x)")
    before = stats(con)
    con.execute("BEGIN")
    con.execute("INSERT INTO main.a VALUES (1)")
    con.execute("INSERT INTO other.b VALUES (1)")
    con.execute("COMMIT")
    after = stats(con)
    assert after["grouped"] == before["grouped"] + 1, (before, after)
    assert after["commits"] == before["commits"] + 1, (before, after)
    assert con.execute("PRAGMA other.txvfs_group").fetchone()[0] == "g1"
    # The pragma form: a third database joins the group.
    con.execute(f"ATTACH 'file:/py/g-third.db?vfs=txvfs&store={STORE}' AS third")
    con.execute("PRAGMA third.txvfs_group='g1'")
    con.execute("CREATE TABLE third.c(x)")
    before = stats(con)
    con.execute("BEGIN")
    for s in ("main.a", "other.b", "third.c"):
        con.execute(f"INSERT INTO {s} VALUES (2)")
    con.execute("COMMIT")
    after = stats(con)
    assert after["commits"] == before["commits"] + 1, (before, after)
    for s in ("main", "other", "third"):
        check(con, s)
    con.close()


@test
def attached_databases_commit_together_without_a_group():
    # SQLite makes a transaction over several attached databases atomic with a super-journal
    # (journal modes DELETE, TRUNCATE, PERSIST; synchronous != OFF); txvfs commits all of
    # them (those in one store) as one txvfs transaction when SQLite deletes the super-journal.
    # The proof: the second database's part does not fit in the store, so the commit fails,
    # and the first database must not have changed either.
    store = "memory:?capacity=3000000"
    quoted = urllib.parse.quote(store, safe="/:=")
    for mode in ["delete", "truncate", "persist"]:
        con = connect(f"/py/at-{mode}-a.db", store=store)
        con.execute(f"ATTACH 'file:/py/at-{mode}-b.db?vfs=txvfs&store={quoted}' AS b")
        for s in ("main", "b"):
            con.execute(f"PRAGMA {s}.journal_mode={mode}")
            con.execute(f"CREATE TABLE {s}.t(x)")
        before = stats(con)
        con.execute("BEGIN")
        con.execute("INSERT INTO main.t VALUES ('one')")
        con.execute("INSERT INTO b.t VALUES ('one')")
        con.execute("COMMIT")
        after = stats(con)
        assert after["commits"] == before["commits"] + 1, (mode, before, after)
        assert after["grouped"] == before["grouped"] + 1, (mode, before, after)
        con.execute("BEGIN")
        con.execute("INSERT INTO main.t VALUES ('lost')")
        con.executemany("INSERT INTO b.t VALUES (randomblob(100000))", [()] * 40)  # ~4 MB
        try:
            con.execute("COMMIT")
            raise AssertionError("4 MB transaction committed on a 3 MB store")
        except sqlite3.OperationalError as e:
            assert "full" in str(e) or "disk I/O" in str(e), e
        if con.in_transaction:
            con.execute("ROLLBACK")
        other = connect(f"/py/at-{mode}-a.db", store=store)
        other.execute(f"ATTACH 'file:/py/at-{mode}-b.db?vfs=txvfs&store={quoted}' AS b")
        for c in (con, other):
            assert c.execute("SELECT x FROM main.t").fetchall() == [("one",)], (
                mode,
                c.execute("SELECT x FROM main.t").fetchall(),
            )
            assert c.execute("SELECT count(*) FROM b.t").fetchone()[0] == 1, mode
            check(c)
            check(c, "b")
        other.close()
        con.close()


@test
def one_group_two_connections_two_threads():
    # Explicit groups are for databases on separate connections: two threads commit to two
    # databases of one group at once, over and over. Neither may block the other for good.
    for name in ("/py/tg-1.db", "/py/tg-2.db"):
        c = connect(name, extra="&group=tg")
        c.execute("CREATE TABLE t(x)")
        c.close()
    errors = []

    def writer(name):
        try:
            c = connect(name, extra="&group=tg", timeout=30, check_same_thread=False)
            for i in range(400):
                c.execute("INSERT INTO t VALUES (?)", (i,))
            c.close()
        except Exception as e:  # reported below
            errors.append(e)

    threads = [
        threading.Thread(target=writer, args=(n,), daemon=True)
        for n in ("/py/tg-1.db", "/py/tg-2.db")
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not any(t.is_alive() for t in threads), "group commits from two threads deadlocked"
    assert not errors, errors
    for name in ("/py/tg-1.db", "/py/tg-2.db"):
        c = connect(name)
        assert c.execute("SELECT count(*) FROM t").fetchone()[0] == 400
        check(c)
        c.close()


@test
def backup_and_vacuum_into():
    # The backup API (another page size than the destination's) and VACUUM INTO write through
    # their own commit paths; both must end in the store.
    src = sqlite3.connect(os.path.join(WORK, "backup-src.db"))
    src.execute("PRAGMA page_size=8192")
    src.execute("CREATE TABLE t(x)")
    src.executemany("INSERT INTO t VALUES (randomblob(500))", [()] * 2000)
    src.commit()
    dst = connect("/py/backup.db")
    dst.execute("CREATE TABLE old(y)")
    src.backup(dst)
    src.close()
    dst.execute(
        f"VACUUM INTO 'file:/py/vacuumed.db?vfs=txvfs&store={urllib.parse.quote(STORE, safe='/:=')}'"
    )
    dst.close()
    for name in ("/py/backup.db", "/py/vacuumed.db"):
        c = connect(name)
        assert c.execute("SELECT count(*) FROM t").fetchone()[0] == 2000, name
        assert c.execute("PRAGMA page_size").fetchone()[0] == 8192, name
        check(c)
        c.close()


@test
def read_only_database_from_a_pack():
    # A database built on the host, packed with `txvfs pack DIR IMAGE`, and queried from the
    # image: reads work; a write fails (the image is read-only) and the image is unchanged.
    host = os.path.join(WORK, "packhost")
    os.makedirs(host)
    plain = sqlite3.connect(os.path.join(host, "cities.db"))
    plain.execute("CREATE TABLE c(name TEXT PRIMARY KEY, pop INTEGER)")
    plain.executemany("INSERT INTO c VALUES (?, ?)", [(f"city{i}", i * 1000) for i in range(5000)])
    plain.commit()
    plain.close()
    image = os.path.join(WORK, "cities.pack")
    cli = os.path.join(os.environ["CARGO_TARGET_DIR"], "release", "txvfs")
    subprocess.run([cli, "pack", host, image], check=True)
    before = open(image, "rb").read()
    con = connect("/cities.db", store="pack:" + image, extra="&mode=ro")
    assert con.execute("SELECT count(*), sum(pop) FROM c").fetchone() == (5000, 12497500000)
    assert con.execute("SELECT pop FROM c WHERE name = 'city4321'").fetchone() == (4321000,)
    check(con)
    try:
        con.execute("INSERT INTO c VALUES ('new', 1)")
        raise AssertionError("a write to a pack succeeded")
    except sqlite3.OperationalError as e:
        assert "readonly" in str(e), e
    con.close()
    assert open(image, "rb").read() == before


assert not os.path.exists(os.path.join(CWD, "txvfs-store")), "the default store was created"
passed.append("no_default_store_created")

print(f"python sqlite3 tests: {len(passed)} passed ({', '.join(passed)})")
