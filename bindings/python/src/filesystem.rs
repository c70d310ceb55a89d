//! `FileSystem`: the os-like calls shared by `Store` (auto-commit) and `Transaction`.

use crate::errors::{detached, is_txvfs_own, to_py, Fail, CLOSED_STORE, FINISHED_TX};
use crate::handle::{read_full, Handle};
use crate::paths::{kind_name, name_obj, path_of, PathArg};
use crate::stat::{Quota, StatResult, StatVfsResult};
use parking_lot::Mutex;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyBytes;
use std::io::SeekFrom;
use txvfs::{
    Error, ErrorKind, FileSystem as _, FileType, OpenOptions, QuotaLimits, RenameFlags, SetTime,
    Store as CoreStore, Transaction as CoreTransaction, XattrFlags,
};

/// What a [`FileSystem`] object runs its calls on.
pub(crate) enum Target {
    /// A store: every call auto-commits. `None` once closed.
    Store(Mutex<Option<CoreStore>>),
    /// A transaction: calls belong to it. `None` once committed or rolled back.
    Tx(Mutex<Option<CoreTransaction>>),
}

/// Runs `f`: the body of a [`run!`], a closure so that a `return` in it leaves the body.
fn run_body<T>(f: impl FnOnce() -> txvfs::Result<T>) -> txvfs::Result<T> {
    f()
}

/// Runs `$body` with `$fs` bound to the store or the transaction, without the GIL. A closed
/// store or a finished transaction raises `ValueError`, the body's errors the core's.
macro_rules! run {
    ($self:expr, $py:expr, |$fs:ident| $body:expr) => {{
        let target = &$self.target;
        detached($py, move || -> Result<_, Fail> {
            match target {
                Target::Store(m) => {
                    let store = m.lock().clone().ok_or(Fail::Closed(CLOSED_STORE))?;
                    let $fs = &store;
                    Ok(run_body(|| $body)?)
                }
                Target::Tx(m) => {
                    let guard = m.lock();
                    let tx = guard.as_ref().ok_or(Fail::Closed(FINISHED_TX))?;
                    let $fs = tx;
                    Ok(run_body(|| $body)?)
                }
            }
        })
    }};
}

/// The file-system calls shared by `Store` (each call is its own transaction) and
/// `Transaction` (calls belong to it). Paths are absolute, `str`, `bytes` or `os.PathLike`.
/// Errors raise the builtin `OSError` subclasses with `errno` set.
#[pyclass(frozen, subclass, module = "txvfs._txvfs")]
pub(crate) struct FileSystem {
    pub(crate) target: Target,
}

#[pymethods]
impl FileSystem {
    /// Attributes of `path`; follows a final symlink unless `follow_symlinks` is false.
    #[pyo3(signature = (path, *, follow_symlinks = true))]
    fn stat(
        &self,
        py: Python<'_>,
        path: &Bound<'_, PyAny>,
        follow_symlinks: bool,
    ) -> PyResult<StatResult> {
        let p = path_of(path)?.bytes;
        let s = run!(self, py, |fs| if follow_symlinks { fs.stat(&p) } else { fs.lstat(&p) })?;
        Ok(s.into())
    }

    /// Attributes of `path` itself, not following a final symlink.
    fn lstat(&self, py: Python<'_>, path: &Bound<'_, PyAny>) -> PyResult<StatResult> {
        let p = path_of(path)?.bytes;
        Ok(run!(self, py, |fs| fs.lstat(&p))?.into())
    }

    /// True if `path` exists, following symlinks; like `os.path.exists`, false for a path
    /// that cannot be resolved (a symlink loop, a name too long, ...).
    fn exists(&self, py: Python<'_>, path: &Bound<'_, PyAny>) -> PyResult<bool> {
        self.is_kind(py, path, true, None)
    }

    /// True if `path` exists, not following a final symlink (like `os.path.lexists`).
    fn lexists(&self, py: Python<'_>, path: &Bound<'_, PyAny>) -> PyResult<bool> {
        self.is_kind(py, path, false, None)
    }

    /// True if `path` is a regular file, following symlinks (like `os.path.isfile`).
    fn isfile(&self, py: Python<'_>, path: &Bound<'_, PyAny>) -> PyResult<bool> {
        self.is_kind(py, path, true, Some(FileType::File))
    }

