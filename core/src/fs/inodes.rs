//! Calls that name files the way a kernel does: existing files by inode number, new and
//! removed names by (directory inode, name). The FUSE adapter is built on these. They check
//! permissions like the path calls (a name needs search permission on its directory) and
//! take the same names as [`check_name`](super::check_name) allows.

use super::file::File;
use super::filesystem::FileSystem;
use super::ops::FileRef;
use super::types::{DirEntry, OpenOptions, RenameFlags, SetTime, Stat, XattrFlags};
use crate::error::{Error, ErrorKind, Result};
use crate::schema::FileType;

/// Attribute changes applied together by [`InodeFileSystem::set_attr`], like one
/// `notify_change` in a kernel. `None`/[`SetTime::Omit`] leave a field alone.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SetAttr {
    /// New permission bits (`0o7777`).
    pub mode: Option<u32>,
    /// New owner.
    pub uid: Option<u32>,
    /// New group.
    pub gid: Option<u32>,
    /// New size (a regular file; needs write permission, like `truncate(2)`).
    pub size: Option<u64>,
    /// New access time.
    pub atime: SetTime,
    /// New modification time.
    pub mtime: SetTime,
}

impl Default for SetAttr {
    fn default() -> SetAttr {
        SetAttr {
            mode: None,
            uid: None,
            gid: None,
            size: None,
            atime: SetTime::Omit,
            mtime: SetTime::Omit,
        }
    }
}

