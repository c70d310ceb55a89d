//! The FUSE requests (`fuser::Filesystem`): each one core call on the store's inode-addressed
//! API, made with the calling process's credential.

use crate::adapter::{Adapter, Handle, Listing, LIST_PAGE};
use crate::convert::*;
use fuser::{
    AccessFlags, Errno, FileHandle, FopenFlags, Generation, INodeNo, InitFlags, KernelConfig,
    LockOwner, OpenFlags, ReplyAttr, ReplyCreate, ReplyData, ReplyDirectory, ReplyEmpty,
    ReplyEntry, ReplyOpen, ReplyStatfs, ReplyWrite, ReplyXattr, Request, TimeOrNow, WriteFlags,
};
use parking_lot::Mutex;
use std::ffi::OsStr;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, SystemTime};
use txvfs::{
    FallocateMode, FileType, InodeFileSystem, RangeLockKind, RenameFlags, SetAttr, XattrFlags,
};

impl fuser::Filesystem for Adapter {
    fn init(&mut self, _req: &Request, config: &mut KernelConfig) -> io::Result<()> {
        // Times are kept in nanoseconds.
        let _ = config.set_time_granularity(Duration::from_nanos(1));
        // Send POSIX record locks here rather than keeping them in the kernel.
        let _ = config.add_capabilities(InitFlags::FUSE_POSIX_LOCKS);
        Ok(())
    }

    fn destroy(&mut self) {
        self.handles.lock().clear();
        let _ = self.store.sync();
    }

    fn lookup(&self, req: &Request, parent: INodeNo, n: &OsStr, reply: ReplyEntry) {
        self.entry(reply, self.as_caller(req).lookup_at(parent.0, name(n)))
    }

    fn getattr(&self, _req: &Request, ino: INodeNo, _fh: Option<FileHandle>, reply: ReplyAttr) {
        self.attr(reply, self.store.stat_ino(ino.0))
    }

    fn setattr(
        &self,
        req: &Request,
        ino: INodeNo,
        mode: Option<u32>,
        uid: Option<u32>,
        gid: Option<u32>,
        size: Option<u64>,
        atime: Option<TimeOrNow>,
        mtime: Option<TimeOrNow>,
        _ctime: Option<SystemTime>,
        fh: Option<FileHandle>,
        _crtime: Option<SystemTime>,
        _chgtime: Option<SystemTime>,
        _bkuptime: Option<SystemTime>,
        _flags: Option<fuser::BsdFileFlags>,
        reply: ReplyAttr,
    ) {
        let fs = self.as_caller(req);
        let mut change = SetAttr {
            mode: mode.map(|m| m & 0o7777),
            uid,
            gid,
            size,
            atime: set_time(atime),
            mtime: set_time(mtime),
        };
        // `ftruncate` on a handle open for writing needs no write permission on the file.
        if let (Some(len), Some(fh)) = (size, fh) {
            let truncated = self.file(fh).and_then(|f| f.set_len(len).map_err(|e| errno(&e)));
            if let Err(e) = truncated {
                return reply.error(e);
            }
            change.size = None;
        }
        self.attr(reply, fs.set_attr(ino.0, &change))
    }

    fn readlink(&self, _req: &Request, ino: INodeNo, reply: ReplyData) {
        match self.store.readlink_ino(ino.0) {
            Ok(t) => reply.data(&t),
            Err(e) => reply.error(errno(&e)),
        }
    }

    fn mknod(
        &self,
        req: &Request,
        parent: INodeNo,
        n: &OsStr,
        mode: u32,
        _umask: u32,
        rdev: u32,
        reply: ReplyEntry,
    ) {
        let Some(k) =
            FileType::from_mode(mode).filter(|k| !matches!(k, FileType::Dir | FileType::Symlink))
        else {
            return reply.error(Errno::EINVAL);
        };
        self.entry(
            reply,
            self.as_caller(req).mknod_at(parent.0, name(n), k, mode & 0o7777, rdev as u64),
        )
    }

    fn mkdir(
        &self,
        req: &Request,
        parent: INodeNo,
        n: &OsStr,
        mode: u32,
        _umask: u32,
        reply: ReplyEntry,
    ) {
        self.entry(reply, self.as_caller(req).mkdir_at(parent.0, name(n), mode & 0o7777))
    }

