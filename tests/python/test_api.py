"""The os-like API of Store and Transaction: paths, attributes, directories, links, xattrs."""

from __future__ import annotations

import errno
import io
import os
import pathlib
import stat
import threading

import pytest
import txvfs


def test_open_returns_store_context_manager(tmp_path: pathlib.Path) -> None:
    with txvfs.open(tmp_path / "s") as s:  # os.PathLike URI
        assert isinstance(s, txvfs.Store)
        assert not s.closed
        s.write_bytes("/a", b"1")
        assert s.describe().startswith("rocksdb:")
    assert s.closed
    with pytest.raises(ValueError):  # like a closed io object
        s.exists("/a")
    s.close()  # idempotent
    with txvfs.open("rocksdb:" + os.fspath(tmp_path / "s")) as s2:  # reopen: data is there
        assert s2.read_bytes("/a") == b"1"


def test_store_options(tmp_path: pathlib.Path) -> None:
    with txvfs.open("memory:", block_size=4096, inline_limit=128) as s:
        assert s.block_size == 4096
        s.write_bytes("/f", b"x" * 10000)
        assert s.stat("/f").st_blksize == 4096
    with txvfs.open(tmp_path / "ro") as s:
        s.write_bytes("/f", b"x")
    with txvfs.open(tmp_path / "ro", read_only=True) as s:
        assert s.read_bytes("/f") == b"x"
        with pytest.raises(OSError) as e:
            s.write_bytes("/g", b"y")
        assert e.value.errno == errno.EROFS
    with pytest.raises(ValueError):
        txvfs.open("memory:", uid=1000)
    with pytest.raises(OSError) as e:
        txvfs.open("memory:", block_size=1000)
    assert e.value.errno == errno.EINVAL


def test_credentials_check_permissions(tmp_path: pathlib.Path) -> None:
    uri = os.fspath(tmp_path / "s")
    with txvfs.open(uri) as owner:
        owner.mkdir("/private", 0o700)
        owner.write_bytes("/private/f", b"secret")
        owner.mkdir("/shared", 0o777)
        # A second open of the same store in this process shares it, with its own credential.
        with txvfs.open(uri, uid=1000, gid=1000) as user:
            with pytest.raises(PermissionError) as e:
                user.read_bytes("/private/f")
            assert e.value.errno == errno.EACCES
            user.write_bytes("/shared/mine", b"ok")
            assert user.stat("/shared/mine").st_uid == 1000
            with pytest.raises(PermissionError):
                user.chown("/shared/mine", 0, 0)


def test_stat_fields(store: txvfs.Store) -> None:
    store.write_bytes("/f", b"hello")
    st = store.stat("/f")
    assert stat.S_ISREG(st.st_mode) and st.st_mode & 0o7777 == 0o644
    assert st.st_size == 5 and st.st_nlink == 1 and st.st_ino > 1 and st.st_dev == 0
    assert st.st_uid == os.getuid() and st.st_gid == os.getgid()
    assert st.st_mtime == pytest.approx(st.st_mtime_ns / 1e9)
    assert st.st_atime_ns > 0 and st.st_ctime_ns > 0 and st.st_blocks == 1
    assert "st_size=5" in repr(st)
    root = store.stat("/")
    assert stat.S_ISDIR(root.st_mode)


def test_paths_str_bytes_pathlike(store: txvfs.Store) -> None:
    store.mkdir(b"/d")
    store.write_bytes(pathlib.PurePosixPath("/d/x"), b"1")
    assert store.listdir("/d") == ["x"]
    assert store.listdir(b"/d") == [b"x"]
    assert store.listdir() == ["d"]
    with pytest.raises(TypeError):
        store.exists(42)  # type: ignore[arg-type]
    # Names that are not UTF-8 round-trip through surrogateescape, like os.listdir.
    store.write_bytes(b"/d/\xff", b"2")
    name = [n for n in store.listdir("/d") if n != "x"][0]
    assert name == os.fsdecode(b"\xff")
    assert store.read_bytes("/d/" + name) == b"2"


