//! Mounts a txvfs store as a Linux file system through FUSE (the `fuser` crate over
//! libfuse3), so that any program can use it: `txvfs mount --store URI MOUNTPOINT`.
//!
//! Every request becomes one core call on the store's inode-addressed API
//! ([`InodeFileSystem`]), each its own transaction, made with the credential of the calling
//! process (uid, gid and supplementary groups), so the core does every permission check.
//! The kernel caches attributes and entries for [`MountOptions::ttl`]: changes made through
//! the mount are always seen at once (the kernel invalidates what its own requests change);
//! changes made to the store by other processes, outside this mount, show up within the ttl.
//! POSIX record locks (`fcntl` F_SETLK, F_SETLKW, F_GETLK) go to the store's lock table, so
//! they also exclude programs using the library on the same store (and, on a shared backend,
//! other processes). `flock` locks stay in the kernel, for this mount only: FUSE does not
//! tell the two apart in the requests fuser passes on.

#![warn(missing_docs)]

use fuser::{
    AccessFlags, Config, Errno, FileAttr, FileHandle, FopenFlags, Generation, INodeNo, InitFlags, KernelConfig, LockOwner,
    MountOption, OpenAccMode, OpenFlags, ReplyAttr, ReplyCreate, ReplyData, ReplyDirectory, ReplyEmpty, ReplyEntry,
    ReplyOpen, ReplyStatfs, ReplyWrite, ReplyXattr, Request, Session, SessionACL, TimeOrNow, WriteFlags,
};
use parking_lot::Mutex;
use std::collections::HashMap;
use std::ffi::OsStr;
use std::io;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use txvfs::{
    Credential, DirEntry, Error, ErrorKind, FallocateMode, File, FileSystem, FileType, InodeFileSystem, OpenOptions,
    RangeLockKind, RenameFlags, SetAttr, SetTime, Stat, Store, XattrFlags,
};

/// How to mount.
#[derive(Clone, Debug)]
pub struct MountOptions {
    /// Mount read-only (the store is opened read-only too).
    pub read_only: bool,
    /// Let users other than the one who mounted use the mount (FUSE's `allow_other`; for a
    /// non-root user it needs `user_allow_other` in /etc/fuse.conf).
    pub allow_other: bool,
    /// How long the kernel may cache attributes and names (see the crate documentation).
    pub ttl: Duration,
    /// Threads serving requests.
    pub threads: usize,
}

impl Default for MountOptions {
    fn default() -> MountOptions {
        MountOptions { read_only: false, allow_other: false, ttl: Duration::from_secs(1), threads: 4 }
    }
}

/// Mounts `store` on `mountpoint` and serves it until the file system is unmounted
/// (`fusermount3 -u`, `umount`) or the process gets SIGINT or SIGTERM, which unmount it
/// cleanly. A mount still in use (an open file, a working directory) is detached instead,
/// like `umount -l`: it leaves the tree at once, and its users keep working until the last
/// lets go, when this returns. Returns once unmounted, after syncing the store.
pub fn mount(store: Store, mountpoint: &Path, options: &MountOptions) -> io::Result<()> {
    let sync_store = store.clone();
    let target = std::ffi::CString::new(std::fs::canonicalize(mountpoint)?.into_os_string().into_vec())?;
    let mut session = new_session(store, mountpoint, options)?;
    let mut unmounter = session.unmount_callable();
    let stop = stop_on_signals()?;
    std::thread::Builder::new().name("txvfs-signals".into()).spawn(move || {
        let mut byte = [0u8; 1];
        let mut first = true;
        // SAFETY: reads one byte into a local buffer from the pipe the handler writes.
        while unsafe { libc::read(stop, byte.as_mut_ptr().cast(), 1) } == 1 {
            if std::mem::take(&mut first) && unmounter.unmount().is_ok() {
                continue;
            }
            detach(&target);
        }
    })?;
    let served = session.run();
    let synced = sync_store.sync().map_err(io::Error::other);
    served.and(synced)
}