    fn unlink(&self, req: &Request, parent: INodeNo, n: &OsStr, reply: ReplyEmpty) {
        reply_empty(reply, self.as_caller(req).unlink_at(parent.0, name(n)))
    }

    fn rmdir(&self, req: &Request, parent: INodeNo, n: &OsStr, reply: ReplyEmpty) {
        reply_empty(reply, self.as_caller(req).rmdir_at(parent.0, name(n)))
    }

    fn symlink(
        &self,
        req: &Request,
        parent: INodeNo,
        link: &OsStr,
        target: &Path,
        reply: ReplyEntry,
    ) {
        self.entry(
            reply,
            self.as_caller(req).symlink_at(target.as_os_str().as_bytes(), parent.0, name(link)),
        )
    }

    fn rename(
        &self,
        req: &Request,
        parent: INodeNo,
        n: &OsStr,
        newparent: INodeNo,
        newname: &OsStr,
        flags: fuser::RenameFlags,
        reply: ReplyEmpty,
    ) {
        if flags.contains(fuser::RenameFlags::RENAME_WHITEOUT) {
            return reply.error(Errno::EINVAL);
        }
        let flags = RenameFlags {
            no_replace: flags.contains(fuser::RenameFlags::RENAME_NOREPLACE),
            exchange: flags.contains(fuser::RenameFlags::RENAME_EXCHANGE),
        };
        reply_empty(
            reply,
            self.as_caller(req).rename_at(parent.0, name(n), newparent.0, name(newname), flags),
        )
    }

    fn link(
        &self,
        req: &Request,
        ino: INodeNo,
        newparent: INodeNo,
        newname: &OsStr,
        reply: ReplyEntry,
    ) {
        self.entry(reply, self.as_caller(req).link_at(ino.0, newparent.0, name(newname)))
    }

    fn open(&self, req: &Request, ino: INodeNo, flags: OpenFlags, reply: ReplyOpen) {
        match self.as_caller(req).open_ino(ino.0, &open_options(flags)) {
            Ok(f) => reply.opened(self.add_handle(Handle::File(Arc::new(f))), FopenFlags::empty()),
            Err(e) => reply.error(errno(&e)),
        }
    }

    fn read(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        size: u32,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyData,
    ) {
        let f = match self.file(fh) {
            Ok(f) => f,
            Err(e) => return reply.error(e),
        };
        let mut buf = vec![0u8; size as usize];
        let mut got = 0;
        // A short read means end of file to the kernel: fill the buffer unless at the end.
        while got < buf.len() {
            match f.read_at(&mut buf[got..], offset + got as u64) {
                Ok(0) => break,
                Ok(n) => got += n,
                Err(e) => return reply.error(errno(&e)),
            }
        }
        reply.data(&buf[..got])
    }

    fn write(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        data: &[u8],
        _write_flags: WriteFlags,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyWrite,
    ) {
        match self.file(fh).and_then(|f| f.write_at(data, offset).map_err(|e| errno(&e))) {
            Ok(n) => reply.written(n as u32),
            Err(e) => reply.error(e),
        }
    }

