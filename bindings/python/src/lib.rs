//! Python bindings for txvfs: the native module `txvfs._txvfs`.
//!
//! This crate only translates: Python arguments to core calls, core results to Python
//! objects, core errors to Python exceptions. Every call into the core runs with the GIL
//! released ([`Python::detach`]) and inside a panic boundary, so a store is usable from many
//! threads and no Rust panic reaches Python as anything but a `txvfs.TxvfsError`.
//!
//! The Python package (`bindings/python/python/txvfs`) builds the friendly API on top:
//! `io` objects, `walk`, `scandir`, `transaction()`, `transact()`, fsspec.
#![warn(missing_docs)]

use parking_lot::Mutex;
use pyo3::exceptions::{PyOSError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PySlice, PyString};
use std::io::SeekFrom;
use std::panic::{catch_unwind, AssertUnwindSafe};
use txvfs::{
    Credential, Error, ErrorKind, FileSystem as _, FileType, FlockOp, OpenOptions, Options, RangeLockKind,
    RenameFlags, SetTime, Store as CoreStore, Transaction as CoreTransaction, XattrFlags,
};

pyo3::create_exception!(
    _txvfs,
    TxvfsError,
    PyOSError,
    "Base class of txvfs's own errors (codes above 10000); POSIX errors raise the builtin OSError subclasses."
);
pyo3::create_exception!(
    _txvfs,
    TransactionConflict,
    TxvfsError,
    "A transaction conflicted with another one (or ran too long); running it again can succeed."
);
pyo3::create_exception!(
    _txvfs,
    TransactionTooLarge,
    TxvfsError,
    "A transaction is larger than the backend can commit."
);

/// Converts a core error into the matching Python exception: `OSError(errno, message)`
/// (which Python turns into FileNotFoundError, FileExistsError, ... by errno) or one of
/// txvfs's own exceptions, whose `errno` is the txvfs code.
fn to_py(e: Error) -> PyErr {
    let args = (e.code(), e.message().to_string());
    match e.kind() {
        ErrorKind::Conflict | ErrorKind::TooOld => TransactionConflict::new_err(args),
        ErrorKind::TooLarge => TransactionTooLarge::new_err(args),
        ErrorKind::Corrupt | ErrorKind::Backend => TxvfsError::new_err(args),
        _ => PyOSError::new_err(args),
    }
}

/// True for txvfs's own errors (codes above 10000, raised as `TxvfsError`), false for POSIX ones.
fn is_txvfs_own(e: &Error) -> bool {
    matches!(e.kind(), ErrorKind::Conflict | ErrorKind::TooOld | ErrorKind::TooLarge | ErrorKind::Corrupt | ErrorKind::Backend)
}

/// Why a call failed: the core said no, or the object was closed (or its transaction ended)
/// before the call, which raises `ValueError` like a closed `io` object.
enum Fail {
    Core(Error),
    Closed(&'static str),
}

impl From<Error> for Fail {
    fn from(e: Error) -> Self {
        Fail::Core(e)
    }
}

const CLOSED_STORE: &str = "I/O operation on a closed store";
const FINISHED_TX: &str = "transaction already committed or rolled back";
const CLOSED_FILE: &str = "I/O operation on closed file";

fn fail_to_py(f: Fail) -> PyErr {
    match f {
        Fail::Core(e) => to_py(e),
        Fail::Closed(msg) => PyValueError::new_err(msg),
    }
}

/// Runs `f` without the GIL and inside a panic boundary.
fn detached<T: Send, E: Into<Fail>>(py: Python<'_>, f: impl FnOnce() -> Result<T, E> + Send) -> PyResult<T> {
    py.detach(|| match catch_unwind(AssertUnwindSafe(f)) {
        Ok(r) => r.map_err(Into::into),
        Err(p) => {
            let msg = p
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| p.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown panic".into());
            Err(Fail::Core(Error::new(ErrorKind::Backend, format!("internal error (panic in txvfs): {msg}"))))
        }
    })
    .map_err(fail_to_py)
}

/// A path argument: `str`, `bytes` or an `os.PathLike`; remembers whether it was bytes, so
/// that names derived from it come back as the same type (like `os.listdir`).
struct PathArg {
    bytes: Vec<u8>,
    is_bytes: bool,
}

fn path_of(obj: &Bound<'_, PyAny>) -> PyResult<PathArg> {
    if let Ok(s) = obj.cast::<PyString>() {
        return Ok(PathArg { bytes: str_bytes(s)?, is_bytes: false });
    }
    if let Ok(b) = obj.cast::<PyBytes>() {
        return Ok(PathArg { bytes: b.as_bytes().to_vec(), is_bytes: true });
    }
    if obj.hasattr("__fspath__")? {
        let p = obj.call_method0("__fspath__")?;
        if p.is_instance_of::<PyString>() || p.is_instance_of::<PyBytes>() {
            return path_of(&p);
        }
    }
    Err(pyo3::exceptions::PyTypeError::new_err(format!(
        "expected str, bytes or os.PathLike object, not {}",
        obj.get_type().name()?
    )))
}

/// UTF-8 bytes of a str; lone surrogates (from `os.fsdecode`) map back with surrogateescape.
fn str_bytes(s: &Bound<'_, PyString>) -> PyResult<Vec<u8>> {
    match s.to_cow() {
        Ok(v) => Ok(v.as_bytes().to_vec()),
        Err(_) => Ok(s.call_method1("encode", ("utf-8", "surrogateescape"))?.cast::<PyBytes>()?.as_bytes().to_vec()),
    }
}

/// A name or path as `bytes` (when the caller used bytes) or `str` (surrogateescape-decoded).
fn name_obj<'py>(py: Python<'py>, v: &[u8], as_bytes: bool) -> PyResult<Bound<'py, PyAny>> {
    if as_bytes {
        return Ok(PyBytes::new(py, v).into_any());
    }
    match std::str::from_utf8(v) {
        Ok(s) => Ok(PyString::new(py, s).into_any()),
        Err(_) => PyBytes::new(py, v).call_method1("decode", ("utf-8", "surrogateescape")),
    }
}

