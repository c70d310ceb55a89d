"""The application of issue 40's test: a photo library whose index is a SQLite table and whose
photos are files, in one txvfs store; every change to both is one commit (txvfs.sqlite).

    python3 rows_files_app.py work STORE WORKER SEED   # add and remove photos until killed
    python3 rows_files_app.py torn STORE WORKER SEED   # the same as two commits (a control)
    python3 rows_files_app.py check STORE              # the invariant, at one snapshot

The invariant: every row names a file that exists with the size and digest the row records,
and every file under /photos has its row. `check` reads the database file and the directory
in one txvfs transaction (one snapshot), then opens its copy of the database with stock
SQLite: a torn unit shows as a row without its file or a file without its row.
"""

import hashlib
import os
import random
import sqlite3
import sys
import tempfile
import time

import txvfs
import txvfs.sqlite

DB = "/index.db"
DIR = "/photos"
SCHEMA = "CREATE TABLE IF NOT EXISTS photos(name TEXT PRIMARY KEY, size INTEGER, digest TEXT)"
KEEP = 150


def content(name: str, size: int) -> bytes:
    """The photo's bytes: a function of its name and size, so a check can recompute them."""
    seed = hashlib.sha256(name.encode()).digest()
    return (seed * (size // len(seed) + 1))[:size]


def connect(store: txvfs.Store) -> "txvfs.sqlite.Connection":
    db = txvfs.sqlite.connect(store, DB, timeout=60, isolation_level=None)
    db.execute(SCHEMA)
    return db


def work(store_dir: str, worker: int, seed: int, torn: bool = False) -> None:
    """Adds photos (sometimes large, spanning blocks) and removes some, each change to the
    row and the file in one unit, until killed. `torn`: the negative control, the way such
    applications are written without txvfs: the file in its own commit, then the row."""
    rng = random.Random(seed)
    store = txvfs.Store(store_dir)
    store.makedirs(DIR, exist_ok=True)
    db = connect(store)
    # This worker's photos, its earlier (killed) runs' too: it keeps at most KEEP of them, so
    # the store (and a check, which reads every photo) stays small however long the test runs.
    pattern = "w%d-%%" % worker
    mine = [r[0] for r in db.execute("SELECT name FROM photos WHERE name LIKE ?", (pattern,))]
    n = 0
    print("working", flush=True)
    while True:
        if mine and (rng.random() < 0.3 or len(mine) >= KEEP):
            name = mine.pop(rng.randrange(len(mine)))

            def remove(files: txvfs.Transaction, name: str = name) -> None:
                db.execute("DELETE FROM photos WHERE name = ?", (name,))
                files.remove("%s/%s" % (DIR, name))

            db.transact(remove)
        else:
            n += 1
            name = "w%d-%d-%d.jpg" % (worker, seed, n)
            size = rng.choice([0, 100, 4096, 70_000, 200_000])
            data = content(name, size)
            digest = hashlib.sha256(data).hexdigest()

            def add(files: txvfs.Transaction) -> None:
                db.execute("INSERT INTO photos VALUES (?, ?, ?)", (name, size, digest))
                files.write_bytes("%s/%s" % (DIR, name), data)

            if torn:
                store.write_bytes("%s/%s" % (DIR, name), data)
                time.sleep(0.02)
                db.execute("INSERT INTO photos VALUES (?, ?, ?)", (name, size, digest))
            else:
                db.transact(add)
            mine.append(name)


def check(store: txvfs.Store) -> int:
    """Checks the invariant at one snapshot; returns the number of photos. Raises
    AssertionError naming what is torn."""
    with store.transaction() as tx:
        if not tx.exists(DB):
            assert not tx.exists(DIR) or not tx.listdir(DIR), "files without a database"
            return 0
        image = tx.read_bytes(DB)
        names = set(tx.listdir(DIR)) if tx.exists(DIR) else set()
        sizes = {n: tx.stat("%s/%s" % (DIR, n)).st_size for n in names}
        data = {n: tx.read_bytes("%s/%s" % (DIR, n)) for n in names}
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "copy.db")
        with open(path, "wb") as f:
            f.write(image)
        copy = sqlite3.connect(path)
        assert copy.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        rows = {n: (s, h) for n, s, h in copy.execute("SELECT * FROM photos")}
        copy.close()
    assert set(rows) - names == set(), "rows without files: %s" % sorted(set(rows) - names)[:5]
    assert names - set(rows) == set(), "files without rows: %s" % sorted(names - set(rows))[:5]
    for n, (size, digest) in rows.items():
        assert sizes[n] == size, "%s: size %d, its row says %d" % (n, sizes[n], size)
        assert hashlib.sha256(data[n]).hexdigest() == digest, "%s: content differs" % n
    return len(rows)


if __name__ == "__main__":
    if sys.argv[1] in ("work", "torn"):
        work(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), torn=sys.argv[1] == "torn")
    elif sys.argv[1] == "check":
        with txvfs.Store(sys.argv[2]) as s:
            print("photos", check(s))
    else:
        sys.exit("usage: rows_files_app.py work STORE WORKER SEED | check STORE")
