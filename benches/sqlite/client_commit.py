"""One-row commits per second of a writer process that is a client of a store another, idle,
process owns (it opened the store first and serves it), and the writer's round trips to the
owner per commit (`PRAGMA txvfs_stats`, from builds that count them): what a client's commit
costs beyond the owner's own, without readers competing for the CPU. The owner's own rate,
measured first the same way, is printed beside it.

    python3 benches/sqlite/client_commit.py LIBPATH WORKDIR [COMMITS] [SYNCHRONOUS]

SYNCHRONOUS is FULL (default) or OFF; with OFF the fsync is out of the way and the round trips
are most of a commit's cost. Prints `client: COMMITS/s ROUND-TRIPS-per-commit`, then
`owner: COMMITS/s` and the client's time per commit over the owner's.
"""

import os
import sqlite3
import subprocess
import sys
import time
import urllib.parse


def connect(lib, work, sync):
    boot = sqlite3.connect(":memory:")
    boot.enable_load_extension(True)
    boot.load_extension(lib)
    boot.close()
    store = urllib.parse.quote(os.path.join(work, "store"), safe="/:=")
    uri = f"file:/client.db?vfs=txvfs&store={store}"
    con = sqlite3.connect(uri, uri=True, isolation_level=None, timeout=60)
    con.execute("PRAGMA journal_mode=WAL")
    con.execute(f"PRAGMA synchronous={sync}")
    return con


def round_trips(con):
    stats = dict(kv.split("=") for kv in con.execute("PRAGMA txvfs_stats").fetchone()[0].split())
    return int(stats.get("round_trips", -1))


def commits(con, n):
    """Commits/s and round trips per commit of `n` one-row commits on `con`."""
    for _ in range(20):  # warm up the connection pool, the cache and the page cache
        con.execute("INSERT INTO t(v) VALUES (randomblob(100))")
    before = round_trips(con)
    start = time.perf_counter()
    for _ in range(n):
        con.execute("INSERT INTO t(v) VALUES (randomblob(100))")
    rate = n / (time.perf_counter() - start)
    trips = (round_trips(con) - before) / n if before >= 0 else float("nan")
    return rate, trips


def client(lib, work, n, sync):
    rate, trips = commits(connect(lib, work, sync), n)
    print(f"{rate:.0f} {trips:.2f}", flush=True)


def main():
    if sys.argv[1] == "--client":
        lib, work, n, sync = sys.argv[2:]
        client(lib, work, int(n), sync)
        return
    lib, work = sys.argv[1], sys.argv[2]
    n = sys.argv[3] if len(sys.argv) > 3 else "1000"
    sync = sys.argv[4] if len(sys.argv) > 4 else "FULL"
    owner = connect(lib, work, sync)  # this process owns the store and stays idle
    owner.execute("CREATE TABLE IF NOT EXISTS t(id INTEGER PRIMARY KEY, v BLOB)")
    own, _ = commits(owner, int(n))
    args = [sys.executable, __file__, "--client", lib, work, n, sync]
    out = subprocess.run(args, capture_output=True, text=True, check=True)
    rate, trips = out.stdout.split()
    print(f"client: {rate}/s {trips} round trips per commit; owner: {own:.0f}/s; ", end="")
    print(f"client/owner time per commit: {own / float(rate):.2f}x")
    owner.close()


if __name__ == "__main__":
    main()
