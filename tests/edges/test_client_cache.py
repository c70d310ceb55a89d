"""A second Python process on a store reads through its cache (kv/shared/client_cache.rs) and
still sees every write another process made before its read began: the owner writes, answers,
and the client's next stat and read_bytes show that write, never an older one."""

import subprocess
import sys

import txvfs

OWNER = r"""
import sys, txvfs
s = txvfs.open(sys.argv[1])
print("ready", flush=True)
for line in sys.stdin:
    path, data = line.split()
    s.write_bytes(path, data.encode())
    print("ok", flush=True)
"""


def test_a_client_reads_every_write_acknowledged_before_its_read(tmp_path):
    path = str(tmp_path / "store")
    owner = subprocess.Popen(
        [sys.executable, "-c", OWNER, path],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert owner.stdout.readline().strip() == "ready"
        with txvfs.open(path) as s:
            s.write_bytes("/same", b"unchanged")
            for i in range(200):
                data = f"v{i}-" * (i % 7 + 1)
                owner.stdin.write(f"/f {data}\n")
                owner.stdin.flush()
                assert owner.stdout.readline().strip() == "ok"
                assert s.stat("/f").st_size == len(data), i
                assert s.read_bytes("/f") == data.encode(), i
                assert s.read_bytes("/same") == b"unchanged"
    finally:
        owner.stdin.close()
        assert owner.wait(timeout=30) == 0
