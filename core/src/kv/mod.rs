//! The key-value backend: serializable transactions over ordered byte keys.
//!
//! `kv` knows nothing about files. Every backend gives the same [`Txn`] semantics, checked by
//! one conformance suite (`core/tests/kv_conformance.rs`):
//! reads see the transaction's own writes; a commit fails with a retryable
//! [`crate::ErrorKind::Conflict`] if anything it read (keys or ranges) was changed by a transaction
//! that committed after its snapshot; snapshot reads add no conflict; atomic operations add no
//! read conflict; a failed commit changes nothing.

mod backend;
mod cache;
mod cache_key;
#[cfg(feature = "testing")]
mod fault;
mod fdb;
mod frozen;
mod journal;
mod layered;
mod memory;
mod occ;
#[cfg(feature = "rocksdb")]
mod owner;
mod range_cache;
mod retry;
#[cfg(feature = "rocksdb")]
mod rocks;
#[cfg(feature = "rocksdb")]
mod rocks_batch;
#[cfg(feature = "rocksdb")]
mod rocks_cf;
#[cfg(feature = "rocksdb")]
mod rocks_named;
#[cfg(feature = "rocksdb")]
mod shared;
mod uri;

pub use backend::{
    Backend, CacheStats, CacheWatch, KeyValue, Lend, LentCopies, Limits, NamedSnapshots,
    ReadCacheControl, Role, Sharing, SnapshotReader, Snapshots, Txn, Wakeup,
};
#[cfg(feature = "testing")]
pub use fault::{FaultPlan, FaultyBackend};
#[cfg(feature = "testing")]
#[doc(hidden)]
pub use fdb::CommitFault;
pub use fdb::{FdbBackend, FdbUri};
pub use journal::JournalTxn;
pub use layered::{create_clone, LayeredBackend, CLONE_KEY};
pub use memory::MemoryBackend;
#[doc(hidden)]
pub use retry::retries;
pub(crate) use retry::retries_on_this_thread;
pub use retry::{backoff, retry, retry_loop, run_with_retries};
#[cfg(feature = "rocksdb")]
pub use rocks::{wal_syncs, RocksBackend};
#[cfg(feature = "rocksdb")]
#[doc(hidden)]
pub use shared::guess_counts;
#[cfg(feature = "rocksdb")]
#[doc(hidden)]
pub use shared::replies_sent;
#[cfg(feature = "rocksdb")]
#[doc(hidden)]
pub use shared::spin_counts;
#[cfg(feature = "rocksdb")]
pub use shared::{
    round_trips, SharedBackend, DEFAULT_OWNER_TIMEOUT, RECOVERY_TIMEOUT, SOCKET_FILE,
};
pub(crate) use uri::absolute_uri;
pub use uri::{open, open_existing, open_raw};

/// Decodes an 8-byte little-endian counter as written by the atomic operations.
pub fn decode_counter(v: Option<&[u8]>) -> u64 {
    match v {
        Some(b) if b.len() == 8 => u64::from_le_bytes(b.try_into().unwrap()),
        _ => 0,
    }
}

/// The smallest key greater than every key starting with `prefix` (for range ends).
pub fn prefix_end(prefix: &[u8]) -> Vec<u8> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < 0xff {
            end.push(last + 1);
            return end;
        }
    }
    vec![0xff; prefix.len() + 1]
}
