"""The rows-and-files workload of the power-cut test (tests/powercut/run): the photo library of
tests/python/rows_files_app.py (a SQLite index and the photo files in one RocksDB store on
txvfs-lazyfs), each photo's row and file committed together through txvfs.sqlite.

    python3 rows_files_cycle.py check|cycle STORE ACKLOG

check: at one snapshot, every row has its file with the size and digest the row records and
       every file has its row (rows_files_app.check), and every photo acknowledged in ACKLOG
       is there. Exit 3 when an acknowledged photo is missing, 4 for anything else.
cycle: check, then add photos (each a row and a file, one commit, synchronous=FULL) until
       killed, in this process and in WRITERS-1 more (default 3 in all, sharing the store: the
       first to open it serves the others), each appending `ack NAME` to ACKLOG, fsynced,
       after each commit returns. Prints `running from N` once the first photo after the
       check committed. The harness starts it in a process group of its own and kills the
       group, so the cut finds every writer dead.
"""

import hashlib
import os
import random
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "python"))
import rows_files_app as app  # noqa: E402
import txvfs  # noqa: E402


def acked(path):
    """The acknowledged photo names (complete lines only)."""
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [ln.split()[1] for ln in f.read().split("\n")[:-1] if ln.startswith("ack ")]


def check(store, acklog):
    """Returns the number of photos, or exits 3 or 4."""
    try:
        n = app.check(store)
    except AssertionError as e:
        print(f"check: torn: {e}")
        sys.exit(4)
    with store.transaction() as tx:
        missing = [a for a in acked(acklog) if not tx.exists(f"{app.DIR}/{a}")]
    if missing:
        print(f"check: {len(missing)} acknowledged photos lost, first {missing[:3]}")
        sys.exit(3)
    return n


def main():
    mode, store_dir, acklog = sys.argv[1:4]
    store = txvfs.open(store_dir)
    if mode == "writer":
        write(store, acklog, None)
    n = check(store, acklog)
    if mode == "check":
        print(f"photos {n}, acknowledged {len(acked(acklog))}")
        return
    store.makedirs(app.DIR, exist_ok=True)
    for _ in range(int(os.environ.get("TXVFS_ROWS_FILES_WRITERS", "3")) - 1):
        subprocess.Popen([sys.executable, __file__, "writer", store_dir, acklog])
    write(store, acklog, n)


def write(store, acklog, n):
    """Adds photos until killed; prints `running from N` after the first (when N is given)."""
    db = app.connect(store)
    db.execute("PRAGMA synchronous=FULL")
    rng = random.Random(int.from_bytes(os.urandom(8), "little"))
    log = open(acklog, "a")  # noqa: SIM115 (open until killed); O_APPEND: whole lines
    first = n is not None
    while True:
        name = f"p{os.getpid()}-{rng.getrandbits(40)}.jpg"
        size = rng.choice([0, 100, 4096, 70_000, 200_000])
        data = app.content(name, size)
        digest = hashlib.sha256(data).hexdigest()

        def add(files, name=name, size=size, data=data, digest=digest):
            db.execute("INSERT INTO photos VALUES (?, ?, ?)", (name, size, digest))
            files.write_bytes(f"{app.DIR}/{name}", data)

        db.transact(add)
        log.write(f"ack {name}\n")
        log.flush()
        os.fsync(log.fileno())
        if first:
            print(f"running from {n}", flush=True)
            first = False


if __name__ == "__main__":
    main()
