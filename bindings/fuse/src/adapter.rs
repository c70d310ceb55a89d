//! The adapter's state: the store, the open files and directories of the mount (kernel file
//! handles), and the store handles that hold each kernel lock owner's POSIX locks.

use crate::convert::{attr, errno};
use crate::MountOptions;
use fuser::{Errno, FileHandle, Generation, ReplyAttr, ReplyEntry, Request};
use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use txvfs::{Credential, DirEntry, File, InodeFileSystem, OpenOptions, RangeLockKind, Stat, Store};

/// An open file or directory of the mount.
pub(crate) enum Handle {
    File(Arc<File>),
    Dir(Mutex<Listing>),
}

/// A directory being read: the entries fetched so far, in name order. Kernel offsets index
/// this list (after `.` and `..`), so a listing stays stable while the directory changes.
pub(crate) struct Listing {
    pub(crate) ino: u64,
    pub(crate) entries: Vec<DirEntry>,
    pub(crate) complete: bool,
}

/// Entries fetched from the store per page of a directory listing.
pub(crate) const LIST_PAGE: usize = 1024;

/// The `fuser::Filesystem` of a mount: the store and the mount's open handles.
pub(crate) struct Adapter {
    pub(crate) store: Store,
    pub(crate) ttl: Duration,
    pub(crate) handles: Mutex<HashMap<u64, Arc<Handle>>>,
    pub(crate) next_handle: AtomicU64,
    /// POSIX lock owners: for each (inode, kernel lock owner), a handle that holds that
    /// owner's locks in the store, and the pid F_GETLK reports.
    pub(crate) lock_owners: Mutex<HashMap<LockOwnerKey, (Arc<File>, u32)>>,
}

/// A POSIX lock owner as the kernel names it: (inode, lock owner).
pub(crate) type LockOwnerKey = (u64, u64);

impl Adapter {
    /// The adapter for `store`, mounted with `options`.
    pub(crate) fn new(store: Store, options: &MountOptions) -> Adapter {
        Adapter {
            store,
            ttl: options.ttl,
            handles: Mutex::new(HashMap::new()),
            next_handle: AtomicU64::new(1),
            lock_owners: Mutex::new(HashMap::new()),
        }
    }

    /// The store as seen by the process that made `req`.
    pub(crate) fn as_caller(&self, req: &Request) -> Store {
        let (uid, gid) = (req.uid(), req.gid());
        let groups = if uid == 0 { Vec::new() } else { supplementary_groups(req.pid()) };
        self.store.with_credential(Some(Credential { uid, gid, groups }))
    }

    /// Registers an open file or directory; returns its kernel file handle.
    pub(crate) fn add_handle(&self, h: Handle) -> FileHandle {
        let fh = self.next_handle.fetch_add(1, Ordering::Relaxed);
        self.handles.lock().insert(fh, Arc::new(h));
        FileHandle(fh)
    }

    /// The open file or directory behind a kernel file handle (EBADF if none).
    pub(crate) fn handle(&self, fh: FileHandle) -> Result<Arc<Handle>, Errno> {
        self.handles.lock().get(&fh.0).cloned().ok_or(Errno::EBADF)
    }

    /// The open file behind a kernel file handle (EISDIR for a directory).
    pub(crate) fn file(&self, fh: FileHandle) -> Result<Arc<File>, Errno> {
        match &*self.handle(fh)? {
            Handle::File(f) => Ok(f.clone()),
            Handle::Dir(_) => Err(Errno::EISDIR),
        }
    }

    /// The handle holding the POSIX locks of `owner` on `ino`, opened on first use. The
    /// kernel has checked the descriptor's access mode against the lock type already.
    pub(crate) fn lock_owner(&self, ino: u64, owner: u64, pid: u32) -> Result<Arc<File>, Errno> {
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
    pub(crate) fn release_locks(&self, ino: u64, owner: u64) {
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

    /// Replies to a lookup-like request with the entry's attributes, or its errno.
    pub(crate) fn entry(&self, reply: ReplyEntry, r: txvfs::Result<Stat>) {
        match r {
            Ok(st) => reply.entry(&self.ttl, &attr(&st), Generation(0)),
            Err(e) => reply.error(errno(&e)),
        }
    }

    /// Replies to an attribute request with the attributes, or its errno.
    pub(crate) fn attr(&self, reply: ReplyAttr, r: txvfs::Result<Stat>) {
        match r {
            Ok(st) => reply.attr(&self.ttl, &attr(&st)),
            Err(e) => reply.error(errno(&e)),
        }
    }
}

/// The supplementary groups of process `pid` (empty if it is gone).
pub(crate) fn supplementary_groups(pid: u32) -> Vec<u32> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("Groups:"))
        .map(|g| g.split_whitespace().filter_map(|n| n.parse().ok()).collect())
        .unwrap_or_default()
}
