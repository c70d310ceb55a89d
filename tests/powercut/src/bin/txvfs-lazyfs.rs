//! txvfs-lazyfs: a test-only FUSE passthrough file system that forgets what was not synced,
//! in the spirit of LazyFS and RocksDB's FaultInjectionTestFS.
//!
//!   txvfs-lazyfs BACKING_DIR MOUNTPOINT
//!
//! Every file of BACKING_DIR shows through MOUNTPOINT. What the model treats as volatile:
//! - File data and size: `write` and truncation are kept in this process's memory (reads see
//!   them) and reach the backing file only at `fsync`/`fdatasync` of that file.
//! - A newly created file's name: it reaches the backing directory at once, but counts as
//!   volatile until its directory is fsynced (or the file is renamed, see below).
//!
//! Writing `cut SEED TEAR` to `MOUNTPOINT/.powercut` (a control file that no listing shows)
//! cuts the power: every unsynced write and truncation is dropped, and every file created
//! since its directory's last fsync is deleted. With TEAR=1 each file's write-back is cut
//! short instead: a random number of its unsynced changes, in order, reach the backing file,
//! the last of them torn (a random prefix of that write); the rest is dropped. SEED makes
//! every random choice.
//! Each cut logs one line (`lazyfs: cut ...`) on standard error. The writer of the control
//! file must have stopped every user of the mount first (killed and reaped).
//!
//! Not modelled (these are durable at once): mkdir, rmdir, unlink, rename (which also makes the
//! renamed file's name durable), chmod; times are not kept. The backing directory is taken as
//! the disk that never loses power: "sync" writes to it without a real fsync. Every open file
//! is in direct-I/O mode and every attribute and entry has a zero TTL, so the kernel caches
//! nothing that a cut could make stale.

use fuser::{
    AccessFlags, Config, Errno, FileAttr, FileHandle, FileType, FopenFlags, Generation, INodeNo, LockOwner,
    MountOption, OpenFlags, RenameFlags, ReplyAttr, ReplyCreate, ReplyData, ReplyDirectory, ReplyEmpty, ReplyEntry,
    ReplyOpen, ReplyStatfs, ReplyWrite, Request, Session, TimeOrNow, WriteFlags,
};
use std::collections::HashMap;
use std::ffi::OsStr;
use std::fs::{self, File, OpenOptions};
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{DirBuilderExt, FileExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

const ROOT: u64 = 1;
const CTL_NAME: &str = ".powercut";
const CTL_INO: u64 = u64::MAX >> 1;
/// Nothing is cached by the kernel: a cut changes sizes and names behind its back.
const TTL: Duration = Duration::ZERO;

/// One unsynced change to a file's data, oldest first.
enum Op {
    Write { off: u64, data: Vec<u8> },
    Truncate(u64),
}

/// The file size after `ops`, starting from the backing file's size.
fn logical_size(mut size: u64, ops: &[Op]) -> u64 {
    for op in ops {
        size = match op {
            Op::Write { off, data } => size.max(off + data.len() as u64),
            Op::Truncate(len) => *len,
        };
    }
    size
}

/// Applies `ops` to the backing file `f` (what a sync does).
fn persist(f: &File, ops: &[Op]) -> io::Result<()> {
    for op in ops {
        match op {
            Op::Write { off, data } => f.write_all_at(data, *off)?,
            Op::Truncate(len) => f.set_len(*len)?,
        }
    }
    Ok(())
}

/// xorshift64*: the cut's random choices come from the seed the harness gives.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545f4914f6cdd1d)
    }
}

#[derive(Default)]
struct State {
    /// Inode number -> backing path. Unlinked files keep their (stale) path here.
    paths: HashMap<u64, PathBuf>,
    /// Backing path -> inode number, for the names that exist.
    inos: HashMap<PathBuf, u64>,
    next_ino: u64,
    /// Open file handle -> backing file (opened read-write when allowed).
    files: HashMap<u64, File>,
    next_fh: u64,
    /// Unsynced data changes per inode.
    pending: HashMap<u64, Vec<Op>>,
    /// Files created since their directory's last fsync: inode -> directory inode.
    new_files: HashMap<u64, u64>,
    cuts: u64,
    /// File and directory syncs since the last cut (for the cut's log line).
    syncs: (u64, u64),
}