    /// True if `path` is a directory, following symlinks (like `os.path.isdir`).
    fn isdir(&self, py: Python<'_>, path: &Bound<'_, PyAny>) -> PyResult<bool> {
        self.is_kind(py, path, true, Some(FileType::Dir))
    }

    /// True if `path` is a symbolic link (like `os.path.islink`).
    fn islink(&self, py: Python<'_>, path: &Bound<'_, PyAny>) -> PyResult<bool> {
        self.is_kind(py, path, false, Some(FileType::Symlink))
    }

    /// Creates a directory. `mode` is applied as given (no umask). With `parents`, missing
    /// parents are created too; with `exist_ok`, an existing directory is not an error.
    #[pyo3(signature = (path, mode = 0o755, *, parents = false, exist_ok = false))]
    fn mkdir(
        &self,
        py: Python<'_>,
        path: &Bound<'_, PyAny>,
        mode: u32,
        parents: bool,
        exist_ok: bool,
    ) -> PyResult<()> {
        let p = path_of(path)?.bytes;
        run!(self, py, |fs| {
            let r = if parents { fs.mkdir_all(&p, mode) } else { fs.mkdir(&p, mode) };
            match r {
                Err(e)
                    if e.kind() == ErrorKind::Exists
                        && exist_ok
                        && fs.stat(&p).map(|s| s.is_dir()).unwrap_or(false) =>
                {
                    Ok(())
                }
                Ok(()) if parents && !exist_ok => Ok(()),
                r => r,
            }
        })
    }

    /// Creates a directory and all missing parents, like `os.makedirs`.
    #[pyo3(signature = (path, mode = 0o755, exist_ok = false))]
    fn makedirs(
        &self,
        py: Python<'_>,
        path: &Bound<'_, PyAny>,
        mode: u32,
        exist_ok: bool,
    ) -> PyResult<()> {
        let p = path_of(path)?.bytes;
        run!(self, py, |fs| {
            if !exist_ok && fs.exists(&p)? {
                return Err(Error::at(ErrorKind::Exists, &p));
            }
            fs.mkdir_all(&p, mode)
        })
    }

    /// Removes an empty directory.
    fn rmdir(&self, py: Python<'_>, path: &Bound<'_, PyAny>) -> PyResult<()> {
        let p = path_of(path)?.bytes;
        run!(self, py, |fs| fs.rmdir(&p))
    }

    /// Removes a file or symlink (an open file stays usable until its last handle closes).
    fn remove(&self, py: Python<'_>, path: &Bound<'_, PyAny>) -> PyResult<()> {
        self.unlink(py, path)
    }

    /// Removes a file or symlink; the same as `remove`.
    fn unlink(&self, py: Python<'_>, path: &Bound<'_, PyAny>) -> PyResult<()> {
        let p = path_of(path)?.bytes;
        run!(self, py, |fs| fs.unlink(&p))
    }

    /// Renames `src` to `dst` atomically, replacing an existing `dst` (like `os.rename` on
    /// POSIX). `no_replace` fails with FileExistsError instead; `exchange` swaps the two.
    #[pyo3(signature = (src, dst, *, no_replace = false, exchange = false))]
    fn rename(
        &self,
        py: Python<'_>,
        src: &Bound<'_, PyAny>,
        dst: &Bound<'_, PyAny>,
        no_replace: bool,
        exchange: bool,
    ) -> PyResult<()> {
        let (s, d) = (path_of(src)?.bytes, path_of(dst)?.bytes);
        run!(self, py, |fs| fs.rename_with(&s, &d, RenameFlags { no_replace, exchange }))
    }

    /// Renames `src` to `dst`, replacing `dst` (like `os.replace`).
    fn replace(
        &self,
        py: Python<'_>,
        src: &Bound<'_, PyAny>,
        dst: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        self.rename(py, src, dst, false, false)
    }

    /// Creates a hard link `dst` to the existing non-directory `src`.
    fn link(&self, py: Python<'_>, src: &Bound<'_, PyAny>, dst: &Bound<'_, PyAny>) -> PyResult<()> {
        let (s, d) = (path_of(src)?.bytes, path_of(dst)?.bytes);
        run!(self, py, |fs| fs.link(&s, &d))
    }

