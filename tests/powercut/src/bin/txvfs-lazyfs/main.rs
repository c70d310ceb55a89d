//! txvfs-lazyfs: a test-only FUSE passthrough file system that forgets what was not synced,
//! in the spirit of LazyFS and RocksDB's FaultInjectionTestFS.
//!
//!   txvfs-lazyfs BACKING_DIR MOUNTPOINT
//!
//! Every file of BACKING_DIR shows through MOUNTPOINT. What the model treats as volatile:
//! - File data and size: `write` and truncation are kept in this process's memory (reads see
//!   them) and reach the backing file only at `fsync`/`fdatasync` of that file.
//! - Directory changes: creating a file or directory, unlinking a file, renaming. They reach
//!   the backing directory at once (an unlinked or replaced file goes to a hidden stash,
//!   `.lazyfs-stash`), but count as volatile until a directory they changed is fsynced.
//!
//! Writing `cut SEED TEAR` to `MOUNTPOINT/.powercut` (a control file that no listing shows)
//! cuts the power: every unsynced write and truncation is dropped, and every volatile
//! directory change is undone, newest first (a new directory goes with what it holds). With
//! TEAR=1 each file's write-back is cut short instead: a random number of its unsynced
//! changes, in order, reach the backing file, the last of them torn (a random prefix of that
//! write); the rest is dropped. SEED makes every random choice. Each cut logs one line
//! (`lazyfs: cut ...`) on standard error. The writer of the control file must have stopped
//! every user of the mount first (killed and reaped). Unmounting is clean: everything
//! unsynced is written back first.
//!
//! Not modelled (durable at once): rmdir, a rename that replaces a directory, chmod; times
//! are not kept. The backing directory is taken as the disk that never loses power: "sync"
//! writes to it without a real fsync. Every open file is in direct-I/O mode and every
//! attribute and entry has a zero TTL, so the kernel caches nothing that a cut could make
//! stale.

use fuser::{
    AccessFlags, Config, Errno, FileHandle, FileType, FopenFlags, Generation, INodeNo, LockOwner,
    MountOption, OpenFlags, RenameFlags, ReplyAttr, ReplyCreate, ReplyData, ReplyDirectory,
    ReplyEmpty, ReplyEntry, ReplyOpen, ReplyStatfs, ReplyWrite, Request, Session, TimeOrNow,
    WriteFlags,
};
use std::ffi::OsStr;
use std::fs::{self, File, OpenOptions};
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{DirBuilderExt, FileExt, OpenOptionsExt, PermissionsExt};
use std::path::PathBuf;
use std::sync::Mutex;
use std::time::{Duration, SystemTime};

mod state;

use state::{
    ctl_attr, err, kind_of, logical_size, NameOp, Op, State, CTL_INO, CTL_NAME, ROOT, STASH_NAME,
};

/// Nothing is cached by the kernel: a cut changes sizes and names behind its back.
const TTL: Duration = Duration::ZERO;

struct LazyFs {
    state: Mutex<State>,
}

impl LazyFs {
    fn entry(&self, reply: ReplyEntry, st: &mut State, path: PathBuf) {
        match fs::symlink_metadata(&path) {
            Ok(_) => {
                let ino = st.ino_for(path);
                match st.attr(ino, None) {
                    Ok(a) => reply.entry(&TTL, &a, Generation(0)),
                    Err(e) => reply.error(e),
                }
            }
            Err(e) => reply.error(err(e)),
        }
    }
}

fn reply_empty(reply: ReplyEmpty, r: Result<(), Errno>) {
    match r {
        Ok(()) => reply.ok(),
        Err(e) => reply.error(e),
    }
}

impl fuser::Filesystem for LazyFs {
    fn destroy(&mut self) {
        if let Err(e) = self.state.lock().unwrap().write_back_all() {
            eprintln!("txvfs-lazyfs: writing back at unmount failed: {e}");
        }
    }

    fn lookup(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        if parent.0 == ROOT && name == CTL_NAME {
            return reply.entry(&TTL, &ctl_attr(), Generation(0));
        }
        if parent.0 == ROOT && name == STASH_NAME {
            return reply.error(Errno::ENOENT);
        }
        let mut st = self.state.lock().unwrap();
        match st.child(parent.0, name) {
            Ok(path) => self.entry(reply, &mut st, path),
            Err(e) => reply.error(e),
        }
    }

    fn getattr(&self, _req: &Request, ino: INodeNo, fh: Option<FileHandle>, reply: ReplyAttr) {
        match self.state.lock().unwrap().attr(ino.0, fh.map(|h| h.0)) {
            Ok(a) => reply.attr(&TTL, &a),
            Err(e) => reply.error(e),
        }
    }