struct LazyFs {
    state: Mutex<State>,
}

fn err(e: io::Error) -> Errno {
    Errno::from_i32(e.raw_os_error().unwrap_or(libc::EIO))
}

fn kind_of(ft: fs::FileType) -> FileType {
    if ft.is_dir() {
        FileType::Directory
    } else if ft.is_symlink() {
        FileType::Symlink
    } else {
        FileType::RegularFile
    }
}

fn time(secs: i64, nsecs: i64) -> SystemTime {
    if secs >= 0 {
        UNIX_EPOCH + Duration::new(secs as u64, nsecs as u32)
    } else {
        UNIX_EPOCH
    }
}

fn ctl_attr() -> FileAttr {
    FileAttr {
        ino: INodeNo(CTL_INO),
        size: 0,
        blocks: 0,
        atime: UNIX_EPOCH,
        mtime: UNIX_EPOCH,
        ctime: UNIX_EPOCH,
        crtime: UNIX_EPOCH,
        kind: FileType::RegularFile,
        perm: 0o600,
        nlink: 1,
        uid: 0,
        gid: 0,
        rdev: 0,
        blksize: 4096,
        flags: 0,
    }
}

impl State {
    fn path(&self, ino: u64) -> Result<PathBuf, Errno> {
        self.paths.get(&ino).cloned().ok_or(Errno::ENOENT)
    }

    fn child(&self, parent: u64, name: &OsStr) -> Result<PathBuf, Errno> {
        Ok(self.path(parent)?.join(name))
    }

    fn ino_for(&mut self, path: PathBuf) -> u64 {
        if let Some(&ino) = self.inos.get(&path) {
            return ino;
        }
        let ino = self.next_ino;
        self.next_ino += 1;
        self.paths.insert(ino, path.clone());
        self.inos.insert(path, ino);
        ino
    }

    /// A name that no longer exists: later files at `path` get a new inode.
    fn forget_name(&mut self, path: &Path) {
        if let Some(ino) = self.inos.remove(path) {
            self.new_files.remove(&ino);
        }
    }

    fn attr(&self, ino: u64, fh: Option<u64>) -> Result<FileAttr, Errno> {
        if ino == CTL_INO {
            return Ok(ctl_attr());
        }
        let md = match fh.and_then(|h| self.files.get(&h)) {
            Some(f) => f.metadata(),
            None => fs::symlink_metadata(self.path(ino)?),
        }
        .map_err(err)?;
        let size = match self.pending.get(&ino) {
            Some(ops) if md.is_file() => logical_size(md.len(), ops),
            _ => md.len(),
        };
        Ok(FileAttr {
            ino: INodeNo(ino),
            size,
            blocks: size.div_ceil(512),
            atime: time(md.atime(), md.atime_nsec()),
            mtime: time(md.mtime(), md.mtime_nsec()),
            ctime: time(md.ctime(), md.ctime_nsec()),
            crtime: time(md.ctime(), md.ctime_nsec()),
            kind: kind_of(md.file_type()),
            perm: (md.mode() & 0o7777) as u16,
            nlink: md.nlink() as u32,
            uid: md.uid(),
            gid: md.gid(),
            rdev: md.rdev() as u32,
            blksize: 4096,
            flags: 0,
        })
    }

    fn add_handle(&mut self, f: File) -> u64 {
        self.next_fh += 1;
        self.files.insert(self.next_fh, f);
        self.next_fh
    }

    /// What `fsync` does: the file's unsynced changes reach the backing file.
    fn sync_file(&mut self, ino: u64, fh: u64) -> Result<(), Errno> {
        self.syncs.0 += 1;
        let Some(ops) = self.pending.remove(&ino) else { return Ok(()) };
        let f = self.files.get(&fh).ok_or(Errno::EBADF)?;
        persist(f, &ops).map_err(err)
    }

