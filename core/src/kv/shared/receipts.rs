//! Receipts: a definite outcome for a client's commit even when its owner dies mid-commit.
//!
//! Each commit a client sends carries a commit id chosen by the client; the serving process
//! writes a receipt key (scope `R`, see `schema`) for it in the same transaction, so in the same
//! RocksDB write batch: the receipt is in the store exactly when the commit is. A client that
//! loses its connection while committing reconnects (to the new owner after a failover, which
//! replayed RocksDB's log, or becomes the owner itself) and asks whether the receipt exists:
//! the commit took effect (success) or it did not (a retryable conflict), instead of
//! CommitUnknown. The old owner's commit cannot still be running then: a new owner opens the
//! store only after the old one closed it, and a server closes a connection only after that
//! connection's request is done, or when it stops, before it closes RocksDB.
//!
//! The id is `R`, then the client's clock in ms since the epoch (u64 big-endian), then a
//! random number of the client process and a sequence number, so receipts sort by age and
//! are collected by one range clear of those older than [`RETENTION`] (at most once a
//! [`COLLECT_EVERY`], by the serving process).

use crate::error::{Error, ErrorKind, Result};
use crate::kv::{Backend, Txn};
use crate::schema::scope;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// How long a receipt is kept: far longer than any failover (bounded by `owner_timeout` and
/// `RECOVERY_TIMEOUT`) after which a client asks for it.
pub const RETENTION: Duration = Duration::from_secs(600);

/// How often the serving process collects old receipts.
pub const COLLECT_EVERY: Duration = Duration::from_secs(60);

/// Length of a receipt key: scope, time, process, sequence.
const KEY_LEN: usize = 1 + 8 + 8 + 8;

fn now_ms() -> u64 {
    crate::clock::now_ms()
}

/// A random number for this process's commit ids (two processes never share ids: the time
/// and the sequence differ, or this number does).
pub(super) fn process_nonce() -> u64 {
    static NONCE: AtomicU64 = AtomicU64::new(0);
    let n = NONCE.load(Ordering::Relaxed);
    if n != 0 {
        return n;
    }
    let mut buf = [0u8; 8];
    // SAFETY: fills `buf`, at most its length.
    let got = unsafe { libc::getrandom(buf.as_mut_ptr().cast(), buf.len(), 0) };
    let mut v = u64::from_le_bytes(buf);
    if got != 8 || v == 0 {
        v = (std::process::id() as u64) << 32 | (crate::clock::now_ns() as u64 & 0xffff_ffff) | 1;
    }
    match NONCE.compare_exchange(0, v, Ordering::SeqCst, Ordering::SeqCst) {
        Ok(_) => v,
        Err(other) => other,
    }
}

/// A new commit id: the receipt key the serving process writes with the commit.
pub(crate) fn new_id() -> Vec<u8> {
    static SEQ: AtomicU64 = AtomicU64::new(0);
    let mut k = Vec::with_capacity(KEY_LEN);
    k.push(scope::RECEIPT);
    k.extend_from_slice(&now_ms().to_be_bytes());
    k.extend_from_slice(&process_nonce().to_be_bytes());
    k.extend_from_slice(&SEQ.fetch_add(1, Ordering::Relaxed).to_be_bytes());
    k
}

/// Checks that `id` (from a client) is a receipt key.
fn check(id: &[u8]) -> Result<()> {
    if id.len() != KEY_LEN || id[0] != scope::RECEIPT {
        return Err(Error::new(ErrorKind::Invalid, "malformed commit id on the store's socket"));
    }
    Ok(())
}

/// Writes the receipt of commit `id` into `txn` (committed with it, or not at all).
pub(crate) fn record(txn: &mut dyn Txn, id: &[u8]) -> Result<()> {
    check(id)?;
    txn.set(id, &now_ms().to_le_bytes())
}

/// Whether the commit `id` is in the store (its receipt is there).
pub(crate) fn committed(backend: &dyn Backend, id: &[u8]) -> Result<bool> {
    check(id)?;
    Ok(backend.begin()?.get(id)?.is_some())
}

/// Clears the receipts older than [`RETENTION`], at most once a [`COLLECT_EVERY`] per process.
/// Best effort: a failure (a conflict with another collector) is left for the next time.
pub(crate) fn collect(backend: &dyn Backend) {
    static LAST: AtomicU64 = AtomicU64::new(0);
    let now = now_ms();
    let last = LAST.load(Ordering::Relaxed);
    if now.saturating_sub(last) < COLLECT_EVERY.as_millis() as u64
        || LAST.compare_exchange(last, now, Ordering::SeqCst, Ordering::Relaxed).is_err()
    {
        return;
    }
    let cutoff = now.saturating_sub(RETENTION.as_millis() as u64);
    let mut end = vec![scope::RECEIPT];
    end.extend_from_slice(&cutoff.to_be_bytes());
    let _ = backend.begin().and_then(|mut t| {
        t.clear_range(&[scope::RECEIPT], &end)?;
        t.commit(false)
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kv::MemoryBackend;

    #[test]
    fn a_receipt_is_there_exactly_when_its_commit_is() {
        let b = MemoryBackend::new(crate::kv::Limits::UNLIMITED);
        let (kept, dropped) = (new_id(), new_id());
        assert_ne!(kept, dropped);
        let mut t = b.begin().unwrap();
        record(&mut *t, &kept).unwrap();
        t.commit(false).unwrap();
        let mut t = b.begin().unwrap();
        record(&mut *t, &dropped).unwrap();
        drop(t); // rolled back
        assert!(committed(&b, &kept).unwrap());
        assert!(!committed(&b, &dropped).unwrap());
        assert!(committed(&b, b"R-short").is_err());
    }

    #[test]
    fn old_receipts_are_collected() {
        let b = MemoryBackend::new(crate::kv::Limits::UNLIMITED);
        let mut old = new_id();
        old[1..9].copy_from_slice(&(now_ms() - RETENTION.as_millis() as u64 - 1).to_be_bytes());
        let young = new_id();
        let mut t = b.begin().unwrap();
        record(&mut *t, &old).unwrap();
        record(&mut *t, &young).unwrap();
        t.commit(false).unwrap();
        collect(&b);
        assert!(!committed(&b, &old).unwrap());
        assert!(committed(&b, &young).unwrap());
    }
}