    fn setattr(
        &self,
        _req: &Request,
        ino: INodeNo,
        mode: Option<u32>,
        _uid: Option<u32>,
        _gid: Option<u32>,
        size: Option<u64>,
        _atime: Option<TimeOrNow>,
        _mtime: Option<TimeOrNow>,
        _ctime: Option<SystemTime>,
        fh: Option<FileHandle>,
        _crtime: Option<SystemTime>,
        _chgtime: Option<SystemTime>,
        _bkuptime: Option<SystemTime>,
        _flags: Option<fuser::BsdFileFlags>,
        reply: ReplyAttr,
    ) {
        let mut st = self.state.lock().unwrap();
        if ino.0 != CTL_INO {
            if let Some(len) = size {
                st.pending.entry(ino.0).or_default().push(Op::Truncate(len));
            }
            if let Some(m) = mode {
                let r = st.path(ino.0).and_then(|p| {
                    fs::set_permissions(p, fs::Permissions::from_mode(m & 0o7777)).map_err(err)
                });
                if let Err(e) = r {
                    return reply.error(e);
                }
            }
        }
        match st.attr(ino.0, fh.map(|h| h.0)) {
            Ok(a) => reply.attr(&TTL, &a),
            Err(e) => reply.error(e),
        }
    }

    fn mkdir(
        &self,
        _req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        reply: ReplyEntry,
    ) {
        let mut st = self.state.lock().unwrap();
        let path = match st.child(parent.0, name) {
            Ok(p) => p,
            Err(e) => return reply.error(e),
        };
        match fs::DirBuilder::new().mode(mode & !umask & 0o7777).create(&path) {
            Ok(()) => {
                st.names.push((NameOp::Created(path.clone()), [parent.0, parent.0]));
                self.entry(reply, &mut st, path)
            }
            Err(e) => reply.error(err(e)),
        }
    }

    fn unlink(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let mut st = self.state.lock().unwrap();
        let r = st.child(parent.0, name).and_then(|p| {
            if fs::symlink_metadata(&p).map_err(err)?.is_dir() {
                return Err(Errno::EISDIR);
            }
            let stash = st.stash_away(&p)?;
            st.forget_name(&p);
            st.names.push((NameOp::Unlinked { path: p, stash }, [parent.0, parent.0]));
            Ok(())
        });
        reply_empty(reply, r)
    }

    fn rmdir(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let mut st = self.state.lock().unwrap();
        let r = st.child(parent.0, name).and_then(|p| {
            fs::remove_dir(&p).map_err(err)?;
            st.forget_name(&p);
            Ok(())
        });
        reply_empty(reply, r)
    }

    fn rename(
        &self,
        _req: &Request,
        parent: INodeNo,
        name: &OsStr,
        newparent: INodeNo,
        newname: &OsStr,
        flags: RenameFlags,
        reply: ReplyEmpty,
    ) {
        if !flags.is_empty() {
            return reply.error(Errno::EINVAL);
        }
        let mut st = self.state.lock().unwrap();
        let r = (|| {
            let (from, to) = (st.child(parent.0, name)?, st.child(newparent.0, newname)?);
            let from_dir = fs::symlink_metadata(&from).map_err(err)?.is_dir();
            let to_md = fs::symlink_metadata(&to).ok();
            // A file it replaces waits in the stash, so that a cut can bring it back.
            let replaced = match &to_md {
                Some(md) if !md.is_dir() && !from_dir => Some(st.stash_away(&to)?),
                _ => None,
            };
            if let Err(e) = fs::rename(&from, &to) {
                if let Some(stash) = &replaced {
                    let _ = fs::rename(stash, &to);
                }
                return Err(err(e));
            }
            // Replacing a directory is not undone (durable at once).
            if to_md.is_none() || replaced.is_some() {
                let op = NameOp::Renamed { from: from.clone(), to: to.clone(), replaced };
                st.names.push((op, [parent.0, newparent.0]));
            }
            st.forget_name(&to);
            if let Some(ino) = st.inos.remove(&from) {
                st.inos.insert(to.clone(), ino);
            }
            // Everything under a renamed directory moves with it.
            let moved: Vec<(u64, PathBuf)> = st
                .paths
                .iter()
                .filter_map(|(&i, p)| {
                    let rest = p.strip_prefix(&from).ok()?;
                    Some((i, if rest.as_os_str().is_empty() { to.clone() } else { to.join(rest) }))
                })
                .collect();
            for (i, p) in moved {
                if let Some(old) = st.paths.insert(i, p.clone()) {
                    if st.inos.get(&old) == Some(&i) {
                        st.inos.remove(&old);
                        st.inos.insert(p, i);
                    }
                }
            }
            Ok(())
        })();
        reply_empty(reply, r)
    }