    /// The power cut. Returns the line to log.
    fn cut(&mut self, seed: u64, tear: bool) -> String {
        self.cuts += 1;
        let mut rng = Rng(seed.wrapping_mul(0x9e3779b97f4a7c15) | 1);
        let mut torn = Vec::new();
        if tear {
            // Each file's write-back got a random way through its unsynced changes, in order,
            // and stopped inside a write. Inode order: the seed decides the same way each time.
            let mut inos: Vec<u64> = self.pending.keys().copied().collect();
            inos.sort();
            for ino in inos {
                let ops = self.pending.get_mut(&ino).unwrap();
                let (n, i) = (ops.len(), (rng.next() % ops.len() as u64) as usize);
                let mut kept: Vec<Op> = ops.drain(..=i).collect();
                let path = self.paths[&ino].clone();
                let mut note = format!("{} kept {} of {n} changes", path.file_name().unwrap_or_default().to_string_lossy(), i + 1);
                if let Some(Op::Write { data, .. }) = kept.last_mut() {
                    let len = data.len();
                    data.truncate((rng.next() % len.max(1) as u64) as usize);
                    note += &format!(", the last cut to {} of {len} bytes", data.len());
                }
                // Only if the name still exists (an unlinked file has nowhere to go).
                if self.inos.get(&path) == Some(&ino) {
                    if let Err(e) = OpenOptions::new().write(true).open(&path).and_then(|f| persist(&f, &kept)) {
                        note += &format!(" (could not write them: {e})");
                    }
                }
                torn.push(note);
            }
        }
        let (mut writes, mut bytes, mut truncates) = (0, 0, 0);
        let files = self.pending.len();
        for op in self.pending.drain().flat_map(|(_, ops)| ops) {
            match op {
                Op::Write { data, .. } => {
                    writes += 1;
                    bytes += data.len();
                }
                Op::Truncate(_) => truncates += 1,
            }
        }
        let mut removed = Vec::new();
        for (ino, _) in std::mem::take(&mut self.new_files) {
            let path = self.paths[&ino].clone();
            if self.inos.get(&path) == Some(&ino) && fs::remove_file(&path).is_ok() {
                self.inos.remove(&path);
                removed.push(path.file_name().unwrap_or_default().to_string_lossy().into_owned());
            }
        }
        removed.sort();
        let (fsyncs, dirsyncs) = std::mem::take(&mut self.syncs);
        format!(
            "lazyfs: cut {} seed={seed} tear={}: dropped {writes} writes ({bytes} bytes) and {truncates} truncations \
             in {files} files; removed {} new files [{}]; torn: [{}]; since the last cut: {fsyncs} file syncs, \
             {dirsyncs} directory syncs",
            self.cuts,
            tear as u8,
            removed.len(),
            removed.join(" "),
            torn.join(", ")
        )
    }

