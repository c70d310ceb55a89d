"""The shared POSIX case table (tests/cases/posix.cases) through the Python API.

The Rust suite (core/tests/posix_cases.rs) and every binding run the same table, so the
front ends cannot drift apart. The format is documented at the top of the table.
"""

from __future__ import annotations

import errno
import os
import re
from typing import List, Optional, Tuple

import pytest
import txvfs
from conftest import ROOT

TABLE = ROOT / "tests" / "cases" / "posix.cases"

Step = Tuple[int, str, List[str], str]


def parse(text: str) -> List[Tuple[str, List[Step]]]:
    cases: List[Tuple[str, List[Step]]] = []
    for i, raw in enumerate(text.splitlines(), 1):
        if not raw.strip() or raw.startswith("#"):
            continue
        if raw.startswith("case "):
            cases.append((raw[5:].strip(), []))
            continue
        lhs, sep, expect = raw.rpartition(" => ")
        assert sep, "posix.cases line %d: missing ' => '" % i
        op, *args = lhs.split(" ")
        assert cases, "posix.cases line %d: step before any case" % i
        cases[-1][1].append((i, op, args, expect))
    return cases


_REPEAT = re.compile(r"\{(\d+):([^}]*)\}")


def decode(s: str) -> bytes:
    """`-` is empty, `{N:UNIT}` repeats, then `\\0` and `\\\\` escapes."""
    expanded = _REPEAT.sub(lambda m: m.group(2) * int(m.group(1)), s)
    if expanded == "-":
        return b""
    out = bytearray()
    it = iter(expanded.encode())
    for b in it:
        if b == 0x5C:
            nxt = next(it)
            out.append({0x30: 0, 0x5C: 0x5C}[nxt])
        else:
            out.append(b)
    return bytes(out)


def listing(names: List[bytes]) -> bytes:
    return b",".join(sorted(names)) if names else b""


def run_op(fs: txvfs.Store, op: str, a: List[str]) -> Optional[bytes]:
    """Runs one step; returns the value of a query, None for an operation."""

    def arg(i: int) -> bytes:
        return decode(a[i])

    if op == "mkdir":
        fs.mkdir(arg(0), int(a[1], 8))
    elif op == "rmdir":
        fs.rmdir(arg(0))
    elif op == "write":
        with fs.open(arg(0), "wb") as f:
            f.write(arg(1))
    elif op == "append":
        with fs.open(arg(0), "ab") as f:
            f.write(arg(1))
    elif op == "pwrite":
        with fs.open(arg(0), "r+b", buffering=0) as raw:
            raw.handle.pwrite(arg(2), int(a[1]))
    elif op == "read":
        with fs.open(arg(0), "rb") as f:
            return f.read()  # type: ignore[no-any-return]
    elif op == "size":
        return str(fs.stat(arg(0)).st_size).encode()
    elif op == "type":
        m = fs.lstat(arg(0)).st_mode
        import stat

        return b"dir" if stat.S_ISDIR(m) else b"symlink" if stat.S_ISLNK(m) else b"file"
    elif op == "nlink":
        return str(fs.stat(arg(0)).st_nlink).encode()
    elif op == "mode":
        return ("%o" % (fs.stat(arg(0)).st_mode & 0o7777)).encode()
    elif op == "unlink":
        fs.unlink(arg(0))
    elif op == "rename":
        fs.rename(arg(0), arg(1))
    elif op == "rename_noreplace":
        fs.rename(arg(0), arg(1), no_replace=True)
    elif op == "rename_exchange":
        fs.rename(arg(0), arg(1), exchange=True)
    elif op == "link":
        fs.link(arg(0), arg(1))
    elif op == "symlink":
        fs.symlink(arg(0), arg(1))
    elif op == "readlink":
        return fs.readlink(arg(0))  # type: ignore[no-any-return]
    elif op == "truncate":
        fs.truncate(arg(0), int(a[1]))
    elif op == "create_excl":
        fs.open(arg(0), "xb").close()
    elif op == "open_read":
        fs.open_raw(arg(0), os.O_RDONLY).close()
    elif op == "open_write":
        fs.open_raw(arg(0), os.O_WRONLY).close()
    elif op == "chmod":
        fs.chmod(arg(0), int(a[1], 8))
    elif op in ("setxattr", "setxattr_create", "setxattr_replace"):
        flags = {
            "setxattr": 0,
            "setxattr_create": txvfs.XATTR_CREATE,
            "setxattr_replace": txvfs.XATTR_REPLACE,
        }[op]
        fs.setxattr(arg(0), arg(1), arg(2), flags)
    elif op == "getxattr":
        return fs.getxattr(arg(0), arg(1))
    elif op == "removexattr":
        fs.removexattr(arg(0), arg(1))
    elif op == "listxattr":
        return listing([os.fsencode(n) for n in fs.listxattr(arg(0))])
    elif op == "ls":
        return listing(fs.listdir(arg(0)))
    elif op == "exists":
        # The table's `exists` is the core's: ENOENT/ENOTDIR are false, other errors surface.
        # Python's exists() answers like os.path.exists instead (false on every POSIX error,
        # test_edges.py), so the step runs through stat().
        try:
            fs.stat(arg(0))
            return b"true"
        except (FileNotFoundError, NotADirectoryError):
            return b"false"
    else:
        raise AssertionError("unknown operation %r" % op)
    return None


CASES = parse(TABLE.read_text())


def test_table_is_complete() -> None:
    assert len(CASES) >= 100


def case_store(name: str) -> str:
    """A fresh store for one case: memory:, or with TXVFS_POSIX_CASES_STORE set (a URI ending
    in a prefix, such as `fdb:CLUSTER?prefix=cases`: tests/foundationdb/run), that URI with the
    case's number and name appended."""
    base = os.environ.get("TXVFS_POSIX_CASES_STORE")
    if not base:
        return "memory:"
    n = [c[0] for c in CASES].index(name)
    return "%s-%d-%s" % (base, n, re.sub(r"[^A-Za-z0-9]+", "-", name))


@pytest.mark.parametrize("name,steps", CASES, ids=[c[0] for c in CASES])
def test_posix_case(name: str, steps: List[Step]) -> None:
    with txvfs.open(case_store(name)) as fs:
        for line, op, args, expect in steps:
            where = "posix.cases line %d: %s %s" % (line, op, " ".join(args))
            try:
                got: Optional[bytes] = run_op(fs, op, args)
                result = "ok" if got is None else None
            except OSError as e:
                got, result = None, errno.errorcode.get(e.errno or 0, str(e.errno))
            if result is not None:
                assert result == expect, "%s: got %s, want %s" % (where, result, expect)
            else:
                assert got == decode(expect), "%s: got %r, want %s" % (where, got, expect)