def test_exists_isfile_isdir_islink(store: txvfs.Store) -> None:
    store.mkdir("/d")
    store.write_bytes("/d/f", b"")
    store.symlink("/d/f", "/l")
    store.symlink("/nowhere", "/dangling")
    assert store.exists("/d") and store.isdir("/d") and not store.isfile("/d")
    assert store.isfile("/d/f") and not store.isdir("/d/f")
    assert store.islink("/l") and store.isfile("/l") and not store.islink("/d/f")
    assert not store.exists("/dangling") and store.islink("/dangling")
    assert not store.exists("/nope") and not store.exists("/d/f/under-a-file")


@pytest.mark.parametrize(
    "call,exc,code",
    [
        (lambda s: s.stat("/missing"), FileNotFoundError, errno.ENOENT),
        (lambda s: s.mkdir("/d"), FileExistsError, errno.EEXIST),
        (lambda s: s.open("/d"), IsADirectoryError, errno.EISDIR),
        (lambda s: s.open("/d", "w"), IsADirectoryError, errno.EISDIR),
        (lambda s: s.listdir("/d/f"), NotADirectoryError, errno.ENOTDIR),
        (lambda s: s.stat("/d/f/x"), NotADirectoryError, errno.ENOTDIR),
        (lambda s: s.rmdir("/d"), OSError, errno.ENOTEMPTY),
        (lambda s: s.unlink("/d"), IsADirectoryError, errno.EISDIR),
        (lambda s: s.rmdir("/d/f"), NotADirectoryError, errno.ENOTDIR),
        (lambda s: s.getxattr("/d/f", "user.none"), OSError, errno.ENODATA),
        (lambda s: s.rename("/d", "/d/sub"), OSError, errno.EINVAL),
        (lambda s: s.rename("/d/f", "/e", no_replace=True), FileExistsError, errno.EEXIST),
        (lambda s: s.link("/d", "/d2"), PermissionError, errno.EPERM),
        (lambda s: s.readlink("/d/f"), OSError, errno.EINVAL),
        (lambda s: s.mkdir("/" + "n" * 256), OSError, errno.ENAMETOOLONG),
        (lambda s: s.rmdir("/"), OSError, errno.EBUSY),
        (lambda s: s.open("/d/f", "x"), FileExistsError, errno.EEXIST),
    ],
)
def test_errors_are_builtin_oserror_subclasses(store: txvfs.Store, call, exc, code) -> None:  # type: ignore[no-untyped-def]
    store.mkdir("/d")
    store.write_bytes("/d/f", b"x")
    store.write_bytes("/e", b"y")
    with pytest.raises(exc) as e:
        call(store)
    assert type(e.value) is exc or exc is OSError
    assert e.value.errno == code
    assert isinstance(e.value, OSError) and e.value.strerror


def test_symlink_loop_is_eloop(store: txvfs.Store) -> None:
    store.symlink("/b", "/a")
    store.symlink("/a", "/b")
    with pytest.raises(OSError) as e:
        store.stat("/a")
    assert e.value.errno == errno.ELOOP


def test_mkdir_parents_exist_ok_makedirs(store: txvfs.Store) -> None:
    with pytest.raises(FileNotFoundError):
        store.mkdir("/a/b/c")
    store.mkdir("/a/b/c", parents=True)
    assert store.isdir("/a/b/c")
    store.mkdir("/a/b/c", parents=True, exist_ok=True)
    store.mkdir("/a", exist_ok=True)
    with pytest.raises(FileExistsError):
        store.mkdir("/a")
    with pytest.raises(FileExistsError):
        store.makedirs("/a/b")
    store.makedirs("/a/b", exist_ok=True)
    store.makedirs("/x/y/z", 0o700)
    assert store.stat("/x/y/z").st_mode & 0o777 == 0o700
    store.write_bytes("/file", b"")
    with pytest.raises(FileExistsError):
        store.mkdir("/file", exist_ok=True)


