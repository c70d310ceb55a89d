//! The store handle: open, free, sync and the store's fixed parameters.

use crate::boundary::{boundary, boundary_or, cstr, obj, Fail, Out, R};
use crate::handles::Handles;
use crate::options::txvfs_options;
use std::ffi::{c_char, c_int};
use std::sync::Arc;
use txvfs::{Options, Store};

/// An open store. Thread-safe: every function may be called on one store from many threads
/// at once. Its descriptors (`txvfs_open`) belong to it: another store's descriptor is
/// -EBADF here.
///
/// Reference-counted (an `Arc` inside the library): the caller's reference is
/// dropped by `txvfs_store_free`, and every open descriptor and every transaction not yet
/// freed holds one more, so the handle outlives `txvfs_store_free` while they do.
pub struct txvfs_store {
    pub(crate) store: Store,
    pub(crate) files: Handles,
}

impl txvfs_store {
    /// A new counted reference to the store behind `self` (for a transaction).
    pub(crate) fn counted(&self) -> Arc<txvfs_store> {
        // SAFETY: every `txvfs_store` lives in an `Arc` (`txvfs_store_open`), and `self` is a
        // live reference to it, so its count is at least one.
        unsafe {
            Arc::increment_strong_count(self);
            Arc::from_raw(self)
        }
    }

    /// Counts one more reference, held by the descriptor just opened; `release` drops it.
    pub(crate) fn retain(&self) {
        // SAFETY: as in `counted`.
        unsafe { Arc::increment_strong_count(self) }
    }

    /// Drops one reference (the caller's or a descriptor's); the last one frees the store.
    ///
    /// # Safety
    /// `p` is a live store and the reference dropped was counted; `p` must not be used
    /// afterwards unless another reference is known to remain.
    pub(crate) unsafe fn release(p: *const txvfs_store) {
        Arc::decrement_strong_count(p)
    }
}

/// The store handle an exported function was given.
///
/// # Safety
/// `p` is NULL or a live store from `txvfs_store_open`.
pub(crate) unsafe fn store_ref<'a>(p: *mut txvfs_store) -> R<&'a txvfs_store> {
    obj(p, "store")
}

/// Opens the store named by `uri`: `memory:` (a new, private in-memory store),
/// `rocksdb:/path/to/dir` or a bare path (RocksDB, created if missing), or
/// `pack:/path/to/image` (a read-only pack image, see `txvfs_pack`). `options` may be NULL
/// for the defaults; it is not kept and may be freed right after. Opening the same RocksDB
/// directory twice through this library shares one instance, each open keeping its own
/// read-only, sync, retry and credential options. Another process, or another copy of txvfs
/// in this process (the Python module, the SQLite extension), holding the store gives -EBUSY
/// with the holder named in `txvfs_last_error()`. A store opened before fork() cannot be used
/// in the child: every call with it there fails with -EBUSY.
///
/// Ownership: the caller owns a reference in `*out` and drops it with `txvfs_store_free`
/// (descriptors and transactions hold references of their own, see there).
/// Errors: -EINVAL (NULL `uri` or `out`, a URI that is not UTF-8, bad options), -EBUSY (in use
/// by another process or library copy), -EROFS (a new store opened read-only), -TXVFS_EBACKEND,
/// -TXVFS_ECORRUPT.
#[no_mangle]
pub unsafe extern "C" fn txvfs_store_open(
    uri: *const c_char,
    options: *const txvfs_options,
    out: *mut *mut txvfs_store,
) -> c_int {
    boundary("txvfs_store_open", || {
        let uri = std::str::from_utf8(cstr(uri, "uri")?)
            .map_err(|_| Fail::invalid("uri is not UTF-8"))?;
        let out = Out::new(out, "out")?;
        let options = options.as_ref().map(|o| o.options.clone()).unwrap_or_else(Options::default);
        let store = Store::open_with(uri, options)?;
        let handle = Arc::new(txvfs_store { store, files: Handles::default() });
        out.set(Arc::into_raw(handle).cast_mut());
        Ok(())
    })
}

/// Writes the whole tree of `store`, read at one snapshot, to the read-only image file
/// `image` (replaced atomically once complete; an interrupted call leaves no image under
/// that name). Open the image with `txvfs_store_open("pack:IMAGE", ...)`.
///
/// Errors: -EINVAL (NULL arguments, a path that is not UTF-8), host errors creating the image
/// (-ENOENT, -EACCES, -ENOSPC), -TXVFS_ECORRUPT, -TXVFS_EBACKEND.
#[no_mangle]
pub unsafe extern "C" fn txvfs_pack(store: *mut txvfs_store, image: *const c_char) -> c_int {
    boundary("txvfs_pack", || {
        let store = store_ref(store)?;
        let image = std::str::from_utf8(cstr(image, "image")?)
            .map_err(|_| Fail::invalid("image is not UTF-8"))?;
        txvfs::pack::pack_backend(
            &*store.store.backend(),
            std::path::Path::new(image),
            &mut |_| {},
        )?;
        Ok(())
    })
}

/// Drops the caller's reference to the store handle. The store stays open, and the handle
/// valid, as long as a descriptor opened on it is open or a transaction begun on it is not
/// freed: calls on those keep working (with this same `store` pointer), and the store is
/// closed and freed by the last `txvfs_close` or `txvfs_tx_free`; if none remain, it is
/// closed and freed now. After this call, pass `store` only to calls on such a descriptor or
/// transaction, and none that may race with the `txvfs_close`/`txvfs_tx_free` of the last of
/// them. NULL is a no-op.
#[no_mangle]
pub unsafe extern "C" fn txvfs_store_free(store: *mut txvfs_store) {
    boundary_or((), || {
        if !store.is_null() {
            txvfs_store::release(store);
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
