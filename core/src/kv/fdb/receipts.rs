//! Definite outcomes for FoundationDB commits whose result the cluster reports as unknown
//! (`commit_unknown_result`, 1021: the commit may or may not have been applied).
//!
//! Every commit that writes also writes a receipt key (scope `R`, as the receipts of a shared
//! RocksDB store, `kv/shared/receipts.rs`) and puts it in its read-conflict set. After a 1021,
//! a new transaction reads the receipt: present, the commit was applied (success); absent, it
//! writes the receipt as *aborted* (an empty value) and commits. That commit makes the
//! original one fail if it is still in flight (the original read-conflicts on the key), so
//! once it is in, the original is definitely not applied: a retryable `Conflict`, which
//! `Store::transact` retries with no risk of applying the transaction twice. Only when this
//! resolution itself cannot finish (the cluster unreachable for its few attempts, all within
//! one deadline of the store) does the caller get `CommitUnknown`.
//!
//! The id is `R`, the clock in ms since the epoch (u64 big-endian), then 16 random bytes, so
//! receipts sort by age: [`collect`] clears those older than [`RETENTION`] (a FoundationDB
//! transaction cannot commit more than a few seconds after it began, so a late original is
//! long dead by then).

use crate::error::{Error, ErrorKind, Result};
use crate::schema::scope;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// How long a receipt is kept.
pub(super) const RETENTION: Duration = Duration::from_secs(600);

/// How often a process collects old receipts.
const COLLECT_EVERY: Duration = Duration::from_secs(60);

/// Attempts of the resolution transaction before the outcome is left unknown.
pub(super) const RESOLVE_ATTEMPTS: u32 = 8;

/// The time limit of each attempt, in ms (FoundationDB's transaction timeout), at most: all
/// attempts together get one deadline of the store.
pub(super) const RESOLVE_TIMEOUT: i64 = 5_000;

/// A new receipt key.
pub(super) fn new_id() -> Vec<u8> {
    let mut k = Vec::with_capacity(25);
    k.push(scope::RECEIPT);
    k.extend_from_slice(&crate::clock::now_ms().to_be_bytes());
    let mut r = [0u8; 16];
    // SAFETY: fills `r`, at most its length.
    let got = unsafe { libc::getrandom(r.as_mut_ptr().cast(), r.len(), 0) };
    if got != 16 {
        // Unique enough without the kernel's randomness: process, time, sequence.
        static SEQ: AtomicU64 = AtomicU64::new(0);
        r[..8].copy_from_slice(&(crate::clock::now_ns() as u64).to_le_bytes());
        let seq = SEQ.fetch_add(1, Ordering::Relaxed) ^ (u64::from(std::process::id()) << 40);
        r[8..].copy_from_slice(&seq.to_le_bytes());
    }
    k.extend_from_slice(&r);
    k
}

/// The value of the receipt of an applied commit (its time); an aborted one is empty.
pub(super) fn applied_value() -> [u8; 8] {
    crate::clock::now_ms().to_le_bytes()
}

/// What a receipt read by the resolution says: `Ok` applied, a `Conflict` not applied.
pub(super) fn outcome(value: &[u8]) -> Result<()> {
    if value.is_empty() {
        Err(not_applied())
    } else {
        Ok(())
    }
}

/// The error of a commit that is definitely not applied.
pub(super) fn not_applied() -> Error {
    Error::new(
        ErrorKind::Conflict,
        "foundationdb commit: commit_unknown_result, then resolved through its receipt: not applied",
    )
}

/// The range of receipts older than [`RETENTION`], when this process should clear it now
/// (at most once a [`COLLECT_EVERY`]).
pub(super) fn due_collection() -> Option<(Vec<u8>, Vec<u8>)> {
    static LAST: AtomicU64 = AtomicU64::new(0);
    let now = crate::clock::now_ms();
    let last = LAST.load(Ordering::Relaxed);
    if now.saturating_sub(last) < COLLECT_EVERY.as_millis() as u64
        || LAST.compare_exchange(last, now, Ordering::SeqCst, Ordering::Relaxed).is_err()
    {
        return None;
    }
    let cutoff = now.saturating_sub(RETENTION.as_millis() as u64);
    let mut end = vec![scope::RECEIPT];
    end.extend_from_slice(&cutoff.to_be_bytes());
    Some((vec![scope::RECEIPT], end))
}

/// Fault injection for tests (cargo feature `testing`): the next commits that write, in the
/// calling thread, answer `commit_unknown_result`.
#[cfg(feature = "testing")]
pub(super) mod fault {
    use std::cell::RefCell;
    use std::collections::VecDeque;

    /// How an injected `commit_unknown_result` comes about.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub enum Fault {
        /// The commit is applied, then answered 1021.
        Applied,
        /// The commit is answered 1021 without being sent.
        NotApplied,
        /// The commit is answered 1021, and sent only after the outcome was resolved (a
        /// commit still in flight): it must then fail.
        Late,
        /// The commit is not sent, and answered with this FoundationDB error code instead.
        Code(i32),
    }

    thread_local! {
        static NEXT: RefCell<VecDeque<Fault>> = const { RefCell::new(VecDeque::new()) };
    }

    /// Makes the next commits that write, in this thread, fail as `faults` say, in order.
    pub fn inject(faults: &[Fault]) {
        NEXT.with(|n| n.borrow_mut().extend(faults));
    }

    /// The fault for this commit, if one is due.
    pub(in crate::kv::fdb) fn take() -> Option<Fault> {
        NEXT.with(|n| n.borrow_mut().pop_front())
    }
}
