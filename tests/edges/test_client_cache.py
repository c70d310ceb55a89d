"""A second Python process on a store reads through its cache (kv/shared/client_cache.rs) and
still sees every write another process made before its read began: the owner writes, answers,
and the client's next stat and read_bytes show that write, never an older one."""

import contextlib
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


@contextlib.contextmanager
def owner_of(path):
    """A second process that owns the store at `path` and writes what it is told."""
    owner = subprocess.Popen(
        [sys.executable, "-c", OWNER, path],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert owner.stdout.readline().strip() == "ready"
        yield owner
    finally:
        owner.stdin.close()
        assert owner.wait(timeout=30) == 0


def test_a_client_reads_every_write_acknowledged_before_its_read(tmp_path):
    path = str(tmp_path / "store")
    with owner_of(path) as owner:
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


def test_a_client_creating_names_another_process_made_finds_them(tmp_path):
    """A client takes a name it creates as absent without asking the owner (one round trip
    saved); where another process made that name, the owner's check makes the call read it,
    so each call answers as it would have: replaced, FileExistsError, or renamed onto."""
    path = str(tmp_path / "store")
    with owner_of(path) as owner:
        for name in ("/w", "/x", "/m", "/t"):
            owner.stdin.write(f"{name} from-the-owner\n")
            owner.stdin.flush()
            assert owner.stdout.readline().strip() == "ok"
        with txvfs.open(path) as s:
            s.write_bytes("/warm", b"w")
            with s.open("/w", "wb") as f:
                f.write(b"replaced")
            assert s.read_bytes("/w") == b"replaced"
            try:
                s.open("/x", "xb")
                raise AssertionError("created over an existing name")
            except FileExistsError:
                pass
            try:
                s.mkdir("/m")
                raise AssertionError("mkdir over an existing name")
            except FileExistsError:
                pass
            s.write_bytes("/src", b"moved")
            s.rename("/src", "/t")
            assert s.read_bytes("/t") == b"moved"
            for i in range(20):
                s.write_bytes(f"/new{i}", b"n")
            names = ["m", "t", "w", "warm", "x"] + [f"new{i}" for i in range(20)]
            assert sorted(s.listdir("/")) == sorted(names)