fn kind_name(k: FileType) -> &'static str {
    match k {
        FileType::File => "file",
        FileType::Dir => "dir",
        FileType::Symlink => "symlink",
        FileType::Fifo => "fifo",
        FileType::CharDevice => "chardev",
        FileType::BlockDevice => "blockdev",
        FileType::Socket => "socket",
    }
}

/// File attributes with the field names of `os.stat_result`.
#[pyclass(frozen, module = "txvfs._txvfs")]
struct StatResult {
    /// File type and permission bits.
    #[pyo3(get)]
    st_mode: u32,
    /// Inode number.
    #[pyo3(get)]
    st_ino: u64,
    /// Device: always 0 (one store is one device).
    #[pyo3(get)]
    st_dev: u64,
    /// Number of hard links.
    #[pyo3(get)]
    st_nlink: u64,
    /// Owner.
    #[pyo3(get)]
    st_uid: u32,
    /// Group.
    #[pyo3(get)]
    st_gid: u32,
    /// Size in bytes.
    #[pyo3(get)]
    st_size: u64,
    /// 512-byte blocks.
    #[pyo3(get)]
    st_blocks: u64,
    /// Preferred I/O size.
    #[pyo3(get)]
    st_blksize: u32,
    /// Access time in ns since the epoch.
    #[pyo3(get)]
    st_atime_ns: i64,
    /// Modification time in ns since the epoch.
    #[pyo3(get)]
    st_mtime_ns: i64,
    /// Status change time in ns since the epoch.
    #[pyo3(get)]
    st_ctime_ns: i64,
}

#[pymethods]
impl StatResult {
    /// Access time in seconds since the epoch.
    #[getter]
    fn st_atime(&self) -> f64 {
        self.st_atime_ns as f64 / 1e9
    }
    /// Modification time in seconds since the epoch.
    #[getter]
    fn st_mtime(&self) -> f64 {
        self.st_mtime_ns as f64 / 1e9
    }
    /// Status change time in seconds since the epoch.
    #[getter]
    fn st_ctime(&self) -> f64 {
        self.st_ctime_ns as f64 / 1e9
    }
    fn __repr__(&self) -> String {
        format!(
            "txvfs.StatResult(st_mode={:#o}, st_ino={}, st_nlink={}, st_uid={}, st_gid={}, st_size={}, st_mtime_ns={})",
            self.st_mode, self.st_ino, self.st_nlink, self.st_uid, self.st_gid, self.st_size, self.st_mtime_ns
        )
    }
}

impl From<txvfs::Stat> for StatResult {
    fn from(s: txvfs::Stat) -> Self {
        StatResult {
            st_mode: s.mode,
            st_ino: s.ino,
            st_dev: 0,
            st_nlink: s.nlink,
            st_uid: s.uid,
            st_gid: s.gid,
            st_size: s.size,
            st_blocks: s.blocks,
            st_blksize: s.blksize,
            st_atime_ns: s.atime_ns,
            st_mtime_ns: s.mtime_ns,
            st_ctime_ns: s.ctime_ns,
        }
    }
}