    /// Creates a symbolic link `dst` pointing to `src` (stored as given), like `os.symlink`.
    fn symlink(
        &self,
        py: Python<'_>,
        src: &Bound<'_, PyAny>,
        dst: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        let (s, d) = (path_of(src)?.bytes, path_of(dst)?.bytes);
        run!(self, py, |fs| fs.symlink(&s, &d))
    }

    /// The target of a symbolic link (`bytes` if `path` is bytes).
    fn readlink<'py>(
        &self,
        py: Python<'py>,
        path: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let p = path_of(path)?;
        let (pb, as_bytes) = (p.bytes, p.is_bytes);
        let t = run!(self, py, |fs| fs.readlink(&pb))?;
        name_obj(py, &t, as_bytes)
    }

    /// The names in a directory (without `.` and `..`), in byte order.
    #[pyo3(signature = (path = None))]
    fn listdir<'py>(
        &self,
        py: Python<'py>,
        path: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Vec<Bound<'py, PyAny>>> {
        let p = match path {
            Some(p) => path_of(p)?,
            None => PathArg { bytes: b"/".to_vec(), is_bytes: false },
        };
        let pb = p.bytes;
        let entries = run!(self, py, |fs| fs.readdir(&pb, None, 0))?;
        entries.iter().map(|e| name_obj(py, &e.name, p.is_bytes)).collect()
    }

    /// One page of a directory: up to `limit` entries (0: all) whose names sort after
    /// `after`, as `(name, inode, type)` with type `"file"`, `"dir"` or `"symlink"`.
    #[pyo3(signature = (path, after = None, limit = 0))]
    fn readdir<'py>(
        &self,
        py: Python<'py>,
        path: &Bound<'py, PyAny>,
        after: Option<&Bound<'py, PyAny>>,
        limit: usize,
    ) -> PyResult<Vec<(Bound<'py, PyAny>, u64, &'static str)>> {
        let p = path_of(path)?;
        let pb = p.bytes;
        let after = after.map(path_of).transpose()?.map(|a| a.bytes);
        let entries = run!(self, py, |fs| fs.readdir(&pb, after.as_deref(), limit))?;
        entries
            .iter()
            .map(|e| Ok((name_obj(py, &e.name, p.is_bytes)?, e.ino, kind_name(e.kind))))
            .collect()
    }

    /// Sets permission bits.
    fn chmod(&self, py: Python<'_>, path: &Bound<'_, PyAny>, mode: u32) -> PyResult<()> {
        let p = path_of(path)?.bytes;
        run!(self, py, |fs| fs.chmod(&p, mode))
    }

    /// Changes owner and group; -1 keeps the current value (like `os.chown`).
    fn chown(&self, py: Python<'_>, path: &Bound<'_, PyAny>, uid: i64, gid: i64) -> PyResult<()> {
        let p = path_of(path)?.bytes;
        let id = |v: i64| -> PyResult<Option<u32>> {
            match v {
                -1 => Ok(None),
                v => u32::try_from(v)
                    .map(Some)
                    .map_err(|_| PyValueError::new_err("uid/gid out of range")),
            }
        };
        let (u, g) = (id(uid)?, id(gid)?);
        run!(self, py, |fs| fs.chown(&p, u, g))
    }

    /// Sets access and modification times like `os.utime`: `times` is `(atime, mtime)` in
    /// seconds, `ns` is `(atime_ns, mtime_ns)`; neither sets both to now.
    #[pyo3(signature = (path, times = None, *, ns = None))]
    fn utime(
        &self,
        py: Python<'_>,
        path: &Bound<'_, PyAny>,
        times: Option<(f64, f64)>,
        ns: Option<(i64, i64)>,
    ) -> PyResult<()> {
        let p = path_of(path)?.bytes;
        let (a, m) = match (times, ns) {
            (Some(_), Some(_)) => {
                return Err(PyValueError::new_err(
                    "utime: you may specify either 'times' or 'ns' but not both",
                ))
            }
            (Some((a, m)), None) => {
                (SetTime::At((a * 1e9).round() as i64), SetTime::At((m * 1e9).round() as i64))
            }
            (None, Some((a, m))) => (SetTime::At(a), SetTime::At(m)),
            (None, None) => (SetTime::Now, SetTime::Now),
        };
        run!(self, py, |fs| fs.utimens(&p, a, m))
    }

    /// Sets the size of a file.
    fn truncate(&self, py: Python<'_>, path: &Bound<'_, PyAny>, length: u64) -> PyResult<()> {
        let p = path_of(path)?.bytes;
        run!(self, py, |fs| fs.truncate(&p, length))
    }

    /// Reads an extended attribute (OSError ENODATA if absent).
    fn getxattr<'py>(
        &self,
        py: Python<'py>,
        path: &Bound<'py, PyAny>,
        attribute: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyBytes>> {
        let (p, n) = (path_of(path)?.bytes, path_of(attribute)?.bytes);
        let v = run!(self, py, |fs| fs.getxattr(&p, &n))?;
        Ok(PyBytes::new(py, &v))
    }

    /// Sets an extended attribute; `flags` 0, `os.XATTR_CREATE` or `os.XATTR_REPLACE`.
    #[pyo3(signature = (path, attribute, value, flags = 0))]
    fn setxattr(
        &self,
        py: Python<'_>,
        path: &Bound<'_, PyAny>,
        attribute: &Bound<'_, PyAny>,
        value: &[u8],
        flags: i32,
    ) -> PyResult<()> {
        let (p, n) = (path_of(path)?.bytes, path_of(attribute)?.bytes);
        let f = match flags {
            0 => XattrFlags::Any,
            1 => XattrFlags::Create,
            2 => XattrFlags::Replace,
            _ => return Err(to_py(Error::new(ErrorKind::Invalid, "setxattr: invalid flags"))),
        };
        let v = value.to_vec();
        run!(self, py, |fs| fs.setxattr(&p, &n, &v, f))
    }

    /// The names of the extended attributes of `path`.
    fn listxattr<'py>(
        &self,
        py: Python<'py>,
        path: &Bound<'py, PyAny>,
    ) -> PyResult<Vec<Bound<'py, PyAny>>> {
        let p = path_of(path)?.bytes;
        let names = run!(self, py, |fs| fs.listxattr(&p))?;
        names.iter().map(|n| name_obj(py, n, false)).collect()
    }

    /// Removes an extended attribute (OSError ENODATA if absent).
    fn removexattr(
        &self,
        py: Python<'_>,
        path: &Bound<'_, PyAny>,
        attribute: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        let (p, n) = (path_of(path)?.bytes, path_of(attribute)?.bytes);
        run!(self, py, |fs| fs.removexattr(&p, &n))
    }

    /// Store-wide usage, like `os.statvfs`.
    fn statvfs(&self, py: Python<'_>) -> PyResult<StatVfsResult> {
        let s = run!(self, py, |fs| fs.statfs())?;
        Ok(StatVfsResult {
            f_bsize: s.block_size,
            f_frsize: s.block_size,
            f_blocks: s.blocks,
            f_bfree: s.blocks_free,
            f_bavail: s.blocks_free,
            f_files: s.files + s.files_free,
            f_ffree: s.files_free,
            f_favail: s.files_free,
            f_namemax: s.name_max,
        })
    }

    /// Sets or changes the quota of the directory tree at `path`: `bytes` of regular files and
    /// `inodes` at most (`None`: not limited; one is needed). A commit that would pass a limit
    /// raises `OSError(EDQUOT)` naming the tree and changes nothing; a rename or link between
    /// trees raises `OSError(EXDEV)`.
    #[pyo3(signature = (path, *, bytes = None, inodes = None))]
    fn set_quota(
        &self,
        py: Python<'_>,
        path: &Bound<'_, PyAny>,
        bytes: Option<u64>,
        inodes: Option<u64>,
    ) -> PyResult<()> {
        let (p, limits) = (path_of(path)?.bytes, QuotaLimits { bytes, inodes });
        run!(self, py, |fs| fs.set_quota(&p, limits))
    }

    /// The innermost quota tree `path` is in (`Quota`), or `None`.
    fn quota(&self, py: Python<'_>, path: &Bound<'_, PyAny>) -> PyResult<Option<Quota>> {
        let p = path_of(path)?.bytes;
        let Some(q) = run!(self, py, |fs| fs.quota(&p))? else { return Ok(None) };
        let (path, l) = (name_obj(py, &q.path, false)?.unbind(), q.limits);
        let (bytes_limit, inodes_limit, parent) = (l.bytes, l.inodes, q.parent);
        let (bytes_used, inodes_used, tree) = (q.bytes_used, q.inodes_used, q.tree);
        Ok(Some(Quota { tree, path, bytes_limit, inodes_limit, bytes_used, inodes_used, parent }))
    }

    /// Removes the quota of the tree whose top directory is `path` (FileNotFoundError if none).
    fn remove_quota(&self, py: Python<'_>, path: &Bound<'_, PyAny>) -> PyResult<()> {
        let p = path_of(path)?.bytes;
        run!(self, py, |fs| fs.remove_quota(&p))
    }

    /// The whole contents of a file.
    fn read_bytes<'py>(
        &self,
        py: Python<'py>,
        path: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyBytes>> {
        self.read_range(py, path, 0, usize::MAX)
    }

    /// Reads `length` bytes (fewer at the end of the file) from `offset` without keeping
    /// a handle open, at one consistent snapshot (one transaction).
    fn read_range<'py>(
        &self,
        py: Python<'py>,
        path: &Bound<'py, PyAny>,
        offset: u64,
        length: usize,
    ) -> PyResult<Bound<'py, PyBytes>> {
        let p = path_of(path)?.bytes;
        let p = p.as_slice();
        let want = |f: &txvfs::File| -> txvfs::Result<usize> {
            let left = f.stat()?.size.saturating_sub(offset);
            Ok(usize::try_from(left).unwrap_or(usize::MAX).min(length))
        };
        // A small range is read into a Vec and copied; a large one is read into the `bytes`
        // object itself, in a second snapshot once its size is known.
        let cap = match run!(self, py, |fs| fs.with_file(p, |f| match want(f)? {
            n if n <= SMALL_READ => read_range_vec(f, offset, n).map(Ok),
            n => Ok(Err(n)),
        }))? {
            Ok(v) => return Ok(PyBytes::new(py, &v)),
            Err(n) => n,
        };
        let mut same = false;
        let bytes = PyBytes::new_with(py, cap, |buf| {
            same = run!(self, py, |fs| fs.with_file(p, |f| {
                let n = want(f)?;
                Ok(n == buf.len() && read_range_into(f, offset, buf)? == n)
            }))?;
            Ok(())
        })?;
        if same {
            return Ok(bytes);
        }
        // The file's size changed between the two snapshots: read it again into a Vec.
        let v = run!(self, py, |fs| fs.with_file(p, |f| read_range_vec(f, offset, want(f)?)))?;
        Ok(PyBytes::new(py, &v))
    }

    /// Creates or replaces a file with `data` in one atomic step; returns `len(data)`.
    fn write_bytes(&self, py: Python<'_>, path: &Bound<'_, PyAny>, data: &[u8]) -> PyResult<usize> {
        let p = path_of(path)?.bytes;
        run!(self, py, |fs| fs.write_file(&p, data))?;
        Ok(data.len())
    }

    /// For the benchmark: runs `stat(path)` `n` times inside Rust (no Python in the loop) and
    /// returns the seconds it took, so that the binding's per-call overhead can be measured
    /// as the difference to the same calls made from Python.
    fn _time_core_stat(&self, py: Python<'_>, path: &Bound<'_, PyAny>, n: u64) -> PyResult<f64> {
        let p = path_of(path)?.bytes;
        run!(self, py, |fs| {
            let t = std::time::Instant::now();
            for _ in 0..n {
                std::hint::black_box(fs.stat(&p)?);
            }
            Ok(t.elapsed().as_secs_f64())
        })
    }

    /// Opens a file with POSIX `open(2)` flags (`os.O_RDONLY`, `os.O_CREAT`, ...) and returns
    /// the native handle. Most code wants `open()`, which wraps it in `io` objects.
    /// `write_back` buffers sequential writes until flush/close (store handles only).
    /// `block_size` gives a file opened for writing that has no blocks yet its own block size
    /// (a power of two from 512 to 65536), for small random writes (a database's pages).
    #[pyo3(signature = (path, flags = 0, mode = 0o644, *, write_back = false, block_size = None))]
    fn open_raw(
        &self,
        py: Python<'_>,
        path: &Bound<'_, PyAny>,
        flags: i32,
        mode: u32,
        write_back: bool,
        block_size: Option<u32>,
    ) -> PyResult<Handle> {
        let p = path_of(path)?.bytes;
        let mut opts = OpenOptions::from_flags(flags, mode).write_back(write_back);
        if let Some(b) = block_size {
            opts = opts.block_size(b);
        }
        let f = run!(self, py, |fs| fs.open(&p, &opts))?;
        let (readable, writable) = (opts_readable(flags), opts_writable(flags));
        Ok(Handle::new(f, readable, writable))
    }
}