/// Detaches a busy mount (`umount -l`): directly as root, else through fusermount3.
fn detach(target: &std::ffi::CStr) {
    // SAFETY: a valid C string naming the mount point.
    if unsafe { libc::umount2(target.as_ptr(), libc::MNT_DETACH) } == 0 {
        eprintln!("txvfs mount: {} was busy: detached; serving its last users until they let go", target.to_string_lossy());
        return;
    }
    let path = std::ffi::OsStr::from_bytes(target.to_bytes());
    match std::process::Command::new("fusermount3").arg("-u").arg("-z").arg(path).status() {
        Ok(s) if s.success() => {
            eprintln!("txvfs mount: {} was busy: detached; serving its last users until they let go", path.to_string_lossy())
        }
        _ => eprintln!("txvfs mount: cannot unmount {}: {}", path.to_string_lossy(), io::Error::last_os_error()),
    }
}

/// The write end of the pipe that SIGINT and SIGTERM write to.
static STOP_PIPE: std::sync::atomic::AtomicI32 = std::sync::atomic::AtomicI32::new(-1);

extern "C" fn on_stop_signal(_: libc::c_int) {
    let fd = STOP_PIPE.load(Ordering::Relaxed);
    // SAFETY: write(2) is async-signal-safe; the byte is a static.
    unsafe { libc::write(fd, b"x".as_ptr().cast(), 1) };
}

/// Makes SIGINT and SIGTERM write a byte to a pipe (whichever thread they hit: threads the
/// store started earlier have them unblocked), and returns the read end.
fn stop_on_signals() -> io::Result<libc::c_int> {
    let mut fds = [0; 2];
    // SAFETY: `fds` has room for the two descriptors.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(io::Error::last_os_error());
    }
    STOP_PIPE.store(fds[1], Ordering::Relaxed);
    for sig in [libc::SIGINT, libc::SIGTERM] {
        // SAFETY: a zeroed sigaction with a valid handler and an empty mask.
        unsafe {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = on_stop_signal as extern "C" fn(libc::c_int) as usize;
            action.sa_flags = libc::SA_RESTART;
            libc::sigemptyset(&mut action.sa_mask);
            if libc::sigaction(sig, &action, std::ptr::null_mut()) != 0 {
                return Err(io::Error::last_os_error());
            }
        }
    }
    Ok(fds[0])
}

/// Mounts `store` on `mountpoint` in a background thread; dropping the returned session
/// unmounts it. For tests and programs that serve a mount next to other work.
pub fn spawn_mount(store: Store, mountpoint: &Path, options: &MountOptions) -> io::Result<fuser::BackgroundSession> {
    new_session(store, mountpoint, options)?.spawn()
}

fn new_session(store: Store, mountpoint: &Path, options: &MountOptions) -> io::Result<Session<Adapter>> {
    quiet_libfuse_table_warning();
    Session::new(Adapter::new(store, options), mountpoint, &config(options))
}

/// The message libfuse 3.14 logs at each mount because fuser hands it a newer (unused)
/// operations table: fuser uses libfuse only to mount and serves requests itself.
const TABLE_WARNING: &[u8] = b"fuse: warning: library too old";

extern "C" {
    fn fuse_set_log_func(func: extern "C" fn(libc::c_int, *const libc::c_char, *mut libc::c_void));
    fn vsnprintf(buf: *mut libc::c_char, size: libc::size_t, fmt: *const libc::c_char, ap: *mut libc::c_void) -> libc::c_int;
}

/// libfuse's logger, minus the operations-table warning: everything else goes to standard
/// error as libfuse would print it. `ap` is the `va_list` (a pointer on x86-64 and arm64).
extern "C" fn libfuse_log(_level: libc::c_int, fmt: *const libc::c_char, ap: *mut libc::c_void) {
    // SAFETY: libfuse passes a NUL-terminated format and its matching va_list.
    unsafe {
        if std::ffi::CStr::from_ptr(fmt).to_bytes().starts_with(TABLE_WARNING) {
            return;
        }
        let mut buf = [0 as libc::c_char; 1024];
        if vsnprintf(buf.as_mut_ptr(), buf.len(), fmt, ap) >= 0 {
            eprint!("{}", std::ffi::CStr::from_ptr(buf.as_ptr()).to_string_lossy());
        }
    }
}

