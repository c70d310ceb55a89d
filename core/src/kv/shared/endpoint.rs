//! Where a store's owner listens for the other processes, and how they find it.
//!
//! The socket is the file `txvfs.sock` in the store directory whenever that directory can
//! hold one. Some file systems cannot hold a socket file (FUSE file systems without `mknod`, such
//! as the power-cut test's lazyfs; some network file systems). There the owner listens on a
//! Linux *abstract* socket instead (no file; it disappears with its process) whose name is
//! `txvfs/DEV:INO/PID/RANDOM` (the store directory's identity, the owner's pid, 64 random
//! bits: two stores, or two owners of one store, never share a name) and writes that name
//! into the store's owner file (`txvfs.owner`, after its pid: `PID shared @NAME`). A client
//! reads it there and, once connected, checks with `SO_PEERCRED` that the process listening
//! is the one the owner file names: a stale name (its owner died: nobody listens) or another
//! process's socket is never taken for the owner. An abstract socket is reachable only within
//! the owner's network namespace. On both kinds the owner serves the same processes, checked
//! at each connection: those that may write the store directory (`access.rs`).
//! `TXVFS_SOCKET=abstract` in the owner's environment chooses the abstract socket on any file
//! system (for tests).

use super::socket_path;
use crate::kv::owner::owner_socket;
use std::os::unix::io::{FromRawFd, OwnedFd};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Where one owner listens.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Endpoint {
    /// `txvfs.sock` in the store directory.
    InDir(PathBuf),
    /// An abstract socket of this name (without the leading NUL), served by process `pid`.
    Abstract { name: String, pid: u32 },
}

/// The environment variable that chooses the abstract socket on any file system.
const CHOOSE: &str = "TXVFS_SOCKET";

/// Starts listening for the store in `dir`: on its socket file (replacing a stale one: the
/// caller holds the owner lock, so no live server uses it), or where the file system cannot
/// hold one, on a new abstract socket. The caller publishes an abstract name.
pub(crate) fn listen(dir: &Path) -> std::io::Result<(UnixListener, Endpoint)> {
    let abstract_only = std::env::var_os(CHOOSE).is_some_and(|v| v == "abstract");
    let in_dir = if abstract_only {
        Err(std::io::Error::other("TXVFS_SOCKET=abstract"))
    } else {
        socket_path(dir, |p| {
            match std::fs::remove_file(p) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
                _ => {}
            }
            let l = UnixListener::bind(p)?;
            // Connectable by all: who is served is checked at each connection
            // (`access.rs`), and a refused process is told why.
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o666))?;
            Ok(l)
        })
    };
    match in_dir {
        Ok(l) => Ok((l, Endpoint::InDir(dir.to_path_buf()))),
        Err(file_error) => {
            let pid = std::process::id();
            // A name taken (by chance, or on purpose) is not ours: draw another.
            for _ in 0..8 {
                let name = abstract_name(dir, pid)?;
                match bind_abstract(&name) {
                    Ok(l) => return Ok((l, Endpoint::Abstract { name, pid })),
                    Err(e) if e.raw_os_error() == Some(libc::EADDRINUSE) => continue,
                    Err(e) => {
                        return Err(std::io::Error::new(
                            e.kind(),
                            format!("socket file: {file_error}; abstract socket: {e}"),
                        ))
                    }
                }
            }
            Err(std::io::Error::other("no free abstract socket name"))
        }
    }
}

/// A new abstract name for the store in `dir`, served by `pid`.
fn abstract_name(dir: &Path, pid: u32) -> std::io::Result<String> {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata(dir)?;
    let mut r = [0u8; 8];
    // SAFETY: getrandom writes at most the length given into `r`.
    let n = unsafe { libc::getrandom(r.as_mut_ptr().cast(), r.len(), 0) };
    if n != r.len() as isize {
        return Err(std::io::Error::last_os_error());
    }
    let r = u64::from_le_bytes(r);
    Ok(format!("txvfs/{:x}:{:x}/{pid}/{r:016x}", m.dev(), m.ino()))
}

