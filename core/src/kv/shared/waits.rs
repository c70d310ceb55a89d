//! Deadlines for waits on another process: no client call waits for ever on its store's owner.
//!
//! Every request a client sends and every reply it waits for is bounded by the store's
//! `owner_timeout` (the URI option `owner_timeout=SECONDS`, [`DEFAULT_OWNER_TIMEOUT`] by
//! default; `0` fails at once when the owner does not answer straight away). When it runs out
//! the call fails with EBUSY and a message that names the owner's pid and says why it did not
//! answer: stopped (SIGSTOP, Ctrl-Z, a debugger; read from `/proc/PID/stat`), gone, or running
//! but slow. Nothing is left half-done: a commit the owner had not read yet is withdrawn (the
//! client shuts its connection down first, then checks with `SIOCOUTQ` that the owner had not
//! consumed the request; the owner checks for that hang-up before it commits), and a commit it
//! had read gives CommitUnknown, as a lost connection does.

use crate::error::{Error, ErrorKind};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::Duration;

/// How long a client waits for its store's owner by default.
pub const DEFAULT_OWNER_TIMEOUT: Duration = Duration::from_secs(30);

/// The shortest wait on a socket: `owner_timeout=0` means "fail unless the owner answers at
/// once", which a socket timeout of zero cannot express (zero means no timeout).
const MIN_WAIT: Duration = Duration::from_millis(1);

/// The timeout to put on a client's socket for a store's `owner_timeout`.
pub(crate) fn socket_timeout(owner_timeout: Duration) -> Duration {
    owner_timeout.max(MIN_WAIT)
}

/// What a process is doing, as far as `/proc` tells.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ProcState {
    /// Stopped by a signal (SIGSTOP, SIGTSTP) or by a debugger.
    Stopped,
    /// Alive and not stopped; the character is its state in `/proc/PID/stat`.
    Running(char),
    /// No such process.
    Gone,
}

/// The state of process `pid` (from the field after the command name in `/proc/PID/stat`).
pub(crate) fn proc_state(pid: u32) -> ProcState {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return ProcState::Gone;
    };
    // "PID (COMMAND) STATE ...": the command may contain ')' itself, so take the last one.
    let state = stat.rfind(')').and_then(|i| stat[i + 1..].trim_start().chars().next());
    match state {
        Some('T') | Some('t') => ProcState::Stopped,
        Some('Z') | Some('X') => ProcState::Gone,
        Some(c) => ProcState::Running(c),
        None => ProcState::Running('?'),
    }
}

/// Why the owner `pid` did not answer, in words.
fn why(pid: Option<u32>) -> String {
    let Some(pid) = pid else {
        return "the store's owner process (pid unknown) did not answer".into();
    };
    match proc_state(pid) {
        ProcState::Stopped => format!(
            "owner process {pid} is stopped (SIGSTOP or SIGTSTP, e.g. Ctrl-Z, a debugger or a \
             paused container); it answers again once continued (SIGCONT)"
        ),
        ProcState::Gone => format!("owner process {pid} has exited"),
        ProcState::Running('D') => {
            format!("owner process {pid} is running but blocked in the kernel (disk I/O) and slow")
        }
        ProcState::Running(_) => format!("owner process {pid} is running but slow to answer"),
    }
}

/// What a call that ran out of time had done, for the error message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// Not a commit: nothing changed.
    NoChange,
    /// A commit that the owner had not read: withdrawn, nothing changed.
    Withdrawn,
    /// A commit the owner had read: it may or may not take effect.
    Unknown,
}

/// The error of a wait on the owner (`pid`, when known) that lasted `waited` without an answer
/// (None: not waited, the owner was found stopped by an earlier call and still is).
pub(crate) fn owner_stalled(
    describe: &str,
    pid: Option<u32>,
    waited: Option<Duration>,
    outcome: Outcome,
) -> Error {
    let waited = match waited {
        Some(w) => format!("waited {:.3} s (the store's owner_timeout)", w.as_secs_f64()),
        None => "failing at once: an earlier call already waited for it".into(),
    };
    let why = why(pid);
    match outcome {
        Outcome::NoChange => Error::new(
            ErrorKind::Busy,
            format!("{describe}: {why}; {waited}; nothing was changed: retry later"),
        ),
        Outcome::Withdrawn => Error::new(
            ErrorKind::Busy,
            format!(
                "{describe}: {why}; {waited}; the commit was withdrawn before the owner read it: \
                 nothing was changed: retry later"
            ),
        ),
        Outcome::Unknown => Error::new(
            ErrorKind::CommitUnknown,
            format!(
                "{describe}: {why}; {waited} after it had read the commit: the commit may or may \
                 not take effect"
            ),
        ),
    }
}

/// True when `e` is a socket timeout (SO_RCVTIMEO / SO_SNDTIMEO ran out).
pub(crate) fn is_timeout(e: &std::io::Error) -> bool {
    matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut)
}

