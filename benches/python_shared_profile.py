#!/usr/bin/env python3
"""Profiling driver for issue 26: one row of the shared-store benchmark at a time, in processes
whose pids it prints, to attach perf, strace or /proc/PID/stat to (docs/benchmarks.md,
"Several processes on one store"; txvfs on PYTHONPATH as in benches/python_shared.py). Roles:
  seq-owner DIR SECS   : owns the store, writes /big (64 MiB), prints "pid ready", then twice:
                         waits for a line, reads /big in 1 MiB reads for SECS s, prints MiB/s
                         (the second round reads the file in the state the client read it).
  seq-client DIR SECS  : a client: waits a line, reads /big for SECS s, prints MiB/s.
  create DIR ID N SYNC : opens (owner if first), prints ready, waits a line, creates N 4 KiB
                         files (durable when SYNC=1), prints seconds, waits a line.
"""

import os
import sys
import time

import txvfs


def seq(s, secs):
    f = s.open("/big", "rb", buffering=0)
    buf = bytearray(1 << 20)
    n = 0
    t = time.perf_counter()
    while time.perf_counter() - t < secs:
        for i in range(64):
            f.seek(i << 20)
            assert f.readinto(buf) == 1 << 20
        n += 64
    dt = time.perf_counter() - t
    f.close()
    return n / dt


def main():
    role = sys.argv[1]
    d = sys.argv[2]
    if role == "seq-owner":
        s = txvfs.open(d, sync=False)
        with s.open("/big", "wb") as f:
            mib = b"\x03" * (1 << 20)
            for _ in range(64):
                f.write(mib)
        print(os.getpid(), "ready", flush=True)
        sys.stdin.readline()
        print(seq(s, float(sys.argv[3])), flush=True)
        sys.stdin.readline()
        print(seq(s, float(sys.argv[3])), flush=True)
        sys.stdin.readline()
        s.close()
    elif role == "seq-client":
        s = txvfs.open(d, sync=False)
        print(os.getpid(), "ready", flush=True)
        sys.stdin.readline()
        print(seq(s, float(sys.argv[3])), flush=True)
        sys.stdin.readline()
    elif role == "create":
        i, n, sync = int(sys.argv[3]), int(sys.argv[4]), sys.argv[5] == "1"
        s = txvfs.open(d, sync=sync)
        s.makedirs(f"/w{i}", exist_ok=True)
        data = bytes(4096)
        print(os.getpid(), "ready", flush=True)
        sys.stdin.readline()
        t = time.perf_counter()
        for k in range(n):
            s.write_bytes(f"/w{i}/f{k}", data)
        print(time.perf_counter() - t, flush=True)
        sys.stdin.readline()


main()
