//! The key-value backend: serializable transactions over ordered byte keys.
//!
//! `kv` knows nothing about files. Every backend gives the same [`Txn`] semantics, checked by
//! one conformance suite (`core/tests/kv_conformance.rs`):
//! reads see the transaction's own writes; a commit fails with a retryable
//! [`ErrorKind::Conflict`] if anything it read (keys or ranges) was changed by a transaction
//! that committed after its snapshot; snapshot reads add no conflict; atomic operations add no
//! read conflict; a failed commit changes nothing.

use crate::error::{Error, ErrorKind, Result};
use std::sync::Arc;
use std::time::Duration;

#[cfg(feature = "testing")]
mod fault;
mod journal;
#[cfg(feature = "foundationdb")]
mod fdb;
mod memory;
mod cache;
mod occ;
mod retry;
#[cfg(feature = "rocksdb")]
mod owner;
#[cfg(feature = "rocksdb")]
mod rocks;

#[cfg(feature = "testing")]
pub use fault::{FaultPlan, FaultyBackend};
pub use journal::JournalTxn;
#[cfg(feature = "foundationdb")]
pub use fdb::{FdbBackend, FdbUri};
pub use memory::MemoryBackend;
pub use retry::{backoff, retry_loop, run_with_retries};
#[cfg(feature = "rocksdb")]
pub use rocks::RocksBackend;

/// The size and time limits of a backend. `None` means unlimited.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Largest key, in bytes.
    pub max_key: Option<usize>,
    /// Largest value, in bytes.
    pub max_value: Option<usize>,
    /// Largest total of keys and values written by one transaction.
    pub max_txn_bytes: Option<usize>,
    /// Longest time from `begin` to `commit`.
    pub max_txn_duration: Option<Duration>,
}

impl Limits {
    /// No limits at all.
    pub const UNLIMITED: Limits =
        Limits { max_key: None, max_value: None, max_txn_bytes: None, max_txn_duration: None };

    /// FoundationDB's documented limits: keys 10,000 B, values 100,000 B, 10,000,000 B of
    /// affected data per transaction, 5 seconds.
    pub const FOUNDATIONDB: Limits = Limits {
        max_key: Some(10_000),
        max_value: Some(100_000),
        max_txn_bytes: Some(10_000_000),
        max_txn_duration: Some(Duration::from_secs(5)),
    };
}

/// A backend: a source of serializable transactions.
pub trait Backend: Send + Sync + 'static {
    /// Starts a transaction reading at a fresh snapshot.
    fn begin(&self) -> Result<Box<dyn Txn>>;
    /// The backend's limits.
    fn limits(&self) -> Limits;
    /// Makes every transaction committed so far durable (one fsync, shared by callers).
    fn sync(&self) -> Result<()>;
    /// A short description for messages, such as `rocksdb:/path`.
    fn describe(&self) -> String;
    /// True if several processes may use this backend at once (FoundationDB): file locks are
    /// then also kept in the backend, under leases, so that they hold between processes.
    fn shared(&self) -> bool {
        false
    }
    /// The (total, free) bytes of the disk that holds the backend's data, if it has one of
    /// its own (RocksDB: the file system of its directory). `statfs` reports it.
    fn disk_space(&self) -> Option<(u64, u64)> {
        None
    }
    /// Sets the size in bytes of the backend's in-process read cache (0: off). Backends that
    /// cannot see every commit (FoundationDB) keep no cache and ignore it.
    fn set_cache_capacity(&self, _bytes: u64) {}
    /// The read cache's (hits, misses, bytes held), for tests and benchmarks; `None` without
    /// a cache or while it is off.
    fn cache_stats(&self) -> Option<(u64, u64, u64)> {
        None
    }
}

impl std::fmt::Debug for dyn Backend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Backend({})", self.describe())
    }
}

/// A key-value pair returned by range reads.
pub type KeyValue = (Vec<u8>, Vec<u8>);

