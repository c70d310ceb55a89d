#!/usr/bin/env python3
"""Owner beside client from Python (issue 26): the same calls, timed in the process that owns
a RocksDB store and in a second process (a client of it), in one run. 2,000 files of 4 KiB
under /a/b; 20,000 random calls of stat and read_bytes each; best of 3 rounds. Usage:

    tests/edges/run --collect-only -q >/dev/null   # or any way to put txvfs on PYTHONPATH
    python3 benches/python_shared.py [--quick]
"""

from __future__ import annotations

import random
import subprocess
import sys
import tempfile
import time

import txvfs

FILES = 2000


def per_call(store: "txvfs.FileSystem", calls: int) -> tuple[float, float]:
    """Microseconds per stat and per read_bytes of random files (best of 3 rounds)."""
    rng = random.Random(7)
    paths = [f"/a/b/f{rng.randrange(FILES)}" for _ in range(calls)]
    best = [float("inf"), float("inf")]
    for _ in range(3):
        t = time.perf_counter()
        for p in paths:
            store.stat(p)
        best[0] = min(best[0], (time.perf_counter() - t) / calls * 1e6)
        t = time.perf_counter()
        for p in paths:
            store.read_bytes(p)
        best[1] = min(best[1], (time.perf_counter() - t) / calls * 1e6)
    return best[0], best[1]


def main() -> None:
    if sys.argv[1:2] == ["client"]:
        with txvfs.open(sys.argv[2]) as s:
            print(*per_call(s, int(sys.argv[3])))
        return
    calls = 2000 if "--quick" in sys.argv else 20000
    with tempfile.TemporaryDirectory() as d:
        path = f"{d}/store"
        with txvfs.open(path) as s:
            s.makedirs("/a/b")
            for i in range(FILES):
                s.write_bytes(f"/a/b/f{i}", bytes(4096))
            own = per_call(s, calls)
            out = subprocess.run(
                [sys.executable, __file__, "client", path, str(calls)],
                check=True,
                capture_output=True,
                text=True,
            ).stdout
            client = [float(x) for x in out.split()]
    print("| call from Python | owner, µs | client, µs | ratio | target |")
    print("|---|---|---|---|---|")
    for name, o, c in zip(["stat", "read_bytes 4 KiB"], own, client, strict=True):
        print(f"| {name} | {o:.2f} | {c:.2f} | {c / o:.2f}x | <= 3x |")


if __name__ == "__main__":
    main()
