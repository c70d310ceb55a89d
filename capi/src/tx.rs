//! Explicit transactions: begin, commit, rollback, free, and the retry helper `txvfs_transact`.

use crate::boundary::{boundary, boundary_or, obj, Fail, Out, R, TXVFS_ECONFLICT, TXVFS_ETOOOLD};
use crate::store::{store_ref, txvfs_store};
use std::ffi::{c_int, c_void};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use txvfs::{Error, ErrorKind, Transaction};

/// An explicit transaction. Every call given it (and every descriptor opened through it)
/// belongs to it: its reads see its own writes, nobody else sees anything until
/// `txvfs_tx_commit`, then everything at once. Thread-safe (the core serializes calls on one
/// transaction).
pub struct txvfs_tx {
    /// The core transaction. (Dropped before `store`: fields drop in order.)
    tx: Held,
    /// Set by `txvfs_tx_commit` and `txvfs_tx_rollback`: a second one is -EINVAL.
    ended: AtomicBool,
    /// The transaction's reference to its store handle, which keeps it open until
    /// `txvfs_tx_free` even after `txvfs_store_free`.
    store: Arc<txvfs_store>,
}

/// Whose transaction a `txvfs_tx` is.
enum Held {
    /// From `txvfs_tx_begin`: the caller's, committed, rolled back and freed by the caller.
    Owned(Transaction),
    /// The one `txvfs_transact`'s retry loop (the core's `Store::transact`) lends its callback
    /// for one call: the callback may not commit, roll back or free it, nor keep it.
    Lent(NonNull<Transaction>),
}

impl txvfs_tx {
    fn new(store: &txvfs_store, tx: Held) -> txvfs_tx {
        txvfs_tx { tx, ended: AtomicBool::new(false), store: store.counted() }
    }

    /// A handle on a joined transaction (`txvfs_tx_join`): owned by the caller, who frees it,
    /// but ended by its SQLite transaction.
    pub(crate) fn joined(store: &txvfs_store, tx: Transaction) -> txvfs_tx {
        txvfs_tx::new(store, Held::Owned(tx))
    }

    /// The core transaction.
    pub(crate) fn get(&self) -> &Transaction {
        match &self.tx {
            Held::Owned(t) => t,
            // SAFETY: a lent transaction outlives its `txvfs_tx` (see `txvfs_transact`).
            Held::Lent(t) => unsafe { t.as_ref() },
        }
    }

    fn managed(&self) -> bool {
        matches!(self.tx, Held::Lent(_))
    }

    /// The transaction for `txvfs_tx_commit` or `_rollback` (`verb`), which ends it.
    fn end(&self, verb: &str) -> R<&Transaction> {
        if self.managed() {
            return Err(Fail::invalid(format!(
                "cannot {verb} a transaction owned by txvfs_transact"
            )));
        }
        if self.get().is_joined() {
            return Err(Fail::invalid(format!(
                "cannot {verb} a joined transaction (txvfs_tx_join): it ends with its SQLite \
                 transaction (COMMIT or ROLLBACK on the connection)"
            )));
        }
        if self.ended.swap(true, Ordering::AcqRel) {
            return Err(Fail::invalid("transaction already committed or rolled back"));
        }
        Ok(self.get())
    }
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
                let $fs = t.get();
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
        out.set(Box::into_raw(Box::new(txvfs_tx::new(s, Held::Owned(s.store.begin()?)))));
        Ok(())
    })
}

/// Commits: all changes become visible at once (and durable, with the sync option), or none
/// do. The transaction is finished either way: later calls with it fail with -EINVAL, its
/// descriptors with -EBADF; it still has to be freed.
/// Errors: -TXVFS_ECONFLICT (another transaction changed something this one read: run it
/// again, see `txvfs_transact`), -EINVAL (NULL, already finished, owned by `txvfs_transact`,
/// or joined with `txvfs_tx_join`), the error of an earlier call that failed part-way (or
/// panicked), -TXVFS_ETOOLARGE, -TXVFS_ECOMMIT_UNKNOWN (applied but its fsync failed: the store
/// refuses every further transaction until reopened), -TXVFS_EBACKEND.
#[no_mangle]
pub unsafe extern "C" fn txvfs_tx_commit(tx: *mut txvfs_tx) -> c_int {
    boundary("txvfs_tx_commit", || Ok(obj(tx, "tx")?.end("commit")?.commit()?))
}

