//! Plain C structs and constants: attributes, directory entries, usage, locks, flags.

use std::ffi::{c_char, c_int};
use txvfs::{DirEntry, FileType, RangeLock, RangeLockKind, Stat, StatFs};

/// Longest name of one directory entry, in bytes (without the NUL).
pub const TXVFS_NAME_MAX: usize = 255;
/// Longest path, in bytes (without the NUL).
pub const TXVFS_PATH_MAX: usize = 4096;

/// `txvfs_open` flag, beyond the POSIX `O_...` flags: buffer sequential writes in the
/// descriptor and commit them at `txvfs_fsync`, `txvfs_close`, a read, or every 4 MiB, instead
/// of one commit per write. Only for descriptors opened outside a transaction.
pub const TXVFS_O_WRITE_BACK: c_int = 0x1000_0000;

/// `txvfs_rename` flag: fail with EEXIST instead of replacing the target (`RENAME_NOREPLACE`).
pub const TXVFS_RENAME_NOREPLACE: u32 = 1;
/// `txvfs_rename` flag: swap the two names atomically; both must exist (`RENAME_EXCHANGE`).
pub const TXVFS_RENAME_EXCHANGE: u32 = 2;

/// `txvfs_setxattr` flag: fail with EEXIST if the attribute exists (`XATTR_CREATE`).
pub const TXVFS_XATTR_CREATE: c_int = 1;
/// `txvfs_setxattr` flag: fail with ENODATA if the attribute does not exist (`XATTR_REPLACE`).
pub const TXVFS_XATTR_REPLACE: c_int = 2;

/// `txvfs_fallocate` mode bit: do not change the size (`FALLOC_FL_KEEP_SIZE`).
pub const TXVFS_FALLOC_KEEP_SIZE: c_int = 1;
/// `txvfs_fallocate` mode bit: make the range read as zeros (`FALLOC_FL_PUNCH_HOLE`); must be
/// combined with `TXVFS_FALLOC_KEEP_SIZE`.
pub const TXVFS_FALLOC_PUNCH_HOLE: c_int = 2;

/// `txvfs_flock` operation: shared lock (`LOCK_SH`).
pub const TXVFS_LOCK_SH: c_int = 1;
/// `txvfs_flock` operation: exclusive lock (`LOCK_EX`).
pub const TXVFS_LOCK_EX: c_int = 2;
/// `txvfs_flock` flag: fail with EAGAIN instead of waiting (`LOCK_NB`).
pub const TXVFS_LOCK_NB: c_int = 4;
/// `txvfs_flock` operation: release (`LOCK_UN`).
pub const TXVFS_LOCK_UN: c_int = 8;

/// Byte-range lock type: read (shared) lock (`F_RDLCK`).
pub const TXVFS_F_RDLCK: c_int = 0;
/// Byte-range lock type: write (exclusive) lock (`F_WRLCK`).
pub const TXVFS_F_WRLCK: c_int = 1;
/// Byte-range lock type: release, or "no conflicting lock" in `txvfs_getlk` (`F_UNLCK`).
pub const TXVFS_F_UNLCK: c_int = 2;

/// `txvfs_lseek` whence: from the start (`SEEK_SET`).
pub const TXVFS_SEEK_SET: c_int = 0;
/// `txvfs_lseek` whence: from the current position (`SEEK_CUR`).
pub const TXVFS_SEEK_CUR: c_int = 1;
/// `txvfs_lseek` whence: from the end of the file (`SEEK_END`).
pub const TXVFS_SEEK_END: c_int = 2;

/// Directory entry type of a regular file (`DT_REG`).
pub const TXVFS_DT_REG: u8 = 8;
/// Directory entry type of a directory (`DT_DIR`).
pub const TXVFS_DT_DIR: u8 = 4;
/// Directory entry type of a symbolic link (`DT_LNK`).
pub const TXVFS_DT_LNK: u8 = 10;
/// Directory entry type of a named pipe (`DT_FIFO`).
pub const TXVFS_DT_FIFO: u8 = 1;
/// Directory entry type of a character device (`DT_CHR`).
pub const TXVFS_DT_CHR: u8 = 2;
/// Directory entry type of a block device (`DT_BLK`).
pub const TXVFS_DT_BLK: u8 = 6;
/// Directory entry type of a Unix domain socket (`DT_SOCK`).
pub const TXVFS_DT_SOCK: u8 = 12;

/// `txvfs_chown`: keep the owner or group unchanged (`(uid_t)-1`).
pub const TXVFS_ID_UNCHANGED: u32 = 0xFFFF_FFFF;
/// `txvfs_utimens`: leave this time unchanged (`UTIME_OMIT`).
pub const TXVFS_UTIME_OMIT: i64 = -9_223_372_036_854_775_807;
/// `txvfs_utimens`: set this time to now (`UTIME_NOW`).
pub const TXVFS_UTIME_NOW: i64 = -9_223_372_036_854_775_806;

