//! The backend traits: [`Backend`] (serializable transactions, the one thing every backend
//! gives) and the capabilities some backends add, each behind an accessor that returns `None`
//! where it is missing: [`Sharing`] (several processes), [`Snapshots`], [`NamedSnapshots`] and
//! [`ReadCacheControl`].

use crate::error::{Error, ErrorKind, Result};
use std::sync::Arc;
use std::time::Duration;

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
    /// A read-only transaction answered from this process's read cache alone, at the latest
    /// visible version, for a call that only reads (a hot `stat` or `pread`): no snapshot, no
    /// read set. Its first read the cache cannot answer (and any write or range read) fails
    /// it, and so does its commit then: the caller runs the call again on [`Backend::begin`].
    /// `None` (the default) where the backend has no such cache.
    fn begin_cached(&self) -> Option<Box<dyn Txn>> {
        None
    }
    /// The backend's limits.
    fn limits(&self) -> Limits;
    /// Makes every transaction committed so far durable (one fsync, shared by callers).
    fn sync(&self) -> Result<()>;
    /// Makes durable every commit that a transaction reading at `read_version` (its
    /// [`Txn::read_version`]; `None`: every commit so far) sees, with no fsync where they
    /// already are (the optimistic layer keeps a mark of what is synced). The change feed
    /// calls it before it hands out records, so a power cut cannot take back what a consumer
    /// read. The default: [`Backend::sync`] (nothing on FoundationDB, whose commits are
    /// durable when they become visible).
    fn sync_through(&self, read_version: Option<u64>) -> Result<()> {
        let _ = read_version;
        self.sync()
    }
    /// A short description for messages, such as `rocksdb:/path`.
    fn describe(&self) -> String;
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
    /// How this process shares the backend with others; `None`: it does not (memory, an
    /// exclusive RocksDB store, a snapshot, a pack), so its role is [`Role::Sole`].
    fn sharing(&self) -> Option<&dyn Sharing> {
        None
    }
    /// Read-only views of everything committed so far, where the backend keeps versions.
    fn snapshots(&self) -> Option<&dyn Snapshots> {
        None
    }
    /// Snapshots kept under a name and surviving reopening (RocksDB checkpoints).
    fn named_snapshots(&self) -> Option<&dyn NamedSnapshots> {
        None
    }
    /// The in-process read cache, on backends that see every commit (memory, RocksDB).
    fn read_cache(&self) -> Option<&dyn ReadCacheControl> {
        None
    }
    /// A watch on the in-process read cache, for a reader that keeps values the cache lent
    /// and serves them again without asking it (a file handle's table of blocks,
    /// `fs/block_table.rs`). `None` (the default) where there is no such cache, or where this
    /// process does not see every commit as it lands (a client of a shared store).
    fn cache_watch(&self) -> Option<Box<dyn CacheWatch>> {
        None
    }
    /// Arranges for `wake` to run once (from any thread, so it must not block) when a
    /// transaction that wrote a versionstamped key under `prefix` with a stamp greater than
    /// `after` has committed: at once if one already has. Dropping the returned [`Wakeup`]
    /// disarms it. `None` (the default): this backend cannot tell, and the caller polls.
    /// FoundationDB arms a watch (`kv/fdb/stamp.rs`), so waiters of every process and machine
    /// wake without polling.
    fn wake_on_stamped(
        &self,
        prefix: &[u8],
        after: &[u8],
        wake: Box<dyn FnOnce() + Send>,
    ) -> Result<Option<Wakeup>> {
        let _ = (prefix, after, wake);
        Ok(None)
    }
    /// Tells the backend that a transaction of this process that wrote versionstamped keys
    /// under `prefix` has committed, so that it wakes the waiters of other processes where it
    /// does that itself (a shared RocksDB store rings its bell, `kv/shared/bell.rs`). Called
    /// by the writer after the commit returned; the default does nothing.
    fn announce_stamped(&self, prefix: &[u8]) {
        let _ = prefix;
    }
}

/// A wake-up armed by [`Backend::wake_on_stamped`]: dropping it disarms it.
pub type Wakeup = Box<dyn Send>;

/// Where this process stands among the processes that use one backend.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// No other process uses it: this process sees every commit and every open file.
    Sole,
    /// Shared, and this process is the primary (the owner of a shared RocksDB store): it sees
    /// every commit, but not the files other processes have open.
    Primary,
    /// Shared with a primary in another process (a client of a shared RocksDB store).
    Secondary,
    /// Shared with no primary (FoundationDB): every process is a peer.
    Peer,
}

impl Role {
    /// True unless the backend is used by this process alone: file locks, open-file marks and
    /// staged data must then be recorded in the backend, where other processes see them.
    pub fn is_shared(self) -> bool {
        self != Role::Sole
    }
    /// True where this process sees every commit and may free an unlinked file's data.
    pub fn is_primary(self) -> bool {
        matches!(self, Role::Sole | Role::Primary)
    }
}