fn bind_abstract(name: &str) -> std::io::Result<UnixListener> {
    // SAFETY: an all-zero sockaddr_un is a valid value.
    let mut addr: libc::sockaddr_un = unsafe { std::mem::zeroed() };
    addr.sun_family = libc::AF_UNIX as libc::sa_family_t;
    let bytes = name.as_bytes();
    if bytes.len() + 1 > addr.sun_path.len() {
        return Err(std::io::Error::other("abstract socket name too long"));
    }
    // sun_path[0] stays NUL: the abstract namespace.
    for (d, s) in addr.sun_path[1..].iter_mut().zip(bytes) {
        *d = *s as libc::c_char;
    }
    let len = (std::mem::size_of::<libc::sa_family_t>() + 1 + bytes.len()) as libc::socklen_t;
    // SAFETY: plain socket calls on a descriptor owned at once; `addr` is valid for `len`.
    unsafe {
        let fd = libc::socket(libc::AF_UNIX, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0);
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        let owned = OwnedFd::from_raw_fd(fd);
        if libc::bind(fd, (&addr as *const libc::sockaddr_un).cast(), len) != 0
            || libc::listen(fd, 128) != 0
        {
            return Err(std::io::Error::last_os_error());
        }
        Ok(UnixListener::from(owned))
    }
}

impl Endpoint {
    /// Where the owner of the store in `dir` listens, as its owner file says now.
    pub(crate) fn of(dir: &Path) -> Endpoint {
        match owner_socket(dir) {
            (Some(pid), Some(name)) => Endpoint::Abstract { name, pid },
            _ => Endpoint::InDir(dir.to_path_buf()),
        }
    }

    /// Connects (see `waits::connect`). On an abstract socket, a listener that is not the
    /// process the owner file named is refused (`ConnectionRefused`, as if nobody listened).
    pub(crate) fn connect(&self, timeout: Duration) -> std::io::Result<UnixStream> {
        match self {
            Endpoint::InDir(dir) => socket_path(dir, |p| super::waits::connect(p, timeout)),
            Endpoint::Abstract { name, pid } => {
                let mut full = vec![0u8];
                full.extend_from_slice(name.as_bytes());
                let s = super::waits::connect_to(&full, timeout)?;
                match super::access::peer_cred(&s) {
                    Some(c) if c.pid as u32 == *pid => Ok(s),
                    _ => Err(std::io::Error::new(
                        std::io::ErrorKind::ConnectionRefused,
                        format!("abstract socket {name:?} is not served by process {pid}"),
                    )),
                }
            }
        }
    }

    /// Removes what the endpoint left behind once its server has stopped (the socket file;
    /// an abstract socket goes with its descriptor).
    pub(crate) fn remove(&self) {
        if let Endpoint::InDir(dir) = self {
            let _ = socket_path(dir, |p| std::fs::remove_file(p));
        }
    }

    /// The name to publish in the owner file, if others cannot find it without.
    pub(crate) fn published(&self) -> Option<&str> {
        match self {
            Endpoint::InDir(_) => None,
            Endpoint::Abstract { name, .. } => Some(name),
        }
    }

    /// For messages: where it is.
    pub(crate) fn describe(&self) -> String {
        match self {
            Endpoint::InDir(dir) => dir.join(super::SOCKET_FILE).display().to_string(),
            Endpoint::Abstract { name, .. } => format!("abstract socket @{name}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_abstract_name_is_taken_only_from_the_process_the_owner_file_names() {
        let name = format!("txvfs/test/{}/{:x}", std::process::id(), line!());
        let listener = bind_abstract(&name).unwrap();
        let me = std::process::id();
        let t = Duration::from_secs(5);
        let ours = Endpoint::Abstract { name: name.clone(), pid: me };
        let s = ours.connect(t).unwrap();
        drop((s, listener.accept().unwrap()));
        // Another process said to be the owner: whoever listens here is not it.
        let other = Endpoint::Abstract { name: name.clone(), pid: me + 1 };
        let e = other.connect(t).unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::ConnectionRefused, "{e}");
        // A name nobody listens on any more (its owner died): refused, never waited on. (A
        // test thread forking meanwhile holds a copy of the listener until its child execs:
        // the name is then bound a moment longer.)
        drop(listener);
        let started = std::time::Instant::now();
        let e = loop {
            match ours.connect(t) {
                Err(e) => break e,
                Ok(_) if started.elapsed() < Duration::from_secs(5) => {
                    std::thread::sleep(Duration::from_millis(10))
                }
                Ok(_) => panic!("the name is still bound 5 s after its listener closed"),
            }
        };
        assert_eq!(e.kind(), std::io::ErrorKind::ConnectionRefused, "{e}");
    }

    #[test]
    fn two_stores_get_different_names() {
        let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let pid = std::process::id();
        let (na, nb) =
            (abstract_name(a.path(), pid).unwrap(), abstract_name(b.path(), pid).unwrap());
        assert_ne!(na, nb);
        assert_ne!(
            abstract_name(a.path(), pid).unwrap(),
            na,
            "a new owner of one store: a new name"
        );
    }
}
