//! Snapshots and clones: `txvfs_store_snapshot`, the named snapshots of a RocksDB store, and
//! `txvfs_clone_create`.

use crate::boundary::{boundary, cstr, Fail, Out};
use crate::handles::Handles;
use crate::store::{store_ref, txvfs_store};
use std::ffi::{c_char, c_int};
use std::sync::Arc;

/// The UTF-8 string argument `what` at `p`.
///
/// # Safety
/// `p` is NULL or a NUL-terminated string.
unsafe fn utf8<'a>(p: *const c_char, what: &str) -> Result<&'a str, Fail> {
    std::str::from_utf8(cstr(p, what)?).map_err(|_| Fail::invalid(format!("{what} is not UTF-8")))
}

/// Opens a read-only snapshot of `store`: a view of the whole tree as it is now, which later
/// commits do not change (each transaction committed so far is in it whole, none committed
/// later is). Cheap: no data is copied. Every change through it fails with -EROFS. RocksDB
/// and memory stores, and clones of them.
///
/// Ownership: the caller owns a new store handle in `*out` and frees it with
/// `txvfs_store_free`; it is independent of `store` (either may be freed first).
/// Errors: -EINVAL (NULL `store` or `out`, a backend without snapshots), -TXVFS_EBACKEND.
#[no_mangle]
pub unsafe extern "C" fn txvfs_store_snapshot(
    store: *mut txvfs_store,
    out: *mut *mut txvfs_store,
) -> c_int {
    boundary("txvfs_store_snapshot", || {
        let s = store_ref(store)?;
        let out = Out::new(out, "out")?;
        let snap = s.store.snapshot()?;
        let handle = Arc::new(txvfs_store { store: snap, files: Handles::default() });
        out.set(Arc::into_raw(handle).cast_mut());
        Ok(())
    })
}

/// Keeps a snapshot of `store`'s whole tree as it is now under `name` (1 to 100 of
/// `A-Z a-z 0-9 . _ -`, not starting with `.`), surviving reopening; open it read-only with
/// `txvfs_store_open("rocksdb:PATH?snapshot=NAME")`. RocksDB only (a checkpoint under the
/// store directory: no data is copied).
/// Errors: -EINVAL (NULL argument, a bad name, a backend without named snapshots), -EEXIST
/// (the name is taken), -ENOSPC, -TXVFS_EBACKEND.
#[no_mangle]
pub unsafe extern "C" fn txvfs_snapshot_create(
    store: *mut txvfs_store,
    name: *const c_char,
) -> c_int {
    boundary("txvfs_snapshot_create", || {
        let s = store_ref(store)?;
        Ok(s.store.create_named_snapshot(utf8(name, "name")?)?)
    })
}

/// Deletes the named snapshot `name` of `store`.
/// Errors: -EINVAL (NULL argument, a bad name), -ENOENT (no such snapshot), -EBUSY (it is
/// open, by this or another process, a clone over it included), -TXVFS_EBACKEND.
#[no_mangle]
pub unsafe extern "C" fn txvfs_snapshot_delete(
    store: *mut txvfs_store,
    name: *const c_char,
) -> c_int {
    boundary("txvfs_snapshot_delete", || {
        let s = store_ref(store)?;
        Ok(s.store.delete_named_snapshot(utf8(name, "name")?)?)
    })
}

/// Makes the new, empty store at `upper` a writable clone of the read-only store at `lower`
/// (a named snapshot, `rocksdb:PATH?snapshot=NAME`): reads fall through to `lower`, changes
/// stay in `upper`, `lower` is never modified. Writes one key whatever the size of `lower`.
/// Open the clone with `txvfs_store_open(upper)`.
/// Errors: -EINVAL (NULL argument, a `lower` that is not read-only), -ENOENT (no store at
/// `lower`), -EEXIST (`upper` is not empty), -EBUSY, -TXVFS_EBACKEND.
#[no_mangle]
pub unsafe extern "C" fn txvfs_clone_create(lower: *const c_char, upper: *const c_char) -> c_int {
    boundary("txvfs_clone_create", || {
        Ok(txvfs::Store::prepare_clone(utf8(lower, "lower")?, utf8(upper, "upper")?)?)
    })
}
