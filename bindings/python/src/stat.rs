//! `StatResult` and `StatVfsResult`: attributes with the field names of `os.stat_result`
//! and `os.statvfs_result`; `Quota`: a quota tree's limits and usage.

use pyo3::prelude::*;

/// File attributes with the field names of `os.stat_result`.
#[pyclass(frozen, module = "txvfs._txvfs")]
pub(crate) struct StatResult {
    /// File type and permission bits.
    #[pyo3(get)]
    pub(crate) st_mode: u32,
    /// Inode number.
    #[pyo3(get)]
    pub(crate) st_ino: u64,
    /// Device: always 0 (one store is one device).
    #[pyo3(get)]
    pub(crate) st_dev: u64,
    /// Number of hard links.
    #[pyo3(get)]
    pub(crate) st_nlink: u64,
    /// Owner.
    #[pyo3(get)]
    pub(crate) st_uid: u32,
    /// Group.
    #[pyo3(get)]
    pub(crate) st_gid: u32,
    /// Size in bytes.
    #[pyo3(get)]
    pub(crate) st_size: u64,
    /// 512-byte blocks.
    #[pyo3(get)]
    pub(crate) st_blocks: u64,
    /// Preferred I/O size.
    #[pyo3(get)]
    pub(crate) st_blksize: u32,
    /// Access time in ns since the epoch.
    #[pyo3(get)]
    pub(crate) st_atime_ns: i64,
    /// Modification time in ns since the epoch.
    #[pyo3(get)]
    pub(crate) st_mtime_ns: i64,
    /// Status change time in ns since the epoch.
    #[pyo3(get)]
    pub(crate) st_ctime_ns: i64,
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
pub(crate) struct StatVfsResult {
    /// Block size.
    #[pyo3(get)]
    pub(crate) f_bsize: u64,
    /// Fragment size (same as the block size).
    #[pyo3(get)]
    pub(crate) f_frsize: u64,
    /// Total blocks.
    #[pyo3(get)]
    pub(crate) f_blocks: u64,
    /// Free blocks.
    #[pyo3(get)]
    pub(crate) f_bfree: u64,
    /// Free blocks available to unprivileged users (same as `f_bfree`).
    #[pyo3(get)]
    pub(crate) f_bavail: u64,
    /// Inodes in use plus free inodes.
    #[pyo3(get)]
    pub(crate) f_files: u64,
    /// Free inodes.
    #[pyo3(get)]
    pub(crate) f_ffree: u64,
    /// Free inodes for unprivileged users (same as `f_ffree`).
    #[pyo3(get)]
    pub(crate) f_favail: u64,
    /// Longest name.
    #[pyo3(get)]
    pub(crate) f_namemax: u64,
}

/// A quota tree's limits and usage, as `FileSystem.quota` returns them.
#[pyclass(frozen, module = "txvfs._txvfs")]
pub(crate) struct Quota {
    /// The inode number of the tree's top directory (what identifies the tree).
    #[pyo3(get)]
    pub(crate) tree: u64,
    /// The top directory's path (`str`; `bytes` if it is not UTF-8).
    #[pyo3(get)]
    pub(crate) path: Py<PyAny>,
    /// Byte limit, or `None`.
    #[pyo3(get)]
    pub(crate) bytes_limit: Option<u64>,
    /// Inode limit, or `None`.
    #[pyo3(get)]
    pub(crate) inodes_limit: Option<u64>,
    /// Bytes of regular files in the tree, nested trees included.
    #[pyo3(get)]
    pub(crate) bytes_used: u64,
    /// Inodes in the tree, nested trees and the top directory included.
    #[pyo3(get)]
    pub(crate) inodes_used: u64,
    /// The enclosing quota tree's top directory, or `None`.
    #[pyo3(get)]
    pub(crate) parent: Option<u64>,
}

#[pymethods]
impl Quota {
    fn __repr__(&self, py: Python<'_>) -> String {
        format!(
            "Quota(path={}, bytes_limit={:?}, inodes_limit={:?}, bytes_used={}, inodes_used={})",
            self.path.bind(py).repr().map_or_else(|_| "?".into(), |r| r.to_string()),
            self.bytes_limit,
            self.inodes_limit,
            self.bytes_used,
            self.inodes_used
        )
    }
}