/// The capability of a backend that several processes use at once.
pub trait Sharing: Send + Sync {
    /// This process's role (it changes when a secondary takes over from a dead primary).
    fn role(&self) -> Role;
    /// True while this process is certainly the only one using the backend (the owner of a
    /// shared RocksDB store that nobody has connected to): locks need not be written to the
    /// backend until [`Sharing::on_sharing`]'s hooks run. False when it cannot tell.
    fn alone(&self) -> bool {
        false
    }
    /// Registers `hook` to run once, when [`Sharing::alone`] stops being true, before any
    /// other process is served (the file layer then writes the locks it kept to itself).
    fn on_sharing(&self, hook: Box<dyn Fn() + Send + Sync>) {
        let _ = hook;
    }
    /// Registers `process` (the random id of one open store in this process) as alive for as
    /// long as the backend is open in this process, where the backend can tell liveness itself
    /// (a shared RocksDB store: a lock the kernel drops when the process dies).
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
    /// Runs a change or test of file lock records (`request`, encoded by the file layer's
    /// lease table) in the process that serves the backend, in one request, and returns its
    /// encoded reply; `None` where this process runs it itself (it serves the backend, or
    /// nobody does, or its server predates such requests). A transaction of the client's own
    /// would read the records in one round trip and commit in another.
    fn serve_locks(&self, request: &[u8]) -> Option<Result<Vec<u8>>> {
        let _ = request;
        None
    }
}

/// The capability of taking read-only views.
pub trait Snapshots: Send + Sync {
    /// A read-only view of everything committed so far, kept until it is dropped: its
    /// transactions all read at that one instant. Cheap (no data is copied); it keeps the old
    /// versions of what later commits change.
    fn snapshot(&self) -> Result<Arc<dyn Backend>>;
}

/// The capability of keeping snapshots by name.
pub trait NamedSnapshots: Send + Sync {
    /// Keeps a snapshot of everything committed so far under `name`, surviving reopening; it
    /// opens read-only by the URI [`NamedSnapshots::uri`] gives.
    fn create(&self, name: &str) -> Result<()>;
    /// The names of the named snapshots, sorted.
    fn list(&self) -> Result<Vec<String>>;
    /// Deletes the named snapshot `name`; [`ErrorKind::Busy`] while it is open.
    fn delete(&self, name: &str) -> Result<()>;
    /// The URI that opens the named snapshot `name` (read-only).
    fn uri(&self, name: &str) -> Result<String>;
}

/// What the read cache has done, for tests and benchmarks.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CacheStats {
    /// Reads answered from the cache.
    pub hits: u64,
    /// Reads that went to the engine.
    pub misses: u64,
    /// Bytes of keys and values held.
    pub bytes: u64,
}

/// The capability of an in-process read cache.
pub trait ReadCacheControl: Send + Sync {
    /// Sets the cache's size in bytes (0: off), evicting down to it.
    fn set_capacity(&self, bytes: u64);
    /// What the cache has done; `None` while it is off.
    fn stats(&self) -> Option<CacheStats>;
}

/// Keeps values lent by the read cache exact without asking the cache for each use: a reader
/// holds copies of one version of some keys and serves them while that version is still the
/// one cached reads are answered at ([`CacheWatch::version`], one atomic load); when it moved,
/// [`CacheWatch::refresh`] tells which copies commits made stale, from the write sets the cache
/// keeps to validate its own fills. Memory: what readers hold counts against a budget (half
/// the cache's capacity, [`CacheWatch::reserve`]), since a value the cache evicted stays alive
/// while a reader holds it.
pub trait CacheWatch: Send + Sync {
    /// The version cached reads are answered at now (what [`Backend::begin_cached`] would read
    /// at); `None` while they cannot be (the store stopped, or this process is a fork's child).
    fn version(&self) -> Option<u64>;
    /// Brings copies of version `at` to the cache's version now, under the cache's lock, and
    /// returns it (`None`: the cache is off or the store stopped; the copies are all stale).
    /// `copies.stale` hears of each key and cleared range in `within` that a commit after `at`
    /// wrote (all of `within` when the cache no longer knows), then `copies.fill` may lend
    /// values of the new version.
    fn refresh(
        &self,
        at: u64,
        within: &[(&[u8], &[u8])],
        copies: &mut dyn LentCopies,
    ) -> Option<u64>;
    /// Counts `bytes` more held by readers, if the budget allows (false: hold nothing more).
    fn reserve(&self, bytes: usize) -> bool;
    /// Counts `bytes` that readers no longer hold.
    fn unreserve(&self, bytes: usize);
}