/// One transaction of a [`Backend`]. Dropping it without `commit` rolls it back.
pub trait Txn: Send {
    /// Reads a key (adds it to the read conflict set).
    fn get(&mut self, key: &[u8]) -> Result<Option<Vec<u8>>>;
    /// Reads a key without adding a read conflict.
    fn snapshot_get(&mut self, key: &[u8]) -> Result<Option<Vec<u8>>>;
    /// Reads the pairs with `start <= key < end`, at most `limit` (0: all), in ascending order,
    /// or descending from `end` when `reverse`. Adds the range actually covered to the read
    /// conflict set, so a later insert into it conflicts (no phantoms).
    fn get_range(&mut self, start: &[u8], end: &[u8], limit: usize, reverse: bool)
        -> Result<Vec<KeyValue>>;
    /// [`Txn::get_range`] without adding a read conflict.
    fn snapshot_get_range(&mut self, start: &[u8], end: &[u8], limit: usize, reverse: bool)
        -> Result<Vec<KeyValue>>;
    /// Writes a key.
    fn set(&mut self, key: &[u8], value: &[u8]) -> Result<()>;
    /// Deletes a key.
    fn clear(&mut self, key: &[u8]) -> Result<()>;
    /// Deletes every key with `start <= key < end`.
    fn clear_range(&mut self, start: &[u8], end: &[u8]) -> Result<()>;
    /// Adds `delta` to the 8-byte little-endian integer at `key` (absent reads as 0) at commit
    /// time, without a read conflict.
    fn atomic_add(&mut self, key: &[u8], delta: i64) -> Result<()>;
    /// Sets the 8-byte little-endian unsigned integer at `key` to the larger of it and `value`
    /// at commit time, without a read conflict.
    fn atomic_max(&mut self, key: &[u8], value: u64) -> Result<()>;
    /// Commits. With `durable`, the commit survives power loss once this returns.
    fn commit(self: Box<Self>, durable: bool) -> Result<()>;
    /// Moves the transaction to a fresh snapshot where it can (keeping its reads valid and
    /// its writes), so that its next reads see every commit made so far. The default does
    /// nothing; [`JournalTxn`] renews itself.
    fn refresh(&mut self) -> Result<()> {
        Ok(())
    }
}

/// Opens a backend by URI: `memory:` (options `?limits=foundationdb` and `capacity=BYTES`, as
/// in `memory:?limits=foundationdb&capacity=1000000`), `rocksdb:/path`, a bare
/// path (RocksDB), or `fdb:[CLUSTER-FILE][?prefix=NAME]` (FoundationDB, with the cargo feature
/// `foundationdb`). Opening the same RocksDB directory twice in one process returns the same
/// shared instance.
pub fn open(uri: &str) -> Result<Arc<dyn Backend>> {
    if let Some(rest) = uri.strip_prefix("memory:") {
        let bad = |why: &str| Error::new(ErrorKind::Invalid, format!("{uri}: {why}"));
        let query = match rest {
            "" => "",
            _ => rest.strip_prefix('?').ok_or_else(|| bad("expected memory:?options"))?,
        };
        let (mut limits, mut capacity) = (Limits::UNLIMITED, None);
        for param in query.split('&').filter(|p| !p.is_empty()) {
            match param.split_once('=') {
                Some(("limits", "foundationdb")) => limits = Limits::FOUNDATIONDB,
                Some(("capacity", n)) => capacity = Some(n.parse().map_err(|_| bad("capacity must be a number of bytes"))?),
                _ => return Err(bad(&format!("unknown memory option {param:?} (known: limits=foundationdb, capacity=BYTES)"))),
            }
        }
        return Ok(Arc::new(MemoryBackend::with_capacity(limits, capacity)));
    }
    if uri.starts_with("fdb:") {
        #[cfg(feature = "foundationdb")]
        return Ok(FdbBackend::open(uri)?);
        #[cfg(not(feature = "foundationdb"))]
        return Err(Error::new(
            ErrorKind::Invalid,
            format!("{uri}: this build has no FoundationDB backend (cargo feature `foundationdb`)"),
        ));
    }
    let path = uri.strip_prefix("rocksdb:").unwrap_or(uri);
    if path.is_empty() {
        return Err(Error::new(ErrorKind::Invalid, "empty store URI"));
    }
    #[cfg(feature = "rocksdb")]
    {
        Ok(RocksBackend::open(std::path::Path::new(path))?)
    }
    #[cfg(not(feature = "rocksdb"))]
    Err(Error::new(ErrorKind::Invalid, format!("{uri}: this build has no RocksDB backend")))
}

/// Opens a backend by URI like [`open`], but only one that already has data: a RocksDB path
/// without a database gives [`ErrorKind::NotFound`] and creates nothing. (`memory:` always
/// opens an empty backend, and FoundationDB creates nothing at open.)
pub fn open_existing(uri: &str) -> Result<Arc<dyn Backend>> {
    #[cfg(feature = "rocksdb")]
    if !uri.starts_with("memory:") && !uri.starts_with("fdb:") {
        let path = std::path::Path::new(uri.strip_prefix("rocksdb:").unwrap_or(uri));
        if !path.as_os_str().is_empty() && !RocksBackend::exists(path) {
            return Err(Error::new(ErrorKind::NotFound, format!("{uri}: no store there")));
        }
    }
    open(uri)
}

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
