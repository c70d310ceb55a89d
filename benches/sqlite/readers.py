"""Readers and a writer on one SQLite database, in separate processes: the writer's durable
one-row commits per second alone, then with READERS reader processes running read
transactions (BEGIN; a few point reads and a count over a range; COMMIT) in a loop, on txvfs
(one RocksDB store shared by the processes) and on stock SQLite in WAL mode
(synchronous=FULL, a file on the host). On txvfs the first process to open the store serves
it to the others (docs/sharing.md), so the writer with readers is measured twice: started
after the readers (a client of one of them) and before them (the store's owner). Rounds
alternate between the systems; each cell is the best round. Prints a table: commits/s alone,
with readers, the ratios, and the writer's mean commit time alone.

    python3 benches/sqlite/readers.py LIBPATH WORKDIR [SECONDS] [READERS] [ROUNDS]
"""

import os
import sqlite3
import subprocess
import sys
import time
import urllib.parse

ROWS = 20000


def load(lib):
    boot = sqlite3.connect(":memory:")
    boot.enable_load_extension(True)
    boot.load_extension(lib)
    boot.close()


def connect(kind, work):
    if kind == "txvfs":
        store = urllib.parse.quote(os.path.join(work, "bench-store"), safe="/:=")
        uri = f"file:/bench/readers.db?vfs=txvfs&store={store}"
        con = sqlite3.connect(uri, uri=True, isolation_level=None, timeout=60)
    else:
        con = sqlite3.connect(os.path.join(work, "stock.db"), isolation_level=None, timeout=60)
    con.execute("PRAGMA journal_mode=WAL")
    con.execute("PRAGMA synchronous=FULL")
    return con


def setup(kind, work):
    con = connect(kind, work)
    con.execute("CREATE TABLE t(id INTEGER PRIMARY KEY, v BLOB)")
    con.execute("BEGIN")
    con.executemany("INSERT INTO t(v) VALUES (randomblob(100))", [()] * ROWS)
    con.execute("COMMIT")
    con.close()


def writer(kind, work, seconds):
    con = connect(kind, work)
    con.execute("SELECT count(*) FROM t").fetchone()
    print("ready", flush=True)
    sys.stdin.readline()  # go: the readers are reading
    n = 0
    start = time.perf_counter()
    while time.perf_counter() - start < seconds:
        con.execute("INSERT INTO t(v) VALUES (randomblob(100))")
        n += 1
    elapsed = time.perf_counter() - start
    print(n, elapsed, flush=True)


def reader(kind, work):
    con = connect(kind, work)
    i = 0
    while True:
        con.execute("BEGIN")
        for k in range(5):
            con.execute(
                "SELECT v FROM t WHERE id = ?", ((i * 7919 + k * 104729) % ROWS + 1,)
            ).fetchone()
        con.execute(
            "SELECT count(*) FROM t WHERE id BETWEEN ? AND ?",
            (i % ROWS, i % ROWS + 500),
        ).fetchone()
        con.execute("COMMIT")
        i += 1


def run(lib, work, kind, role, *args):
    return subprocess.Popen(
        [sys.executable, __file__, "--role", lib, work, kind, role, *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )


def measure(lib, work, kind, seconds, readers, writer_first=False):
    """The writer's commits and seconds, with `readers` reader processes started after the
    writer opened the database (`writer_first`) or before."""
    w = run(lib, work, kind, "writer", str(seconds)) if writer_first else None
    if w:
        w.stdout.readline()
    readers_p = [run(lib, work, kind, "reader") for _ in range(readers)]
    time.sleep(1.0 if readers else 0)  # the readers are reading when the writer starts
    if not w:
        w = run(lib, work, kind, "writer", str(seconds))
        w.stdout.readline()
    out, _ = w.communicate("go\n")
    for r in readers_p:
        r.kill()
        r.wait()
    n, elapsed = out.split()
    return int(n) / float(elapsed)


def main():
    if sys.argv[1] == "--role":
        lib, work, kind, role, *rest = sys.argv[2:]
        if kind == "txvfs":
            load(lib)
        if role == "writer":
            writer(kind, work, float(rest[0]))
        else:
            reader(kind, work)
        return
    lib, work = sys.argv[1], sys.argv[2]
    seconds = float(sys.argv[3]) if len(sys.argv) > 3 else 5.0
    readers = int(sys.argv[4]) if len(sys.argv) > 4 else 4
    rounds = int(sys.argv[5]) if len(sys.argv) > 5 else 1
    load(lib)
    kinds = ("txvfs", "stock WAL")
    best = {(k, c): 0.0 for k in kinds for c in ("alone", "after", "first")}
    for k in kinds:
        setup(k, work)
    for _ in range(rounds):
        for k in kinds:
            for c in ("alone", "after", "first"):
                if c == "first" and k != "txvfs":
                    continue
                r = measure(lib, work, k, seconds, 0 if c == "alone" else readers, c == "first")
                best[k, c] = max(best[k, c], r)
    print(
        f"| database | writer alone, commits/s | with {readers} readers, commits/s | ratio "
        f"| writer as the store's owner, with {readers} readers | ratio | commit alone, us |"
    )
    print("|---|---|---|---|---|---|---|")
    for k in kinds:
        a, b, f = best[k, "alone"], best[k, "after"], best[k, "first"]
        first = f"{f:.0f} | {f / a:.2f}x" if f else "- | -"
        print(f"| {k} | {a:.0f} | {b:.0f} | {b / a:.2f}x | {first} | {1e6 / a:.0f} |", flush=True)


if __name__ == "__main__":
    main()