/// Store-wide usage with the field names of `os.statvfs_result`.
#[pyclass(frozen, module = "txvfs._txvfs")]
struct StatVfsResult {
    /// Block size.
    #[pyo3(get)]
    f_bsize: u64,
    /// Fragment size (same as the block size).
    #[pyo3(get)]
    f_frsize: u64,
    /// Total blocks.
    #[pyo3(get)]
    f_blocks: u64,
    /// Free blocks.
    #[pyo3(get)]
    f_bfree: u64,
    /// Free blocks available to unprivileged users (same as `f_bfree`).
    #[pyo3(get)]
    f_bavail: u64,
    /// Inodes in use plus free inodes.
    #[pyo3(get)]
    f_files: u64,
    /// Free inodes.
    #[pyo3(get)]
    f_ffree: u64,
    /// Free inodes for unprivileged users (same as `f_ffree`).
    #[pyo3(get)]
    f_favail: u64,
    /// Longest name.
    #[pyo3(get)]
    f_namemax: u64,
}

/// What a [`FileSystem`] object runs its calls on.
enum Target {
    /// A store: every call auto-commits. `None` once closed.
    Store(Mutex<Option<CoreStore>>),
    /// A transaction: calls belong to it. `None` once committed or rolled back.
    Tx(Mutex<Option<CoreTransaction>>),
}

/// Runs `$body` with `$fs` bound to the store or the transaction, without the GIL.
macro_rules! run {
    ($self:expr, $py:expr, |$fs:ident| $body:expr) => {{
        let target = &$self.target;
        detached($py, move || -> Result<_, Fail> {
            match target {
                Target::Store(m) => {
                    let store = m.lock().clone().ok_or(Fail::Closed(CLOSED_STORE))?;
                    let $fs = &store;
                    Ok((|| -> txvfs::Result<_> { $body })()?)
                }
                Target::Tx(m) => {
                    let guard = m.lock();
                    let tx = guard.as_ref().ok_or(Fail::Closed(FINISHED_TX))?;
                    let $fs = tx;
                    Ok((|| -> txvfs::Result<_> { $body })()?)
                }
            }
        })
    }};
}

/// The file-system calls shared by `Store` (each call is its own transaction) and
/// `Transaction` (calls belong to it). Paths are absolute, `str`, `bytes` or `os.PathLike`.
/// Errors raise the builtin `OSError` subclasses with `errno` set.
#[pyclass(frozen, subclass, module = "txvfs._txvfs")]
struct FileSystem {
    target: Target,
}

