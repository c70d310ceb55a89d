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

mod cache;
#[cfg(feature = "testing")]
mod fault;
#[cfg(feature = "foundationdb")]
mod fdb;
mod frozen;
mod journal;
mod layered;
mod memory;
mod occ;
#[cfg(feature = "rocksdb")]
mod owner;
mod retry;
#[cfg(feature = "rocksdb")]
mod rocks;
#[cfg(feature = "rocksdb")]
mod rocks_named;
#[cfg(feature = "rocksdb")]
mod shared;

#[cfg(feature = "testing")]
pub use fault::{FaultPlan, FaultyBackend};
#[cfg(feature = "foundationdb")]
pub use fdb::{FdbBackend, FdbUri};
pub use journal::JournalTxn;
pub use layered::{create_clone, LayeredBackend, CLONE_KEY};
pub use memory::MemoryBackend;
pub use retry::{backoff, retry_loop, run_with_retries};
#[cfg(feature = "rocksdb")]
pub use rocks::RocksBackend;
#[cfg(feature = "rocksdb")]
pub use shared::{SharedBackend, RECOVERY_TIMEOUT, SOCKET_FILE};

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
    /// On a shared backend, whether this process is the store's primary, which sees every
    /// commit and whose open files other processes cannot see (`Some(true)`), a secondary of
    /// a primary in another process (`Some(false)`), or neither because the backend has no
    /// primary (`None`: FoundationDB). A backend that is not shared answers `Some(true)`.
    /// The file layer decides from it who records open handles in the store and who may free
    /// an unlinked file's data (`fs/handle_marks.rs`).
    fn primary(&self) -> Option<bool> {
        if self.shared() {
            None
        } else {
            Some(true)
        }
    }
    /// True while this process is certainly the only one using this shared backend (the owner
    /// of a shared RocksDB store that nobody has connected to): locks need not be written to
    /// the backend until [`Backend::on_sharing`]'s hooks run. False when the backend cannot
    /// tell (the safe answer: locks are then always written).
    fn alone(&self) -> bool {
        false
    }
    /// Registers `hook` to run once, when [`Backend::alone`] stops being true, before any
    /// other process is served (the file layer then writes the locks it kept to itself).
    fn on_sharing(&self, hook: Box<dyn Fn() + Send + Sync>) {
        let _ = hook;
    }
    /// Registers `process` (the random id of one open store in this process) as alive for as
    /// long as this backend is open in this process, where the backend can tell liveness
    /// itself (a shared RocksDB store: a lock the kernel drops when the process dies).
    fn register_process(&self, process: u64) -> Result<()> {
        let _ = process;
        Ok(())
    }
    /// Whether the process that registered `process` is alive, if the backend can tell at
    /// once (`None`: it cannot; the caller relies on leases).
    fn process_alive(&self, process: u64) -> Option<bool> {
        let _ = process;
        None
    }
    /// The (total, free) bytes of the disk that holds the backend's data, if it has one of
    /// its own (RocksDB: the file system of its directory). `statfs` reports it.
    fn disk_space(&self) -> Option<(u64, u64)> {
        None
    }
    /// True if every write fails with [`ErrorKind::ReadOnly`] (a snapshot, a pack): a store
    /// on it opens read-only.
    fn read_only(&self) -> bool {
        false
    }
    /// A read-only view of everything committed so far, kept until it is dropped: its
    /// transactions all read at that one instant. Cheap (no data is copied); it keeps the old
    /// versions of what later commits change. The default: not supported.
    fn snapshot(&self) -> Result<Arc<dyn Backend>> {
        Err(unsupported(&self.describe(), "snapshots"))
    }
    /// Keeps a snapshot of everything committed so far under `name`, surviving reopening; it
    /// opens read-only by the URI [`Backend::named_snapshot_uri`] gives. The default: not supported.
    fn create_named_snapshot(&self, name: &str) -> Result<()> {
        let _ = name;
        Err(unsupported(&self.describe(), "named snapshots"))
    }
    /// The names of the named snapshots, sorted.
    fn named_snapshots(&self) -> Result<Vec<String>> {
        Err(unsupported(&self.describe(), "named snapshots"))
    }
    /// Deletes the named snapshot `name`; [`ErrorKind::Busy`] while it is open.
    fn delete_named_snapshot(&self, name: &str) -> Result<()> {
        let _ = name;
        Err(unsupported(&self.describe(), "named snapshots"))
    }
    /// The URI that opens the named snapshot `name` (read-only).
    fn named_snapshot_uri(&self, name: &str) -> Result<String> {
        let _ = name;
        Err(unsupported(&self.describe(), "named snapshots"))
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

/// The error of a backend that lacks a feature.
fn unsupported(what: &str, feature: &str) -> Error {
    Error::new(ErrorKind::Invalid, format!("{what}: this backend has no {feature}"))
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
    /// Reads a key like [`Txn::get`], lending the value to `read` instead of returning a copy
    /// (a 4 KiB read of a 64 KiB block copies 4 KiB, not 64). Returns false, without calling
    /// `read`, when the key is absent. The default copies through `get`.
    fn get_with(&mut self, key: &[u8], read: &mut dyn FnMut(&[u8])) -> Result<bool> {
        Ok(self.get(key)?.map(|v| read(&v)).is_some())
    }
    /// Reads the pairs with `start <= key < end`, at most `limit` (0: all), in ascending order,
    /// or descending from `end` when `reverse`. Adds the range actually covered to the read
    /// conflict set, so a later insert into it conflicts (no phantoms).
    fn get_range(
        &mut self,
        start: &[u8],
        end: &[u8],
        limit: usize,
        reverse: bool,
    ) -> Result<Vec<KeyValue>>;
    /// Adds `start <= key < end` to the read conflict set without reading it: the commit fails
    /// if a concurrent commit writes there. The default reads the range (same conflicts).
    fn add_read_conflict_range(&mut self, start: &[u8], end: &[u8]) -> Result<()> {
        self.get_range(start, end, 0, false).map(|_| ())
    }
    /// Reads every pair with `start <= key < end` in ascending order like [`Txn::get_range`]
    /// (the whole range enters the read conflict set), lending each to `visit` instead of
    /// returning copies. The default copies through `get_range`.
    fn visit_range(
        &mut self,
        start: &[u8],
        end: &[u8],
        visit: &mut dyn FnMut(&[u8], &[u8]),
    ) -> Result<()> {
        for (k, v) in self.get_range(start, end, 0, false)? {
            visit(&k, &v);
        }
        Ok(())
    }
    /// [`Txn::get_range`] without adding a read conflict.
    fn snapshot_get_range(
        &mut self,
        start: &[u8],
        end: &[u8],
        limit: usize,
        reverse: bool,
    ) -> Result<Vec<KeyValue>>;
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
/// in `memory:?limits=foundationdb&capacity=1000000`), `rocksdb:/path[?mode=shared|exclusive]`,
/// a bare path (RocksDB, shared), or `fdb:[CLUSTER-FILE][?prefix=NAME]` (FoundationDB, with the
/// cargo feature `foundationdb`). Opening the same RocksDB directory twice in one process
/// returns the same instance; `pack:/path/image` opens a read-only pack image (see
/// [`crate::pack`]). Several processes may open one RocksDB store at once (see
/// [`SharedBackend`]); `mode=exclusive` refuses every other process instead.
///
/// `rocksdb:/path?snapshot=NAME` (or the snapshot's own directory, `/path/snapshots/NAME`)
/// opens a named snapshot, read-only. A store made a clone by [`create_clone`] opens as the
/// clone, its lower layer opened by the URI it recorded.
pub fn open(uri: &str) -> Result<Arc<dyn Backend>> {
    if let Some(path) = uri.strip_prefix("pack:") {
        return Ok(crate::pack::PackBackend::open(std::path::Path::new(path))?);
    }
    let backend = open_raw(uri)?;
    if uri.starts_with("memory:") {
        return Ok(backend);
    }
    layered::open_if_clone(backend)
}

/// `uri` with a RocksDB path made absolute (other URIs as they are), to be recorded.
pub(crate) fn absolute_uri(uri: &str) -> Result<String> {
    let scheme = uri
        .split_once(':')
        .map(|(s, _)| s)
        .filter(|s| !s.is_empty() && s.bytes().all(|b| b.is_ascii_alphanumeric()));
    if scheme.is_some_and(|s| s != "rocksdb") {
        return Ok(uri.to_string());
    }
    let (path, _, snapshot) = rocksdb_uri(uri)?;
    let abs = std::path::absolute(path)
        .map_err(|e| Error::new(ErrorKind::Invalid, format!("{uri}: {e}")))?;
    let abs = abs
        .to_str()
        .ok_or_else(|| Error::new(ErrorKind::Invalid, format!("{uri}: path is not UTF-8")))?;
    Ok(match snapshot {
        Some(name) => format!("rocksdb:{abs}?snapshot={name}"),
        None => format!("rocksdb:{abs}"),
    })
}

/// [`open`] without opening a clone over the store: a clone's upper layer opens as it is
/// stored, with its own keys (for tools and tests that inspect it).
pub fn open_raw(uri: &str) -> Result<Arc<dyn Backend>> {
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
                Some(("capacity", n)) => {
                    capacity =
                        Some(n.parse().map_err(|_| bad("capacity must be a number of bytes"))?)
                }
                _ => {
                    return Err(bad(&format!(
                    "unknown memory option {param:?} (known: limits=foundationdb, capacity=BYTES)"
                )))
                }
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
    let (path, exclusive, snapshot) = rocksdb_uri(uri)?;
    if path.is_empty() {
        return Err(Error::new(ErrorKind::Invalid, "empty store URI"));
    }
    #[cfg(feature = "rocksdb")]
    {
        let dir = std::path::Path::new(path);
        if let Some(name) = snapshot {
            return rocks_named::open_named(dir, name);
        }
        if rocks_named::is_snapshot_dir(dir) {
            return rocks_named::open_dir(dir, format!("rocksdb:{path}"));
        }
        let canon = RocksBackend::prepare_dir(dir)?;
        Ok(SharedBackend::open(&canon, exclusive)?)
    }
    #[cfg(not(feature = "rocksdb"))]
    {
        let _ = (exclusive, snapshot);
        Err(Error::new(ErrorKind::Invalid, format!("{uri}: this build has no RocksDB backend")))
    }
}

/// Splits a RocksDB URI into its path, whether it asks for exclusive use, and the named
/// snapshot it opens. Options: `mode=shared` (the default), `mode=exclusive`, `snapshot=NAME`.
/// A bare path takes them too when every parameter after its last `?` is one of them (else the
/// `?` is part of the path).
fn rocksdb_uri(uri: &str) -> Result<(&str, bool, Option<&str>)> {
    let (rest, explicit) = match uri.strip_prefix("rocksdb:") {
        Some(rest) => (rest, true),
        None => (uri, false),
    };
    let Some((path, query)) = rest.rsplit_once('?') else { return Ok((rest, false, None)) };
    let (mut exclusive, mut snapshot) = (false, None);
    for param in query.split('&').filter(|p| !p.is_empty()) {
        match param.split_once('=') {
            Some(("mode", "exclusive")) => exclusive = true,
            Some(("mode", "shared")) => exclusive = false,
            Some(("snapshot", name)) => snapshot = Some(name),
            _ if !explicit => return Ok((rest, false, None)),
            _ => {
                return Err(Error::new(
                    ErrorKind::Invalid,
                    format!("{uri}: unknown rocksdb option {param:?} (known: mode=shared, mode=exclusive, snapshot=NAME)"),
                ))
            }
        }
    }
    Ok((path, exclusive, snapshot))
}

/// Opens a backend by URI like [`open`], but only one that already has data: a RocksDB path
/// without a database gives [`ErrorKind::NotFound`] and creates nothing. (`memory:` always
/// opens an empty backend, and FoundationDB creates nothing at open.)
pub fn open_existing(uri: &str) -> Result<Arc<dyn Backend>> {
    #[cfg(feature = "rocksdb")]
    if !uri.starts_with("memory:") && !uri.starts_with("fdb:") && !uri.starts_with("pack:") {
        let path = std::path::Path::new(rocksdb_uri(uri)?.0);
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