/// Discards every change of the transaction; it is finished afterwards (free it).
/// Errors: -EINVAL (NULL, already finished, owned by `txvfs_transact`, or joined with
/// `txvfs_tx_join`).
#[no_mangle]
pub unsafe extern "C" fn txvfs_tx_rollback(tx: *mut txvfs_tx) -> c_int {
    boundary("txvfs_tx_rollback", || {
        obj(tx, "tx")?.end("roll back")?.rollback();
        Ok(())
    })
}

/// Frees a transaction from `txvfs_tx_begin`, rolling it back if it is still open (a handle
/// from `txvfs_tx_join` is freed without ending its transaction); it must be
/// the last call with it. Its descriptors stay open (and fail with -EBADF) until closed. It
/// drops the transaction's reference to the store handle, so it may close and free the store
/// (when `txvfs_store_free` was called and nothing else is open on it). NULL,
/// and a transaction passed to a `txvfs_transact` callback (freed by `txvfs_transact`), are
/// no-ops.
#[no_mangle]
pub unsafe extern "C" fn txvfs_tx_free(tx: *mut txvfs_tx) {
    boundary_or((), || {
        if !tx.is_null() && !(*tx).managed() {
            drop(Box::from_raw(tx));
        }
    })
}

/// The callback of `txvfs_transact`: does the transaction's work with `tx` and returns 0 to
/// commit, or a negative code to roll back and return that code (a retryable code,
/// -TXVFS_ECONFLICT or -TXVFS_ETOOOLD, runs the callback again). It must not commit, roll back
/// or free `tx`, must not keep it after returning, and must not unwind (throw) into txvfs.
pub type txvfs_transact_fn =
    Option<unsafe extern "C" fn(tx: *mut txvfs_tx, userdata: *mut c_void) -> c_int>;

/// The message of the error that stands for a callback's own code inside the retry loop.
const CALLBACK_FAILED: &str = "txvfs_transact: the callback returned an error code";

/// Runs `callback(tx, userdata)` in a new transaction and commits it; when the transaction
/// conflicts with another one it rolls back and runs the callback again (the core's retry
/// loop, `Store::transact`: with backoff, up to the store's max_retries), so the callback may run several times and must have no effects
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
        // The core's retry loop runs the callback; a code of the callback's own, which a core
        // error cannot carry, waits here (the error handed to the loop only says whether to
        // retry) and is returned unchanged when the loop ends with that attempt.
        let mut callback_code = None;
        let result = s.store.transact(|t| {
            callback_code = None;
            let lent = txvfs_tx::new(s, Held::Lent(NonNull::from(t)));
            // `lent` lives on this frame, so the callback's pointer dies with the call.
            let rc = callback(&lent as *const txvfs_tx as *mut txvfs_tx, userdata);
            match rc {
                0 => Ok(()),
                rc if rc < 0 && rc != c_int::MIN => {
                    callback_code = Some(-rc);
                    let kind = match -rc {
                        TXVFS_ECONFLICT => ErrorKind::Conflict,
                        TXVFS_ETOOOLD => ErrorKind::TooOld,
                        _ => ErrorKind::Invalid,
                    };
                    Err(Error::new(kind, CALLBACK_FAILED))
                }
                rc => Err(Error::new(
                    ErrorKind::Invalid,
                    format!("callback returned {rc}; expected 0 or a negative code"),
                )),
            }
        });
        match (result, callback_code) {
            (Ok(()), _) => Ok(()),
            // The callback's message (of its last failed txvfs call) is kept: an empty one.
            (Err(e), Some(code)) if e.message() == CALLBACK_FAILED => Err(Fail::new(code, "")),
            (Err(e), _) => Err(e.into()),
        }
    })
}