    fn control(&mut self, data: &[u8]) -> Result<(), Errno> {
        let text = String::from_utf8_lossy(data);
        let words: Vec<&str> = text.split_whitespace().collect();
        match words.as_slice() {
            ["cut", seed, tear] => {
                let seed = seed.parse().map_err(|_| Errno::EINVAL)?;
                let line = self.cut(seed, *tear == "1");
                eprintln!("{line}");
                Ok(())
            }
            _ => {
                eprintln!("lazyfs: unknown control command {text:?} (want: cut SEED TEAR)");
                Err(Errno::EINVAL)
            }
        }
    }
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
    fn lookup(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        if parent.0 == ROOT && name == CTL_NAME {
            return reply.entry(&TTL, &ctl_attr(), Generation(0));
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
                let r = st.path(ino.0).and_then(|p| fs::set_permissions(p, fs::Permissions::from_mode(m & 0o7777)).map_err(err));
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

    fn mkdir(&self, _req: &Request, parent: INodeNo, name: &OsStr, mode: u32, umask: u32, reply: ReplyEntry) {
        let mut st = self.state.lock().unwrap();
        let path = match st.child(parent.0, name) {
            Ok(p) => p,
            Err(e) => return reply.error(e),
        };
        match fs::DirBuilder::new().mode(mode & !umask & 0o7777).create(&path) {
            Ok(()) => self.entry(reply, &mut st, path),
            Err(e) => reply.error(err(e)),
        }
    }

    fn unlink(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let mut st = self.state.lock().unwrap();
        let r = st.child(parent.0, name).and_then(|p| {
            fs::remove_file(&p).map_err(err)?;
            st.forget_name(&p);
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
            fs::rename(&from, &to).map_err(err)?;
            st.forget_name(&to);
            if let Some(ino) = st.inos.remove(&from) {
                // Modelled as durable at once, name included (see the module's comment).
                st.new_files.remove(&ino);
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

    fn create(&self, _req: &Request, parent: INodeNo, name: &OsStr, mode: u32, umask: u32, flags: i32, reply: ReplyCreate) {
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
        let ino = st.ino_for(path);
        if !existed {
            st.new_files.insert(ino, parent.0);
        } else if flags & libc::O_TRUNC != 0 {
            st.pending.entry(ino).or_default().push(Op::Truncate(0));
        }
        let fh = st.add_handle(f);
        match st.attr(ino, Some(fh)) {
            Ok(a) => reply.created(&TTL, &a, Generation(0), FileHandle(fh), FopenFlags::FOPEN_DIRECT_IO),
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
                Op::Truncate(len) if *len < end => buf[(len.saturating_sub(offset)) as usize..].fill(0),
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

    fn flush(&self, _req: &Request, _ino: INodeNo, _fh: FileHandle, _lock_owner: LockOwner, reply: ReplyEmpty) {
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

    fn fsync(&self, _req: &Request, ino: INodeNo, fh: FileHandle, _datasync: bool, reply: ReplyEmpty) {
        reply_empty(reply, self.state.lock().unwrap().sync_file(ino.0, fh.0))
    }

    fn opendir(&self, _req: &Request, _ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        reply.opened(FileHandle(0), FopenFlags::empty())
    }

    fn readdir(&self, _req: &Request, ino: INodeNo, _fh: FileHandle, offset: u64, mut reply: ReplyDirectory) {
        let mut st = self.state.lock().unwrap();
        let path = match st.path(ino.0) {
            Ok(p) => p,
            Err(e) => return reply.error(e),
        };
        let mut names: Vec<(PathBuf, FileType)> = match fs::read_dir(&path) {
            Ok(rd) => rd.filter_map(Result::ok).map(|e| (e.path(), e.file_type().map(kind_of).unwrap_or(FileType::RegularFile))).collect(),
            Err(e) => return reply.error(err(e)),
        };
        names.sort_by(|a, b| a.0.cmp(&b.0));
        let mut list = vec![(ino.0, FileType::Directory, OsStr::new(".").to_owned()), (ROOT, FileType::Directory, "..".into())];
        for (p, kind) in names {
            let name = p.file_name().unwrap_or_default().to_owned();
            list.push((st.ino_for(p), kind, name));
        }
        for (i, (child, kind, name)) in list.into_iter().enumerate().skip(offset as usize) {
            if reply.add(INodeNo(child), i as u64 + 1, kind, &name) {
                break;
            }
        }
        reply.ok()
    }

    fn fsyncdir(&self, _req: &Request, ino: INodeNo, _fh: FileHandle, _datasync: bool, reply: ReplyEmpty) {
        // The names created in this directory are now durable.
        let mut st = self.state.lock().unwrap();
        st.syncs.1 += 1;
        st.new_files.retain(|_, dir| *dir != ino.0);
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
        reply.statfs(s.f_blocks, s.f_bfree, s.f_bavail, s.f_files, s.f_ffree, s.f_bsize as u32, s.f_namemax as u32, s.f_frsize as u32)
    }

    fn access(&self, _req: &Request, ino: INodeNo, _mask: AccessFlags, reply: ReplyEmpty) {
        let st = self.state.lock().unwrap();
        let r = if ino.0 == CTL_INO { Ok(()) } else { st.path(ino.0).and_then(|p| fs::symlink_metadata(p).map(|_| ()).map_err(err)) };
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
    let mut state = State { next_ino: ROOT + 1, ..State::default() };
    state.paths.insert(ROOT, backing.clone());
    state.inos.insert(backing, ROOT);
    let fs = LazyFs { state: Mutex::new(state) };
    let mut config = Config::default();
    config.mount_options = vec![MountOption::FSName("lazyfs".into()), MountOption::Subtype("lazyfs".into()), MountOption::RW];
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
