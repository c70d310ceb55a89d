//! Who the owner serves: exactly the processes that may write the store directory.
//!
//! A process that may write the directory can already do anything to the store (replace its
//! files, become its owner when the owner goes), so serving it grants nothing new; a process
//! that may not must not reach the store through the owner, which acts with the owner's
//! rights. The rule is checked at every new connection from the peer's credentials
//! (`SO_PEERCRED`, `SO_PEERGROUPS`) against the directory's owner, group and permission
//! bits (write and search), as the kernel would check them, root always passing; the same
//! rule on both kinds of socket (`endpoint.rs`): the socket file's own mode decides nothing
//! (it is made connectable by all, so that a refused process gets an error saying why,
//! rather than EACCES from `connect`). ACLs and capabilities other than root's are not
//! consulted.

use crate::error::{Error, ErrorKind, Result};
use std::os::unix::fs::MetadataExt;
use std::os::unix::io::AsRawFd;
use std::os::unix::net::UnixStream;
use std::path::Path;

/// The credentials of a connected peer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Peer {
    pub(crate) pid: u32,
    pub(crate) uid: u32,
    /// Its effective group and supplementary groups.
    pub(crate) groups: Vec<u32>,
}

/// `SO_PEERGROUPS` (Linux 4.13), where it has its generic number.
#[cfg(not(any(
    target_arch = "mips",
    target_arch = "mips64",
    target_arch = "sparc64",
    target_arch = "powerpc",
    target_arch = "powerpc64"
)))]
const SO_PEERGROUPS: Option<libc::c_int> = Some(59);
#[cfg(any(
    target_arch = "mips",
    target_arch = "mips64",
    target_arch = "sparc64",
    target_arch = "powerpc",
    target_arch = "powerpc64"
))]
const SO_PEERGROUPS: Option<libc::c_int> = None;

/// The credentials of the process at the other end of `s` (for a listener: the process that
/// listened; for an accepted connection: the process that connected).
pub(crate) fn peer_cred(s: &UnixStream) -> Option<libc::ucred> {
    // SAFETY: an all-zero ucred is a valid value; getsockopt writes at most `len` bytes.
    unsafe {
        let mut c: libc::ucred = std::mem::zeroed();
        let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
        let r = libc::getsockopt(
            s.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            (&mut c as *mut libc::ucred).cast(),
            &mut len,
        );
        (r == 0).then_some(c)
    }
}

/// The peer of an accepted connection, with its groups (its effective group only where the
/// kernel cannot tell the others).
pub(crate) fn peer(s: &UnixStream) -> Option<Peer> {
    let c = peer_cred(s)?;
    let mut groups = vec![c.gid];
    if let Some(opt) = SO_PEERGROUPS {
        let mut buf = [0 as libc::gid_t; 256];
        let mut len = std::mem::size_of_val(&buf) as libc::socklen_t;
        // SAFETY: getsockopt writes at most `len` bytes into `buf`.
        let r = unsafe {
            libc::getsockopt(
                s.as_raw_fd(),
                libc::SOL_SOCKET,
                opt,
                buf.as_mut_ptr().cast(),
                &mut len,
            )
        };
        if r == 0 {
            let n = len as usize / std::mem::size_of::<libc::gid_t>();
            groups.extend_from_slice(&buf[..n.min(buf.len())]);
        }
    }
    Some(Peer { pid: c.pid as u32, uid: c.uid, groups })
}

/// Whether a process of `uid` in `groups` may write (and search) a directory of this owner,
/// group and mode, by its permission bits: owner bits for its owner, else group bits for a
/// member of its group, else the others' bits; root always.
pub(crate) fn may_write(mode: u32, dir_uid: u32, dir_gid: u32, uid: u32, groups: &[u32]) -> bool {
    if uid == 0 {
        return true;
    }
    let bits = if uid == dir_uid {
        mode >> 6
    } else if groups.contains(&dir_gid) {
        mode >> 3
    } else {
        mode
    };
    bits & 0o3 == 0o3
}

/// Admits the process at the other end of `s`, a new connection to the owner of the store in
/// `dir`, or says why not (`Access`). `what` names the store and its socket for the message.
pub(crate) fn admit(dir: &Path, s: &UnixStream, what: &str) -> Result<Peer> {
    let refuse = |why: String| {
        Err(Error::new(
            ErrorKind::Access,
            format!(
                "{what}: {why}; the store's owner serves only processes that may write the \
                 store directory (and root)"
            ),
        ))
    };
    let Some(p) = peer(s) else { return refuse("cannot tell who is connecting".into()) };
    let m = match std::fs::metadata(dir) {
        Ok(m) => m,
        Err(e) => return refuse(format!("{}: {e}", dir.display())),
    };
    if !may_write(m.mode() & 0o777, m.uid(), m.gid(), p.uid, &p.groups) {
        return refuse(format!(
            "process {} (uid {}) may not write {} (owner {}, group {}, mode {:o})",
            p.pid,
            p.uid,
            dir.display(),
            m.uid(),
            m.gid(),
            m.mode() & 0o777
        ));
    }
    Ok(p)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rule_is_the_kernels_for_a_directory() {
        let (alice, bob, carol, staff) = (1000, 1001, 1002, 50);
        // Owner bits for the owner, even where the group's are wider.
        assert!(may_write(0o700, alice, staff, alice, &[alice]));
        assert!(!may_write(0o570, alice, staff, alice, &[staff]));
        assert!(!may_write(0o500, alice, staff, alice, &[alice]));
        // Write without search is not enough.
        assert!(!may_write(0o200, alice, staff, alice, &[alice]));
        // Group bits for a member (by any of its groups), never for others.
        assert!(may_write(0o770, alice, staff, bob, &[bob, staff]));
        assert!(!may_write(0o750, alice, staff, bob, &[bob, staff]));
        assert!(!may_write(0o770, alice, staff, carol, &[carol]));
        // Others' bits for the rest; a member gets the group's bits, not the others'.
        assert!(may_write(0o777, alice, staff, carol, &[carol]));
        assert!(!may_write(0o707, alice, staff, bob, &[staff]));
        // Root always.
        assert!(may_write(0o000, alice, staff, 0, &[0]));
    }

    #[test]
    fn this_process_may_write_its_own_directory() {
        let d = tempfile::tempdir().unwrap();
        let (a, b) = UnixStream::pair().unwrap();
        let p = admit(d.path(), &a, "test").unwrap();
        assert_eq!(p.pid, std::process::id());
        drop(b);
    }
}
