//! Plain data types of the file-system API.

use crate::schema::{FileType, Inode};

/// Who is calling, for POSIX permission checks. A store opened without one acts as its owner.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Credential {
    /// User id (0 is root and passes every check).
    pub uid: u32,
    /// Primary group id.
    pub gid: u32,
    /// Supplementary groups.
    pub groups: Vec<u32>,
}

impl Credential {
    /// True if `gid` is the primary or a supplementary group.
    pub fn in_group(&self, gid: u32) -> bool {
        self.gid == gid || self.groups.contains(&gid)
    }
}

/// File attributes, as `stat` returns them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Stat {
    /// Inode number.
    pub ino: u64,
    /// File type.
    pub kind: FileType,
    /// `st_mode`: type bits and permission bits.
    pub mode: u32,
    /// Number of hard links (directories: 2 + subdirectories).
    pub nlink: u64,
    /// Owner.
    pub uid: u32,
    /// Group.
    pub gid: u32,
    /// Size in bytes.
    pub size: u64,
    /// 512-byte blocks of data (an estimate: sparse regions are not subtracted).
    pub blocks: u64,
    /// Preferred I/O size (the store's block size).
    pub blksize: u32,
    /// Access time, ns since the epoch.
    pub atime_ns: i64,
    /// Modification time, ns since the epoch.
    pub mtime_ns: i64,
    /// Status change time, ns since the epoch.
    pub ctime_ns: i64,
    /// Device number of a character or block device node (0 otherwise).
    pub rdev: u64,
}

impl Stat {
    pub(crate) fn from_inode(ino: u64, i: &Inode, block_size: u32) -> Stat {
        Stat {
            ino,
            kind: i.kind,
            mode: i.kind.mode_bits() | i.perm,
            nlink: i.nlink as u64,
            uid: i.uid,
            gid: i.gid,
            size: i.size,
            blocks: i.size.div_ceil(512),
            blksize: block_size,
            atime_ns: i.atime,
            mtime_ns: i.mtime,
            ctime_ns: i.ctime,
            rdev: i.rdev(),
        }
    }

    /// True for a directory.
    pub fn is_dir(&self) -> bool {
        self.kind == FileType::Dir
    }
    /// True for a regular file.
    pub fn is_file(&self) -> bool {
        self.kind == FileType::File
    }
    /// True for a symbolic link.
    pub fn is_symlink(&self) -> bool {
        self.kind == FileType::Symlink
    }
}

/// One directory entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DirEntry {
    /// The entry's name (bytes; not necessarily UTF-8; inline when short).
    pub name: super::Name,
    /// Inode number.
    pub ino: u64,
    /// File type.
    pub kind: FileType,
}

/// Store-wide usage, as `statfs` returns it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StatFs {
    /// Block size used for the counts below.
    pub block_size: u64,
    /// Total blocks.
    pub blocks: u64,
    /// Free blocks.
    pub blocks_free: u64,
    /// Number of inodes in use.
    pub files: u64,
    /// Inodes still available.
    pub files_free: u64,
    /// Longest name.
    pub name_max: u64,
}

/// How to open a file; a builder in the shape of `std::fs::OpenOptions`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OpenOptions {
    pub(crate) read: bool,
    pub(crate) write: bool,
    pub(crate) append: bool,
    pub(crate) truncate: bool,
    pub(crate) create: bool,
    pub(crate) create_new: bool,
    pub(crate) no_follow: bool,
    pub(crate) write_back: bool,
    pub(crate) mode: u32,
    pub(crate) block_size: Option<u32>,
}

impl Default for OpenOptions {
    fn default() -> Self {
        OpenOptions {
            read: false,
            write: false,
            append: false,
            truncate: false,
            create: false,
            create_new: false,
            no_follow: false,
            write_back: false,
            mode: 0o644,
            block_size: None,
        }
    }
}