    fn flush(
        &self,
        _req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        lock_owner: LockOwner,
        reply: ReplyEmpty,
    ) {
        // Any close by a process drops its POSIX locks on the file.
        self.release_locks(ino.0, lock_owner.0);
        // Writes are committed as they arrive; only a bad handle can fail here.
        match self.handle(fh) {
            Ok(_) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }

    fn release(
        &self,
        _req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        _flags: OpenFlags,
        lock_owner: Option<LockOwner>,
        _flush: bool,
        reply: ReplyEmpty,
    ) {
        if let Some(owner) = lock_owner {
            self.release_locks(ino.0, owner.0);
        }
        let h = self.handles.lock().remove(&fh.0);
        // Closing frees the file if it was unlinked while open (its last handle).
        match h.map(Arc::into_inner) {
            Some(Some(Handle::File(f))) => match Arc::into_inner(f) {
                Some(f) => reply_empty(reply, f.close()),
                None => reply.ok(),
            },
            Some(_) => reply.ok(),
            None => reply.error(Errno::EBADF),
        }
    }

    fn fsync(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        _datasync: bool,
        reply: ReplyEmpty,
    ) {
        match self.file(fh) {
            Ok(f) => reply_empty(reply, f.sync()),
            Err(e) => reply.error(e),
        }
    }

    fn opendir(&self, req: &Request, ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        // The first page, read with the caller's rights: listing needs a directory the caller
        // may read, checked now as open(2) of a directory would.
        match self.as_caller(req).readdir_ino(ino.0, None, LIST_PAGE) {
            Ok(page) => {
                let listing =
                    Listing { ino: ino.0, complete: page.len() < LIST_PAGE, entries: page };
                reply.opened(self.add_handle(Handle::Dir(Mutex::new(listing))), FopenFlags::empty())
            }
            Err(e) => reply.error(errno(&e)),
        }
    }

    fn readdir(
        &self,
        _req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        mut reply: ReplyDirectory,
    ) {
        let h = match self.handle(fh) {
            Ok(h) => h,
            Err(e) => return reply.error(e),
        };
        let Handle::Dir(listing) = &*h else { return reply.error(Errno::ENOTDIR) };
        let mut l = listing.lock();
        // Offsets: 1 after ".", 2 after "..", 3 + i after entry i.
        let mut next = offset;
        if next == 0 {
            if reply.add(ino, 1, fuser::FileType::Directory, ".") {
                return reply.ok();
            }
            next = 1;
        }
        if next == 1 {
            // The store keeps no parent links; the kernel answers ".." from its own cache.
            if reply.add(ino, 2, fuser::FileType::Directory, "..") {
                return reply.ok();
            }
            next = 2;
        }
        let mut i = (next - 2) as usize;
        loop {
            if i >= l.entries.len() {
                if l.complete {
                    break;
                }
                let after = l.entries.last().map(|e| e.name.clone());
                // Paging reads with the mount's own rights: permission was checked at opendir.
                match self.store.readdir_ino(l.ino, after.as_deref(), LIST_PAGE) {
                    Ok(page) => {
                        l.complete = page.len() < LIST_PAGE;
                        l.entries.extend(page);
                    }
                    Err(e) => return reply.error(errno(&e)),
                }
                continue;
            }
            let e = &l.entries[i];
            if reply.add(INodeNo(e.ino), 3 + i as u64, kind(e.kind), OsStr::from_bytes(&e.name)) {
                break;
            }
            i += 1;
        }
        reply.ok()
    }

    fn releasedir(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        _flags: OpenFlags,
        reply: ReplyEmpty,
    ) {
        match self.handles.lock().remove(&fh.0) {
            Some(_) => reply.ok(),
            None => reply.error(Errno::EBADF),
        }
    }

    fn fsyncdir(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _datasync: bool,
        reply: ReplyEmpty,
    ) {
        reply_empty(reply, self.store.sync())
    }

    fn statfs(&self, _req: &Request, ino: INodeNo, reply: ReplyStatfs) {
        match crate::convert::statfs_at(&self.store, ino.0) {
            Ok(s) => reply.statfs(
                s.blocks,
                s.blocks_free,
                s.blocks_free,
                // The kernel wants the total, in use plus free.
                s.files.saturating_add(s.files_free),
                s.files_free,
                s.block_size as u32,
                s.name_max as u32,
                s.block_size as u32,
            ),
            Err(e) => reply.error(errno(&e)),
        }
    }

    fn setxattr(
        &self,
        req: &Request,
        ino: INodeNo,
        n: &OsStr,
        value: &[u8],
        flags: i32,
        position: u32,
        reply: ReplyEmpty,
    ) {
        if position != 0 {
            return reply.error(Errno::EINVAL);
        }
        let flags = match flags {
            0 => XattrFlags::default(),
            libc::XATTR_CREATE => XattrFlags::Create,
            libc::XATTR_REPLACE => XattrFlags::Replace,
            _ => return reply.error(Errno::EINVAL),
        };
        reply_empty(reply, self.as_caller(req).setxattr_ino(ino.0, name(n), value, flags))
    }

    fn getxattr(&self, req: &Request, ino: INodeNo, n: &OsStr, size: u32, reply: ReplyXattr) {
        match self.as_caller(req).getxattr_ino(ino.0, name(n)) {
            Ok(v) => sized(reply, size, &v),
            Err(e) => reply.error(errno(&e)),
        }
    }

    fn listxattr(&self, req: &Request, ino: INodeNo, size: u32, reply: ReplyXattr) {
        match self.as_caller(req).listxattr_ino(ino.0) {
            Ok(names) => {
                let list: Vec<u8> = names
                    .into_iter()
                    .flat_map(|mut n| {
                        n.push(0);
                        n
                    })
                    .collect();
                sized(reply, size, &list)
            }
            Err(e) => reply.error(errno(&e)),
        }
    }

    fn removexattr(&self, req: &Request, ino: INodeNo, n: &OsStr, reply: ReplyEmpty) {
        reply_empty(reply, self.as_caller(req).removexattr_ino(ino.0, name(n)))
    }

    fn access(&self, req: &Request, ino: INodeNo, mask: AccessFlags, reply: ReplyEmpty) {
        reply_empty(reply, self.as_caller(req).access_ino(ino.0, mask.bits() as u32))
    }

    fn create(
        &self,
        req: &Request,
        parent: INodeNo,
        n: &OsStr,
        mode: u32,
        _umask: u32,
        flags: i32,
        reply: ReplyCreate,
    ) {
        let fs = self.as_caller(req);
        let options = open_options(OpenFlags(flags))
            .create(true)
            .create_new(flags & libc::O_EXCL != 0)
            .truncate(flags & libc::O_TRUNC != 0 && flags & libc::O_ACCMODE != libc::O_RDONLY)
            .mode(mode & 0o7777);
        let opened = fs.open_at(parent.0, name(n), &options).and_then(|f| Ok((f.stat()?, f)));
        match opened {
            Ok((st, f)) => {
                let fh = self.add_handle(Handle::File(Arc::new(f)));
                reply.created(&self.ttl, &attr(&st), Generation(0), fh, FopenFlags::empty())
            }
            Err(e) => reply.error(errno(&e)),
        }
    }

    fn getlk(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        lock_owner: LockOwner,
        start: u64,
        end: u64,
        typ: i32,
        pid: u32,
        reply: fuser::ReplyLock,
    ) {
        let probe = match self.lock_owner(ino.0, lock_owner.0, pid) {
            Ok(f) => f,
            Err(e) => return reply.error(e),
        };
        match probe.test_lock(typ == libc::F_WRLCK, start, range_len(start, end)) {
            Ok(None) => reply.locked(start, end, libc::F_UNLCK, 0),
            Ok(Some(l)) => {
                let holder_pid = self
                    .lock_owners
                    .lock()
                    .values()
                    .find(|(f, _)| f.handle_id() == l.owner)
                    .map_or(0, |(_, pid)| *pid);
                let end = if l.len == 0 { OFFSET_MAX } else { l.start + l.len - 1 };
                let typ =
                    if l.kind == RangeLockKind::Write { libc::F_WRLCK } else { libc::F_RDLCK };
                reply.locked(l.start, end, typ, holder_pid)
            }
            Err(e) => reply.error(errno(&e)),
        }
    }

    fn setlk(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        lock_owner: LockOwner,
        start: u64,
        end: u64,
        typ: i32,
        pid: u32,
        sleep: bool,
        reply: ReplyEmpty,
    ) {
        let kind = match typ {
            libc::F_RDLCK => RangeLockKind::Read,
            libc::F_WRLCK => RangeLockKind::Write,
            libc::F_UNLCK => RangeLockKind::Unlock,
            _ => return reply.error(Errno::EINVAL),
        };
        let holder = match self.lock_owner(ino.0, lock_owner.0, pid) {
            Ok(f) => f,
            Err(e) => return reply.error(e),
        };
        let len = range_len(start, end);
        if !sleep || kind == RangeLockKind::Unlock {
            return reply_empty(reply, holder.lock_range(kind, start, len, false));
        }
        // F_SETLKW: wait in a thread of its own, so that waiters never hold up the threads
        // that serve requests (the holder's unlock among them).
        let spawned = std::thread::Builder::new()
            .name("txvfs-lock-wait".into())
            .spawn(move || reply_empty(reply, holder.lock_range(kind, start, len, true)));
        if let Err(e) = spawned {
            eprintln!("txvfs mount: cannot start a lock waiter: {e}");
        }
    }

    fn fallocate(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        length: u64,
        mode: i32,
        reply: ReplyEmpty,
    ) {
        let mode = match mode {
            0 => FallocateMode::Allocate,
            libc::FALLOC_FL_KEEP_SIZE => FallocateMode::KeepSize,
            m if m == libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE => {
                FallocateMode::PunchHole
            }
            _ => return reply.error(Errno::from_i32(libc::EOPNOTSUPP)),
        };
        match self.file(fh) {
            Ok(f) => reply_empty(reply, f.allocate(mode, offset, length)),
            Err(e) => reply.error(e),
        }
    }
}
