//! Quotas on directory trees: limits on bytes and inodes, checked in the commit that changes
//! the usage (see `FileSystem::set_quota` of the Rust API and docs/design.md, "Quotas"). A
//! commit that would pass a limit fails with -EDQUOT naming the tree; renames and hard links
//! between different trees fail with -EXDEV.

use crate::boundary::{boundary, cstr, Out};
use crate::store::txvfs_store;
use crate::tx::{txvfs_tx, with_fs};
use std::ffi::{c_char, c_int};
use txvfs::{FileSystem, QuotaLimits};

/// A quota tree's limits and usage, as `txvfs_quota_get` fills it. A limit of 0 means none.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct txvfs_quota {
    /// The inode number of the tree's top directory (what identifies the tree).
    pub tree: u64,
    /// Byte limit (0: not limited).
    pub bytes_limit: u64,
    /// Inode limit (0: not limited).
    pub inodes_limit: u64,
    /// Bytes of regular files in the tree, nested trees included.
    pub bytes_used: u64,
    /// Inodes in the tree, nested trees and the top directory included.
    pub inodes_used: u64,
    /// The enclosing quota tree's top directory (0: none).
    pub parent: u64,
}

/// Sets (or changes) the quota of the directory tree at `path`: at most `bytes_limit` bytes
/// of regular files and `inodes_limit` inodes (0: that one is not limited; at least one must
/// be set, each at most INT64_MAX). A new quota counts what the tree already holds (at most
/// 10,000 inodes walked in one transaction, else -TXVFS_ETOOLARGE). Errors: -EINVAL (no
/// limit, a limit too large), -ENOTDIR, -EDQUOT (the tree already holds more), -EXDEV (a file
/// in the tree has hard links outside it), -EPERM (a credential other than root), -EBUSY
/// (files of an earlier quota tree there are still open).
#[no_mangle]
pub unsafe extern "C" fn txvfs_quota_set(
    store: *mut txvfs_store,
    tx: *mut txvfs_tx,
    path: *const c_char,
    bytes_limit: u64,
    inodes_limit: u64,
) -> c_int {
    boundary("txvfs_quota_set", || {
        let p = cstr(path, "path")?;
        let some = |n: u64| (n != 0).then_some(n);
        let limits = QuotaLimits { bytes: some(bytes_limit), inodes: some(inodes_limit) };
        with_fs!(store, tx, |fs| Ok(fs.set_quota(p, limits)?))
    })
}

/// The innermost quota tree that `path` is in: `*found` = whether there is one, and if so
/// `*out` = its limits and usage (untouched otherwise).
#[no_mangle]
pub unsafe extern "C" fn txvfs_quota_get(
    store: *mut txvfs_store,
    tx: *mut txvfs_tx,
    path: *const c_char,
    found: *mut bool,
    out: *mut txvfs_quota,
) -> c_int {
    boundary("txvfs_quota_get", || {
        let (p, found, out) =
            (cstr(path, "path")?, Out::new(found, "found")?, Out::new(out, "out")?);
        let q = with_fs!(store, tx, |fs| fs.quota(p)?);
        if let Some(q) = &q {
            out.set(txvfs_quota {
                tree: q.tree,
                bytes_limit: q.limits.bytes.unwrap_or(0),
                inodes_limit: q.limits.inodes.unwrap_or(0),
                bytes_used: q.bytes_used,
                inodes_used: q.inodes_used,
                parent: q.parent.unwrap_or(0),
            });
        }
        found.set(q.is_some());
        Ok(())
    })
}

/// Removes the quota of the tree whose top directory is `path`: its files then count toward
/// the enclosing tree only. Errors: -ENOENT (no quota set there), -EPERM.
#[no_mangle]
pub unsafe extern "C" fn txvfs_quota_remove(
    store: *mut txvfs_store,
    tx: *mut txvfs_tx,
    path: *const c_char,
) -> c_int {
    boundary("txvfs_quota_remove", || {
        let p = cstr(path, "path")?;
        with_fs!(store, tx, |fs| Ok(fs.remove_quota(p)?))
    })
}
