//! Locks through the mount: POSIX record locks between processes, flock between open files,
//! and mount locks against library handles on the same store.

mod common;

use common::*;
use std::ffi::CString;
use std::fs;
use std::io;
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};
use txvfs::{ErrorKind, FileSystem, OpenOptions, RangeLockKind};

// ---- locks ----
//
// POSIX record locks need a second process: a forked child that only makes system calls
// (open, fcntl, flock, write, _exit: no allocation), reporting four numbers through a pipe.

struct Forked {
    pid: libc::pid_t,
    rd: libc::c_int,
}

/// Forks a child that runs `f` and reports its result.
fn fork_child(f: impl FnOnce() -> [i64; 4]) -> Forked {
    let mut fds = [0; 2];
    // SAFETY: room for two descriptors.
    sys(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) }).unwrap();
    // SAFETY: the child makes only async-signal-safe calls (whatever `f` makes, write, _exit).
    let pid = unsafe { libc::fork() };
    if pid == 0 {
        // Keep none of the descriptors other tests have open (an inherited copy would keep
        // their files open, and their flocks held, while this child lives): only the pipe.
        // SAFETY: close_range is a plain system call.
        unsafe {
            libc::syscall(libc::SYS_close_range, 3u32, fds[1] as u32 - 1, 0u32);
            libc::syscall(libc::SYS_close_range, fds[1] as u32 + 1, u32::MAX, 0u32);
        }
        let r = f();
        // SAFETY: writes the result from the stack and exits without running destructors.
        unsafe {
            libc::write(fds[1], r.as_ptr().cast(), std::mem::size_of_val(&r));
            libc::_exit(0);
        }
    }
    assert!(pid > 0, "fork: {}", io::Error::last_os_error());
    // SAFETY: our copy of the write end.
    unsafe { libc::close(fds[1]) };
    Forked { pid, rd: fds[0] }
}

impl Forked {
    /// True once the child has reported (waiting at most `ms` milliseconds).
    fn reported_within(&self, ms: i32) -> bool {
        let mut p = libc::pollfd { fd: self.rd, events: libc::POLLIN, revents: 0 };
        // SAFETY: one pollfd.
        unsafe { libc::poll(&mut p, 1, ms) > 0 }
    }

    /// The child's result, after it has exited.
    fn result(self) -> [i64; 4] {
        let mut r = [0i64; 4];
        // SAFETY: reads into `r`.
        let n = unsafe { libc::read(self.rd, r.as_mut_ptr().cast(), std::mem::size_of_val(&r)) };
        assert_eq!(n as usize, std::mem::size_of_val(&r), "the child reported nothing");
        r
    }
}

impl Forked {
    fn kill(&self) {
        // SAFETY: a signal to our own child.
        unsafe { libc::kill(self.pid, libc::SIGKILL) };
    }
}

impl Drop for Forked {
    fn drop(&mut self) {
        self.kill();
        // A child killed inside a FUSE request dies only once the request is answered (a lock
        // wait, when the lock is freed): reap it if it goes, but do not wait for it forever.
        // SAFETY: our own child and pipe.
        let reaped =
            || unsafe { libc::waitpid(self.pid, std::ptr::null_mut(), libc::WNOHANG) != 0 };
        if !reaped() {
            let deadline = Instant::now() + Duration::from_secs(5);
            while !reaped() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(10));
            }
        }
        // SAFETY: our read end of the pipe.
        unsafe { libc::close(self.rd) };
    }
}

fn flock_struct(kind: libc::c_int, start: i64, len: i64) -> libc::flock {
    // SAFETY: flock is plain data.
    let mut fl: libc::flock = unsafe { std::mem::zeroed() };
    fl.l_type = kind as libc::c_short;
    fl.l_whence = libc::SEEK_SET as libc::c_short;
    fl.l_start = start;
    fl.l_len = len;
    fl
}

/// In a forked child: opens `path` read-write, runs fcntl(`cmd`) with `fl`; reports
/// [return value, errno, l_type, l_pid] (the last two as F_GETLK left them).
fn child_fcntl(path: &CString, cmd: libc::c_int, fl: libc::flock) -> Forked {
    fork_child(|| {
        let mut fl = fl;
        // SAFETY: system calls on a valid C string and a stack struct.
        unsafe {
            let fd = libc::open(path.as_ptr(), libc::O_RDWR);
            if fd < 0 {
                return [-1, *libc::__errno_location() as i64, -1, -1];
            }
            let r = libc::fcntl(fd, cmd, &mut fl as *mut libc::flock);
            let e = if r < 0 { *libc::__errno_location() } else { 0 };
            [r as i64, e as i64, fl.l_type as i64, fl.l_pid as i64]
        }
    })
}

fn fcntl_lock(
    f: &fs::File,
    cmd: libc::c_int,
    kind: libc::c_int,
    start: i64,
    len: i64,
) -> Result<libc::flock, i32> {
    let mut fl = flock_struct(kind, start, len);
    // SAFETY: a valid descriptor and struct.
    sys(unsafe { libc::fcntl(f.as_raw_fd(), cmd, &mut fl as *mut libc::flock) })?;
    Ok(fl)
}

