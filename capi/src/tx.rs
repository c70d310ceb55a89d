//! Explicit transactions: begin, commit, rollback, free, and the retry helper `txvfs_transact`.

use crate::boundary::{boundary, boundary_or, obj, Fail, Out, R};
use crate::store::{store_ref, txvfs_store};
use std::ffi::{c_int, c_void};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;
use txvfs::Transaction;

/// An explicit transaction. Every call given it (and every descriptor opened through it)
/// belongs to it: its reads see its own writes, nobody else sees anything until
/// `txvfs_tx_commit`, then everything at once. Thread-safe (calls on one transaction are
/// serialized).
pub struct txvfs_tx {
    /// `None` once committed or rolled back. (Dropped before `store`: fields drop in order.)
    tx: Mutex<Option<Transaction>>,
    /// Owned by `txvfs_transact`: the callback may not commit, roll back or free it.
    managed: bool,
    /// The transaction's reference to its store handle, which keeps it open until
    /// `txvfs_tx_free` even after `txvfs_store_free`.
    store: Arc<txvfs_store>,
}

impl txvfs_tx {
    fn new(store: &txvfs_store, tx: Transaction, managed: bool) -> txvfs_tx {
        txvfs_tx { tx: Mutex::new(Some(tx)), managed, store: store.counted() }
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, Option<Transaction>> {
        self.tx.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn take(&self, verb: &str) -> R<Transaction> {
        if self.managed {
            return Err(Fail::invalid(format!("cannot {verb} a transaction owned by txvfs_transact")));
        }
        self.lock().take().ok_or_else(finished)
    }
}

fn finished() -> Fail {
    Fail::invalid("transaction already committed or rolled back")
}

/// The live transaction inside a locked `txvfs_tx`.
pub(crate) fn active(slot: &Option<Transaction>) -> R<&Transaction> {
    slot.as_ref().ok_or_else(finished)
}

/// The transaction an exported function was given, if any, checked to belong to `store`.
///
/// # Safety
/// `p` is NULL or a live transaction from `txvfs_tx_begin` or `txvfs_transact`.
pub(crate) unsafe fn tx_ref<'a>(store: &txvfs_store, p: *mut txvfs_tx) -> R<Option<&'a txvfs_tx>> {
    let Some(t) = p.as_ref() else { return Ok(None) };
    if !std::ptr::eq(Arc::as_ptr(&t.store), store) {
        return Err(Fail::new(libc::EXDEV, "transaction belongs to another store handle"));
    }
    Ok(Some(t))
}

/// Runs `$body` with `$fs` bound to the store (auto-commit) or the live transaction, from the
/// `store` and `tx` arguments every path operation takes.
macro_rules! with_fs {
    ($store:expr, $tx:expr, |$fs:ident| $body:expr) => {{
        let s = $crate::store::store_ref($store)?;
        match $crate::tx::tx_ref(s, $tx)? {
            None => {
                let $fs = &s.store;
                $body
            }
            Some(t) => {
                let guard = t.lock();
                let $fs = $crate::tx::active(&guard)?;
                $body
            }
        }
    }};
}
pub(crate) use with_fs;

/// Starts an explicit transaction on `store`. Pass it as the `tx` argument of path operations
/// and `txvfs_open`; end it with `txvfs_tx_commit` or `txvfs_tx_rollback`, then free it.
///
/// Ownership: the caller owns `*out` and frees it with `txvfs_tx_free` (which rolls back a
/// transaction still open). It holds a reference to the store handle: the store stays open
/// until the transaction is freed, even after `txvfs_store_free`.
/// Errors: -EINVAL (NULL `store` or `out`), -TXVFS_EBACKEND.
#[no_mangle]
pub unsafe extern "C" fn txvfs_tx_begin(store: *mut txvfs_store, out: *mut *mut txvfs_tx) -> c_int {
    boundary("txvfs_tx_begin", || {
        let s = store_ref(store)?;
        let out = Out::new(out, "out")?;
        out.set(Box::into_raw(Box::new(txvfs_tx::new(s, s.store.begin()?, false))));
        Ok(())
    })
}

/// Commits: all changes become visible at once (and durable, with the sync option), or none
/// do. The transaction is finished either way: later calls with it fail with -EINVAL, its
/// descriptors with -EBADF; it still has to be freed.
/// Errors: -TXVFS_ECONFLICT (another transaction changed something this one read: run it
/// again, see `txvfs_transact`), -EINVAL (NULL, already finished, or owned by
/// `txvfs_transact`), the error of an earlier call that failed part-way, -TXVFS_ETOOLARGE,
/// -TXVFS_EBACKEND.
#[no_mangle]
pub unsafe extern "C" fn txvfs_tx_commit(tx: *mut txvfs_tx) -> c_int {
    boundary("txvfs_tx_commit", || Ok(obj(tx, "tx")?.take("commit")?.commit()?))
}

/// Discards every change of the transaction; it is finished afterwards (free it).
/// Errors: -EINVAL (NULL, already finished, or owned by `txvfs_transact`).
#[no_mangle]
pub unsafe extern "C" fn txvfs_tx_rollback(tx: *mut txvfs_tx) -> c_int {
    boundary("txvfs_tx_rollback", || {
        obj(tx, "tx")?.take("roll back")?.rollback();
        Ok(())
    })
}

/// Frees a transaction from `txvfs_tx_begin`, rolling it back if it is still open; it must be
/// the last call with it. Its descriptors stay open (and fail with -EBADF) until closed. It
/// drops the transaction's reference to the store handle, so it may close and free the store
/// (when `txvfs_store_free` was called and nothing else is open on it). NULL,
/// and a transaction passed to a `txvfs_transact` callback (freed by `txvfs_transact`), are
/// no-ops.
#[no_mangle]
pub unsafe extern "C" fn txvfs_tx_free(tx: *mut txvfs_tx) {
    boundary_or((), || {
        if !tx.is_null() && !(*tx).managed {
            drop(Box::from_raw(tx));
        }
    })
}

/// The callback of `txvfs_transact`: does the transaction's work with `tx` and returns 0 to
/// commit, or a negative code to roll back and return that code (a retryable code,
/// -TXVFS_ECONFLICT or -TXVFS_ETOOOLD, runs the callback again). It must not commit, roll back
/// or free `tx`, must not keep it after returning, and must not unwind (throw) into txvfs.
pub type txvfs_transact_fn = Option<unsafe extern "C" fn(tx: *mut txvfs_tx, userdata: *mut c_void) -> c_int>;

/// Runs `callback(tx, userdata)` in a new transaction and commits it; when the transaction
/// conflicts with another one it rolls back and runs the callback again (with backoff, up to
/// the store's max_retries), so the callback may run several times and must have no effects
/// outside the transaction.
///
/// Returns 0 once committed; a negative code the callback returned (as is, not retried unless
/// retryable; `txvfs_last_error` then holds the message of the last failed txvfs call);
/// -EINVAL (NULL `store` or `callback`, a positive return from the callback); or the commit's
/// error, -TXVFS_ECONFLICT after too many retries.
#[no_mangle]
pub unsafe extern "C" fn txvfs_transact(
    store: *mut txvfs_store,
    callback: txvfs_transact_fn,
    userdata: *mut c_void,
) -> c_int {
    boundary("txvfs_transact", || {
        let s = store_ref(store)?;
        let callback = callback.ok_or_else(|| Fail::invalid("argument `callback` is NULL"))?;
        let mut attempt = 0;
        loop {
            let tx = Box::new(txvfs_tx::new(s, s.store.begin()?, true));
            let ptr = &*tx as *const txvfs_tx as *mut txvfs_tx;
            let rc = callback(ptr, userdata);
            let slot = tx.lock().take();
            let result = match (rc, slot) {
                (0, Some(t)) => t.commit().map_err(Fail::from),
                (0, None) => Err(finished()),
                // The callback's own code goes back unchanged, and its message is kept.
                (rc, _) if rc < 0 && rc != c_int::MIN => Err(Fail::new(-rc, "")),
                (rc, _) => Err(Fail::invalid(format!("callback returned {rc}; expected 0 or a negative code"))),
            };
            match result {
                Err(e) if e.is_retryable() && attempt < s.max_retries => backoff(attempt),
                r => return r,
            }
            attempt += 1;
        }
    })
}

/// Sleeps before retry `attempt`: exponential up to 100 ms, with jitter.
fn backoff(attempt: u32) {
    let cap = Duration::from_millis(1 << attempt.min(7)).min(Duration::from_millis(100));
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos() as u64)
        .unwrap_or(0);
    let half = cap.as_nanos() as u64 / 2;
    std::thread::sleep(Duration::from_nanos(half + nanos % (half + 1)));
}
