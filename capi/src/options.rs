//! Store options: a builder (`txvfs_options_new`, `_set_...`, `_free`) so the ABI can grow.

use crate::boundary::{boundary, boundary_or, obj_mut, Out, R};
use std::ffi::c_int;
use txvfs::{Credential, Options};

/// Options for `txvfs_store_open`. Create with `txvfs_options_new`, free with
/// `txvfs_options_free`. Not thread-safe: use one from one thread at a time.
pub struct txvfs_options {
    pub(crate) options: Options,
}

/// Creates options with the defaults: sync on, block size 65536, inline limit 4096, writable,
/// no credential (act as the store's owner), 100 retries.
///
/// Ownership: the caller owns `*out` and frees it with `txvfs_options_free`.
/// Errors: -EINVAL if `out` is NULL.
#[no_mangle]
pub unsafe extern "C" fn txvfs_options_new(out: *mut *mut txvfs_options) -> c_int {
    boundary("txvfs_options_new", || {
        let out = Out::new(out, "out")?;
        out.set(Box::into_raw(Box::new(txvfs_options { options: Options::default() })));
        Ok(())
    })
}

/// Frees options made by `txvfs_options_new`. NULL is a no-op.
#[no_mangle]
pub unsafe extern "C" fn txvfs_options_free(options: *mut txvfs_options) {
    boundary_or((), || {
        if !options.is_null() {
            drop(Box::from_raw(options));
        }
    })
}

unsafe fn set(options: *mut txvfs_options, name: &str, f: impl FnOnce(&mut Options) -> R) -> c_int {
    boundary(name, || f(&mut obj_mut(options, "options")?.options))
}

/// Whether each explicit commit is durable before it returns (one fsync, shared by concurrent
/// commits). Auto-commit calls are durable at the next `txvfs_fsync`/`txvfs_store_sync`.
/// Errors: -EINVAL if `options` is NULL.
#[no_mangle]
pub unsafe extern "C" fn txvfs_options_set_sync(options: *mut txvfs_options, sync: bool) -> c_int {
    set(options, "txvfs_options_set_sync", |o| {
        o.sync = sync;
        Ok(())
    })
}

/// Block size of a new store: a power of two from 512 to 65536 (checked at open). Fixed when
/// the store is created; ignored for an existing store. Errors: -EINVAL if `options` is NULL.
#[no_mangle]
pub unsafe extern "C" fn txvfs_options_set_block_size(
    options: *mut txvfs_options,
    block_size: u32,
) -> c_int {
    set(options, "txvfs_options_set_block_size", |o| {
        o.block_size = block_size;
        Ok(())
    })
}

/// Files up to this many bytes keep their data in the inode (at most 65536, checked at open).
/// Fixed when the store is created. Errors: -EINVAL if `options` is NULL.
#[no_mangle]
pub unsafe extern "C" fn txvfs_options_set_inline_limit(
    options: *mut txvfs_options,
    inline_limit: u32,
) -> c_int {
    set(options, "txvfs_options_set_inline_limit", |o| {
        o.inline_limit = inline_limit;
        Ok(())
    })
}

/// Opens the store read-only: every change fails with -EROFS.
/// Errors: -EINVAL if `options` is NULL.
#[no_mangle]
pub unsafe extern "C" fn txvfs_options_set_read_only(
    options: *mut txvfs_options,
    read_only: bool,
) -> c_int {
    set(options, "txvfs_options_set_read_only", |o| {
        o.read_only = read_only;
        Ok(())
    })
}

/// Checks POSIX permissions as this user (uid 0 passes every check) with primary group `gid`
/// and `ngroups` supplementary groups from `groups` (copied; NULL allowed when `ngroups` is 0).
/// Errors: -EINVAL if `options` is NULL, or `groups` is NULL with `ngroups` > 0.
#[no_mangle]
pub unsafe extern "C" fn txvfs_options_set_credential(
    options: *mut txvfs_options,
    uid: u32,
    gid: u32,
    groups: *const u32,
    ngroups: usize,
) -> c_int {
    set(options, "txvfs_options_set_credential", |o| {
        let groups = match ngroups {
            0 => Vec::new(),
            n if groups.is_null() => {
                return Err(crate::boundary::Fail::invalid(format!(
                    "argument `groups` is NULL with ngroups {n}"
                )))
            }
            n => std::slice::from_raw_parts(groups, n).to_vec(),
        };
        o.credential = Some(Credential { uid, gid, groups });
        Ok(())
    })
}

/// How often `txvfs_transact` (and each auto-commit call) retries a conflicting transaction
/// before returning -TXVFS_ECONFLICT. Errors: -EINVAL if `options` is NULL.
#[no_mangle]
pub unsafe extern "C" fn txvfs_options_set_max_retries(
    options: *mut txvfs_options,
    max_retries: u32,
) -> c_int {
    set(options, "txvfs_options_set_max_retries", |o| {
        o.max_retries = max_retries;
        Ok(())
    })
}