#[pymethods]
impl FileSystem {
    /// Attributes of `path`; follows a final symlink unless `follow_symlinks` is false.
    #[pyo3(signature = (path, *, follow_symlinks = true))]
    fn stat(&self, py: Python<'_>, path: &Bound<'_, PyAny>, follow_symlinks: bool) -> PyResult<StatResult> {
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
    fn mkdir(&self, py: Python<'_>, path: &Bound<'_, PyAny>, mode: u32, parents: bool, exist_ok: bool) -> PyResult<()> {
        let p = path_of(path)?.bytes;
        run!(self, py, |fs| {
            let r = if parents { fs.mkdir_all(&p, mode) } else { fs.mkdir(&p, mode) };
            match r {
                Err(e) if e.kind() == ErrorKind::Exists && exist_ok && fs.stat(&p).map(|s| s.is_dir()).unwrap_or(false) => Ok(()),
                Ok(()) if parents && !exist_ok => Ok(()),
                r => r,
            }
        })
    }

    /// Creates a directory and all missing parents, like `os.makedirs`.
    #[pyo3(signature = (path, mode = 0o755, exist_ok = false))]
    fn makedirs(&self, py: Python<'_>, path: &Bound<'_, PyAny>, mode: u32, exist_ok: bool) -> PyResult<()> {
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
    fn rename(&self, py: Python<'_>, src: &Bound<'_, PyAny>, dst: &Bound<'_, PyAny>, no_replace: bool, exchange: bool) -> PyResult<()> {
        let (s, d) = (path_of(src)?.bytes, path_of(dst)?.bytes);
        run!(self, py, |fs| fs.rename_with(&s, &d, RenameFlags { no_replace, exchange }))
    }

    /// Renames `src` to `dst`, replacing `dst` (like `os.replace`).
    fn replace(&self, py: Python<'_>, src: &Bound<'_, PyAny>, dst: &Bound<'_, PyAny>) -> PyResult<()> {
        self.rename(py, src, dst, false, false)
    }

    /// Creates a hard link `dst` to the existing non-directory `src`.
    fn link(&self, py: Python<'_>, src: &Bound<'_, PyAny>, dst: &Bound<'_, PyAny>) -> PyResult<()> {
        let (s, d) = (path_of(src)?.bytes, path_of(dst)?.bytes);
        run!(self, py, |fs| fs.link(&s, &d))
    }

    /// Creates a symbolic link `dst` pointing to `src` (stored as given), like `os.symlink`.
    fn symlink(&self, py: Python<'_>, src: &Bound<'_, PyAny>, dst: &Bound<'_, PyAny>) -> PyResult<()> {
        let (s, d) = (path_of(src)?.bytes, path_of(dst)?.bytes);
        run!(self, py, |fs| fs.symlink(&s, &d))
    }

    /// The target of a symbolic link (`bytes` if `path` is bytes).
    fn readlink<'py>(&self, py: Python<'py>, path: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
        let p = path_of(path)?;
        let (pb, as_bytes) = (p.bytes, p.is_bytes);
        let t = run!(self, py, |fs| fs.readlink(&pb))?;
        name_obj(py, &t, as_bytes)
    }

    /// The names in a directory (without `.` and `..`), in byte order.
    #[pyo3(signature = (path = None))]
    fn listdir<'py>(&self, py: Python<'py>, path: Option<&Bound<'py, PyAny>>) -> PyResult<Vec<Bound<'py, PyAny>>> {
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
        entries.iter().map(|e| Ok((name_obj(py, &e.name, p.is_bytes)?, e.ino, kind_name(e.kind)))).collect()
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
                v => u32::try_from(v).map(Some).map_err(|_| PyValueError::new_err("uid/gid out of range")),
            }
        };
        let (u, g) = (id(uid)?, id(gid)?);
        run!(self, py, |fs| fs.chown(&p, u, g))
    }

    /// Sets access and modification times like `os.utime`: `times` is `(atime, mtime)` in
    /// seconds, `ns` is `(atime_ns, mtime_ns)`; neither sets both to now.
    #[pyo3(signature = (path, times = None, *, ns = None))]
    fn utime(&self, py: Python<'_>, path: &Bound<'_, PyAny>, times: Option<(f64, f64)>, ns: Option<(i64, i64)>) -> PyResult<()> {
        let p = path_of(path)?.bytes;
        let (a, m) = match (times, ns) {
            (Some(_), Some(_)) => return Err(PyValueError::new_err("utime: you may specify either 'times' or 'ns' but not both")),
            (Some((a, m)), None) => (SetTime::At((a * 1e9).round() as i64), SetTime::At((m * 1e9).round() as i64)),
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
    fn getxattr<'py>(&self, py: Python<'py>, path: &Bound<'py, PyAny>, attribute: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyBytes>> {
        let (p, n) = (path_of(path)?.bytes, path_of(attribute)?.bytes);
        let v = run!(self, py, |fs| fs.getxattr(&p, &n))?;
        Ok(PyBytes::new(py, &v))
    }

    /// Sets an extended attribute; `flags` 0, `os.XATTR_CREATE` or `os.XATTR_REPLACE`.
    #[pyo3(signature = (path, attribute, value, flags = 0))]
    fn setxattr(&self, py: Python<'_>, path: &Bound<'_, PyAny>, attribute: &Bound<'_, PyAny>, value: &[u8], flags: i32) -> PyResult<()> {
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
    fn listxattr<'py>(&self, py: Python<'py>, path: &Bound<'py, PyAny>) -> PyResult<Vec<Bound<'py, PyAny>>> {
        let p = path_of(path)?.bytes;
        let names = run!(self, py, |fs| fs.listxattr(&p))?;
        names.iter().map(|n| name_obj(py, n, false)).collect()
    }

    /// Removes an extended attribute (OSError ENODATA if absent).
    fn removexattr(&self, py: Python<'_>, path: &Bound<'_, PyAny>, attribute: &Bound<'_, PyAny>) -> PyResult<()> {
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

    /// The whole contents of a file.
    fn read_bytes<'py>(&self, py: Python<'py>, path: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyBytes>> {
        self.read_range(py, path, 0, usize::MAX)
    }

    /// Reads `length` bytes (fewer at the end of the file) from `offset` without keeping
    /// a handle open, at one consistent snapshot (one transaction).
    fn read_range<'py>(&self, py: Python<'py>, path: &Bound<'py, PyAny>, offset: u64, length: usize) -> PyResult<Bound<'py, PyBytes>> {
        let p = path_of(path)?.bytes;
        let v = run!(self, py, |fs| fs.read_snapshot(&p, offset, length))?;
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
    #[pyo3(signature = (path, flags = 0, mode = 0o644, *, write_back = false))]
    fn open_raw(&self, py: Python<'_>, path: &Bound<'_, PyAny>, flags: i32, mode: u32, write_back: bool) -> PyResult<Handle> {
        let p = path_of(path)?.bytes;
        let opts = OpenOptions::from_flags(flags, mode).write_back(write_back);
        let f = run!(self, py, |fs| fs.open(&p, &opts))?;
        let (readable, writable) = (opts_readable(flags), opts_writable(flags));
        Ok(Handle { file: Mutex::new(Some(f)), readable, writable })
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
    fn store(&self) -> PyResult<CoreStore> {
        match &self.target {
            Target::Store(m) => m.lock().clone().ok_or_else(|| PyValueError::new_err(CLOSED_STORE)),
            Target::Tx(_) => Err(to_py(Error::new(ErrorKind::Invalid, "not a store"))),
        }
    }

    /// Whether `path` exists (and is of `kind`), with the meaning of `os.path`: a path that
    /// fails to resolve with a POSIX error is false; txvfs's own errors still raise.
    fn is_kind(&self, py: Python<'_>, path: &Bound<'_, PyAny>, follow: bool, kind: Option<FileType>) -> PyResult<bool> {
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

/// An open store. Every call is a transaction by itself (auto-commit), like a POSIX call.
/// URIs: `memory:`, `rocksdb:/path` or a bare path (RocksDB, created if missing).
#[pyclass(frozen, subclass, extends = FileSystem, module = "txvfs._txvfs")]
struct Store {
    uri: String,
}

#[pymethods]
impl Store {
    /// Opens (or creates) the store at `uri`. `sync`: make each commit durable before it
    /// returns; `block_size`/`inline_limit`: layout of a new store; `read_only`: refuse
    /// changes; `max_retries`: conflict retries; `uid`/`gid`/`groups`: check POSIX
    /// permissions as this user (default: act as the store's owner).
    #[new]
    #[pyo3(signature = (uri, *, sync = true, block_size = 65536, inline_limit = 4096, read_only = false,
                        max_retries = 100, uid = None, gid = None, groups = None))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        uri: &Bound<'_, PyAny>,
        sync: bool,
        block_size: u32,
        inline_limit: u32,
        read_only: bool,
        max_retries: u32,
        uid: Option<u32>,
        gid: Option<u32>,
        groups: Option<Vec<u32>>,
    ) -> PyResult<PyClassInitializer<Self>> {
        let uri_b = path_of(uri)?.bytes;
        let uri = String::from_utf8(uri_b).map_err(|_| PyValueError::new_err("store URI must be UTF-8"))?;
        let credential = match (uid, gid) {
            (None, None) if groups.is_none() => None,
            (Some(u), Some(g)) => Some(Credential { uid: u, gid: g, groups: groups.unwrap_or_default() }),
            _ => return Err(PyValueError::new_err("uid and gid must be given together")),
        };
        let options = Options { sync, block_size, inline_limit, read_only, credential, max_retries };
        let u = uri.clone();
        let store = detached(py, move || CoreStore::open_with(&u, options))?;
        Ok(PyClassInitializer::from(FileSystem { target: Target::Store(Mutex::new(Some(store))) })
            .add_subclass(Store { uri }))
    }

    /// The URI the store was opened with.
    #[getter]
    fn uri(&self) -> &str {
        &self.uri
    }

    /// The backend's description, such as `rocksdb:/path`.
    fn describe(self_: PyRef<'_, Self>, py: Python<'_>) -> PyResult<String> {
        let s = self_.as_super().store()?;
        Ok(py.detach(|| s.describe()))
    }

    /// The store's block size in bytes.
    #[getter]
    fn block_size(self_: PyRef<'_, Self>) -> PyResult<u32> {
        Ok(self_.as_super().store()?.block_size())
    }

    /// Makes every change committed so far durable (what `fsync` does for auto-commit writes).
    fn sync(self_: PyRef<'_, Self>, py: Python<'_>) -> PyResult<()> {
        let s = self_.as_super().store()?;
        detached(py, move || s.sync())
    }

    /// True once `close()` was called.
    #[getter]
    fn closed(self_: PyRef<'_, Self>) -> bool {
        match &self_.as_super().target {
            Target::Store(m) => m.lock().is_none(),
            Target::Tx(_) => true,
        }
    }

    /// Releases this object's reference to the store; later calls raise `ValueError`, like
    /// a closed `io` object's. Open files keep the store alive until they close. Idempotent.
    fn close(self_: PyRef<'_, Self>, py: Python<'_>) {
        if let Target::Store(m) = &self_.as_super().target {
            let s = m.lock().take();
            py.detach(move || drop(s));
        }
    }
}

/// An explicit transaction on a store: every call on it (and on files opened through it)
/// belongs to it; nobody else sees anything until `commit()`, then everything at once.
#[pyclass(frozen, subclass, extends = FileSystem, module = "txvfs._txvfs")]
struct Transaction {}

#[pymethods]
impl Transaction {
    /// Begins a transaction on `store`.
    #[new]
    fn new(py: Python<'_>, store: PyRef<'_, Store>) -> PyResult<PyClassInitializer<Self>> {
        let s = store.as_super().store()?;
        let tx = detached(py, move || s.begin())?;
        Ok(PyClassInitializer::from(FileSystem { target: Target::Tx(Mutex::new(Some(tx))) }).add_subclass(Transaction {}))
    }

    /// Commits: all changes become visible at once (and durable with `sync`), or none do.
    /// Raises `TransactionConflict` when another transaction changed what this one read.
    fn commit(self_: PyRef<'_, Self>, py: Python<'_>) -> PyResult<()> {
        let Target::Tx(m) = &self_.as_super().target else { unreachable!() };
        detached(py, || -> Result<(), Fail> {
            let tx = m.lock().take().ok_or(Fail::Closed(FINISHED_TX))?;
            Ok(tx.commit()?)
        })
    }

    /// Discards every change of the transaction. Idempotent.
    fn rollback(self_: PyRef<'_, Self>, py: Python<'_>) {
        let Target::Tx(m) = &self_.as_super().target else { unreachable!() };
        py.detach(|| {
            if let Some(tx) = m.lock().take() {
                tx.rollback()
            }
        })
    }

    /// True until the transaction is committed or rolled back.
    #[getter]
    fn active(self_: PyRef<'_, Self>) -> bool {
        let Target::Tx(m) = &self_.as_super().target else { unreachable!() };
        m.lock().is_some()
    }
}

/// A native open file: the raw layer under `txvfs.RawFile`. Reads and writes go straight to
/// the store (or the transaction the file was opened in); there is no buffering here.
#[pyclass(frozen, module = "txvfs._txvfs")]
struct Handle {
    file: Mutex<Option<txvfs::File>>,
    readable: bool,
    writable: bool,
}

impl Handle {
    fn with<T: Send>(&self, py: Python<'_>, f: impl FnOnce(&txvfs::File) -> txvfs::Result<T> + Send) -> PyResult<T> {
        let m = &self.file;
        detached(py, move || -> Result<T, Fail> {
            let g = m.lock();
            Ok(f(g.as_ref().ok_or(Fail::Closed(CLOSED_FILE))?)?)
        })
    }

    /// Reads from the current position to the end of the file (which may grow meanwhile).
    fn read_to_end(&self, py: Python<'_>) -> PyResult<Vec<u8>> {
        self.with(py, |f| {
            let n = f.stat()?.size.saturating_sub(f.position()) as usize;
            let mut buf = vec![0u8; n];
            let mut got = read_full(f, &mut buf)?;
            if got == n {
                // The file may have grown since the stat: read on until the end.
                loop {
                    buf.resize(got + READ_CHUNK, 0);
                    match read_full(f, &mut buf[got..])? {
                        0 => break,
                        k => got += k,
                    }
                }
            }
            buf.truncate(got);
            Ok(buf)
        })
    }

    /// Reads up to `n` bytes at the current position (short only at the end of the file).
    /// `n` is a limit, not an allocation: `read(2**44)` of a 3-byte file allocates 3 bytes.
    fn read_some(&self, py: Python<'_>, n: usize) -> PyResult<Vec<u8>> {
        self.with(py, |f| {
            let mut buf = vec![0u8; read_capacity(f, n, f.position())?];
            let mut got = read_full(f, &mut buf)?;
            // The file may have grown since its size was read: read on, up to `n`.
            while got == buf.len() && got < n {
                buf.resize(n.min(got + READ_CHUNK), 0);
                match read_full(f, &mut buf[got..])? {
                    0 => break,
                    k => got += k,
                }
            }
            buf.truncate(got);
            Ok(buf)
        })
    }
}

/// Reading a range of a file at one snapshot: a store reads inside a short transaction of its
/// own (so a concurrent writer cannot tear the result), a transaction reads in itself.
trait ReadSnapshot {
    fn read_snapshot(&self, path: &[u8], offset: u64, length: usize) -> txvfs::Result<Vec<u8>>;
}

impl ReadSnapshot for CoreStore {
    fn read_snapshot(&self, path: &[u8], offset: u64, length: usize) -> txvfs::Result<Vec<u8>> {
        self.begin()?.read_snapshot(path, offset, length)
    }
}

impl ReadSnapshot for CoreTransaction {
    fn read_snapshot(&self, path: &[u8], offset: u64, length: usize) -> txvfs::Result<Vec<u8>> {
        let f = self.open(path, &OpenOptions::new().read(true))?;
        let size = f.stat()?.size;
        let mut buf = vec![0u8; length.min(size.saturating_sub(offset) as usize)];
        f.seek(SeekFrom::Start(offset))?;
        let got = read_full(&f, &mut buf)?;
        buf.truncate(got);
        Ok(buf)
    }
}

/// Core reads are issued in pieces of this size: one core read of many megabytes is slower
/// than several of 1 MiB (measured with benches/python_bench.py).
const READ_CHUNK: usize = 1 << 20;

/// How many bytes to allocate for a read of up to `n` bytes at `offset`: `n` itself when it
/// is small, otherwise no more than the file holds from `offset` (never the caller's `n` of
/// terabytes, which would abort the process when the allocation fails).
fn read_capacity(f: &txvfs::File, n: usize, offset: u64) -> txvfs::Result<usize> {
    if n <= READ_CHUNK {
        return Ok(n);
    }
    let left = f.stat()?.size.saturating_sub(offset);
    Ok(n.min(usize::try_from(left).unwrap_or(usize::MAX)))
}

/// Fills `buf` from the file's position in `READ_CHUNK` pieces; returns the bytes read,
/// fewer than `buf.len()` only at the end of the file.
fn read_full(f: &txvfs::File, buf: &mut [u8]) -> txvfs::Result<usize> {
    let mut got = 0;
    while got < buf.len() {
        let end = buf.len().min(got + READ_CHUNK);
        match f.read(&mut buf[got..end])? {
            0 => break,
            k => got += k,
        }
    }
    Ok(got)
}

#[pymethods]
impl Handle {
    /// Reads up to `size` bytes (all to the end with -1) at the current position.
    #[pyo3(signature = (size = -1))]
    fn read<'py>(&self, py: Python<'py>, size: i64) -> PyResult<Bound<'py, PyBytes>> {
        let v = if size < 0 { self.read_to_end(py)? } else { self.read_some(py, size as usize)? };
        Ok(PyBytes::new(py, &v))
    }

    /// Reads everything from the current position to the end of the file.
    fn readall<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        let v = self.read_to_end(py)?;
        Ok(PyBytes::new(py, &v))
    }

    /// Reads into the writable buffer `buffer` (`bytearray`, `memoryview`, ...); returns the
    /// number of bytes read, 0 at the end of the file.
    fn readinto(&self, py: Python<'_>, buffer: &Bound<'_, PyAny>) -> PyResult<usize> {
        let v = self.read_some(py, buffer.len()?)?;
        let k = v.len();
        if k > 0 {
            buffer.set_item(PySlice::new(py, 0, k as isize, 1), PyBytes::new(py, &v))?;
        }
        Ok(k)
    }

    /// Reads up to `size` bytes at `offset` without moving the position (`pread`).
    fn pread<'py>(&self, py: Python<'py>, size: usize, offset: u64) -> PyResult<Bound<'py, PyBytes>> {
        let v = self.with(py, |f| {
            let mut buf = vec![0u8; read_capacity(f, size, offset)?];
            let k = f.read_at(&mut buf, offset)?;
            buf.truncate(k);
            Ok(buf)
        })?;
        Ok(PyBytes::new(py, &v))
    }

    /// Writes all of `data` at the current position (at the end in append mode); returns
    /// `len(data)`.
    fn write(&self, py: Python<'_>, data: &[u8]) -> PyResult<usize> {
        self.with(py, |f| f.write(data))
    }

    /// Writes all of `data` at `offset` without moving the position (`pwrite`).
    fn pwrite(&self, py: Python<'_>, data: &[u8], offset: u64) -> PyResult<usize> {
        self.with(py, |f| f.write_at(data, offset))
    }

    /// Moves the position like `os.lseek` (`whence` 0, 1 or 2); returns the new position.
    #[pyo3(signature = (offset, whence = 0))]
    fn seek(&self, py: Python<'_>, offset: i64, whence: i32) -> PyResult<u64> {
        let to = match whence {
            // `seek(0, SEEK_CUR)` only asks for the position (io's buffered objects ask it
            // when they close): it needs no store, so it answers after the transaction ended.
            1 if offset == 0 => return self.with(py, |f| Ok(f.position())),
            0 if offset >= 0 => SeekFrom::Start(offset as u64),
            0 => return Err(to_py(Error::new(ErrorKind::Invalid, "negative seek position"))),
            1 => SeekFrom::Current(offset),
            2 => SeekFrom::End(offset),
            _ => return Err(PyValueError::new_err(format!("invalid whence ({whence}, should be 0, 1 or 2)"))),
        };
        self.with(py, |f| f.seek(to))
    }

    /// The current position.
    fn tell(&self, py: Python<'_>) -> PyResult<u64> {
        self.with(py, |f| Ok(f.position()))
    }

    /// Sets the file's size (`ftruncate`).
    fn truncate(&self, py: Python<'_>, size: u64) -> PyResult<()> {
        self.with(py, |f| f.set_len(size))
    }

    /// Attributes of the open file (`fstat`).
    fn stat(&self, py: Python<'_>) -> PyResult<StatResult> {
        Ok(self.with(py, |f| f.stat())?.into())
    }

    /// `fsync`: makes the file's committed writes durable (flushes a write-back buffer).
    fn fsync(&self, py: Python<'_>) -> PyResult<()> {
        self.with(py, |f| f.sync())
    }

    /// True if the handle was opened for reading.
    fn readable(&self) -> bool {
        self.readable
    }

    /// True if the handle was opened for writing.
    fn writable(&self) -> bool {
        self.writable
    }

    /// True if the handle refers to a directory.
    fn isdir(&self, py: Python<'_>) -> PyResult<bool> {
        self.with(py, |f| Ok(f.kind() == FileType::Dir))
    }

    /// `flock(2)`: `operation` is `fcntl.LOCK_SH`, `LOCK_EX` or `LOCK_UN`, optionally
    /// or-ed with `LOCK_NB` (then a held lock raises BlockingIOError instead of waiting).
    fn flock(&self, py: Python<'_>, operation: i32) -> PyResult<()> {
        let (op, wait) = lock_op(operation)?;
        let op = match op {
            LockOp::Sh => FlockOp::Shared,
            LockOp::Ex => FlockOp::Exclusive,
            LockOp::Un => FlockOp::Unlock,
        };
        self.with(py, |f| f.flock(op, wait))
    }

    /// A byte-range lock like `fcntl.lockf`: `cmd` is `LOCK_SH`, `LOCK_EX` or `LOCK_UN`
    /// (with optional `LOCK_NB`) on `len` bytes from `start` (0: to the end and beyond).
    #[pyo3(signature = (cmd, len = 0, start = 0))]
    fn lockf(&self, py: Python<'_>, cmd: i32, len: u64, start: u64) -> PyResult<()> {
        let (op, wait) = lock_op(cmd)?;
        let kind = match op {
            LockOp::Sh => RangeLockKind::Read,
            LockOp::Ex => RangeLockKind::Write,
            LockOp::Un => RangeLockKind::Unlock,
        };
        self.with(py, |f| f.lock_range(kind, start, len, wait))
    }

    /// Closes the handle, releasing its locks; reports a failed flush. Idempotent.
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        let m = &self.file;
        detached(py, move || match m.lock().take() {
            Some(f) => f.close(),
            None => Ok(()),
        })
    }

    /// True once closed.
    #[getter]
    fn closed(&self) -> bool {
        self.file.lock().is_none()
    }
}