/// A reader's copies of values lent by the read cache, brought up to date by
/// [`CacheWatch::refresh`].
pub trait LentCopies {
    /// A commit after the copies' version wrote `key` (`end` is `None`) or cleared the range
    /// `[key, end)`: what the reader holds of it is stale.
    fn stale(&mut self, key: &[u8], end: Option<&[u8]>);
    /// Takes what it needs at the new version: `lend(key)` is the cache's value of `key`
    /// (`None`: absent or not cached).
    fn fill(&mut self, lend: &mut Lend<'_>);
}

/// What [`LentCopies::fill`] lends values with.
pub type Lend<'a> = dyn FnMut(&[u8]) -> Option<Arc<[u8]>> + 'a;

impl dyn Backend {
    /// This process's role; [`Role::Sole`] on a backend without [`Sharing`].
    pub fn role(&self) -> Role {
        self.sharing().map_or(Role::Sole, |s| s.role())
    }
    /// [`Sharing::alone`]; false on a backend without [`Sharing`].
    pub fn alone(&self) -> bool {
        self.sharing().is_some_and(|s| s.alone())
    }
    /// [`Sharing::process_alive`]; `None` on a backend without [`Sharing`].
    pub fn process_alive(&self, process: u64) -> Option<bool> {
        self.sharing().and_then(|s| s.process_alive(process))
    }
    /// The capability `what` of `cap`, or the error of a backend that lacks it.
    pub fn require<'a, T: ?Sized>(&self, cap: Option<&'a T>, what: &str) -> Result<&'a T> {
        cap.ok_or_else(|| unsupported(&self.describe(), what))
    }
}

/// The error of a backend that lacks a feature.
pub(crate) fn unsupported(what: &str, feature: &str) -> Error {
    Error::new(ErrorKind::Invalid, format!("{what}: this backend has no {feature}"))
}

impl std::fmt::Debug for dyn Backend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Backend({})", self.describe())
    }
}

/// A key-value pair returned by range reads.
pub type KeyValue = (Vec<u8>, Vec<u8>);

