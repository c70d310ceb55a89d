//! The one retry policy of the core: a conflicting transaction runs again after a backoff.
//! [`Store::transact`](crate::Store::transact) and every internal short transaction go through
//! [`retry_loop`]; bindings use it through [`retry`] (re-exported as `txvfs::retry`).

use super::{Backend, Txn};
use crate::error::Result;
use std::time::Duration;

/// Sleeps before retry `attempt`: exponential from 1 ms up to 100 ms, with jitter.
pub fn backoff(attempt: u32) {
    let cap = Duration::from_millis(1 << attempt.min(7)).min(Duration::from_millis(100));
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0) as u64;
    let jitter = nanos % (cap.as_nanos() as u64 + 1);
    std::thread::sleep(Duration::from_nanos(cap.as_nanos() as u64 / 2 + jitter / 2));
}

thread_local! {
    /// Retries this thread has made: quota accounting moves to another usage shard after a
    /// conflict (`fs/ops/quota.rs`), without knowing what conflicted.
    static RETRIES: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// Retries [`retry_loop`] made in this process (the quota benchmark reports them).
static RETRIES_TOTAL: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// The number of retries [`retry_loop`] has made in this process.
#[doc(hidden)]
pub fn retries() -> u64 {
    RETRIES_TOTAL.load(std::sync::atomic::Ordering::Relaxed)
}

/// The number of retries [`retry_loop`] has made on this thread.
pub(crate) fn retries_on_this_thread() -> u64 {
    RETRIES.with(|r| r.get())
}

/// The retry loop: begins a transaction with `begin` and runs `attempt` on it (which also
/// commits it); when that fails with a retryable error (a conflict, a too-old snapshot),
/// sleeps with [`backoff`] and starts over, at most `max_retries` times. An error from
/// `begin` and every other error are returned at once. This is the shape of foundationdb-rs
/// `db.run`.
pub fn retry_loop<T, R>(
    max_retries: u32,
    mut begin: impl FnMut() -> Result<T>,
    mut attempt: impl FnMut(T) -> Result<R>,
) -> Result<R> {
    let mut retries = 0;
    loop {
        let tx = begin()?;
        match attempt(tx) {
            Err(e) if e.is_retryable() && retries < max_retries => {
                RETRIES.with(|r| r.set(r.get() + 1));
                RETRIES_TOTAL.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                backoff(retries)
            }
            r => return r,
        }
        retries += 1;
    }
}

/// Runs `f` and runs it again after a [`backoff`] while it fails with a retryable error (a
/// conflict, a too-old snapshot, a shared store whose owner went away as it began), at most
/// `max_retries` times: the policy of [`retry_loop`] for work that begins its own
/// transaction or opens a store. `f` may run several times, so it must not have side effects
/// outside what it retries. Every other error is returned at once.
///
/// ```
/// let mut tries = 0;
/// let r = txvfs::retry(3, || {
///     tries += 1;
///     if tries < 3 {
///         return Err(txvfs::Error::new(txvfs::ErrorKind::Conflict, "try again"));
///     }
///     Ok(tries)
/// });
/// assert_eq!(r.unwrap(), 3);
/// ```
pub fn retry<R>(max_retries: u32, mut f: impl FnMut() -> Result<R>) -> Result<R> {
    retry_loop(max_retries, || Ok(()), |()| f())
}

/// Runs `f` in a fresh transaction of `backend` and commits it (durably with `durable`),
/// retrying through [`retry_loop`].
pub fn run_with_retries<R>(
    backend: &dyn Backend,
    max_retries: u32,
    durable: bool,
    mut f: impl FnMut(&mut dyn Txn) -> Result<R>,
) -> Result<R> {
    retry_loop(
        max_retries,
        || backend.begin(),
        |mut tx| f(&mut *tx).and_then(|v| tx.commit(durable).map(|()| v)),
    )
}