fn quiet_libfuse_table_warning() {
    // SAFETY: installs a logger with the signature libfuse expects (fuse_log_func_t).
    unsafe { fuse_set_log_func(libfuse_log) };
}

fn config(options: &MountOptions) -> Config {
    let mut c = Config::default();
    c.mount_options = vec![
        MountOption::FSName("txvfs".into()),
        MountOption::Subtype("txvfs".into()),
        // Device nodes and set-user-id bits are stored, but honoured by the kernel only if
        // asked: as on most user mounts, they are not.
        MountOption::NoDev,
        MountOption::NoSuid,
        if options.read_only { MountOption::RO } else { MountOption::RW },
    ];
    if options.allow_other {
        // fuser passes `allow_other` to the mount for this ACL.
        c.acl = SessionACL::All;
    }
    c.n_threads = Some(options.threads.max(1));
    c
}

/// An open file or directory of the mount.
enum Handle {
    File(Arc<File>),
    Dir(Mutex<Listing>),
}

/// A directory being read: the entries fetched so far, in name order. Kernel offsets index
/// this list (after `.` and `..`), so a listing stays stable while the directory changes.
struct Listing {
    ino: u64,
    entries: Vec<DirEntry>,
    complete: bool,
}

/// Entries fetched from the store per page of a directory listing.
const LIST_PAGE: usize = 1024;

struct Adapter {
    store: Store,
    ttl: Duration,
    handles: Mutex<HashMap<u64, Arc<Handle>>>,
    next_handle: AtomicU64,
    /// POSIX lock owners: for each (inode, kernel lock owner), a handle that holds that
    /// owner's locks in the store, and the pid F_GETLK reports.
    lock_owners: Mutex<HashMap<(u64, u64), (Arc<File>, u32)>>,
}

impl Adapter {
    fn new(store: Store, options: &MountOptions) -> Adapter {
        Adapter {
            store,
            ttl: options.ttl,
            handles: Mutex::new(HashMap::new()),
            next_handle: AtomicU64::new(1),
            lock_owners: Mutex::new(HashMap::new()),
        }
    }

    /// The store as seen by the process that made `req`.
    fn as_caller(&self, req: &Request) -> Store {
        let (uid, gid) = (req.uid(), req.gid());
        let groups = if uid == 0 { Vec::new() } else { supplementary_groups(req.pid()) };
        self.store.with_credential(Some(Credential { uid, gid, groups }))
    }

    fn add_handle(&self, h: Handle) -> FileHandle {
        let fh = self.next_handle.fetch_add(1, Ordering::Relaxed);
        self.handles.lock().insert(fh, Arc::new(h));
        FileHandle(fh)
    }

    fn handle(&self, fh: FileHandle) -> Result<Arc<Handle>, Errno> {
        self.handles.lock().get(&fh.0).cloned().ok_or(Errno::EBADF)
    }

    fn file(&self, fh: FileHandle) -> Result<Arc<File>, Errno> {
        match &*self.handle(fh)? {
            Handle::File(f) => Ok(f.clone()),
            Handle::Dir(_) => Err(Errno::EISDIR),
        }
    }

    /// The handle holding the POSIX locks of `owner` on `ino`, opened on first use. The
    /// kernel has checked the descriptor's access mode against the lock type already.
    fn lock_owner(&self, ino: u64, owner: u64, pid: u32) -> Result<Arc<File>, Errno> {
        let mut owners = self.lock_owners.lock();
        if let Some((f, _)) = owners.get(&(ino, owner)) {
            return Ok(f.clone());
        }
        let both = OpenOptions::new().read(true).write(true);
        // A read-only store gives read locks only (the kernel refuses write locks there).
        let f = self
            .store
            .open_ino(ino, &both)
            .or_else(|_| self.store.open_ino(ino, &OpenOptions::new().read(true)))
            .map_err(|e| errno(&e))?;
        let f = Arc::new(f);
        owners.insert((ino, owner), (f.clone(), pid));
        Ok(f)
    }