    fn open(&self, _req: &Request, ino: INodeNo, flags: OpenFlags, reply: ReplyOpen) {
        if ino.0 == CTL_INO {
            return reply.opened(FileHandle(0), FopenFlags::FOPEN_DIRECT_IO);
        }
        let mut st = self.state.lock().unwrap();
        let path = match st.path(ino.0) {
            Ok(p) => p,
            Err(e) => return reply.error(e),
        };
        // Read-write if allowed, so that a sync can write through any handle.
        match OpenOptions::new().read(true).write(true).open(&path).or_else(|_| File::open(&path)) {
            Ok(f) => {
                if flags.0 & libc::O_TRUNC != 0 {
                    st.pending.entry(ino.0).or_default().push(Op::Truncate(0));
                }
                let fh = st.add_handle(f);
                reply.opened(FileHandle(fh), FopenFlags::FOPEN_DIRECT_IO)
            }
            Err(e) => reply.error(err(e)),
        }
    }

    fn create(
        &self,
        _req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        flags: i32,
        reply: ReplyCreate,
    ) {
        let mut st = self.state.lock().unwrap();
        let path = match st.child(parent.0, name) {
            Ok(p) => p,
            Err(e) => return reply.error(e),
        };
        let existed = fs::symlink_metadata(&path).is_ok();
        let opened = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .create_new(flags & libc::O_EXCL != 0)
            .mode(mode & !umask & 0o7777)
            .open(&path);
        let f = match opened {
            Ok(f) => f,
            Err(e) => return reply.error(err(e)),
        };
        let ino = st.ino_for(path.clone());
        if !existed {
            st.names.push((NameOp::Created(path), [parent.0, parent.0]));
        } else if flags & libc::O_TRUNC != 0 {
            st.pending.entry(ino).or_default().push(Op::Truncate(0));
        }
        let fh = st.add_handle(f);
        match st.attr(ino, Some(fh)) {
            Ok(a) => {
                reply.created(&TTL, &a, Generation(0), FileHandle(fh), FopenFlags::FOPEN_DIRECT_IO)
            }
            Err(e) => reply.error(e),
        }
    }

    fn read(
        &self,
        _req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        size: u32,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyData,
    ) {
        if ino.0 == CTL_INO {
            return reply.data(&[]);
        }
        let st = self.state.lock().unwrap();
        let Some(f) = st.files.get(&fh.0) else { return reply.error(Errno::EBADF) };
        let backing = match f.metadata() {
            Ok(md) => md.len(),
            Err(e) => return reply.error(err(e)),
        };
        let mut buf = vec![0u8; size as usize];
        let mut got = 0;
        while got < buf.len() {
            match f.read_at(&mut buf[got..], offset + got as u64) {
                Ok(0) => break,
                Ok(n) => got += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return reply.error(err(e)),
            }
        }
        // Overlay the unsynced changes, in order, on the window [offset, offset + size).
        let ops = st.pending.get(&ino.0).map(Vec::as_slice).unwrap_or(&[]);
        let end = offset + size as u64;
        for op in ops {
            match op {
                Op::Write { off, data } => {
                    let (s, e) = ((*off).max(offset), (off + data.len() as u64).min(end));
                    if s < e {
                        buf[(s - offset) as usize..(e - offset) as usize]
                            .copy_from_slice(&data[(s - off) as usize..(e - off) as usize]);
                    }
                }
                Op::Truncate(len) if *len < end => {
                    buf[(len.saturating_sub(offset)) as usize..].fill(0)
                }
                Op::Truncate(_) => {}
            }
        }
        let size_now = logical_size(backing, ops);
        reply.data(&buf[..size_now.clamp(offset, end).saturating_sub(offset) as usize])
    }

    fn write(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        data: &[u8],
        _write_flags: WriteFlags,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyWrite,
    ) {
        let mut st = self.state.lock().unwrap();
        if ino.0 == CTL_INO {
            return match st.control(data) {
                Ok(()) => reply.written(data.len() as u32),
                Err(e) => reply.error(e),
            };
        }
        st.pending.entry(ino.0).or_default().push(Op::Write { off: offset, data: data.to_vec() });
        reply.written(data.len() as u32)
    }

    fn flush(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _lock_owner: LockOwner,
        reply: ReplyEmpty,
    ) {
        reply.ok()
    }

    fn release(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        _flush: bool,
        reply: ReplyEmpty,
    ) {
        // Closing does not sync: unsynced data stays in memory, like dirty pages.
        self.state.lock().unwrap().files.remove(&fh.0);
        reply.ok()
    }

