//! One owner per store directory, whatever the path into the process, and fork detection.
//!
//! RocksDB's own LOCK file is a POSIX record lock, which never conflicts inside one process:
//! two copies of txvfs in one process (the Python module and the SQLite extension each carry
//! one) could both open a store and lose each other's data. txvfs therefore takes its own
//! lock, an open-file-description lock (`F_OFD_SETLK`) on `txvfs.owner` in the store
//! directory: it conflicts between any two opens, in one process or in two, and the file
//! holds the owner's pid for the error message.
//!
//! A forked child inherits the parent's open store in memory but not its RocksDB threads;
//! writing through it corrupts the store. An at-fork handler counts forks, so a store opened
//! before a fork refuses every call in the child, and closes the child's copy of each lock
//! descriptor, so the lock goes away with the parent, never held on by a child.

use crate::error::{Error, ErrorKind, Result};
use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::atomic::{AtomicI32, AtomicU64, Ordering};
use std::sync::Once;

/// Name of the lock file inside a store directory.
pub const OWNER_FILE: &str = "txvfs.owner";

/// How long a new owner stays quiet after taking the lock: it commits nothing (neither its
/// own calls nor its clients') until this long after the previous owner's end. A client that
/// saw its owner alive at time T therefore trusts its cache without asking again until
/// T + this: no new owner's commit can precede its reads (see `Client::owner_exited`).
pub const TAKEOVER_QUIET: std::time::Duration = std::time::Duration::from_micros(200);

static FORKS: AtomicU64 = AtomicU64::new(0);

/// Lock descriptors of this process, for the at-fork child handler (which may not take locks
/// or allocate). -1 is a free slot.
const SLOTS: usize = 256;
static LOCK_FDS: [AtomicI32; SLOTS] = [const { AtomicI32::new(-1) }; SLOTS];

extern "C" fn after_fork_in_child() {
    FORKS.fetch_add(1, Ordering::SeqCst);
    for slot in &LOCK_FDS {
        let fd = slot.swap(-1, Ordering::SeqCst);
        if fd >= 0 {
            // SAFETY: close is async-signal-safe; the descriptor is the child's copy.
            unsafe { libc::close(fd) };
        }
    }
}

fn register_fork_handler() {
    static ONCE: Once = Once::new();
    // SAFETY: registers a plain function without arguments for the child side of fork().
    ONCE.call_once(|| unsafe {
        libc::pthread_atfork(None, None, Some(after_fork_in_child));
    });
}

/// How many times this process image has been forked off (0 in the original process).
/// A store remembers the value at open; a different value means "inherited across fork".
pub fn fork_generation() -> u64 {
    FORKS.load(Ordering::SeqCst)
}

/// The error every call on a store inherited across fork() gets in the child.
pub fn forked_error(what: &str, owner_pid: u32) -> Error {
    Error::new(
        ErrorKind::Busy,
        format!(
            "{what}: this store was opened by process {owner_pid} before fork(); a store cannot be \
             used across fork: open it in the child (possible once process {owner_pid} has closed it)"
        ),
    )
}

/// The ownership lock of one store directory; released when dropped.
pub struct OwnerLock {
    fd: i32,
    slot: Option<usize>,
    generation: u64,
    pid: u32,
    /// When the lock was taken (see [`OwnerLock::wait_quiet`]).
    taken: std::time::Instant,
}

/// Has the at-fork handler close descriptor `fd` in every child, so that an open-file-
/// description lock on it goes away with this process, not with the last of its children.
/// Returns the slot to pass to [`keep_in_children`] before closing `fd`.
pub fn close_in_children(fd: i32) -> Option<usize> {
    register_fork_handler();
    LOCK_FDS
        .iter()
        .position(|s| s.compare_exchange(-1, fd, Ordering::SeqCst, Ordering::SeqCst).is_ok())
}

/// Undoes [`close_in_children`] (call before closing the descriptor).
pub fn keep_in_children(slot: Option<usize>) {
    if let Some(i) = slot {
        LOCK_FDS[i].store(-1, Ordering::SeqCst);
    }
}

fn ofd_lock(fd: i32, kind: i32, cmd: i32) -> std::io::Result<libc::flock> {
    // SAFETY: flock is plain data; zeroed is a valid value (whole file from offset 0).
    let mut fl: libc::flock = unsafe { std::mem::zeroed() };
    fl.l_type = kind as libc::c_short;
    fl.l_whence = libc::SEEK_SET as libc::c_short;
    // SAFETY: fd is open; fl is a valid flock for F_OFD_SETLK/F_OFD_GETLK.
    if unsafe { libc::fcntl(fd, cmd, &mut fl) } == -1 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(fl)
}

