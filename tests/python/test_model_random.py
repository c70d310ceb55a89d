"""Random operation sequences (hypothesis) on a store and on a temporary directory of the real
file system, which serves as the model: every step gives the same result or errno, and the
final trees are equal. Runs each sequence on the store directly and inside one transaction
(which must then behave the same and, rolled back, leave nothing behind)."""

from __future__ import annotations

import errno
import os
import pathlib
import shutil
import stat
import tempfile
from typing import Any, Callable, Dict, List, Tuple

import txvfs
from conftest import examples
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

PATHS = ["a", "b", "a/c", "a/d", "b/c", "a/c/e"]
# Relative targets without "..": in the model, ".." from the root leaves the temporary directory.
TARGETS = ["a", "c", "e", "missing", "c/e"]

path = st.sampled_from(PATHS)
data = st.binary(max_size=40)
Op = Tuple[str, Tuple[Any, ...]]

ops = st.lists(
    st.one_of(
        st.tuples(st.just("mkdir"), st.tuples(path)),
        st.tuples(st.just("rmdir"), st.tuples(path)),
        st.tuples(st.just("write"), st.tuples(path, data)),
        st.tuples(st.just("append"), st.tuples(path, data)),
        st.tuples(st.just("read"), st.tuples(path)),
        st.tuples(st.just("unlink"), st.tuples(path)),
        st.tuples(st.just("rename"), st.tuples(path, path)),
        st.tuples(st.just("link"), st.tuples(path, path)),
        st.tuples(st.just("symlink"), st.tuples(st.sampled_from(TARGETS), path)),
        st.tuples(st.just("readlink"), st.tuples(path)),
        st.tuples(st.just("truncate"), st.tuples(path, st.integers(0, 60))),
        st.tuples(st.just("stat"), st.tuples(path)),
        st.tuples(st.just("lstat"), st.tuples(path)),
        st.tuples(st.just("listdir"), st.tuples(path)),
        st.tuples(st.just("exists"), st.tuples(path)),
        st.tuples(st.just("chmod"), st.tuples(path, st.sampled_from([0o600, 0o755]))),
    ),
    max_size=40,
)


def model_op(root: str, op: Op) -> Any:
    name, args = op
    p = lambda s: os.path.join(root, s)  # noqa: E731
    if name == "mkdir":
        return os.mkdir(p(args[0]), 0o755)
    if name == "rmdir":
        return os.rmdir(p(args[0]))
    if name == "write":
        with open(p(args[0]), "wb") as f:
            f.write(args[1])
        return None
    if name == "append":
        with open(p(args[0]), "ab") as f:
            f.write(args[1])
        return None
    if name == "read":
        with open(p(args[0]), "rb") as f:
            return f.read()
    if name == "unlink":
        return os.unlink(p(args[0]))
    if name == "rename":
        return os.rename(p(args[0]), p(args[1]))
    if name == "link":
        return os.link(p(args[0]), p(args[1]), follow_symlinks=False)
    if name == "symlink":
        return os.symlink(args[0], p(args[1]))
    if name == "readlink":
        return os.readlink(p(args[0]))
    if name == "truncate":
        return os.truncate(p(args[0]), args[1])
    if name in ("stat", "lstat"):
        s = os.stat(p(args[0])) if name == "stat" else os.lstat(p(args[0]))
        return (stat.S_IFMT(s.st_mode), s.st_size if not stat.S_ISDIR(s.st_mode) else 0, s.st_nlink)
    if name == "listdir":
        return sorted(os.listdir(p(args[0])))
    if name == "exists":
        return os.path.exists(p(args[0]))
    if name == "chmod":
        return os.chmod(p(args[0]), args[1])
    raise AssertionError(name)