/// True when the peer of socket `fd` has shut both its sides down ([`withdraw`]) or closed it:
/// a client that gave up waiting, whose pending commit must then not be applied. Only both
/// directions count (POLLHUP): the server's own stop shuts its reading side (POLLRDHUP alone)
/// to drain what is queued, and those commits must still be carried out.
pub(crate) fn peer_hung_up(fd: i32) -> bool {
    let mut p = libc::pollfd { fd, events: 0, revents: 0 };
    // SAFETY: polls one valid pollfd without waiting.
    let n = unsafe { libc::poll(&mut p, 1, 0) };
    n > 0 && p.revents & libc::POLLHUP != 0
}

/// Shuts socket `fd` down both ways, then tells whether the peer had left part of what was sent
/// unread (`SIOCOUTQ`, the bytes of this socket still queued at the receiver). When it had,
/// the last request never reached the peer whole, and the peer (which checks
/// [`peer_hung_up`] before acting on a commit) will not act on it.
pub(crate) fn withdraw(fd: i32) -> bool {
    // SAFETY: plain calls on an open descriptor; `queued` is a valid int to write.
    unsafe {
        libc::shutdown(fd, libc::SHUT_RDWR);
        let mut queued: libc::c_int = 0;
        libc::ioctl(fd, libc::TIOCOUTQ, &mut queued) == 0 && queued > 0
    }
}

/// Connects to the Unix socket at `path`, waiting at most `timeout` (see [`socket_timeout`])
/// for room in its listen backlog. A stopped server's backlog fills up, and a plain connect(2)
/// then waits until the server runs again; with a send timeout on the socket the kernel gives
/// up after it with EAGAIN (a timeout for [`is_timeout`]).
pub(crate) fn connect(path: &Path, timeout: Duration) -> std::io::Result<UnixStream> {
    use std::os::unix::ffi::OsStrExt;
    let bytes = path.as_os_str().as_bytes();
    if bytes.contains(&0) {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("socket path {} holds a NUL", path.display()),
        ));
    }
    connect_to(bytes, timeout)
}

/// [`connect`] to the socket whose `sun_path` is `name`: a path, or (starting with a NUL
/// byte) a name in Linux's abstract namespace, whose length is then part of the name.
pub(crate) fn connect_to(name: &[u8], timeout: Duration) -> std::io::Result<UnixStream> {
    use std::os::fd::{FromRawFd, OwnedFd};
    // SAFETY: an all-zero sockaddr_un is a valid value.
    let mut addr: libc::sockaddr_un = unsafe { std::mem::zeroed() };
    addr.sun_family = libc::AF_UNIX as libc::sa_family_t;
    if name.is_empty() || name.len() >= addr.sun_path.len() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("socket name {:?} is empty or too long", String::from_utf8_lossy(name)),
        ));
    }
    for (d, s) in addr.sun_path.iter_mut().zip(name) {
        *d = *s as libc::c_char;
    }
    // A path is NUL-terminated inside the whole structure; an abstract name has its length.
    let len = if name[0] == 0 {
        (std::mem::size_of::<libc::sa_family_t>() + name.len()) as libc::socklen_t
    } else {
        std::mem::size_of::<libc::sockaddr_un>() as libc::socklen_t
    };
    let t = socket_timeout(timeout);
    let tv = libc::timeval {
        tv_sec: t.as_secs().min(i32::MAX as u64) as libc::time_t,
        tv_usec: t.subsec_micros() as libc::suseconds_t,
    };
    // SAFETY: plain socket calls on a descriptor owned at once; `addr` and `tv` are valid
    // for the lengths given.
    unsafe {
        let fd = libc::socket(libc::AF_UNIX, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0);
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        let owned = OwnedFd::from_raw_fd(fd);
        let tv_len = std::mem::size_of::<libc::timeval>() as libc::socklen_t;
        let set = libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_SNDTIMEO,
            (&tv as *const libc::timeval).cast(),
            tv_len,
        );
        if set != 0 {
            return Err(std::io::Error::last_os_error());
        }
        loop {
            if libc::connect(fd, (&addr as *const libc::sockaddr_un).cast(), len) == 0 {
                return Ok(UnixStream::from(owned));
            }
            let e = std::io::Error::last_os_error();
            if e.kind() != std::io::ErrorKind::Interrupted {
                return Err(e);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zero_waits_the_shortest_time() {
        assert_eq!(socket_timeout(Duration::ZERO), MIN_WAIT);
    }

    #[test]
    fn this_process_is_running_and_a_reaped_child_is_gone() {
        assert!(matches!(proc_state(std::process::id()), ProcState::Running(_)));
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        child.wait().unwrap();
        assert_eq!(proc_state(pid), ProcState::Gone);
    }
}
