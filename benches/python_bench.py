#!/usr/bin/env python3
"""txvfs from Python side by side with the builtin open and fsspec's LocalFileSystem.

Runs, in one process and on the same disk (a temporary directory under --dir):
  * write, then read, 10,000 files of 4 KiB: store.open vs builtin open (open+write/read+close)
  * write, then read, one 256 MiB file in 1 MiB pieces: store.open vs builtin open
  * fsspec cat_file of the 256 MiB file: TxvfsFileSystem vs LocalFileSystem
  * per-call overhead of the binding: store.stat("/") from Python minus the same core call in a
    Rust loop (FileSystem._time_core_stat), and store.exists on a missing path

Ratios are txvfs time / baseline time (lower is better; 1.25x = 25% slower). The RocksDB
store is opened with its defaults (auto-commit calls are atomic and durable at the next
sync, like the builtin open without fsync). Usage:

    tests/python/run --collect-only -q >/dev/null   # or any way to put txvfs on PYTHONPATH
    python3 benches/python_bench.py [--dir DIR] [--quick]
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
from typing import Callable, List, Tuple

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
    args = ap.parse_args()
    nfiles = 1000 if args.quick else 10_000
    big = (16 if args.quick else 256) * MiB
    base = tempfile.mkdtemp(prefix="txvfs-pybench-", dir=args.dir)
    rows: List[Tuple[str, str, str, str]] = []
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

        def per_file(fn: Callable[[], None]) -> float:
            return timed(fn) / nfiles

        for name, a, b in [
            ("create+write 4 KiB+close (%d files)" % nfiles, write_small_txvfs, write_small_plain),
            ("open+read 4 KiB+close (%d files)" % nfiles, read_small_txvfs, read_small_plain),
        ]:
            ta, tb = per_file(a), per_file(b)
            rows.append((name, "%.1f µs" % (ta * 1e6), "%.1f µs" % (tb * 1e6), "%.2fx" % (ta / tb)))

        chunk = os.urandom(MiB)
        big_plain = os.path.join(plain, "big")

        def write_big(opener: Callable[[], object]) -> Callable[[], None]:
            def go() -> None:
                with opener() as f:  # type: ignore[attr-defined]
                    for _ in range(big // MiB):
                        f.write(chunk)
            return go

        def read_big(opener: Callable[[], object]) -> Callable[[], None]:
            def go() -> None:
                n = 0
                with opener() as f:  # type: ignore[attr-defined]
                    while True:
                        b = f.read(MiB)
                        if not b:
                            break
                        n += len(b)
                assert n == big
            return go

        mib = big / MiB
        for name, a, b in [
            ("sequential write %d MiB (1 MiB writes)" % mib,
             write_big(lambda: store.open("/big", "wb")), write_big(lambda: open(big_plain, "wb"))),
            ("sequential read %d MiB (1 MiB reads)" % mib,
             read_big(lambda: store.open("/big", "rb")), read_big(lambda: open(big_plain, "rb"))),
        ]:
            ta, tb = timed(a), timed(b)
            rows.append((name, "%.0f MiB/s" % (mib / ta), "%.0f MiB/s" % (mib / tb), "%.2fx" % (ta / tb)))

        import fsspec
        from txvfs.fsspec import TxvfsFileSystem

        tfs = TxvfsFileSystem(store=store, skip_instance_cache=True)
        lfs = fsspec.filesystem("file")
        ta = timed(lambda: tfs.cat_file("/big"))
        tb = timed(lambda: lfs.cat_file(big_plain))
        rows.append(("fsspec cat_file %d MiB (vs LocalFileSystem)" % mib,
                     "%.0f MiB/s" % (mib / ta), "%.0f MiB/s" % (mib / tb), "%.2fx" % (ta / tb)))

        n = 100_000 if not args.quick else 10_000
        store.stat("/")
        t_py = timed(lambda: [store.stat("/") for _ in range(n)]) / n
        t_rs = store._time_core_stat("/", n) / n
        t_os = timed(lambda: [os.stat(plain) for _ in range(n)]) / n
        rows.append(("stat(\"/\") from Python", "%.2f µs" % (t_py * 1e6), "%.2f µs (os.stat)" % (t_os * 1e6), "%.2fx" % (t_py / t_os)))
        rows.append(("same core stat in a Rust loop", "%.2f µs" % (t_rs * 1e6), "-", "-"))
        rows.append(("binding overhead per call (difference)", "%.2f µs" % ((t_py - t_rs) * 1e6), "-", "-"))
        t_ex = timed(lambda: [store.exists("/missing") for _ in range(n)]) / n
        t_exos = timed(lambda: [os.path.exists(os.path.join(plain, "missing")) for _ in range(n)]) / n
        rows.append(("exists(missing) from Python", "%.2f µs" % (t_ex * 1e6), "%.2f µs (os.path.exists)" % (t_exos * 1e6), "%.2fx" % (t_ex / t_exos)))
        store.close()
    finally:
        shutil.rmtree(base, ignore_errors=True)

    print("| workload | txvfs | builtin / local | txvfs / baseline |")
    print("|---|---|---|---|")
    for r in rows:
        print("| %s | %s | %s | %s |" % r)


if __name__ == "__main__":
    main()