impl OwnerLock {
    /// Takes the ownership lock of the store in `dir`, or fails with [`ErrorKind::Busy`]
    /// naming the process that holds it (this one, if another copy of txvfs in this process
    /// has the store open).
    /// The file also says whether the owner serves other processes (`shared`) or not
    /// (`exclusive`), so that they can tell "wait for it" from "refused".
    pub fn acquire(dir: &Path, what: &str, exclusive: bool) -> Result<OwnerLock> {
        register_fork_handler();
        let path = dir.join(OWNER_FILE);
        let c = CString::new(path.as_os_str().as_bytes())
            .map_err(|_| Error::new(ErrorKind::Invalid, format!("{what}: path contains NUL")))?;
        // SAFETY: c is a valid C string; the flags and mode are plain values.
        let fd = unsafe {
            libc::open(c.as_ptr(), libc::O_RDWR | libc::O_CREAT | libc::O_CLOEXEC, 0o644)
        };
        if fd < 0 {
            let e = std::io::Error::last_os_error();
            return Err(Error::new(
                ErrorKind::Backend,
                format!("{what}: cannot open {}: {e}", path.display()),
            ));
        }
        // SAFETY: getpid cannot fail.
        let pid = unsafe { libc::getpid() } as u32;
        if let Err(e) = ofd_lock(fd, libc::F_WRLCK, libc::F_OFD_SETLK) {
            let holder = read_owner(fd).0;
            // SAFETY: fd is ours and open.
            unsafe { libc::close(fd) };
            if matches!(e.raw_os_error(), Some(libc::EAGAIN) | Some(libc::EACCES)) {
                let by = match holder {
                    Some(p) if p == pid => format!(
                        "this process (pid {pid}), through another copy of the txvfs library \
                         (another binding: the Python module, the C library, the SQLite extension)"
                    ),
                    Some(p) => format!("process {p}"),
                    None => "another process".to_string(),
                };
                return Err(Error::new(
                    ErrorKind::Busy,
                    format!("{what}: store is in use by {by}"),
                ));
            }
            return Err(Error::new(
                ErrorKind::Backend,
                format!("{what}: cannot lock {}: {e}", path.display()),
            ));
        }
        let taken = std::time::Instant::now();
        write_owner(fd, pid, exclusive);
        Ok(OwnerLock { fd, slot: close_in_children(fd), generation: fork_generation(), pid, taken })
    }

    /// Waits until [`TAKEOVER_QUIET`] has passed since the lock was taken (the previous owner
    /// ended before that): called before the store commits anything. Opening RocksDB takes
    /// longer than that, so this rarely sleeps.
    pub fn wait_quiet(&self) {
        if let Some(rest) = TAKEOVER_QUIET.checked_sub(self.taken.elapsed()) {
            std::thread::sleep(rest);
        }
    }

    /// True when this lock was taken before a fork of this process (so the caller is a child).
    pub fn inherited(&self) -> bool {
        self.generation != fork_generation()
    }

    /// Records in the owner file that this owner serves nobody after all (it could not
    /// serve), so other processes are refused at once instead of waiting for a server.
    pub fn mark_exclusive(&self) {
        write_owner(self.fd, self.pid, true);
    }

    /// Records in the owner file the abstract socket name this owner serves on (when the
    /// store's file system cannot hold its socket file; see `kv/shared/endpoint.rs`).
    pub fn publish_socket(&self, name: &str) {
        write_owner_line(self.fd, &format!("{} shared @{name}\n", self.pid));
    }

    /// The pid of the process that took the lock.
    pub fn owner_pid(&self) -> u32 {
        self.pid
    }
}

impl Drop for OwnerLock {
    fn drop(&mut self) {
        if self.inherited() {
            // The at-fork handler closed the child's copy (or the slot table was full and the
            // child keeps it until exit); the number may name another file by now.
            return;
        }
        keep_in_children(self.slot);
        // SAFETY: fd is ours; closing the last descriptor of the description releases the lock.
        unsafe { libc::close(self.fd) };
    }
}

/// The pid in a store's owner file and whether that owner uses the store exclusively: it
/// said so, or it wrote no mode at all (a txvfs from before stores were shared, which serves
/// nobody). (None, false) when there is no readable owner file.
pub fn owner_info(dir: &Path) -> (Option<u32>, bool) {
    use std::os::unix::io::AsRawFd;
    match std::fs::File::open(dir.join(OWNER_FILE)) {
        Ok(f) => read_owner(f.as_raw_fd()),
        Err(_) => (None, false),
    }
}

/// The pid in a store's owner file and the abstract socket name it serves on, if it published
/// one (`None`: its socket is the file in the store directory, or it serves nobody).
pub fn owner_socket(dir: &Path) -> (Option<u32>, Option<String>) {
    use std::os::unix::io::AsRawFd;
    let Ok(f) = std::fs::File::open(dir.join(OWNER_FILE)) else { return (None, None) };
    let text = read_owner_text(f.as_raw_fd());
    let mut words = text.split_whitespace();
    let pid = words.next().and_then(|w| w.parse().ok());
    let name = words.nth(1).and_then(|w| w.strip_prefix('@')).map(str::to_string);
    (pid, name)
}

