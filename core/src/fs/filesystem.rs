//! The [`FileSystem`] trait: the path-based file-system calls of a store and a transaction.

use super::file::File;
use super::ops::FileRef;
use super::path;
use super::scope::CallScope;
use super::store::Store;
use super::transaction::Transaction;
use super::types::{
    DirEntry, OpenOptions, Quota, QuotaLimits, RenameFlags, SetTime, Stat, StatFs, XattrFlags,
};
use crate::error::{Error, ErrorKind, Result};

mod sealed {
    pub trait Sealed {}
    impl Sealed for super::Store {}
    impl Sealed for super::Transaction {}
}

fn bytes(p: &(impl AsRef<[u8]> + ?Sized)) -> &[u8] {
    p.as_ref()
}

/// The file-system calls, on a [`Store`] (each call auto-commits) and on a [`Transaction`]
/// (calls belong to it). Paths are absolute byte strings (`&str`, `&[u8]`, `String`, ...),
/// `/`-separated, without NUL, names up to 255 bytes, paths up to 4096; `..` never leaves the
/// root. Errors carry a POSIX errno (see [`Error::code`]).
pub trait FileSystem: sealed::Sealed {
    #[doc(hidden)]
    fn scope(&self) -> CallScope;

    /// Opens a file; see [`OpenOptions`].
    fn open(&self, path: impl AsRef<[u8]>, options: &OpenOptions) -> Result<File> {
        File::open(self.scope(), bytes(&path), options)
    }
    /// Creates (or truncates) a file for writing, like `std::fs::File::create`.
    fn create(&self, path: impl AsRef<[u8]>) -> Result<File> {
        self.open(path, &OpenOptions::new().write(true).create(true).truncate(true))
    }
    /// Reads a whole file.
    fn read_file(&self, path: impl AsRef<[u8]>) -> Result<Vec<u8>> {
        let p = bytes(&path);
        self.scope().read(|op| {
            let (ino, _) = op.open(p, &OpenOptions::new().read(true))?;
            op.read_ino(ino, 0, usize::MAX)
        })
    }
    /// Creates or replaces a file's contents in one atomic step.
    fn write_file(&self, path: impl AsRef<[u8]>, data: &[u8]) -> Result<()> {
        let p = bytes(&path);
        self.scope().run(|op| {
            let (ino, _) =
                op.open(p, &OpenOptions::new().write(true).create(true).truncate(true))?;
            op.write_ino(ino, 0, data, false)?;
            op.note(crate::schema::ChangeKind::Written, ino, crate::FileType::File, p);
            Ok(())
        })
    }
    /// `stat`: attributes, following a final symlink.
    fn stat(&self, path: impl AsRef<[u8]>) -> Result<Stat> {
        self.scope().read(|op| op.stat(bytes(&path), true))
    }
    /// `lstat`: attributes of a symlink itself.
    fn lstat(&self, path: impl AsRef<[u8]>) -> Result<Stat> {
        self.scope().read(|op| op.stat(bytes(&path), false))
    }
    /// True if `path` exists (following symlinks); errors other than ENOENT/ENOTDIR surface.
    fn exists(&self, path: impl AsRef<[u8]>) -> Result<bool> {
        match self.stat(path) {
            Ok(_) => Ok(true),
            Err(e) if matches!(e.kind(), ErrorKind::NotFound | ErrorKind::NotDir) => Ok(false),
            Err(e) => Err(e),
        }
    }
    /// Creates a directory with permission bits `mode`.
    fn mkdir(&self, path: impl AsRef<[u8]>, mode: u32) -> Result<()> {
        self.scope().run(|op| op.mkdir(bytes(&path), mode))
    }
    /// Creates a directory and any missing parents; existing directories are fine.
    fn mkdir_all(&self, path: impl AsRef<[u8]>, mode: u32) -> Result<()> {
        let p = bytes(&path);
        self.scope().run(|op| {
            let (comps, _) = path::split(p)?;
            let mut cur = Vec::new();
            let count = comps.len();
            for (i, c) in comps.into_iter().enumerate() {
                cur.push(b'/');
                cur.extend_from_slice(c);
                match op.mkdir(&cur, mode) {
                    Err(e) if e.kind() == ErrorKind::Exists => {
                        if !op.stat(&cur, true)?.is_dir() {
                            // Like `mkdir -p`: EEXIST for the last name, ENOTDIR for a parent.
                            let kind =
                                if i + 1 == count { ErrorKind::Exists } else { ErrorKind::NotDir };
                            return Err(Error::at(kind, p));
                        }
                    }
                    r => r?,
                }
            }
            Ok(())
        })
    }
    /// Creates a special file at `path`: a FIFO, a socket's name, or a device node numbered
    /// `rdev` ([`FileType::Fifo`](crate::FileType), `Socket`, `CharDevice`, `BlockDevice`).
    /// Only its name and attributes are stored: opening it through the store is refused.
    fn mknod(
        &self,
        path: impl AsRef<[u8]>,
        kind: crate::FileType,
        mode: u32,
        rdev: u64,
    ) -> Result<()> {
        self.scope().run(|op| op.mknod(bytes(&path), kind, mode, rdev))
    }
    /// Removes an empty directory.
    fn rmdir(&self, path: impl AsRef<[u8]>) -> Result<()> {
        self.scope().run(|op| op.rmdir(bytes(&path)))
    }
    /// Removes a file or symlink (an open file stays usable until its last handle closes).
    fn unlink(&self, path: impl AsRef<[u8]>) -> Result<()> {
        self.scope().run(|op| op.unlink(bytes(&path)))
    }
    /// Renames atomically, replacing an existing target (a file by a file, an empty directory
    /// by a directory).
    fn rename(&self, from: impl AsRef<[u8]>, to: impl AsRef<[u8]>) -> Result<()> {
        self.rename_with(from, to, RenameFlags::default())
    }
    /// Renames with flags (no-replace, exchange).
    fn rename_with(
        &self,
        from: impl AsRef<[u8]>,
        to: impl AsRef<[u8]>,
        flags: RenameFlags,
    ) -> Result<()> {
        self.scope().run(|op| op.rename(bytes(&from), bytes(&to), flags))
    }
    /// Creates a hard link `to` for the existing non-directory `from`.
    fn link(&self, from: impl AsRef<[u8]>, to: impl AsRef<[u8]>) -> Result<()> {
        self.scope().run(|op| op.link(bytes(&from), bytes(&to)))
    }
    /// Creates a symlink at `link` whose target is `target` (stored as given).
    fn symlink(&self, target: impl AsRef<[u8]>, link: impl AsRef<[u8]>) -> Result<()> {
        self.scope().run(|op| op.symlink(bytes(&target), bytes(&link)))
    }
    /// Reads a symlink's target.
    fn readlink(&self, path: impl AsRef<[u8]>) -> Result<Vec<u8>> {
        self.scope().read(|op| op.readlink(bytes(&path)))
    }
    /// Lists a directory page: up to `limit` entries (0 for all) whose names sort after
    /// `after` (the cursor: the last name of the previous page), in byte order of names.
    fn readdir(
        &self,
        path: impl AsRef<[u8]>,
        after: Option<&[u8]>,
        limit: usize,
    ) -> Result<Vec<DirEntry>> {
        self.scope().read(|op| op.readdir(bytes(&path), after, limit))
    }
    /// Sets permission bits.
    fn chmod(&self, path: impl AsRef<[u8]>, mode: u32) -> Result<()> {
        self.scope().run(|op| op.chmod(bytes(&path), mode))
    }
    /// Changes owner and/or group (`None` keeps it), following symlinks.
    fn chown(&self, path: impl AsRef<[u8]>, uid: Option<u32>, gid: Option<u32>) -> Result<()> {
        self.scope().run(|op| op.chown(bytes(&path), uid, gid, true))
    }
    /// Sets access and modification times, following symlinks.
    fn utimens(&self, path: impl AsRef<[u8]>, atime: SetTime, mtime: SetTime) -> Result<()> {
        self.scope().run(|op| op.utimens(bytes(&path), atime, mtime, true))
    }
    /// Sets the size of a file.
    fn truncate(&self, path: impl AsRef<[u8]>, size: u64) -> Result<()> {
        self.scope().run(|op| {
            let (ino, _) = op.open(bytes(&path), &OpenOptions::new().write(true))?;
            op.truncate_ino(ino, size)?;
            op.note(crate::schema::ChangeKind::Written, ino, crate::FileType::File, bytes(&path));
            Ok(())
        })
    }
    /// Reads an extended attribute (ENODATA if absent).
    fn getxattr(&self, path: impl AsRef<[u8]>, name: impl AsRef<[u8]>) -> Result<Vec<u8>> {
        self.scope().read(|op| op.getxattr(FileRef::Path(bytes(&path)), bytes(&name)))
    }
    /// Sets an extended attribute; see [`XattrFlags`].
    fn setxattr(
        &self,
        path: impl AsRef<[u8]>,
        name: impl AsRef<[u8]>,
        value: &[u8],
        flags: XattrFlags,
    ) -> Result<()> {
        self.scope().run(|op| op.setxattr(FileRef::Path(bytes(&path)), bytes(&name), value, flags))
    }
    /// Lists extended attribute names.
    fn listxattr(&self, path: impl AsRef<[u8]>) -> Result<Vec<Vec<u8>>> {
        self.scope().read(|op| op.listxattr(FileRef::Path(bytes(&path))))
    }
    /// Removes an extended attribute (ENODATA if absent).
    fn removexattr(&self, path: impl AsRef<[u8]>, name: impl AsRef<[u8]>) -> Result<()> {
        self.scope().run(|op| op.removexattr(FileRef::Path(bytes(&path)), bytes(&name)))
    }
    /// Store-wide usage in O(1).
    fn statfs(&self) -> Result<StatFs> {
        self.scope().read(|op| op.statfs())
    }
    /// Sets (or changes) the quota of the directory tree at `path` (followed if a symbolic
    /// link): at most `limits.bytes` bytes of regular files and `limits.inodes` inodes. A
    /// commit that would take the tree, or any tree enclosing it, past a limit fails with
    /// EDQUOT ([`ErrorKind::QuotaExceeded`]) naming the tree, and changes nothing. A file
    /// counts toward every enclosing tree; a rename or hard link between different trees
    /// fails with EXDEV (`mv` then copies and deletes). A new quota counts what the tree
    /// already holds (at most [`MAX_QUOTA_WALK`](crate::MAX_QUOTA_WALK) inodes, all in one
    /// transaction); EDQUOT if that is over a limit. Only root (or a store opened without a
    /// credential) sets quotas.
    ///
    /// ```
    /// use txvfs::{FileSystem, QuotaLimits, Store};
    /// let store = Store::open("memory:")?;
    /// store.mkdir("/jobs", 0o755)?;
    /// store.set_quota("/jobs", QuotaLimits { bytes: Some(10), inodes: None })?;
    /// store.write_file("/jobs/a", b"0123456789")?;
    /// let e = store.write_file("/jobs/b", b"!").unwrap_err();
    /// assert_eq!(e.code(), libc::EDQUOT);
    /// assert!(!store.exists("/jobs/b")?);
    /// # Ok::<(), txvfs::Error>(())
    /// ```
    fn set_quota(&self, path: impl AsRef<[u8]>, limits: QuotaLimits) -> Result<()> {
        self.scope().run(|op| op.set_quota(bytes(&path), limits))
    }
    /// The limits and usage of the innermost quota tree that `path` is in (the tree whose top
    /// is `path` itself, for a top directory), or `None` outside every quota tree.
    fn quota(&self, path: impl AsRef<[u8]>) -> Result<Option<Quota>> {
        self.scope().read(|op| op.quota(bytes(&path)))
    }
    /// Removes the quota of the tree whose top directory is `path` (ENOENT if it has none):
    /// its files then count toward the enclosing tree only.
    fn remove_quota(&self, path: impl AsRef<[u8]>) -> Result<()> {
        self.scope().run(|op| op.remove_quota(bytes(&path)))
    }
}

impl FileSystem for Store {
    fn scope(&self) -> CallScope {
        CallScope::AutoCommit(self.clone())
    }
}

impl FileSystem for Transaction {
    fn scope(&self) -> CallScope {
        CallScope::InTransaction(self.shared.clone())
    }
}
