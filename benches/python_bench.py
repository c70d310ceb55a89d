#!/usr/bin/env python3
"""txvfs from Python side by side with the builtin open and fsspec's LocalFileSystem.

Runs, in one process and on the same disk (a temporary directory under --dir):
  * write, then read, 10,000 files of 4 KiB: store.open vs builtin open (open+write/read+close)
  * write one 256 MiB file in 1 MiB pieces (from bytes, and from a memoryview as
    io.BufferedWriter hands large writes to the raw file): store.open vs builtin open
  * read it sequentially: read() of the whole file, read(1 MiB) in a loop, readinto a 1 MiB
    bytearray, read(4 KiB) (served from io.BufferedReader's buffer, as open() returns it),
    and readinto a 1 MiB memoryview on the raw file (buffering=0: RawFile vs io.FileIO), also
    after reopening the store (the file's blocks then come from RocksDB's table files);
    the same file read by the core in a Rust loop (Handle._time_core_read) shows the ceiling
  * fsspec cat_file of the 256 MiB file: TxvfsFileSystem vs LocalFileSystem
  * per-call overhead of the binding: store.stat("/") from Python minus the same core call in a
    Rust loop (FileSystem._time_core_stat), and store.exists on a missing path

Each row is the best of --rounds runs (txvfs and the baseline alternate). The ratio is txvfs's
rate / the baseline's rate (higher is better; 0.50x = half the builtin's speed). The last
column counts minor page faults per MiB moved (averaged over the rounds): fresh memory mapped
for the data, which a read into a reused buffer should not need (256 per MiB: every page new). The RocksDB
store is opened with its defaults (auto-commit calls are atomic and durable at the next sync,
like the builtin open without fsync). Usage:

    tests/python/run --collect-only -q >/dev/null   # or any way to put txvfs on PYTHONPATH
    python3 benches/python_bench.py [--dir DIR] [--quick] [--rounds N]
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import tempfile
import time
from typing import Any, Callable, List, Tuple

import txvfs

KiB, MiB = 1 << 10, 1 << 20


def timed(fn: Callable[[], object]) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dir", default=None, help="where the store and the plain files go")
    ap.add_argument("--quick", action="store_true", help="small sizes, for a smoke run")
    ap.add_argument("--rounds", type=int, default=3, help="runs per row; the best counts")
    args = ap.parse_args()
    nfiles = 1000 if args.quick else 10_000
    big = (16 if args.quick else 256) * MiB
    mib = big // MiB
    base = tempfile.mkdtemp(prefix="txvfs-pybench-", dir=args.dir)
    rows: List[Tuple[str, str, str, str, str]] = []

    faults = [0.0, 0.0]  # minor page faults per round of the last row: txvfs, baseline

    def best(a: Callable[[], object], b: Callable[[], object]) -> Tuple[float, float]:
        """The best times of `a` (txvfs) and `b` (baseline) over the rounds, alternating;
        counts their page faults (fresh memory the allocator maps) into `faults`."""
        ta = tb = float("inf")
        faults[:] = [0.0, 0.0]
        for _ in range(args.rounds):
            for i, fn in enumerate((a, b)):
                f0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
                t = timed(fn)
                faults[i] += (resource.getrusage(resource.RUSAGE_SELF).ru_minflt - f0) / args.rounds
                ta, tb = (min(ta, t), tb) if i == 0 else (ta, min(tb, t))
        return ta, tb

    def per_file_row(name: str, a: Callable[[], None], b: Callable[[], None]) -> None:
        ta, tb = best(a, b)
        ta, tb = ta / nfiles, tb / nfiles
        rows.append(
            (name, "%.1f µs" % (ta * 1e6), "%.1f µs" % (tb * 1e6), "%.2fx" % (tb / ta), "-")
        )

    def rate_row(name: str, a: Callable[[], object], b: Callable[[], object]) -> None:
        ta, tb = best(a, b)
        rows.append(
            (
                name,
                "%.0f MiB/s" % (mib / ta),
                "%.0f MiB/s" % (mib / tb),
                "%.2fx" % (tb / ta),
                "%.0f / %.0f" % (faults[0] / mib, faults[1] / mib),
            )
        )

    try:
        plain = os.path.join(base, "plain")
        os.makedirs(os.path.join(plain, "small"))
        store = txvfs.open(os.path.join(base, "store"))
        store.mkdir("/small")
        small = os.urandom(4 * KiB)

        def write_small_txvfs() -> None:
            for i in range(nfiles):
                with store.open("/small/f%d" % i, "wb") as f:
                    f.write(small)

        def write_small_plain() -> None:
            for i in range(nfiles):
                with open(os.path.join(plain, "small", "f%d" % i), "wb") as f:
                    f.write(small)

        def read_small_txvfs() -> None:
            for i in range(nfiles):
                with store.open("/small/f%d" % i, "rb") as f:
                    assert len(f.read()) == 4 * KiB

        def read_small_plain() -> None:
            for i in range(nfiles):
                with open(os.path.join(plain, "small", "f%d" % i), "rb") as f:
                    assert len(f.read()) == 4 * KiB

        per_file_row(
            "create+write 4 KiB+close (%d files)" % nfiles, write_small_txvfs, write_small_plain
        )
        per_file_row(
            "open+read 4 KiB+close (%d files)" % nfiles, read_small_txvfs, read_small_plain
        )

        chunk = os.urandom(MiB)
        big_plain = os.path.join(plain, "big")
        Opener = Callable[..., Any]

        def tx_open(mode: str, **kw: Any) -> Any:
            return store.open("/big", mode, **kw)

        def os_open(mode: str, **kw: Any) -> Any:
            return open(big_plain, mode, **kw)

        def write_big(opener: Opener, data: Any) -> Callable[[], None]:
            def go() -> None:
                with opener("wb") as f:
                    for _ in range(mib):
                        f.write(data)

            return go

        def read_whole(opener: Opener) -> Callable[[], None]:
            def go() -> None:
                with opener("rb") as f:
                    assert len(f.read()) == big

            return go

        def read_chunks(opener: Opener, n: int) -> Callable[[], None]:
            def go() -> None:
                got = 0
                with opener("rb") as f:
                    while True:
                        b = f.read(n)
                        if not b:
                            break
                        got += len(b)
                assert got == big

            return go

        def read_into(opener: Opener, buf: Any, **kw: Any) -> Callable[[], None]:
            def go() -> None:
                got = 0
                with opener("rb", **kw) as f:
                    while True:
                        k = f.readinto(buf)
                        if not k:
                            break
                        got += k
                assert got == big

            return go

        rate_row(
            "sequential write %d MiB (1 MiB writes of bytes)" % mib,
            write_big(tx_open, chunk),
            write_big(os_open, chunk),
        )
        view = memoryview(bytearray(chunk))
        rate_row(
            "sequential write %d MiB (1 MiB writes of a memoryview)" % mib,
            write_big(tx_open, view),
            write_big(os_open, view),
        )
        rate_row(
            "sequential read %d MiB: read() whole" % mib, read_whole(tx_open), read_whole(os_open)
        )
        rate_row(
            "sequential read %d MiB: read(1 MiB)" % mib,
            read_chunks(tx_open, MiB),
            read_chunks(os_open, MiB),
        )
        buf = bytearray(MiB)
        rate_row(
            "sequential read %d MiB: readinto(1 MiB bytearray)" % mib,
            read_into(tx_open, buf),
            read_into(os_open, buf),
        )
        rate_row(
            "sequential read %d MiB: read(4 KiB) via BufferedReader" % mib,
            read_chunks(tx_open, 4 * KiB),
            read_chunks(os_open, 4 * KiB),
        )
        rate_row(
            "sequential read %d MiB: raw readinto(1 MiB memoryview)" % mib,
            read_into(tx_open, view, buffering=0),
            read_into(os_open, view, buffering=0),
        )

        def core_row(name: str) -> None:
            """The same file read by the core in a Rust loop: the ceiling for the rows above."""
            t_core = float("inf")
            with store.open("/big", "rb", buffering=0) as f:
                for _ in range(args.rounds):
                    f.seek(0)
                    t_core = min(t_core, f.handle._time_core_read(MiB))
            rows.append((name, "%.0f MiB/s" % (mib / t_core), "-", "-", "-"))

        core_row("the same file read by the core in a Rust loop (1 MiB reads)")
        # The rows above read a file just written: its blocks are still in RocksDB's memtable.
        # Reopened, the store reads them from its table files (in the page cache, like ext4's).
        store.close()
        store = txvfs.open(os.path.join(base, "store"))
        rate_row(
            "sequential read %d MiB: raw readinto(1 MiB memoryview), store reopened" % mib,
            read_into(tx_open, view, buffering=0),
            read_into(os_open, view, buffering=0),
        )
        core_row("the same file read by the core in a Rust loop, store reopened")

        import fsspec
        from txvfs.fsspec import TxvfsFileSystem

        tfs = TxvfsFileSystem(store=store, skip_instance_cache=True)
        lfs = fsspec.filesystem("file")
        rate_row(
            "fsspec cat_file %d MiB (vs LocalFileSystem)" % mib,
            lambda: tfs.cat_file("/big"),
            lambda: lfs.cat_file(big_plain),
        )

        n = 100_000 if not args.quick else 10_000
        store.stat("/")
        t_py = timed(lambda: [store.stat("/") for _ in range(n)]) / n
        t_rs = store._time_core_stat("/", n) / n
        t_os = timed(lambda: [os.stat(plain) for _ in range(n)]) / n
        rows.append(
            (
                'stat("/") from Python',
                "%.2f µs" % (t_py * 1e6),
                "%.2f µs (os.stat)" % (t_os * 1e6),
                "%.2fx" % (t_os / t_py),
                "-",
            )
        )
        rows.append(("same core stat in a Rust loop", "%.2f µs" % (t_rs * 1e6), "-", "-", "-"))
        rows.append(
            (
                "binding overhead per call (difference)",
                "%.2f µs" % ((t_py - t_rs) * 1e6),
                "-",
                "-",
                "-",
            )
        )
        t_ex = timed(lambda: [store.exists("/missing") for _ in range(n)]) / n
        t_exos = (
            timed(lambda: [os.path.exists(os.path.join(plain, "missing")) for _ in range(n)]) / n
        )
        rows.append(
            (
                "exists(missing) from Python",
                "%.2f µs" % (t_ex * 1e6),
                "%.2f µs (os.path.exists)" % (t_exos * 1e6),
                "%.2fx" % (t_exos / t_ex),
                "-",
            )
        )
        store.close()
    finally:
        shutil.rmtree(base, ignore_errors=True)

    print(
        "| workload | txvfs | builtin / local | txvfs rate / baseline rate | page faults per MiB (txvfs / baseline) |"
    )
    print("|---|---|---|---|---|")
    for r in rows:
        print("| %s | %s | %s | %s | %s |" % r)


if __name__ == "__main__":
    main()