    fn fsync(
        &self,
        _req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        _datasync: bool,
        reply: ReplyEmpty,
    ) {
        reply_empty(reply, self.state.lock().unwrap().sync_file(ino.0, fh.0))
    }

    fn opendir(&self, _req: &Request, _ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        reply.opened(FileHandle(0), FopenFlags::empty())
    }

    fn readdir(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        mut reply: ReplyDirectory,
    ) {
        let mut st = self.state.lock().unwrap();
        let path = match st.path(ino.0) {
            Ok(p) => p,
            Err(e) => return reply.error(e),
        };
        let mut names: Vec<(PathBuf, FileType)> = match fs::read_dir(&path) {
            Ok(rd) => rd
                .filter_map(Result::ok)
                .map(|e| (e.path(), e.file_type().map(kind_of).unwrap_or(FileType::RegularFile)))
                .collect(),
            Err(e) => return reply.error(err(e)),
        };
        names.sort_by(|a, b| a.0.cmp(&b.0));
        let mut list = vec![
            (ino.0, FileType::Directory, OsStr::new(".").to_owned()),
            (ROOT, FileType::Directory, "..".into()),
        ];
        for (p, kind) in names {
            let name = p.file_name().unwrap_or_default().to_owned();
            if ino.0 == ROOT && name == STASH_NAME {
                continue;
            }
            list.push((st.ino_for(p), kind, name));
        }
        for (i, (child, kind, name)) in list.into_iter().enumerate().skip(offset as usize) {
            if reply.add(INodeNo(child), i as u64 + 1, kind, &name) {
                break;
            }
        }
        reply.ok()
    }

    fn fsyncdir(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        _datasync: bool,
        reply: ReplyEmpty,
    ) {
        // Every change to this directory is now durable.
        self.state.lock().unwrap().dir_synced(ino.0);
        reply.ok()
    }

    fn statfs(&self, _req: &Request, _ino: INodeNo, reply: ReplyStatfs) {
        let st = self.state.lock().unwrap();
        let root = std::ffi::CString::new(st.paths[&ROOT].as_os_str().as_bytes()).unwrap();
        // SAFETY: a valid C string and a zeroed statvfs for the call to fill.
        let mut s: libc::statvfs = unsafe { std::mem::zeroed() };
        if unsafe { libc::statvfs(root.as_ptr(), &mut s) } != 0 {
            return reply.error(err(io::Error::last_os_error()));
        }
        reply.statfs(
            s.f_blocks,
            s.f_bfree,
            s.f_bavail,
            s.f_files,
            s.f_ffree,
            s.f_bsize as u32,
            s.f_namemax as u32,
            s.f_frsize as u32,
        )
    }

    fn access(&self, _req: &Request, ino: INodeNo, _mask: AccessFlags, reply: ReplyEmpty) {
        let st = self.state.lock().unwrap();
        let r = if ino.0 == CTL_INO {
            Ok(())
        } else {
            st.path(ino.0).and_then(|p| fs::symlink_metadata(p).map(|_| ()).map_err(err))
        };
        reply_empty(reply, r)
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() != 3 {
        eprintln!("usage: txvfs-lazyfs BACKING_DIR MOUNTPOINT");
        std::process::exit(2);
    }
    let backing = match fs::canonicalize(&args[1]) {
        Ok(p) if p.is_dir() => p,
        _ => {
            eprintln!("txvfs-lazyfs: {} is not a directory", args[1]);
            std::process::exit(2);
        }
    };
    // The stash of a previous mount that did not end cleanly holds nothing anyone needs.
    let stash = backing.join(STASH_NAME);
    let _ = fs::remove_dir_all(&stash);
    if let Err(e) = fs::create_dir(&stash) {
        eprintln!("txvfs-lazyfs: cannot create {}: {e}", stash.display());
        std::process::exit(1);
    }
    let mut state = State { next_ino: ROOT + 1, stash, ..State::default() };
    state.paths.insert(ROOT, backing.clone());
    state.inos.insert(backing, ROOT);
    let fs = LazyFs { state: Mutex::new(state) };
    let mut config = Config::default();
    config.mount_options = vec![
        MountOption::FSName("lazyfs".into()),
        MountOption::Subtype("lazyfs".into()),
        MountOption::RW,
    ];
    // One thread: requests (and the cut) are handled one at a time, in order.
    config.n_threads = Some(1);
    match Session::new(fs, &args[2], &config).and_then(Session::run) {
        Ok(()) => eprintln!("txvfs-lazyfs: unmounted"),
        Err(e) => {
            eprintln!("txvfs-lazyfs: cannot serve {}: {e}", args[2]);
            std::process::exit(1);
        }
    }
}