    /// Drops every POSIX lock of `owner` on `ino` (a close by that owner, as POSIX says).
    fn release_locks(&self, ino: u64, owner: u64) {
        let holder = self.lock_owners.lock().remove(&(ino, owner));
        if let Some((f, _)) = holder {
            // Unlock now even if an F_SETLKW waiter still holds the handle; what that waiter
            // may still get is released when it ends and drops the handle.
            let _ = f.lock_range(RangeLockKind::Unlock, 0, 0, false);
            if let Some(f) = Arc::into_inner(f) {
                let _ = f.close();
            }
        }
    }

    fn entry(&self, reply: ReplyEntry, r: txvfs::Result<Stat>) {
        match r {
            Ok(st) => reply.entry(&self.ttl, &attr(&st), Generation(0)),
            Err(e) => reply.error(errno(&e)),
        }
    }

    fn attr(&self, reply: ReplyAttr, r: txvfs::Result<Stat>) {
        match r {
            Ok(st) => reply.attr(&self.ttl, &attr(&st)),
            Err(e) => reply.error(errno(&e)),
        }
    }
}

/// The supplementary groups of process `pid` (empty if it is gone).
fn supplementary_groups(pid: u32) -> Vec<u32> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("Groups:"))
        .map(|g| g.split_whitespace().filter_map(|n| n.parse().ok()).collect())
        .unwrap_or_default()
}

fn errno(e: &Error) -> Errno {
    let code = match e.kind() {
        // Auto-commit calls retry conflicts themselves; one that still fails is transient.
        ErrorKind::Conflict | ErrorKind::TooOld => libc::EAGAIN,
        ErrorKind::TooLarge => libc::EFBIG,
        ErrorKind::Corrupt | ErrorKind::Backend => libc::EIO,
        kind => kind.code(),
    };
    Errno::from_i32(code)
}

fn reply_empty(reply: ReplyEmpty, r: txvfs::Result<()>) {
    match r {
        Ok(()) => reply.ok(),
        Err(e) => reply.error(errno(&e)),
    }
}

fn time(ns: i64) -> SystemTime {
    if ns >= 0 {
        UNIX_EPOCH + Duration::from_nanos(ns as u64)
    } else {
        UNIX_EPOCH - Duration::from_nanos(ns.unsigned_abs())
    }
}