fn is_lock_conflict(errno: i64) -> bool {
    errno == libc::EAGAIN as i64 || errno == libc::EACCES as i64
}

#[test]
fn posix_record_locks_between_processes() {
    let Some(m) = default_mount() else { return };
    let p = m.path("locked");
    fs::write(&p, vec![0u8; 100]).unwrap();
    let cp = cpath(&p);
    let f = fs::OpenOptions::new().read(true).write(true).open(&p).unwrap();
    fcntl_lock(&f, libc::F_SETLK, libc::F_WRLCK, 0, 10).unwrap();
    let me = std::process::id() as i64;

    // Another process: the locked range conflicts, F_GETLK names the holder, the rest is free.
    let r = child_fcntl(&cp, libc::F_SETLK, flock_struct(libc::F_WRLCK, 5, 10)).result();
    assert!(r[0] == -1 && is_lock_conflict(r[1]), "conflicting F_SETLK gave {r:?}");
    let r = child_fcntl(&cp, libc::F_SETLK, flock_struct(libc::F_RDLCK, 0, 1)).result();
    assert!(r[0] == -1 && is_lock_conflict(r[1]), "conflicting read lock gave {r:?}");
    let r = child_fcntl(&cp, libc::F_GETLK, flock_struct(libc::F_WRLCK, 0, 0)).result();
    assert_eq!(r[..3], [0, 0, libc::F_WRLCK as i64], "F_GETLK gave {r:?}");
    assert_eq!(r[3], me, "F_GETLK names pid {} instead of the holder {me}", r[3]);
    let r = child_fcntl(&cp, libc::F_SETLK, flock_struct(libc::F_WRLCK, 10, 10)).result();
    assert_eq!(r[..2], [0, 0], "lock of a free range gave {r:?}");
    let r = child_fcntl(&cp, libc::F_GETLK, flock_struct(libc::F_WRLCK, 10, 90)).result();
    assert_eq!(r[2], libc::F_UNLCK as i64, "F_GETLK on a free range gave {r:?}");

    // Read locks share.
    fcntl_lock(&f, libc::F_SETLK, libc::F_RDLCK, 0, 10).unwrap();
    let r = child_fcntl(&cp, libc::F_SETLK, flock_struct(libc::F_RDLCK, 0, 10)).result();
    assert_eq!(r[..2], [0, 0], "shared read lock gave {r:?}");

    // F_SETLKW waits for the holder to unlock.
    fcntl_lock(&f, libc::F_SETLK, libc::F_WRLCK, 0, 10).unwrap();
    let waiter = child_fcntl(&cp, libc::F_SETLKW, flock_struct(libc::F_WRLCK, 0, 10));
    assert!(!waiter.reported_within(300), "F_SETLKW did not wait for the lock");
    fcntl_lock(&f, libc::F_SETLK, libc::F_UNLCK, 0, 0).unwrap();
    assert!(waiter.reported_within(20_000), "F_SETLKW still waiting after the unlock");
    assert_eq!(waiter.result()[..2], [0, 0]);

    // A waiter killed while it waits leaves no lock behind once the holder unlocks (the
    // killed process lingers until its request is answered, then its close drops the lock).
    fcntl_lock(&f, libc::F_SETLK, libc::F_WRLCK, 0, 10).unwrap();
    let waiter = child_fcntl(&cp, libc::F_SETLKW, flock_struct(libc::F_WRLCK, 0, 10));
    assert!(!waiter.reported_within(300), "F_SETLKW did not wait for the lock");
    waiter.kill();
    fcntl_lock(&f, libc::F_SETLK, libc::F_UNLCK, 0, 0).unwrap();
    drop(waiter);
    assert!(
        eventually(|| child_fcntl(&cp, libc::F_SETLK, flock_struct(libc::F_WRLCK, 0, 10)).result()
            [0]
            == 0),
        "a killed F_SETLKW waiter left its lock behind"
    );
    let r = child_fcntl(&cp, libc::F_GETLK, flock_struct(libc::F_WRLCK, 0, 0)).result();
    assert_eq!(r[2], libc::F_UNLCK as i64, "{r:?}");

    // Closing any descriptor of the file drops the process's locks.
    fcntl_lock(&f, libc::F_SETLK, libc::F_WRLCK, 0, 0).unwrap();
    let r = child_fcntl(&cp, libc::F_SETLK, flock_struct(libc::F_WRLCK, 50, 1)).result();
    assert!(r[0] == -1 && is_lock_conflict(r[1]), "{r:?}");
    drop(fs::File::open(&p).unwrap());
    let r = child_fcntl(&cp, libc::F_SETLK, flock_struct(libc::F_WRLCK, 50, 1)).result();
    assert_eq!(r[..2], [0, 0], "lock still held after close: {r:?}");
    drop(f);
}