/// Reads of one transaction's snapshot that several threads may make at once (see
/// [`Txn::parallel_reader`]). Valid while the transaction lives.
pub trait SnapshotReader: Send + Sync {
    /// Visits the pairs with `start <= key < end` (within the reader's range) at the
    /// transaction's snapshot in ascending order, lending each to `visit`. Adds no read
    /// conflict (the reader's whole range already is in the transaction's read conflict set).
    fn visit_range(
        &self,
        start: &[u8],
        end: &[u8],
        visit: &mut dyn FnMut(&[u8], &[u8]),
    ) -> Result<()>;
    /// How many reads are worth keeping in flight at once: 1 for a local engine (no round
    /// trip to overlap), more for a backend with latency per request.
    fn in_flight(&self) -> usize;
}

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
    /// Reads several keys without adding read conflicts (like [`Txn::snapshot_get`], seeing
    /// the transaction's own writes), lending the value of `keys[i]` to `read(i, value)`,
    /// `None` when absent, in order. A backend with a round trip per request
    /// ([`Txn::batches_reads`]) sends them all at once and waits once; the default reads them
    /// one after the other. A value the caller goes on to use enters the read conflict set
    /// through [`Txn::note_read`].
    fn snapshot_get_many(
        &mut self,
        keys: &[&[u8]],
        read: &mut dyn FnMut(usize, Option<&[u8]>),
    ) -> Result<()> {
        for (i, k) in keys.iter().enumerate() {
            read(i, self.snapshot_get(k)?.as_deref());
        }
        Ok(())
    }
    /// Makes `key`, which [`Txn::snapshot_get_many`] found to be `value`, a read of this
    /// transaction as if read by [`Txn::get`]: the commit fails if a concurrent commit
    /// changes it. Fails with a retryable `Conflict` where the transaction can tell that
    /// `value` is no longer what it reads. The default reads the key again.
    fn note_read(&mut self, key: &[u8], value: Option<&[u8]>) -> Result<()> {
        let _ = value;
        self.get(key).map(|_| ())
    }
    /// Takes `key` as absent without reading it, where reading costs a round trip and the
    /// commit can check it instead (a client of a shared store): true if it did, and then the
    /// commit fails with a retryable `Conflict` if the key was present at this transaction's
    /// read version. False (the default, and where the key is read as cheaply as it is
    /// guessed): nothing was taken, the caller reads. For a name about to be created, by an
    /// operation that commits whatever it finds and reruns without guessing if it fails.
    fn assume_absent(&mut self, key: &[u8]) -> Result<bool> {
        let _ = key;
        Ok(false)
    }
    /// True where [`Txn::snapshot_get_many`] costs about one read however many keys it reads
    /// (a remote backend: FoundationDB), so that guessing keys and reading them together
    /// pays. False (the default) for local engines, where a read costs no round trip.
    fn batches_reads(&self) -> bool {
        false
    }
    /// True where reads are answered in this process (a local engine and its read cache), so
    /// that a point read per block costs no more than a range read of the blocks and lets
    /// the cache answer them. False (the default) where a read may cost a round trip.
    fn local_reads(&self) -> bool {
        false
    }
    /// Reads `key` like [`Txn::get_with`] where this process can answer without a round trip
    /// (the transaction's own writes, the process's read cache); `None` otherwise, having
    /// read nothing. The default answers only where [`Txn::local_reads`].
    fn cached_get_with(&mut self, key: &[u8], read: &mut dyn FnMut(&[u8])) -> Result<Option<bool>> {
        if self.local_reads() {
            return self.get_with(key, read).map(Some);
        }
        Ok(None)
    }
    /// The value of `key` as this transaction reads it, shared with the process's read cache
    /// instead of copied: an immutable buffer, valid for as long as it is held (eviction
    /// drops only the cache's reference). `None` where the value cannot be lent exactly: this
    /// transaction wrote the key, the key is absent, the cache does not hold it (or cannot
    /// prove it current at this snapshot), or the backend has no such cache (the default).
    /// Counts as a read, like [`Txn::get`].
    fn lend(&mut self, key: &[u8]) -> Result<Option<Arc<[u8]>>> {
        let _ = key;
        Ok(None)
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
    /// A reader of this transaction's snapshot for the keys `start <= key < end` that other
    /// threads may use at once, so that a large read keeps several requests in flight; the
    /// whole range enters the read conflict set. `None` (the default) where the backend has
    /// none, or where the transaction wrote into the range (its writes must be merged in):
    /// the caller reads through the transaction then.
    fn parallel_reader(
        &mut self,
        start: &[u8],
        end: &[u8],
    ) -> Result<Option<std::sync::Arc<dyn SnapshotReader>>> {
        let _ = (start, end);
        Ok(None)
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
    /// Writes `value` at the key `prefix` + a 10-byte versionstamp filled in at commit: the
    /// stamp (8-byte big-endian commit counter, then a 2-byte big-endian index within the
    /// transaction) grows with commit order, so such keys sort in the order their transactions
    /// committed. The keys are unknown before the commit, so the transaction cannot read them.
    /// Backends without it (the default) fail with [`ErrorKind::Invalid`] ("this backend has
    /// no versionstamped keys"). On FoundationDB this is its own `SET_VERSIONSTAMPED_KEY`,
    /// whose 2 last bytes order the transactions of one commit batch instead: there, a second
    /// versionstamped key under the same prefix in one transaction fails with
    /// [`ErrorKind::Invalid`] (`kv/fdb/stamp.rs`).
    fn set_versionstamped_key(&mut self, prefix: &[u8], value: &[u8]) -> Result<()> {
        let _ = (prefix, value);
        Err(unsupported("this backend", "versionstamped keys (needed by the change feed)"))
    }
    /// [`Txn::set_versionstamped_key`] with a value the transaction may keep as it is (the
    /// optimistic layer does; the others copy it).
    fn set_versionstamped_key_vec(&mut self, prefix: &[u8], value: Vec<u8>) -> Result<()> {
        self.set_versionstamped_key(prefix, &value)
    }
    /// The version of the snapshot this transaction reads, where the backend numbers them
    /// (the optimistic layer's; `kv/shared` uses it to check a client's cached reads).
    fn read_version(&self) -> Option<u64> {
        None
    }
    /// Commits. With `durable`, the commit survives power loss once this returns.
    fn commit(self: Box<Self>, durable: bool) -> Result<()>;
    /// [`Txn::commit`], returning the commit's version where the backend numbers them (the
    /// optimistic layer's; None for a read-only commit, or on other backends).
    fn commit_versioned(self: Box<Self>, durable: bool) -> Result<Option<u64>> {
        self.commit(durable).map(|()| None)
    }
    /// True when [`Txn::commit_pinned`] can give a transaction at this commit's version (a
    /// client of a shared store whose reads the owner's change ring versions).
    fn pins_commit(&self) -> bool {
        false
    }
    /// [`Txn::commit`], then a read-only transaction reading exactly the state this commit
    /// made (its version: no later commit), where the backend can give one
    /// ([`Txn::pins_commit`]); None otherwise, and the commit stands.
    fn commit_pinned(self: Box<Self>, durable: bool) -> Result<Option<Box<dyn Txn>>> {
        self.commit(durable).map(|()| None)
    }
    /// Moves the transaction to a fresh snapshot where it can (keeping its reads valid and
    /// its writes), so that its next reads see every commit made so far. The default does
    /// nothing; `JournalTxn` (kv/journal.rs) renews itself.
    fn refresh(&mut self) -> Result<()> {
        Ok(())
    }
}