fn set_time(t: Option<TimeOrNow>) -> SetTime {
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

fn kind(k: FileType) -> fuser::FileType {
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

fn attr(st: &Stat) -> FileAttr {
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

fn open_options(flags: OpenFlags) -> OpenOptions {
    let (read, write) = match flags.acc_mode() {
        OpenAccMode::O_RDONLY => (true, false),
        OpenAccMode::O_WRONLY => (false, true),
        OpenAccMode::O_RDWR => (true, true),
    };
    OpenOptions::new().read(read).write(write).append(flags.0 & libc::O_APPEND != 0)
}

fn name(n: &OsStr) -> &[u8] {
    n.as_bytes()
}

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
        let mut change = SetAttr { mode: mode.map(|m| m & 0o7777), uid, gid, size, atime: set_time(atime), mtime: set_time(mtime) };
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

    fn mknod(&self, req: &Request, parent: INodeNo, n: &OsStr, mode: u32, _umask: u32, rdev: u32, reply: ReplyEntry) {
        let Some(k) = FileType::from_mode(mode).filter(|k| !matches!(k, FileType::Dir | FileType::Symlink)) else {
            return reply.error(Errno::EINVAL);
        };
        self.entry(reply, self.as_caller(req).mknod_at(parent.0, name(n), k, mode & 0o7777, rdev as u64))
    }

    fn mkdir(&self, req: &Request, parent: INodeNo, n: &OsStr, mode: u32, _umask: u32, reply: ReplyEntry) {
        self.entry(reply, self.as_caller(req).mkdir_at(parent.0, name(n), mode & 0o7777))
    }

    fn unlink(&self, req: &Request, parent: INodeNo, n: &OsStr, reply: ReplyEmpty) {
        reply_empty(reply, self.as_caller(req).unlink_at(parent.0, name(n)))
    }

    fn rmdir(&self, req: &Request, parent: INodeNo, n: &OsStr, reply: ReplyEmpty) {
        reply_empty(reply, self.as_caller(req).rmdir_at(parent.0, name(n)))
    }

    fn symlink(&self, req: &Request, parent: INodeNo, link: &OsStr, target: &Path, reply: ReplyEntry) {
        self.entry(reply, self.as_caller(req).symlink_at(target.as_os_str().as_bytes(), parent.0, name(link)))
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
        reply_empty(reply, self.as_caller(req).rename_at(parent.0, name(n), newparent.0, name(newname), flags))
    }

    fn link(&self, req: &Request, ino: INodeNo, newparent: INodeNo, newname: &OsStr, reply: ReplyEntry) {
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

    fn flush(&self, _req: &Request, ino: INodeNo, fh: FileHandle, lock_owner: LockOwner, reply: ReplyEmpty) {
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

    fn fsync(&self, _req: &Request, _ino: INodeNo, fh: FileHandle, _datasync: bool, reply: ReplyEmpty) {
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
                let listing = Listing { ino: ino.0, complete: page.len() < LIST_PAGE, entries: page };
                reply.opened(self.add_handle(Handle::Dir(Mutex::new(listing))), FopenFlags::empty())
            }
            Err(e) => reply.error(errno(&e)),
        }
    }

    fn readdir(&self, _req: &Request, ino: INodeNo, fh: FileHandle, offset: u64, mut reply: ReplyDirectory) {
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

    fn releasedir(&self, _req: &Request, _ino: INodeNo, fh: FileHandle, _flags: OpenFlags, reply: ReplyEmpty) {
        match self.handles.lock().remove(&fh.0) {
            Some(_) => reply.ok(),
            None => reply.error(Errno::EBADF),
        }
    }

    fn fsyncdir(&self, _req: &Request, _ino: INodeNo, _fh: FileHandle, _datasync: bool, reply: ReplyEmpty) {
        reply_empty(reply, self.store.sync())
    }

    fn statfs(&self, _req: &Request, _ino: INodeNo, reply: ReplyStatfs) {
        match self.store.statfs() {
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
                let list: Vec<u8> = names.into_iter().flat_map(|mut n| {
                    n.push(0);
                    n
                }).collect();
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

    fn create(&self, req: &Request, parent: INodeNo, n: &OsStr, mode: u32, _umask: u32, flags: i32, reply: ReplyCreate) {
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
                let typ = if l.kind == RangeLockKind::Write { libc::F_WRLCK } else { libc::F_RDLCK };
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

    fn fallocate(&self, _req: &Request, _ino: INodeNo, fh: FileHandle, offset: u64, length: u64, mode: i32, reply: ReplyEmpty) {
        let mode = match mode {
            0 => FallocateMode::Allocate,
            libc::FALLOC_FL_KEEP_SIZE => FallocateMode::KeepSize,
            m if m == libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE => FallocateMode::PunchHole,
            _ => return reply.error(Errno::from_i32(libc::EOPNOTSUPP)),
        };
        match self.file(fh) {
            Ok(f) => reply_empty(reply, f.allocate(mode, offset, length)),
            Err(e) => reply.error(e),
        }
    }
}

/// The largest file offset in a lock request: "to the end of the file and beyond".
const OFFSET_MAX: u64 = i64::MAX as u64;

/// A lock's length from the kernel's inclusive end (0: to the end of the file).
fn range_len(start: u64, end: u64) -> u64 {
    if end >= OFFSET_MAX {
        0
    } else {
        end - start + 1
    }
}

/// Answers an xattr query: the size when asked with 0, the bytes if they fit, else ERANGE.
fn sized(reply: ReplyXattr, size: u32, data: &[u8]) {
    if size == 0 {
        reply.size(data.len() as u32)
    } else if data.len() <= size as usize {
        reply.data(data)
    } else {
        reply.error(Errno::from_i32(libc::ERANGE))
    }
}
