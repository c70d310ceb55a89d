//! Conversions between the core's types and FUSE's: errors to errno, stats to attributes,
//! times, open flags, lock ranges, and the replies built from them.

use fuser::{Errno, FileAttr, INodeNo, OpenAccMode, OpenFlags, ReplyEmpty, ReplyXattr, TimeOrNow};
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use txvfs::{Error, ErrorKind, FileType, OpenOptions, SetTime, Stat};

/// The errno the kernel gets for a core error.
pub(crate) fn errno(e: &Error) -> Errno {
    let code = match e.kind() {
        // Auto-commit calls retry conflicts themselves; one that still fails is transient.
        ErrorKind::Conflict | ErrorKind::TooOld => libc::EAGAIN,
        ErrorKind::TooLarge => libc::EFBIG,
        ErrorKind::Corrupt | ErrorKind::Backend => libc::EIO,
        kind => kind.code(),
    };
    Errno::from_i32(code)
}

/// Replies ok, or with the error's errno.
pub(crate) fn reply_empty(reply: ReplyEmpty, r: txvfs::Result<()>) {
    match r {
        Ok(()) => reply.ok(),
        Err(e) => reply.error(errno(&e)),
    }
}

/// A time in ns since the epoch (negative before 1970) as a `SystemTime`.
pub(crate) fn time(ns: i64) -> SystemTime {
    if ns >= 0 {
        UNIX_EPOCH + Duration::from_nanos(ns as u64)
    } else {
        UNIX_EPOCH - Duration::from_nanos(ns.unsigned_abs())
    }
}

/// The core's time setting for a `setattr` time (none, now, or a time, before 1970 too).
pub(crate) fn set_time(t: Option<TimeOrNow>) -> SetTime {
    match t {
        None => SetTime::Omit,
        Some(TimeOrNow::Now) => SetTime::Now,
        Some(TimeOrNow::SpecificTime(t)) => SetTime::At(match t.duration_since(UNIX_EPOCH) {
            Ok(d) => d.as_nanos() as i64,
            Err(e) => {
                // fuser 0.18 turns the kernel's (seconds, nanoseconds) of a time before 1970
                // into the epoch minus (|seconds| + nanoseconds), where the time is the epoch
                // minus |seconds| plus nanoseconds (-1.5 s comes as -2 s + 0.5 s, and fuser
                // makes it -2.5 s): undo that (tests/mount.rs checks it).
                let d = e.duration();
                -(d.as_secs() as i64) * 1_000_000_000 + i64::from(d.subsec_nanos())
            }
        }),
    }
}

/// The FUSE file type of a core file type.
pub(crate) fn kind(k: FileType) -> fuser::FileType {
    match k {
        FileType::File => fuser::FileType::RegularFile,
        FileType::Dir => fuser::FileType::Directory,
        FileType::Symlink => fuser::FileType::Symlink,
        FileType::Fifo => fuser::FileType::NamedPipe,
        FileType::CharDevice => fuser::FileType::CharDevice,
        FileType::BlockDevice => fuser::FileType::BlockDevice,
        FileType::Socket => fuser::FileType::Socket,
    }
}

/// The FUSE attributes of a core stat.
pub(crate) fn attr(st: &Stat) -> FileAttr {
    FileAttr {
        ino: INodeNo(st.ino),
        size: st.size,
        blocks: st.blocks,
        atime: time(st.atime_ns),
        mtime: time(st.mtime_ns),
        ctime: time(st.ctime_ns),
        crtime: time(st.ctime_ns),
        kind: kind(st.kind),
        perm: (st.mode & 0o7777) as u16,
        nlink: st.nlink.min(u32::MAX as u64) as u32,
        uid: st.uid,
        gid: st.gid,
        rdev: st.rdev as u32,
        blksize: st.blksize,
        flags: 0,
    }
}

/// The core's open options for the kernel's open flags (access mode and append).
pub(crate) fn open_options(flags: OpenFlags) -> OpenOptions {
    let (read, write) = match flags.acc_mode() {
        OpenAccMode::O_RDONLY => (true, false),
        OpenAccMode::O_WRONLY => (false, true),
        OpenAccMode::O_RDWR => (true, true),
    };
    OpenOptions::new().read(read).write(write).append(flags.0 & libc::O_APPEND != 0)
}

/// A name's bytes.
pub(crate) fn name(n: &OsStr) -> &[u8] {
    n.as_bytes()
}

/// The largest file offset in a lock request: "to the end of the file and beyond".
pub(crate) const OFFSET_MAX: u64 = i64::MAX as u64;

/// A lock's length from the kernel's inclusive end (0: to the end of the file).
pub(crate) fn range_len(start: u64, end: u64) -> u64 {
    if end >= OFFSET_MAX {
        0
    } else {
        end - start + 1
    }
}

/// Answers an xattr query: the size when asked with 0, the bytes if they fit, else ERANGE.
pub(crate) fn sized(reply: ReplyXattr, size: u32, data: &[u8]) {
    if size == 0 {
        reply.size(data.len() as u32)
    } else if data.len() <= size as usize {
        reply.data(data)
    } else {
        reply.error(Errno::from_i32(libc::ERANGE))
    }
}

/// What `statfs` reports for `ino`: the store's usage, or, inside a quota tree, the tree's
/// limits and usage in each limited dimension (as XFS does for project quotas), so that `df`
/// on a directory of the tree shows the tree.
pub(crate) fn statfs_at(store: &txvfs::Store, ino: u64) -> txvfs::Result<txvfs::StatFs> {
    use txvfs::{FileSystem, InodeFileSystem};
    let mut s = store.statfs()?;
    let Some(q) = store.quota_ino(ino)? else { return Ok(s) };
    if let Some(limit) = q.limits.bytes {
        s.blocks = limit.div_ceil(s.block_size);
        s.blocks_free = limit.saturating_sub(q.bytes_used) / s.block_size;
    }
    if let Some(limit) = q.limits.inodes {
        s.files = q.inodes_used;
        s.files_free = limit.saturating_sub(q.inodes_used);
    }
    Ok(s)
}
