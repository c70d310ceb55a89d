//! Which processes using a shared store are alive, answered at once, without leases.
//!
//! Each open store in a process has a random id. On a store shared through its directory, the
//! process holds an open-file-description lock on the byte at offset `id` of `txvfs.alive`
//! (taken when the file layer registers the id). The kernel drops the lock when the process
//! dies, however it dies, so a probe (`F_OFD_GETLK`) tells a dead process from a live one at
//! once: its open-file marks, staged chunks and file locks can be released without waiting for
//! a lease to run out.

use super::super::owner::{close_in_children, fork_generation, keep_in_children};
use crate::error::{Error, ErrorKind, Result};
use std::collections::HashSet;
use std::mem::ManuallyDrop;
use std::os::fd::OwnedFd;
use std::os::unix::io::AsRawFd;
use std::path::Path;

/// Name of the liveness file inside a store directory.
pub const ALIVE_FILE: &str = "txvfs.alive";

/// This process's liveness locks on one store.
pub(crate) struct Alive {
    /// Closed in `drop`, except in a forked child, where the at-fork handler closed it.
    file: ManuallyDrop<std::fs::File>,
    slot: Option<usize>,
    own: HashSet<u64>,
    generation: u64,
}

/// The byte that stands for process id `id` (positive offsets only).
fn offset(id: u64) -> i64 {
    (id >> 2) as i64
}

fn range_lock(fd: i32, kind: i32, cmd: i32, at: i64) -> std::io::Result<libc::flock> {
    // SAFETY: flock is plain data; zeroed is a valid value.
    let mut fl: libc::flock = unsafe { std::mem::zeroed() };
    fl.l_type = kind as libc::c_short;
    fl.l_whence = libc::SEEK_SET as libc::c_short;
    fl.l_start = at;
    fl.l_len = 1;
    // SAFETY: fd is open; fl is a valid flock for F_OFD_SETLK/F_OFD_GETLK.
    if unsafe { libc::fcntl(fd, cmd, &mut fl) } == -1 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(fl)
}

impl Alive {
    /// Opens the liveness file of the store in `dir`.
    pub(crate) fn open(dir: &Path) -> Result<Alive> {
        let path = dir.join(ALIVE_FILE);
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(|e| Error::new(ErrorKind::Backend, format!("{}: {e}", path.display())))?;
        let slot = close_in_children(file.as_raw_fd());
        Ok(Alive {
            file: ManuallyDrop::new(file),
            slot,
            own: HashSet::new(),
            generation: fork_generation(),
        })
    }

    /// Marks `id` alive for as long as this process keeps the store open.
    pub(crate) fn register(&mut self, id: u64) -> Result<()> {
        range_lock(self.file.as_raw_fd(), libc::F_WRLCK, libc::F_OFD_SETLK, offset(id)).map_err(
            |e| Error::new(ErrorKind::Backend, format!("{ALIVE_FILE}: cannot lock: {e}")),
        )?;
        self.own.insert(id);
        Ok(())
    }

    /// This file's descriptor, to pass to the store's owner with a hello: the proof that
    /// this process holds the ids it registered (see [`Alive::held_by`]).
    pub(crate) fn raw_fd(&self) -> std::os::unix::io::RawFd {
        self.file.as_raw_fd()
    }

    /// Whether `fd` (a descriptor another process passed) is open on this same liveness file.
    pub(crate) fn same_file(&self, fd: &OwnedFd) -> bool {
        let id = |fd: i32| {
            // SAFETY: `st` is plain data written by fstat on an open descriptor.
            let mut st: libc::stat = unsafe { std::mem::zeroed() };
            (unsafe { libc::fstat(fd, &mut st) } == 0).then_some((st.st_dev, st.st_ino))
        };
        id(self.file.as_raw_fd()).is_some_and(|me| id(fd.as_raw_fd()) == Some(me))
    }

    /// Whether the open file description of `theirs` (on this file, [`Alive::same_file`])
    /// holds the lock of id `id`: someone holds it (a probe from this description says so),
    /// and nobody but `theirs` (a probe from it finds no other holder). Only the process that
    /// registered `id`, or one it gave its descriptor, can pass this.
    pub(crate) fn held_by(&self, theirs: &OwnedFd, id: u64) -> bool {
        let locked = |fd: i32| {
            range_lock(fd, libc::F_WRLCK, libc::F_OFD_GETLK, offset(id))
                .map(|fl| fl.l_type != libc::F_UNLCK as libc::c_short)
        };
        !self.own.contains(&id)
            && matches!(locked(self.file.as_raw_fd()), Ok(true))
            && matches!(locked(theirs.as_raw_fd()), Ok(false))
    }

    /// Whether the process that registered `id` is alive.
    pub(crate) fn is_alive(&self, id: u64) -> bool {
        if self.own.contains(&id) {
            return true;
        }
        match range_lock(self.file.as_raw_fd(), libc::F_WRLCK, libc::F_OFD_GETLK, offset(id)) {
            Ok(fl) => fl.l_type != libc::F_UNLCK as libc::c_short,
            Err(_) => true, // cannot tell: assume alive (the safe side)
        }
    }
}

/// Whether any process (other than through an `Alive` of this open) holds a liveness lock on
/// the store in `dir`: a process that becomes the owner must then not take itself to be alone
/// on the store, since those processes' file locks and open marks are in it (a fresh open
/// that becomes the owner after a failover, while the old owner's clients live on).
pub(crate) fn others_alive(dir: &Path) -> bool {
    let Ok(file) = std::fs::File::open(dir.join(ALIVE_FILE)) else { return false };
    // SAFETY: flock is plain data; zeroed is a valid value (the whole file: l_len 0).
    let mut fl: libc::flock = unsafe { std::mem::zeroed() };
    fl.l_type = libc::F_WRLCK as libc::c_short;
    fl.l_whence = libc::SEEK_SET as libc::c_short;
    // SAFETY: the descriptor is open; fl is a valid flock for F_OFD_GETLK.
    match unsafe { libc::fcntl(file.as_raw_fd(), libc::F_OFD_GETLK, &mut fl) } {
        -1 => true, // cannot tell: assume others are there (the safe side)
        _ => fl.l_type != libc::F_UNLCK as libc::c_short,
    }
}

impl Drop for Alive {
    fn drop(&mut self) {
        if self.generation != fork_generation() {
            return; // the descriptor number may name another file by now
        }
        keep_in_children(self.slot);
        // SAFETY: dropped once, here.
        unsafe { ManuallyDrop::drop(&mut self.file) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_holders_descriptor_proves_an_id() {
        let d = tempfile::tempdir().unwrap();
        let probe = Alive::open(d.path()).unwrap();
        let mut holder = Alive::open(d.path()).unwrap();
        let other = Alive::open(d.path()).unwrap();
        let dup = |a: &Alive| OwnedFd::from(a.file.try_clone().unwrap());
        holder.register(40).unwrap();
        assert!(probe.same_file(&dup(&holder)));
        assert!(probe.held_by(&dup(&holder), 40));
        // Another opener of the file, and an id nobody holds, prove nothing.
        assert!(!probe.held_by(&dup(&other), 40));
        assert!(!probe.held_by(&dup(&holder), 4000));
        // Nor does another file.
        let f = std::fs::File::open(d.path()).unwrap();
        assert!(!probe.same_file(&OwnedFd::from(f)));
    }
}