def test_remove_rename_replace_link(store: txvfs.Store) -> None:
    store.write_bytes("/a", b"A")
    store.write_bytes("/b", b"B")
    store.rename("/a", "/b")
    assert store.read_bytes("/b") == b"A" and not store.exists("/a")
    store.write_bytes("/c", b"C")
    store.replace("/c", "/b")
    assert store.read_bytes("/b") == b"C"
    store.write_bytes("/x", b"X")
    store.rename("/x", "/b", exchange=True)
    assert store.read_bytes("/x") == b"C" and store.read_bytes("/b") == b"X"
    store.link("/b", "/hard")
    assert store.stat("/b").st_nlink == 2
    store.remove("/b")
    assert store.read_bytes("/hard") == b"X" and store.stat("/hard").st_nlink == 1
    store.unlink("/hard")
    assert store.listdir("/") == ["x"]


def test_symlink_readlink(store: txvfs.Store) -> None:
    store.write_bytes("/target", b"t")
    store.symlink("target", "/rel")
    store.symlink("/target", b"/abs")
    assert store.readlink("/rel") == "target"
    assert store.readlink(b"/abs") == b"/target"
    assert store.read_bytes("/rel") == b"t"
    assert stat.S_ISLNK(store.lstat("/rel").st_mode)
    assert stat.S_ISLNK(store.stat("/rel", follow_symlinks=False).st_mode)
    assert stat.S_ISREG(store.stat("/rel").st_mode)


def test_chmod_chown_utime_truncate(store: txvfs.Store) -> None:
    store.write_bytes("/f", b"0123456789")
    store.chmod("/f", 0o600)
    assert store.stat("/f").st_mode & 0o7777 == 0o600
    store.chown("/f", -1, -1)
    store.chown("/f", os.getuid(), -1)
    assert store.stat("/f").st_uid == os.getuid()
    store.utime("/f", (1.5, 2.25))
    st = store.stat("/f")
    assert st.st_atime_ns == 1_500_000_000 and st.st_mtime_ns == 2_250_000_000
    store.utime("/f", ns=(10, 20))
    assert store.stat("/f").st_mtime_ns == 20
    store.utime("/f")
    assert store.stat("/f").st_mtime_ns > 2_250_000_000
    with pytest.raises(ValueError):
        store.utime("/f", (1, 2), ns=(1, 2))
    store.truncate("/f", 4)
    assert store.read_bytes("/f") == b"0123"
    store.truncate("/f", 6)
    assert store.read_bytes("/f") == b"0123\0\0"
    with pytest.raises(ValueError):
        store.chown("/f", -2, 0)


def test_xattrs(store: txvfs.Store) -> None:
    store.write_bytes("/f", b"")
    store.setxattr("/f", "user.a", b"1")
    store.setxattr("/f", b"user.b", b"2")
    assert sorted(store.listxattr("/f")) == ["user.a", "user.b"]
    assert store.getxattr("/f", "user.a") == b"1"
    with pytest.raises(FileExistsError):
        store.setxattr("/f", "user.a", b"x", txvfs.XATTR_CREATE)
    with pytest.raises(OSError) as e:
        store.setxattr("/f", "user.c", b"x", txvfs.XATTR_REPLACE)
    assert e.value.errno == errno.ENODATA
    store.setxattr("/f", "user.a", b"3", txvfs.XATTR_REPLACE)
    assert store.getxattr("/f", "user.a") == b"3"
    store.removexattr("/f", "user.a")
    assert store.listxattr("/f") == ["user.b"]
    with pytest.raises(OSError):
        store.setxattr("/f", "user.a", b"3", 99)


def test_statvfs(store: txvfs.Store) -> None:
    before = store.statvfs()
    store.write_bytes("/f", b"x")
    after = store.statvfs()
    assert after.f_namemax == 255 and after.f_bsize > 0
    assert after.f_files - after.f_ffree == before.f_files - before.f_ffree + 1