#[test]
fn flock_between_open_files() {
    let Some(m) = default_mount() else { return };
    let p = m.path("f");
    fs::write(&p, b"x").unwrap();
    let flock = |f: &fs::File, op| sys(unsafe { libc::flock(f.as_raw_fd(), op) });
    // flock belongs to the open file description: two opens conflict even in one process.
    let a = fs::File::open(&p).unwrap();
    let b = fs::File::open(&p).unwrap();
    flock(&a, libc::LOCK_EX).unwrap();
    assert_eq!(flock(&b, libc::LOCK_EX | libc::LOCK_NB), Err(libc::EWOULDBLOCK));
    assert_eq!(flock(&b, libc::LOCK_SH | libc::LOCK_NB), Err(libc::EWOULDBLOCK));
    flock(&a, libc::LOCK_SH).unwrap();
    flock(&b, libc::LOCK_SH | libc::LOCK_NB).unwrap();
    assert_eq!(flock(&a, libc::LOCK_EX | libc::LOCK_NB), Err(libc::EWOULDBLOCK));
    flock(&b, libc::LOCK_UN).unwrap();
    flock(&a, libc::LOCK_EX | libc::LOCK_NB).unwrap();
    // Closing the holder releases it; a forked child waits in LOCK_EX until then.
    let cp = cpath(&p);
    let waiter = fork_child(|| unsafe {
        let fd = libc::open(cp.as_ptr(), libc::O_RDONLY);
        let r = libc::flock(fd, libc::LOCK_EX);
        [fd as i64, r as i64, if r < 0 { *libc::__errno_location() as i64 } else { 0 }, 0]
    });
    assert!(!waiter.reported_within(300), "LOCK_EX did not wait for the holder");
    drop(a);
    assert!(waiter.reported_within(20_000), "LOCK_EX still waiting after the holder closed");
    let r = waiter.result();
    assert!(r[0] >= 0 && r[1] == 0, "{r:?}");
    drop(b);
}

/// POSIX record locks taken through the mount and through the library's handles on the same
/// store exclude each other: the adapter forwards them to the store's lock table.
#[test]
fn mount_locks_exclude_library_handles() {
    let Some(m) = default_mount() else { return };
    let p = m.path("shared");
    fs::write(&p, vec![0u8; 100]).unwrap();
    let rw = OpenOptions::new().read(true).write(true);
    let lib = m.store.open("/shared", &rw).unwrap();
    let would_block =
        |r: txvfs::Result<()>| matches!(r, Err(e) if e.kind() == ErrorKind::WouldBlock);

    // Record locks: the mount's lock stops the library, and the other way round.
    let f = fs::OpenOptions::new().read(true).write(true).open(&p).unwrap();
    fcntl_lock(&f, libc::F_SETLK, libc::F_WRLCK, 0, 10).unwrap();
    assert!(
        would_block(lib.lock_range(RangeLockKind::Write, 5, 1, false)),
        "library locked a range the mount holds"
    );
    assert!(lib.test_lock(true, 0, 10).unwrap().is_some());
    lib.lock_range(RangeLockKind::Write, 20, 10, false).unwrap();
    let r = fcntl_lock(&f, libc::F_SETLK, libc::F_WRLCK, 25, 1).map(drop);
    assert!(
        matches!(r, Err(e) if is_lock_conflict(e as i64)),
        "mount locked a range the library holds: {r:?}"
    );
    let held = fcntl_lock(&f, libc::F_GETLK, libc::F_WRLCK, 0, 0).unwrap();
    assert_eq!((held.l_type as i32, held.l_start, held.l_len), (libc::F_WRLCK, 20, 10));
    lib.lock_range(RangeLockKind::Unlock, 0, 0, false).unwrap();
    fcntl_lock(&f, libc::F_SETLK, libc::F_WRLCK, 25, 1).unwrap();
    // Closing the mount's descriptor frees its locks for the library.
    drop(f);
    assert!(
        eventually(|| lib.lock_range(RangeLockKind::Write, 0, 0, false).is_ok()),
        "the mount's locks outlived close"
    );
    lib.lock_range(RangeLockKind::Unlock, 0, 0, false).unwrap();

    // F_SETLKW through the mount waits for the library's lock.
    lib.lock_range(RangeLockKind::Read, 0, 10, false).unwrap();
    let cp = cpath(&p);
    let waiter = child_fcntl(&cp, libc::F_SETLKW, flock_struct(libc::F_WRLCK, 5, 1));
    assert!(!waiter.reported_within(300), "F_SETLKW did not wait for the library's lock");
    let r = child_fcntl(&cp, libc::F_SETLK, flock_struct(libc::F_RDLCK, 0, 10)).result();
    assert_eq!(r[..2], [0, 0], "read locks through the mount and the library should share: {r:?}");
    lib.lock_range(RangeLockKind::Unlock, 0, 0, false).unwrap();
    assert!(waiter.reported_within(20_000), "F_SETLKW still waiting after the library unlocked");
    assert_eq!(waiter.result()[..2], [0, 0]);
    // The waiter's exit dropped its lock.
    assert!(eventually(|| lib.lock_range(RangeLockKind::Write, 0, 0, false).is_ok()));
    // `flock` stays in the kernel (see the adapter's documentation): it is not checked here.
    lib.close().unwrap();
}
