"""fork() with a store open (issue 20, item 2), and other processes on the same store
(issue 15). A forked child cannot use the store object it inherited (every call fails clearly:
before issue 20's fix the child wrote through the parent's RocksDB instance and the next open
failed with "Corruption: Sequence number is being set backwards"); it may open the store again,
as any other process may since issue 15 (it becomes a client of the process that owns the
files), unless one of them asked for exclusive use."""

import errno
import os
import subprocess
import sys

import pytest
import txvfs


def _child_checks(store, path: str) -> int:
    """Runs in the child; returns a bit mask of the checks that failed (0: all held)."""
    failed = 0
    try:
        store.write_bytes("/from-child-inherited", b"child")
        failed |= 1
    except OSError as e:
        if e.errno != errno.EBUSY or "fork" not in str(e):
            failed |= 2
    try:
        store.read_bytes("/before")
        failed |= 4
    except OSError:
        pass
    try:
        with txvfs.open(path) as own:
            if own.read_bytes("/before") != b"parent":
                failed |= 8
            own.write_bytes("/from-child", b"child")
    except OSError:
        failed |= 16
    return failed


def test_fork_child_cannot_use_the_inherited_store_but_may_open_it_again(tmp_path):
    path = str(tmp_path / "store")
    store = txvfs.open(path)
    store.write_bytes("/before", b"parent")
    pid = os.fork()
    if pid == 0:
        os._exit(_child_checks(store, path))
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert store.read_bytes("/from-child") == b"child"
    store.write_bytes("/after", b"parent")
    store.close()
    with txvfs.open(path) as again:
        assert again.read_bytes("/before") == b"parent"
        assert again.read_bytes("/after") == b"parent"
        assert again.read_bytes("/from-child") == b"child"
        assert not again.exists("/from-child-inherited")


def _run(code: str, *args: str) -> str:
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, check=True).stdout


def test_a_second_process_shares_the_store_and_sees_commits_both_ways(tmp_path):
    path = str(tmp_path / "store")
    with txvfs.open(path) as store:
        store.write_bytes("/parent", b"p")
        out = _run("import sys, txvfs\nwith txvfs.open(sys.argv[1]) as s:\n print(s.read_bytes('/parent').decode())\n"
                   " s.write_bytes('/second', b's')", path)
        assert out.strip() == "p"
        assert store.read_bytes("/second") == b"s"


REFUSED = "import sys, txvfs\ntry:\n txvfs.open(sys.argv[1]).close()\n print('opened')\nexcept OSError as e:\n print(e.errno, e)"


def test_exclusive_use_refuses_other_processes_with_the_holder_named(tmp_path):
    path = str(tmp_path / "store")
    with txvfs.open(f"rocksdb:{path}?mode=exclusive"):
        out = _run(REFUSED, path)
    assert out.startswith(f"{errno.EBUSY} ") and f"process {os.getpid()}" in out and "exclusive" in out, out
    with txvfs.open(path):
        out = _run(REFUSED, f"rocksdb:{path}?mode=exclusive")
    assert out.startswith(f"{errno.EBUSY} ") and "exclusive use asked" in out and f"process {os.getpid()}" in out, out
    assert _run(REFUSED, f"rocksdb:{path}?mode=exclusive").strip() == "opened"


def test_a_bad_mode_is_refused_clearly(tmp_path):
    with pytest.raises(OSError) as e:
        txvfs.open(f"rocksdb:{tmp_path}/store?mode=sometimes")
    assert "mode" in str(e.value)