fn read_owner_text(fd: i32) -> String {
    let mut buf = [0u8; 256];
    // SAFETY: buf is writable for its length.
    let n = unsafe { libc::pread(fd, buf.as_mut_ptr().cast(), buf.len(), 0) };
    if n <= 0 {
        return String::new();
    }
    String::from_utf8_lossy(&buf[..n as usize]).into_owned()
}

fn read_owner(fd: i32) -> (Option<u32>, bool) {
    let text = read_owner_text(fd);
    if text.is_empty() {
        // Empty: its owner is between taking the lock and writing the file.
        return (None, false);
    }
    let mut words = text.split_whitespace();
    let pid = words.next().and_then(|w| w.parse().ok());
    (pid, words.next() != Some("shared"))
}

fn write_owner(fd: i32, pid: u32, exclusive: bool) {
    write_owner_line(fd, &format!("{pid} {}\n", if exclusive { "exclusive" } else { "shared" }));
}

fn write_owner_line(fd: i32, text: &str) {
    // SAFETY: fd is open for writing; text is readable for its length. Written over the old
    // text, then cut to its length: a reader sees the old line, the new one, or (while it is
    // being written) a mix that names no socket; it then tries again. A failure to write is
    // ignored: the pid is for messages, and an owner whose socket name is missing is waited
    // for, then reported as not serving.
    unsafe {
        libc::pwrite(fd, text.as_ptr().cast(), text.len(), 0);
        libc::ftruncate(fd, text.len() as libc::off_t);
    }
}

/// A lock on the `txvfs.owner` file of a named snapshot: shared by its readers, exclusive
/// for its deletion, so a snapshot is never deleted under a reader. Released when dropped.
pub struct SnapshotLock {
    fd: i32,
    /// See [`close_in_children`]: a forked child does not keep the snapshot locked.
    slot: Option<usize>,
    generation: u64,
    pid: u32,
}

impl SnapshotLock {
    /// Takes the lock of the snapshot in `dir` (shared, or `exclusive`), or fails with
    /// [`ErrorKind::Busy`] naming why.
    pub fn acquire(dir: &Path, what: &str, exclusive: bool) -> Result<SnapshotLock> {
        let path = dir.join(OWNER_FILE);
        let c = CString::new(path.as_os_str().as_bytes())
            .map_err(|_| Error::new(ErrorKind::Invalid, format!("{what}: path contains NUL")))?;
        // A shared lock needs a descriptor open for reading, an exclusive one for writing.
        let mode = if exclusive { libc::O_RDWR } else { libc::O_RDONLY };
        // SAFETY: c is a valid C string; the flags are plain values.
        let fd = unsafe { libc::open(c.as_ptr(), mode | libc::O_CLOEXEC) };
        if fd < 0 {
            let e = std::io::Error::last_os_error();
            return Err(Error::new(
                ErrorKind::Backend,
                format!("{what}: cannot open {}: {e}", path.display()),
            ));
        }
        let kind = if exclusive { libc::F_WRLCK } else { libc::F_RDLCK };
        if let Err(e) = ofd_lock(fd, kind, libc::F_OFD_SETLK) {
            // SAFETY: fd is ours and open.
            unsafe { libc::close(fd) };
            if matches!(e.raw_os_error(), Some(libc::EAGAIN) | Some(libc::EACCES)) {
                let why = if exclusive {
                    "the snapshot is open (by this or another process)"
                } else {
                    "the snapshot is being deleted"
                };
                return Err(Error::new(ErrorKind::Busy, format!("{what}: {why}")));
            }
            return Err(Error::new(
                ErrorKind::Backend,
                format!("{what}: cannot lock {}: {e}", path.display()),
            ));
        }
        // SAFETY: getpid cannot fail.
        let pid = unsafe { libc::getpid() } as u32;
        Ok(SnapshotLock { fd, slot: close_in_children(fd), generation: fork_generation(), pid })
    }

    /// True when this lock was taken before a fork of this process (so the caller is a child).
    pub fn inherited(&self) -> bool {
        self.generation != fork_generation()
    }

    /// The pid of the process that took the lock.
    pub fn owner_pid(&self) -> u32 {
        self.pid
    }
}

impl Drop for SnapshotLock {
    fn drop(&mut self) {
        if self.inherited() {
            // The at-fork handler closed the child's copy (see `OwnerLock`'s drop).
            return;
        }
        keep_in_children(self.slot);
        // SAFETY: fd is ours; closing it releases the lock.
        unsafe { libc::close(self.fd) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A client trusts its cache for TAKEOVER_QUIET after it saw its owner alive: a new
    /// owner must not commit before that has passed since it took the lock.
    #[test]
    fn a_new_owner_stays_quiet_after_taking_the_lock() {
        let d = tempfile::tempdir().unwrap();
        let lock = OwnerLock::acquire(d.path(), "test", false).unwrap();
        lock.wait_quiet();
        assert!(lock.taken.elapsed() >= TAKEOVER_QUIET);
    }
}