/// Inode-addressed file-system calls on a [`Store`](super::Store) (each call auto-commits)
/// or a [`Transaction`](super::Transaction). Inode numbers come from [`Stat::ino`] and
/// [`DirEntry::ino`]; the root directory is [`ROOT_INO`](crate::schema::ROOT_INO). A number
/// whose file was deleted gives ENOENT.
pub trait InodeFileSystem: FileSystem {
    /// The attributes of `name` in directory `dir` (ENOENT if absent).
    fn lookup_at(&self, dir: u64, name: impl AsRef<[u8]>) -> Result<Stat> {
        self.scope().read(|op| op.lookup_at(dir, name.as_ref()))
    }
    /// The attributes of inode `ino`.
    fn stat_ino(&self, ino: u64) -> Result<Stat> {
        self.scope().read(|op| op.stat_ino(ino))
    }
    /// Checks `access(2)`: may the caller read (4), write (2) or search/execute (1) `ino`?
    /// A mask of 0 checks only that it exists.
    fn access_ino(&self, ino: u64, mask: u32) -> Result<()> {
        self.scope().read(|op| op.access_check(ino, mask))
    }
    /// Creates directory `name` in `dir` with permission bits `mode`.
    fn mkdir_at(&self, dir: u64, name: impl AsRef<[u8]>, mode: u32) -> Result<Stat> {
        self.make_at(dir, name.as_ref(), FileType::Dir, mode, b"", 0)
    }
    /// Creates `name` in `dir`: an empty regular file, or a special file (FIFO, socket, or a
    /// device node numbered `rdev`). Directories and symlinks have their own calls.
    fn mknod_at(
        &self,
        dir: u64,
        name: impl AsRef<[u8]>,
        kind: FileType,
        mode: u32,
        rdev: u64,
    ) -> Result<Stat> {
        if matches!(kind, FileType::Dir | FileType::Symlink) {
            return Err(Error::new(
                ErrorKind::Invalid,
                "mknod_at makes files and special files only",
            ));
        }
        self.make_at(dir, name.as_ref(), kind, mode, b"", rdev)
    }
    /// Creates symlink `name` in `dir` pointing to `target`.
    fn symlink_at(
        &self,
        target: impl AsRef<[u8]>,
        dir: u64,
        name: impl AsRef<[u8]>,
    ) -> Result<Stat> {
        self.make_at(dir, name.as_ref(), FileType::Symlink, 0o777, target.as_ref(), 0)
    }
    #[doc(hidden)]
    fn make_at(
        &self,
        dir: u64,
        name: &[u8],
        kind: FileType,
        mode: u32,
        data: &[u8],
        rdev: u64,
    ) -> Result<Stat> {
        self.scope().run(|op| {
            let ino = op.mknod_at(dir, name, kind, mode, data, rdev)?;
            op.stat_ino(ino)
        })
    }
    /// Creates hard link `name` in `dir` to the non-directory `ino`; returns its attributes.
    fn link_at(&self, ino: u64, dir: u64, name: impl AsRef<[u8]>) -> Result<Stat> {
        self.scope().run(|op| {
            op.link_at(ino, dir, name.as_ref())?;
            op.stat_ino(ino)
        })
    }
    /// Removes the name `name` of a non-directory in `dir`.
    fn unlink_at(&self, dir: u64, name: impl AsRef<[u8]>) -> Result<()> {
        self.scope().run(|op| op.unlink_at(dir, name.as_ref()))
    }
    /// Removes the empty directory `name` of `dir`.
    fn rmdir_at(&self, dir: u64, name: impl AsRef<[u8]>) -> Result<()> {
        self.scope().run(|op| op.rmdir_at(dir, name.as_ref()))
    }
    /// Renames `name` of `dir` to `new_name` of `new_dir`, with [`RenameFlags`]. The store
    /// keeps no parent links, so it cannot refuse moving a directory into its own subtree
    /// here: the caller must (a kernel does, before asking).
    fn rename_at(
        &self,
        dir: u64,
        name: impl AsRef<[u8]>,
        new_dir: u64,
        new_name: impl AsRef<[u8]>,
        flags: RenameFlags,
    ) -> Result<()> {
        self.scope().run(|op| op.rename_at(dir, name.as_ref(), new_dir, new_name.as_ref(), flags))
    }
    /// Reads the target of symlink `ino`.
    fn readlink_ino(&self, ino: u64) -> Result<Vec<u8>> {
        self.scope().read(|op| op.readlink_ino(ino))
    }
    /// Lists directory `ino` like [`FileSystem::readdir`] (a page after the name `after`).
    fn readdir_ino(&self, ino: u64, after: Option<&[u8]>, limit: usize) -> Result<Vec<DirEntry>> {
        self.scope().read(|op| op.readdir_ino(ino, after, limit))
    }
    /// Applies `attr` to `ino` in one step (all or nothing) and returns the new attributes.
    fn set_attr(&self, ino: u64, attr: &SetAttr) -> Result<Stat> {
        self.scope().run(|op| {
            if attr.uid.is_some() || attr.gid.is_some() {
                op.chown_ino(ino, attr.uid, attr.gid)?;
            }
            if let Some(mode) = attr.mode {
                op.chmod_ino(ino, mode)?;
            }
            if let Some(size) = attr.size {
                op.truncate_checked(ino, size)?;
            }
            if attr.atime != SetTime::Omit || attr.mtime != SetTime::Omit {
                op.utimens_ino(ino, attr.atime, attr.mtime)?;
            }
            op.stat_ino(ino)
        })
    }
    /// Opens the existing file `ino` (not a symlink or special file), checking the caller's
    /// permission for `options`; `create` options are ignored.
    fn open_ino(&self, ino: u64, options: &OpenOptions) -> Result<File> {
        File::open_with(self.scope(), options, |op| op.open_ino(ino, options))
    }
    /// Opens `name` in `dir`, creating it if `options` say so; the new file's attributes
    /// come from [`File::stat`].
    fn open_at(&self, dir: u64, name: impl AsRef<[u8]>, options: &OpenOptions) -> Result<File> {
        let mut path = Vec::new();
        let mut file = File::open_with(self.scope(), options, |op| {
            let opened = op.open_at(dir, name.as_ref(), options)?;
            // The change feed records the handle's writes at this path.
            path = op.path_at(dir, name.as_ref())?;
            Ok(opened)
        })?;
        file.set_path(path);
        Ok(file)
    }
    /// Reads extended attribute `name` of `ino` (ENODATA if absent).
    fn getxattr_ino(&self, ino: u64, name: impl AsRef<[u8]>) -> Result<Vec<u8>> {
        self.scope().read(|op| op.getxattr(FileRef::Ino(ino), name.as_ref()))
    }
    /// Sets extended attribute `name` of `ino`.
    fn setxattr_ino(
        &self,
        ino: u64,
        name: impl AsRef<[u8]>,
        value: &[u8],
        flags: XattrFlags,
    ) -> Result<()> {
        self.scope().run(|op| op.setxattr(FileRef::Ino(ino), name.as_ref(), value, flags))
    }
    /// Lists the extended attribute names of `ino`.
    fn listxattr_ino(&self, ino: u64) -> Result<Vec<Vec<u8>>> {
        self.scope().read(|op| op.listxattr(FileRef::Ino(ino)))
    }
    /// Removes extended attribute `name` of `ino` (ENODATA if absent).
    fn removexattr_ino(&self, ino: u64, name: impl AsRef<[u8]>) -> Result<()> {
        self.scope().run(|op| op.removexattr(FileRef::Ino(ino), name.as_ref()))
    }
    /// The innermost quota tree inode `ino` is in, if any (what a mount's `statfs` shows).
    fn quota_ino(&self, ino: u64) -> Result<Option<super::types::Quota>> {
        self.scope().read(|op| op.quota_ino(ino))
    }
}

impl InodeFileSystem for super::Store {}
impl InodeFileSystem for super::Transaction {}
