//! `StatResult` and `StatVfsResult`: attributes with the field names of `os.stat_result`
//! and `os.statvfs_result`.

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