def test_read_write_shortcuts(store: txvfs.Store) -> None:
    assert store.write_bytes("/b", b"\x00\x01") == 2
    assert store.read_bytes("/b") == b"\x00\x01"
    assert store.write_text("/t", "h\u00e9llo\nworld\n", encoding="utf-8") == 12
    assert store.read_text("/t", encoding="utf-8") == "h\u00e9llo\nworld\n"
    assert store.read_bytes("/t") == "h\u00e9llo\nworld\n".encode()
    store.write_text("/crlf", "a\nb\n", newline="\r\n")
    assert store.read_bytes("/crlf") == b"a\r\nb\r\n"
    assert store.read_text("/crlf") == "a\nb\n"
    with pytest.raises(TypeError):
        store.write_text("/t", b"bytes")  # type: ignore[arg-type]
    assert store.read_range("/b", 1, 10) == b"\x01"
    assert store.read_range("/b", 5, 10) == b""


def test_scandir_and_cached_stat(store: txvfs.Store) -> None:
    store.mkdir("/d")
    store.mkdir("/d/sub")
    store.write_bytes("/d/f", b"abc")
    store.symlink("/d/sub", "/d/link")
    with store.scandir("/d") as it:
        entries = {e.name: e for e in it}
    assert sorted(entries) == ["f", "link", "sub"]
    f, link, sub = entries["f"], entries["link"], entries["sub"]
    assert f.is_file() and not f.is_dir() and not f.is_symlink()
    assert (
        sub.is_dir()
        and link.is_symlink()
        and link.is_dir()
        and not link.is_dir(follow_symlinks=False)
    )
    assert f.path == "/d/f" and os.fspath(f) == "/d/f" and f.inode() == store.stat("/d/f").st_ino
    st = f.stat()
    store.write_bytes("/d/f", b"abcdef")
    assert f.stat() is st and st.st_size == 3  # cached, like os.DirEntry
    assert stat.S_ISLNK(link.stat(follow_symlinks=False).st_mode)
    assert stat.S_ISDIR(link.stat().st_mode)
    assert "DirEntry" in repr(f)
    assert [e.name for e in store.scandir(b"/d")] == [b"f", b"link", b"sub"]


def test_scandir_pages_large_directory(store: txvfs.Store) -> None:
    with store.transaction() as tx:
        tx.mkdir("/big")
        for i in range(2500):
            tx.write_bytes("/big/%05d" % i, b"")
    names = [e.name for e in store.scandir("/big")]
    assert names == ["%05d" % i for i in range(2500)]
    assert store.listdir("/big") == names
    page = store.readdir("/big", "00100", 3)
    assert page == [
        (n, store.stat("/big/" + n).st_ino, "file") for n in ("00101", "00102", "00103")
    ]


def test_walk_matches_os_walk(store: txvfs.Store, tmp_path: pathlib.Path) -> None:
    layout = ["a/b/c/f1", "a/f2", "d/f3", "f4", "a/b/e/f5"]
    for rel in layout:
        store.mkdir("/" + os.path.dirname(rel), parents=True, exist_ok=True)
        store.write_bytes("/" + rel, b"")
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_bytes(b"")
    store.mkdir("/empty")
    (tmp_path / "empty").mkdir()

    def norm(walk, root):  # type: ignore[no-untyped-def]
        return [
            ("/" + os.path.relpath(p, root).lstrip("."), sorted(d), sorted(f)) for p, d, f in walk
        ]

    for topdown in (True, False):
        mine = norm(store.walk("/", topdown=topdown), "/")
        theirs = norm(os.walk(tmp_path, topdown=topdown), tmp_path)
        key = lambda t: t[0]  # noqa: E731
        assert sorted(mine, key=key) == sorted(theirs, key=key)
    # Pruning in place works top-down.
    seen = []
    for path, dirs, _ in store.walk("/"):
        seen.append(path)
        if "a" in dirs:
            dirs.remove("a")
    assert "/a" not in seen and "/d" in seen
    errors: list = []
    assert list(store.walk("/missing", onerror=errors.append)) == []
    assert isinstance(errors[0], FileNotFoundError)


def test_walk_does_not_follow_symlinks_by_default(store: txvfs.Store) -> None:
    store.mkdir("/real/inner", parents=True)
    store.symlink("/real", "/alias")
    assert [p for p, _, _ in store.walk("/")] == ["/", "/real", "/real/inner"]
    assert "/alias/inner" in [p for p, _, _ in store.walk("/", followlinks=True)]