impl OpenOptions {
    /// Nothing set (add at least `read` or `write`). New files get mode `0o644`.
    pub fn new() -> Self {
        Self::default()
    }
    /// Open for reading.
    pub fn read(mut self, v: bool) -> Self {
        self.read = v;
        self
    }
    /// Open for writing.
    pub fn write(mut self, v: bool) -> Self {
        self.write = v;
        self
    }
    /// Every write goes to the end of the file (implies write).
    pub fn append(mut self, v: bool) -> Self {
        self.append = v;
        self.write |= v;
        self
    }
    /// Truncate to zero length on open (needs write).
    pub fn truncate(mut self, v: bool) -> Self {
        self.truncate = v;
        self
    }
    /// Create the file if it does not exist (`O_CREAT`).
    pub fn create(mut self, v: bool) -> Self {
        self.create = v;
        self
    }
    /// Create the file, failing with EEXIST if it exists (`O_CREAT|O_EXCL`).
    pub fn create_new(mut self, v: bool) -> Self {
        self.create_new = v;
        self
    }
    /// Fail with ELOOP if the last component is a symbolic link (`O_NOFOLLOW`).
    pub fn no_follow(mut self, v: bool) -> Self {
        self.no_follow = v;
        self
    }
    /// Buffer sequential writes in the handle and commit them together at `sync`, `close`, a
    /// read through the handle, or every 4 MiB, instead of one commit per write. Other
    /// handles see the data once it is flushed; `close` or `sync` report flush errors. Only for
    /// handles opened on a store: a transaction's handles write into the transaction directly.
    pub fn write_back(mut self, v: bool) -> Self {
        self.write_back = v;
        self
    }
    /// The file's own block size in bytes (a power of two from 512 to 65536), for a file
    /// written at random in small pieces: a SQLite database with 4 KiB pages writes 4 KiB
    /// blocks instead of rewriting 64 KiB ones. Applied when the handle is opened for writing
    /// and the file has no blocks yet (a new file, or one small enough to be inline);
    /// otherwise the file keeps its block size. Default: the store's block size.
    pub fn block_size(mut self, bytes: u32) -> Self {
        self.block_size = Some(bytes);
        self
    }
    /// Permission bits for a newly created file (no umask is applied).
    pub fn mode(mut self, mode: u32) -> Self {
        self.mode = mode & 0o7777;
        self
    }
    /// Builds options from POSIX `open(2)` flags (`O_RDONLY`, `O_WRONLY`, `O_RDWR`, `O_CREAT`,
    /// `O_EXCL`, `O_TRUNC`, `O_APPEND`, `O_NOFOLLOW`) and a creation mode.
    pub fn from_flags(flags: i32, mode: u32) -> Self {
        let acc = flags & libc::O_ACCMODE;
        let excl = flags & libc::O_EXCL != 0 && flags & libc::O_CREAT != 0;
        OpenOptions::new()
            .read(acc == libc::O_RDONLY || acc == libc::O_RDWR)
            .write(acc == libc::O_WRONLY || acc == libc::O_RDWR)
            .append(flags & libc::O_APPEND != 0)
            .truncate(flags & libc::O_TRUNC != 0)
            .create(flags & libc::O_CREAT != 0 && !excl)
            .create_new(excl)
            .no_follow(flags & libc::O_NOFOLLOW != 0)
            .mode(mode)
    }
}

/// Flags of `rename`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RenameFlags {
    /// Fail with EEXIST instead of replacing the target (`RENAME_NOREPLACE`).
    pub no_replace: bool,
    /// Swap the two names atomically; both must exist (`RENAME_EXCHANGE`).
    pub exchange: bool,
}

/// A time to set with `utimens`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SetTime {
    /// Leave unchanged (`UTIME_OMIT`).
    Omit,
    /// The current time (`UTIME_NOW`).
    Now,
    /// This time, in ns since the epoch.
    At(i64),
}

/// Flags of `setxattr`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum XattrFlags {
    /// Create or replace.
    #[default]
    Any,
    /// Fail with EEXIST if the attribute exists (`XATTR_CREATE`).
    Create,
    /// Fail with ENODATA if it does not (`XATTR_REPLACE`).
    Replace,
}

/// Modes of `fallocate`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FallocateMode {
    /// Mode 0: the file grows to cover the range.
    Allocate,
    /// `FALLOC_FL_KEEP_SIZE`: the size does not change.
    KeepSize,
    /// `FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE`: the range reads as zeros afterwards.
    PunchHole,
}

/// Bytes of a file lent by [`super::File::lend`] instead of copied: a shared, immutable buffer
/// of the process's read cache (the stored block that holds them), kept alive by this value
/// even after the cache evicts it. The bytes never change while it is held.
#[derive(Clone)]
pub struct Lent {
    pub(crate) block: std::sync::Arc<[u8]>,
    pub(crate) start: usize,
    pub(crate) len: usize,
}

impl Lent {
    /// The lent bytes.
    pub fn as_slice(&self) -> &[u8] {
        &self.block[self.start..self.start + self.len]
    }
}

impl std::ops::Deref for Lent {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        self.as_slice()
    }
}

impl std::fmt::Debug for Lent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Lent({} bytes)", self.len)
    }
}

/// The limits of a quota tree (see [`FileSystem::set_quota`](super::FileSystem::set_quota)).
/// `None` counts without limiting; at least one limit must be set, and a limit is positive
/// and at most `i64::MAX`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct QuotaLimits {
    /// Most bytes of regular files (their sizes) the tree may hold.
    pub bytes: Option<u64>,
    /// Most inodes (files, directories, symlinks, special files; the top directory included)
    /// the tree may hold.
    pub inodes: Option<u64>,
}

/// A quota tree's limits and usage, as [`FileSystem::quota`](super::FileSystem::quota)
/// returns them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Quota {
    /// The tree's top directory (its inode number identifies the tree).
    pub tree: u64,
    /// The top directory's path, as this transaction sees it (empty if it cannot be found).
    pub path: Vec<u8>,
    /// The limits.
    pub limits: QuotaLimits,
    /// Bytes of regular files in the tree, nested trees included.
    pub bytes_used: u64,
    /// Inodes in the tree, nested trees and the top directory included.
    pub inodes_used: u64,
    /// The enclosing quota tree's top directory, if any.
    pub parent: Option<u64>,
}