enum LockOp {
    Sh,
    Ex,
    Un,
}

fn lock_op(op: i32) -> PyResult<(LockOp, bool)> {
    const LOCK_SH: i32 = 1;
    const LOCK_EX: i32 = 2;
    const LOCK_NB: i32 = 4;
    const LOCK_UN: i32 = 8;
    let wait = op & LOCK_NB == 0;
    let o = match op & !LOCK_NB {
        LOCK_SH => LockOp::Sh,
        LOCK_EX => LockOp::Ex,
        LOCK_UN => LockOp::Un,
        _ => return Err(to_py(Error::new(ErrorKind::Invalid, format!("invalid lock operation {op}")))),
    };
    Ok((o, wait))
}

/// The errno-or-code and message of an error kind's description, for tests and tools.
#[pyfunction]
fn strerror(code: i32) -> String {
    ErrorKind::from_code(code).map(|k| k.description().to_string()).unwrap_or_else(|| format!("unknown error {code}"))
}

/// The native module `txvfs._txvfs`.
#[pymodule]
fn _txvfs(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add_class::<FileSystem>()?;
    m.add_class::<Store>()?;
    m.add_class::<Transaction>()?;
    m.add_class::<Handle>()?;
    m.add_class::<StatResult>()?;
    m.add_class::<StatVfsResult>()?;
    m.add("TxvfsError", py.get_type::<TxvfsError>())?;
    m.add("TransactionConflict", py.get_type::<TransactionConflict>())?;
    m.add("TransactionTooLarge", py.get_type::<TransactionTooLarge>())?;
    m.add_function(wrap_pyfunction!(strerror, m)?)?;
    m.add("CONFLICT", txvfs::error::code::CONFLICT)?;
    m.add("TOO_LARGE", txvfs::error::code::TOO_LARGE)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