def store_op(fs: Any, op: Op) -> Any:
    name, args = op
    p = lambda s: "/" + s  # noqa: E731
    if name == "mkdir":
        return fs.mkdir(p(args[0]), 0o755)
    if name == "write":
        with fs.open(p(args[0]), "wb") as f:
            f.write(args[1])
        return None
    if name == "append":
        with fs.open(p(args[0]), "ab") as f:
            f.write(args[1])
        return None
    if name == "read":
        with fs.open(p(args[0]), "rb") as f:
            return f.read()
    if name in ("rename", "link"):
        return getattr(fs, name)(p(args[0]), p(args[1]))
    if name == "symlink":
        return fs.symlink(args[0], p(args[1]))
    if name in ("truncate", "chmod"):
        return getattr(fs, name)(p(args[0]), args[1])
    if name in ("stat", "lstat"):
        s = getattr(fs, name)(p(args[0]))
        return (stat.S_IFMT(s.st_mode), s.st_size if not stat.S_ISDIR(s.st_mode) else 0, s.st_nlink)
    if name == "listdir":
        return sorted(fs.listdir(p(args[0])))
    return getattr(fs, name)(p(args[0]))


def outcome(fn: Callable[[], Any]) -> Any:
    try:
        return ("ok", fn())
    except OSError as e:
        return ("err", errno.errorcode.get(e.errno or 0, e.errno))


def snapshot_model(root: str) -> Dict[str, Any]:
    out: Dict[str, Any] = {}
    for dirpath, dirs, files in os.walk(root):
        rel = "/" + os.path.relpath(dirpath, root).lstrip(".")
        out[rel] = ("dir", sorted(dirs + files))
        for f in files:
            full = os.path.join(dirpath, f)
            key = rel.rstrip("/") + "/" + f
            if os.path.islink(full):
                out[key] = ("link", os.readlink(full))
            else:
                with open(full, "rb") as fh:
                    out[key] = ("file", fh.read(), os.stat(full).st_mode & 0o777)
    return out


def snapshot_store(fs: Any) -> Dict[str, Any]:
    out: Dict[str, Any] = {}
    for dirpath, dirs, files in fs.walk("/"):
        out[dirpath] = ("dir", sorted(dirs + files))
        for f in files:
            key = dirpath.rstrip("/") + "/" + f
            if fs.islink(key):
                out[key] = ("link", fs.readlink(key))
            else:
                out[key] = ("file", fs.read_bytes(key), fs.stat(key).st_mode & 0o777)
    return out


def check(fs: Any, seq: List[Op]) -> None:
    root = tempfile.mkdtemp(prefix="txvfs-model-")
    try:
        os.chmod(root, 0o755)
        for i, op in enumerate(seq):
            want = outcome(lambda: model_op(root, op))
            got = outcome(lambda: store_op(fs, op))
            assert got == want, "step %d %r: txvfs %r, model %r" % (i, op, got, want)
        assert snapshot_store(fs) == snapshot_model(root)
    finally:
        shutil.rmtree(root)


SETTINGS = settings(
    max_examples=examples(150),
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


@SETTINGS
@given(seq=ops)
def test_random_sequences_match_the_real_file_system(seq: List[Op]) -> None:
    with txvfs.open("memory:") as s:
        check(s, seq)


@SETTINGS
@given(seq=ops, commit=st.booleans())
def test_random_sequences_inside_one_transaction(seq: List[Op], commit: bool) -> None:
    with txvfs.open("memory:") as s:
        tx = s.transaction()
        check(tx, seq)
        inside = snapshot_store(tx)
        if commit:
            tx.commit()
            assert snapshot_store(s) == inside
        else:
            tx.rollback()
            assert s.listdir("/") == []


def test_model_runs_on_rocksdb(tmp_path: pathlib.Path) -> None:
    seq: List[Op] = [
        ("mkdir", ("a",)),
        ("write", ("a/c", b"x")),
        ("link", ("a/c", "b")),
        ("rename", ("b", "a/d")),
        ("symlink", ("c", "a/c/e")),
        ("symlink", ("c", "b")),
        ("read", ("b",)),
        ("rmdir", ("a",)),
        ("truncate", ("a/d", 5)),
        ("listdir", ("a",)),
    ]
    with txvfs.open(tmp_path / "s", sync=False) as s:
        check(s, seq)