fn opts_readable(flags: i32) -> bool {
    matches!(flags & libc::O_ACCMODE, libc::O_RDONLY | libc::O_RDWR)
}

fn opts_writable(flags: i32) -> bool {
    matches!(flags & libc::O_ACCMODE, libc::O_WRONLY | libc::O_RDWR)
}

impl FileSystem {
    /// The store of a `Store` object (a cheap shared handle), or an error once it is closed.
    pub(crate) fn store(&self) -> PyResult<CoreStore> {
        match &self.target {
            Target::Store(m) => m.lock().clone().ok_or_else(|| PyValueError::new_err(CLOSED_STORE)),
            Target::Tx(_) => Err(to_py(Error::new(ErrorKind::Invalid, "not a store"))),
        }
    }

    /// Whether `path` exists (and is of `kind`), with the meaning of `os.path`: a path that
    /// fails to resolve with a POSIX error is false; txvfs's own errors still raise.
    fn is_kind(
        &self,
        py: Python<'_>,
        path: &Bound<'_, PyAny>,
        follow: bool,
        kind: Option<FileType>,
    ) -> PyResult<bool> {
        let p = path_of(path)?.bytes;
        run!(self, py, |fs| {
            let r = if follow { fs.stat(&p) } else { fs.lstat(&p) };
            match r {
                Ok(s) => Ok(kind.is_none_or(|k| s.kind == k)),
                Err(e) if !is_txvfs_own(&e) => Ok(false),
                Err(e) => Err(e),
            }
        })
    }
}