def test_open_unlinked_file_stays_readable(store: txvfs.Store) -> None:
    store.write_bytes("/f", b"still here")
    with store.open("/f", "rb") as f:
        store.unlink("/f")
        assert not store.exists("/f")
        assert f.read() == b"still here"


def test_store_usable_from_many_threads(disk_store: txvfs.Store) -> None:
    errors: list = []

    def work(n: int) -> None:
        try:
            disk_store.mkdir("/t%d" % n)
            for i in range(50):
                p = "/t%d/f%d" % (n, i)
                with disk_store.open(p, "w") as f:
                    f.write("%d-%d" % (n, i))
                assert disk_store.read_text(p) == "%d-%d" % (n, i)
        except BaseException as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert sorted(disk_store.listdir("/")) == sorted("t%d" % n for n in range(8))
    assert all(len(disk_store.listdir("/t%d" % n)) == 50 for n in range(8))


def test_native_classes_cannot_be_misused(store: txvfs.Store) -> None:
    with pytest.raises(TypeError):
        txvfs._txvfs.FileSystem()  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        txvfs.Transaction("not a store")  # type: ignore[arg-type]
    h = store.open_raw("/new", os.O_CREAT | os.O_WRONLY)
    h.close()
    h.close()
    assert h.closed
    with pytest.raises(ValueError):
        h.write(b"x")
    assert txvfs._txvfs.strerror(errno.ENOENT) == "no such file or directory"
    assert txvfs._txvfs.strerror(txvfs._txvfs.CONFLICT).startswith("transaction conflict")


def test_raw_handle_positional_io(store: txvfs.Store) -> None:
    h = store.open_raw("/p", os.O_CREAT | os.O_RDWR)
    assert h.readable() and h.writable()
    assert h.pwrite(b"world", 6) == 5
    assert h.pwrite(b"hello", 0) == 5
    assert h.tell() == 0
    assert h.pread(5, 6) == b"world"
    assert h.read() == b"hello\0world"
    assert h.seek(-5, 2) == 6
    assert h.read(100) == b"world"
    h.fsync()
    assert h.stat().st_size == 11
    h.truncate(5)
    assert h.stat().st_size == 5
    with pytest.raises(ValueError):
        h.seek(0, 7)
    with pytest.raises(OSError) as e:
        h.seek(-1)
    assert e.value.errno == errno.EINVAL
    h.close()
    w = store.open_raw("/p", os.O_WRONLY)
    with pytest.raises(OSError) as e:
        w.read()
    assert e.value.errno == errno.EBADF
    w.close()


def test_write_back_handles_commit_at_close(store: txvfs.Store) -> None:
    with store.open("/wb", "wb", write_back=True) as f:
        for _ in range(100):
            f.write(b"x" * 1000)
    assert store.stat("/wb").st_size == 100_000


def test_file_mode_of_new_files(store: txvfs.Store) -> None:
    with store.open("/m", "w", file_mode=0o600):
        pass
    assert store.stat("/m").st_mode & 0o777 == 0o600


def test_io_base_interop(store: txvfs.Store) -> None:
    with store.open("/x", "wb") as f:
        assert isinstance(f, io.BufferedWriter) and isinstance(f.raw, txvfs.RawFile)
        assert isinstance(f, io.IOBase)
        with pytest.raises(io.UnsupportedOperation):
            f.fileno()
        assert not f.isatty()


def test_open_with_a_block_size(store: txvfs.Store) -> None:
    # A file for small random writes gets its own block size; its data is the same.
    with store.open("/pages", "wb", block_size=4096) as f:
        f.write(b"p" * 10000)
    assert store.stat("/pages").st_blksize == 4096
    assert store.read_bytes("/pages") == b"p" * 10000
    with store.open("/plain", "wb") as f:
        f.write(b"q" * 10000)
    assert store.stat("/plain").st_blksize == 65536
    with pytest.raises(OSError, match="block size 3000") as e:
        store.open("/bad", "wb", block_size=3000)
    assert e.value.errno == errno.EINVAL
    assert not store.exists("/bad")
