//! The store handle: open, free, sync and the store's fixed parameters.

use crate::boundary::{boundary, boundary_or, cstr, obj, Fail, Out, R};
use crate::files::Handles;
use crate::options::txvfs_options;
use std::ffi::{c_char, c_int};
use std::sync::atomic::{AtomicU64, Ordering};
use txvfs::{Options, Store};

/// An open store. Thread-safe: every function may be called on one store from many threads
/// at once. Its descriptors (`txvfs_open`) belong to it: another store's descriptor is
/// -EBADF here.
pub struct txvfs_store {
    /// Distinguishes handles, so a transaction of another store is refused.
    pub(crate) id: u64,
    pub(crate) store: Store,
    pub(crate) files: Handles,
    pub(crate) max_retries: u32,
}

static NEXT_STORE_ID: AtomicU64 = AtomicU64::new(1);

/// The store handle an exported function was given.
///
/// # Safety
/// `p` is NULL or a live store from `txvfs_store_open`.
pub(crate) unsafe fn store_ref<'a>(p: *mut txvfs_store) -> R<&'a txvfs_store> {
    obj(p, "store")
}

/// Opens the store named by `uri`: `memory:` (a new, private in-memory store),
/// `rocksdb:/path/to/dir` or a bare path (RocksDB, created if missing). `options` may be NULL
/// for the defaults; it is not kept and may be freed right after. Opening the same RocksDB
/// directory twice in one process shares one instance (the first open's options stay in
/// force, except the credential); another process gets -EBUSY.
///
/// Ownership: the caller owns `*out` and frees it with `txvfs_store_free`.
/// Errors: -EINVAL (NULL `uri` or `out`, a URI that is not UTF-8, bad options), -EBUSY (locked
/// by another process), -EROFS (a new store opened read-only), -TXVFS_EBACKEND,
/// -TXVFS_ECORRUPT.
#[no_mangle]
pub unsafe extern "C" fn txvfs_store_open(
    uri: *const c_char,
    options: *const txvfs_options,
    out: *mut *mut txvfs_store,
) -> c_int {
    boundary("txvfs_store_open", || {
        let uri = std::str::from_utf8(cstr(uri, "uri")?).map_err(|_| Fail::invalid("uri is not UTF-8"))?;
        let out = Out::new(out, "out")?;
        let options = options.as_ref().map(|o| o.options.clone()).unwrap_or_else(Options::default);
        let max_retries = options.max_retries;
        let store = Store::open_with(uri, options)?;
        let id = NEXT_STORE_ID.fetch_add(1, Ordering::Relaxed);
        out.set(Box::into_raw(Box::new(txvfs_store { id, store, files: Handles::default(), max_retries })));
        Ok(())
    })
}

/// Closes the store handle: closes every descriptor still open on it (releasing their locks)
/// and frees it. It must be the last call with this handle: no other thread may be using it.
/// Free its transactions first (their calls need the store handle). NULL is a no-op.
#[no_mangle]
pub unsafe extern "C" fn txvfs_store_free(store: *mut txvfs_store) {
    boundary_or((), || {
        if !store.is_null() {
            drop(Box::from_raw(store));
        }
    })
}

/// Makes every change committed so far durable (what fsync does for auto-commit writes).
/// Errors: -EINVAL (NULL `store`), -TXVFS_EBACKEND.
#[no_mangle]
pub unsafe extern "C" fn txvfs_store_sync(store: *mut txvfs_store) -> c_int {
    boundary("txvfs_store_sync", || Ok(store_ref(store)?.store.sync()?))
}

/// The store's block size (fixed when it was created) in `*out`.
/// Errors: -EINVAL (NULL `store` or `out`).
#[no_mangle]
pub unsafe extern "C" fn txvfs_store_block_size(store: *mut txvfs_store, out: *mut u32) -> c_int {
    boundary("txvfs_store_block_size", || {
        let s = store_ref(store)?;
        Out::new(out, "out")?.set(s.store.block_size());
        Ok(())
    })
}

/// The store's inline limit (files up to this size keep their data in the inode) in `*out`.
/// Errors: -EINVAL (NULL `store` or `out`).
#[no_mangle]
pub unsafe extern "C" fn txvfs_store_inline_limit(store: *mut txvfs_store, out: *mut u32) -> c_int {
    boundary("txvfs_store_inline_limit", || {
        let s = store_ref(store)?;
        Out::new(out, "out")?.set(s.store.inline_limit());
        Ok(())
    })
}