/// Ranges up to this size are read into a `Vec` and copied into `bytes` (one snapshot);
/// larger ones first learn the size, then fill the `bytes` (a second snapshot, whose extra
/// open and stat cost little next to the copy they save).
const SMALL_READ: usize = 64 << 10;

/// Reading a file at one snapshot: a store opens it inside a short transaction of its own (so
/// a concurrent writer cannot tear the result), a transaction opens it in itself.
trait WithFile {
    fn with_file<T>(
        &self,
        path: &[u8],
        f: impl FnOnce(&txvfs::File) -> txvfs::Result<T>,
    ) -> txvfs::Result<T>;
}

impl WithFile for CoreStore {
    fn with_file<T>(
        &self,
        path: &[u8],
        f: impl FnOnce(&txvfs::File) -> txvfs::Result<T>,
    ) -> txvfs::Result<T> {
        self.begin()?.with_file(path, f)
    }
}

impl WithFile for CoreTransaction {
    fn with_file<T>(
        &self,
        path: &[u8],
        f: impl FnOnce(&txvfs::File) -> txvfs::Result<T>,
    ) -> txvfs::Result<T> {
        f(&self.open(path, &OpenOptions::new().read(true))?)
    }
}

/// Reads `buf.len()` bytes (fewer at the end) of `f` from `offset`.
fn read_range_into(f: &txvfs::File, offset: u64, buf: &mut [u8]) -> txvfs::Result<usize> {
    f.seek(SeekFrom::Start(offset))?;
    read_full(f, buf)
}

/// Reads `n` bytes (fewer at the end) of `f` from `offset` into a new Vec.
fn read_range_vec(f: &txvfs::File, offset: u64, n: usize) -> txvfs::Result<Vec<u8>> {
    let mut v = vec![0u8; n];
    let got = read_range_into(f, offset, &mut v)?;
    v.truncate(got);
    Ok(v)
}
