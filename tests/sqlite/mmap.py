"""Pages lent to SQLite instead of copied (PRAGMA mmap_size: the VFS's xFetch/xUnfetch).

A reader connection with mmap_size set reads a table and its index after every commit of
another connection and of another process (a client of this process's store), each commit
changing every row: it must see exactly the last commit (min = max = its number), never a
page lent from an older state. A read transaction held open, and a statement stepped half-way,
keep seeing their snapshot while commits land; a write transaction that spilled pages out of
its page cache reads them back from its own writes, never lent the committed ones. integrity_check passes with mmap on. The
counters (PRAGMA txvfs_stats) prove pages were lent (lends), and that every lend was given
back (lent = 0 between statements and once the connections closed); the client process, whose
cache cannot prove a page current, lends none.

    python3 mmap.py LIBPATH WORKDIR
"""

import os
import sqlite3
import subprocess
import sys
import urllib.parse

ROWS = 3000
PAD = 300
MMAP = 256 << 20


def connect(store, mmap=0):
    uri = f"file:/mmap/t.db?vfs=txvfs&store={urllib.parse.quote(store, safe='/:=')}"
    con = sqlite3.connect(uri, uri=True, isolation_level=None, timeout=30)
    if mmap:
        got = con.execute(f"PRAGMA mmap_size={mmap}").fetchone()
        assert got == (mmap,), f"PRAGMA mmap_size={mmap} answered {got}"
    return con


def stats(con):
    row = con.execute("PRAGMA txvfs_stats").fetchone()[0]
    return {k: int(v) for k, v in (kv.split("=") for kv in row.split())}


def state(con):
    """(min, max, count, pad bytes) of the table, then the index's count of the max."""
    lo, hi, n, pad = con.execute(
        "SELECT min(v), max(v), count(*), sum(length(pad)) FROM t"
    ).fetchone()
    by_index = con.execute("SELECT count(*) FROM t INDEXED BY tv WHERE v = ?", (hi,)).fetchone()[0]
    return lo, hi, n, pad, by_index


def expect_state(con, i, what):
    got = state(con)
    want = (i, i, ROWS, ROWS * PAD, ROWS)
    assert got == want, f"{what}: read {got}, the last commit is {want}"


def child(store):
    """A client process: commits 'go I' as UPDATE t SET v = I, answers 'done I'; reads with
    mmap_size set too; at 'end' prints its own lend count."""
    con = connect(store, mmap=MMAP)
    for line in sys.stdin:
        cmd, *arg = line.split()
        if cmd == "go":
            i = int(arg[0])
            con.execute("UPDATE t SET v = ?", (i,))
            expect_state(con, i, "the client after its commit")
            print("done", i, flush=True)
        elif cmd == "end":
            print("lends", stats(con)["lends"], flush=True)
            return


def main(lib, work):
    boot = sqlite3.connect(":memory:")
    boot.enable_load_extension(True)
    boot.load_extension(lib)
    boot.close()
    store = os.path.join(work, "mmap-store")
    w = connect(store)
    w.execute("CREATE TABLE t(id INTEGER PRIMARY KEY, v INTEGER, pad BLOB)")
    w.execute("CREATE INDEX tv ON t(v)")
    w.execute(
        "WITH RECURSIVE n(k) AS (SELECT 1 UNION ALL SELECT k + 1 FROM n WHERE k < ?) "
        "INSERT INTO t(v, pad) SELECT 0, randomblob(?) FROM n",
        (ROWS, PAD),
    )
    r = connect(store, mmap=MMAP)
    assert r.execute("PRAGMA mmap_size").fetchone() == (MMAP,)
    start = stats(r)["lends"]
    expect_state(r, 0, "first read")

    # Another connection commits; the reader reads after each commit.
    i = 0
    for i in range(1, 31):
        w.execute("UPDATE t SET v = ?", (i,))
        expect_state(r, i, f"after the other connection's commit {i}")
        assert stats(r)["lent"] == 0, "pages not given back after a statement"
    lent_reads = stats(r)["lends"] - start
    assert lent_reads > 30 * 10, f"only {lent_reads} pages lent over 30 scans"

    # A read transaction keeps its snapshot across commits; so does a statement stepped
    # half-way (its cursor holds lent pages while the commits land).
    r.execute("BEGIN")
    expect_state(r, i, "the read transaction's first read")
    cur = r.execute("SELECT v FROM t ORDER BY id")
    half = [v for (v,) in cur.fetchmany(ROWS // 2)]
    for j in range(i + 1, i + 6):
        w.execute("UPDATE t SET v = ?", (j,))
    rest = [v for (v,) in cur.fetchall()]
    assert set(half + rest) == {i} and len(half + rest) == ROWS, "a statement saw a commit"
    expect_state(r, i, "the read transaction after 5 commits")
    r.execute("COMMIT")
    i += 5
    expect_state(r, i, "a new read transaction")

    # A write transaction larger than its page cache spills pages to the VFS (its uncommitted
    # overlay) and forgets them: reading them again in the transaction must not be lent the
    # committed pages.
    x = connect(store, mmap=MMAP)
    x.execute("PRAGMA cache_size=10")
    x.execute("BEGIN")
    x.execute("UPDATE t SET v = ?", (i + 1,))
    expect_state(x, i + 1, "a write transaction reading what it spilled")
    x.execute("ROLLBACK")
    expect_state(x, i, "after the rollback")
    x.close()

    # Another process commits (a client of this process's store).
    p = subprocess.Popen(
        [sys.executable, __file__, lib, work, "child", store],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    for j in range(i + 1, i + 21):
        p.stdin.write(f"go {j}\n")
        p.stdin.flush()
        line = p.stdout.readline().strip()
        assert line == f"done {j}", f"the client process answered {line!r}"
        expect_state(r, j, f"after the other process's commit {j}")
    i += 20
    p.stdin.write("end\n")
    p.stdin.flush()
    client_lends = p.stdout.readline().strip()
    assert p.wait(timeout=60) == 0, "the client process failed"
    assert client_lends == "lends 0", f"a client of the store lent pages: {client_lends}"

    # integrity_check reads every page with mmap on.
    assert r.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    lends = stats(r)["lends"] - start
    r.close()
    w.close()
    last = connect(store)
    s = stats(last)
    assert s["lent"] == 0, f"{s['lent']} lends outstanding after the connections closed"
    expect_state(last, i, "without mmap")
    last.close()
    print(f"mmap: {lends} pages lent over {i} commits, all given back; the client lent none")


if __name__ == "__main__":
    if len(sys.argv) > 3 and sys.argv[3] == "child":
        boot = sqlite3.connect(":memory:")
        boot.enable_load_extension(True)
        boot.load_extension(sys.argv[1])
        boot.close()
        child(sys.argv[4])
    else:
        main(sys.argv[1], sys.argv[2])