/// File attributes, as `txvfs_stat`, `txvfs_lstat` and `txvfs_fstat` return them.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct txvfs_attr {
    /// Inode number.
    pub ino: u64,
    /// `st_mode`: type bits (`S_IFREG`, `S_IFDIR`, `S_IFLNK`) and permission bits.
    pub mode: u32,
    /// Owner.
    pub uid: u32,
    /// Group.
    pub gid: u32,
    /// Preferred I/O size (the store's block size).
    pub blksize: u32,
    /// Number of hard links (directories: 2 + subdirectories).
    pub nlink: u64,
    /// Size in bytes.
    pub size: u64,
    /// 512-byte blocks of data (an estimate).
    pub blocks: u64,
    /// Access time, ns since the epoch.
    pub atime_ns: i64,
    /// Modification time, ns since the epoch.
    pub mtime_ns: i64,
    /// Status change time, ns since the epoch.
    pub ctime_ns: i64,
}

impl From<Stat> for txvfs_attr {
    fn from(s: Stat) -> Self {
        txvfs_attr {
            ino: s.ino,
            mode: s.mode,
            uid: s.uid,
            gid: s.gid,
            blksize: s.blksize,
            nlink: s.nlink,
            size: s.size,
            blocks: s.blocks,
            atime_ns: s.atime_ns,
            mtime_ns: s.mtime_ns,
            ctime_ns: s.ctime_ns,
        }
    }
}

/// Store-wide usage, as `txvfs_statfs` returns it.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct txvfs_usage {
    /// Block size used for the counts below.
    pub block_size: u64,
    /// Total blocks.
    pub blocks: u64,
    /// Free blocks.
    pub blocks_free: u64,
    /// Inodes in use.
    pub files: u64,
    /// Inodes still available.
    pub files_free: u64,
    /// Longest name.
    pub name_max: u64,
}

impl From<StatFs> for txvfs_usage {
    fn from(s: StatFs) -> Self {
        txvfs_usage {
            block_size: s.block_size,
            blocks: s.blocks,
            blocks_free: s.blocks_free,
            files: s.files,
            files_free: s.files_free,
            name_max: s.name_max,
        }
    }
}

/// One directory entry, as `txvfs_readdir` fills it in a caller's array.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct txvfs_dirent {
    /// Inode number.
    pub ino: u64,
    /// `TXVFS_DT_REG`, `TXVFS_DT_DIR`, `TXVFS_DT_LNK`, or for a special file (made by
    /// another binding or the FUSE mount) `TXVFS_DT_FIFO`, `_CHR`, `_BLK` or `_SOCK`.
    pub r#type: u8,
    /// Length of `name` in bytes (without the NUL).
    pub name_len: u16,
    /// The name, NUL-terminated (names never contain NUL; they need not be UTF-8).
    pub name: [c_char; 256],
}

impl From<&DirEntry> for txvfs_dirent {
    fn from(e: &DirEntry) -> Self {
        let mut name = [0 as c_char; 256];
        let n = e.name.len().min(TXVFS_NAME_MAX);
        for (d, s) in name.iter_mut().zip(&e.name[..n]) {
            *d = *s as c_char;
        }
        txvfs_dirent { ino: e.ino, r#type: dt(e.kind), name_len: n as u16, name }
    }
}

pub(crate) fn dt(kind: FileType) -> u8 {
    match kind {
        FileType::File => TXVFS_DT_REG,
        FileType::Dir => TXVFS_DT_DIR,
        FileType::Symlink => TXVFS_DT_LNK,
        FileType::Fifo => TXVFS_DT_FIFO,
        FileType::CharDevice => TXVFS_DT_CHR,
        FileType::BlockDevice => TXVFS_DT_BLK,
        FileType::Socket => TXVFS_DT_SOCK,
    }
}

/// A byte-range lock, as `txvfs_getlk` reports it.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct txvfs_lock {
    /// `TXVFS_F_RDLCK` or `TXVFS_F_WRLCK` for a conflicting lock, `TXVFS_F_UNLCK` for none.
    pub r#type: c_int,
    /// First byte of the conflicting lock.
    pub start: u64,
    /// Its length; 0 means to the end of the file and beyond.
    pub len: u64,
    /// A process-unique identifier of the descriptor that holds it.
    pub owner: u64,
}

impl From<Option<RangeLock>> for txvfs_lock {
    fn from(l: Option<RangeLock>) -> Self {
        match l {
            None => txvfs_lock { r#type: TXVFS_F_UNLCK, start: 0, len: 0, owner: 0 },
            Some(l) => txvfs_lock {
                r#type: match l.kind {
                    RangeLockKind::Read => TXVFS_F_RDLCK,
                    RangeLockKind::Write => TXVFS_F_WRLCK,
                    RangeLockKind::Unlock => TXVFS_F_UNLCK,
                },
                start: l.start,
                len: l.len,
                owner: l.owner,
            },
        }
    }
}
