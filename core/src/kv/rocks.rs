//! The RocksDB backend: a store is a directory on local disk, opened by one owner.
//!
//! RocksDB gives snapshots and atomic write batches; serializable conflict detection (ranges
//! included) comes from the optimistic layer in `occ.rs`, which is complete because only one
//! owner can open the directory (txvfs's own lock, `owner.rs`, across processes and library
//! copies) and one process shares one instance.

use super::occ::{Engine, Mutation, OccStore};
use super::owner::{forked_error, OwnerLock};
use super::rocks_batch::KeptBatch;
use super::rocks_cf;
use super::{Backend, CacheWatch, Limits, NamedSnapshots, ReadCacheControl, Snapshots, Txn};
use crate::error::{Error, ErrorKind, Result};
use parking_lot::Mutex;
use rocksdb::{
    BlockBasedOptions, Cache, ColumnFamily, ColumnFamilyDescriptor, Options,
    SnapshotWithThreadMode, DB,
};
use std::collections::HashMap;
use std::mem::ManuallyDrop;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock, Weak};

struct RocksEngine {
    /// Closed in `drop`, before the owner lock is released; never closed in a forked child
    /// (its RocksDB threads are gone and closing could write to the parent's files).
    db: ManuallyDrop<DB>,
    path: PathBuf,
    owner: OwnerLock,
    /// The batch every commit fills and writes (see `rocks_batch.rs`).
    batch: Mutex<KeptBatch>,
}

impl RocksEngine {
    /// The family of `key`: the change feed's for its records (see `rocks_cf.rs`), else the
    /// default one (`None`).
    #[inline]
    fn family(&self, key: &[u8]) -> Option<&ColumnFamily> {
        if rocks_cf::in_feed(key) {
            self.db.cf_handle(rocks_cf::FEED_CF)
        } else {
            None
        }
    }

    /// Refuses every use of a store inherited across fork().
    fn check_owner(&self) -> Result<()> {
        if self.owner.inherited() {
            return Err(forked_error(
                &format!("rocksdb:{}", self.path.display()),
                self.owner.owner_pid(),
            ));
        }
        Ok(())
    }
}

impl Drop for RocksEngine {
    fn drop(&mut self) {
        if !self.owner.inherited() {
            // SAFETY: dropped once, here; nothing uses the DB afterwards.
            unsafe { ManuallyDrop::drop(&mut self.db) };
        }
    }
}

fn backend_error(path: &Path, e: rocksdb::Error) -> Error {
    rocks_error(path, e.into_string())
}

fn rocks_error(path: &Path, msg: String) -> Error {
    let kind = if msg.contains("No space left") { ErrorKind::NoSpace } else { ErrorKind::Backend };
    Error::new(kind, format!("rocksdb:{}: {msg}", path.display()))
}

/// A snapshot that borrows the engine's DB. The transaction that holds it also holds an `Arc`
/// of the engine and releases the snapshot first, so the borrow never outlives the DB.
pub(crate) struct RocksSnapshot(SnapshotWithThreadMode<'static, DB>);

impl Engine for RocksEngine {
    type Snapshot = RocksSnapshot;

    fn snapshot(&self, _version: u64) -> RocksSnapshot {
        let snap = self.db.snapshot();
        // SAFETY: see `RocksSnapshot`: the DB outlives every snapshot taken from it.
        RocksSnapshot(unsafe {
            std::mem::transmute::<SnapshotWithThreadMode<'_, DB>, SnapshotWithThreadMode<'static, DB>>(
                snap,
            )
        })
    }

    fn get(&self, snap: &RocksSnapshot, key: &[u8]) -> Result<Option<Vec<u8>>> {
        match self.family(key) {
            Some(cf) => snap.0.get_cf(cf, key),
            None => snap.0.get(key),
        }
        .map_err(|e| backend_error(&self.path, e))
    }

    fn get_with(
        &self,
        snap: &RocksSnapshot,
        key: &[u8],
        read: &mut dyn FnMut(&[u8]),
    ) -> Result<bool> {
        let v = match self.family(key) {
            Some(cf) => snap.0.get_pinned_cf(cf, key),
            None => snap.0.get_pinned(key),
        }
        .map_err(|e| backend_error(&self.path, e))?;
        Ok(v.map(|v| read(&v)).is_some())
    }

    fn get_latest(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        match self.family(key) {
            Some(cf) => self.db.get_cf(cf, key),
            None => self.db.get(key),
        }
        .map_err(|e| backend_error(&self.path, e))
    }

    fn scan(
        &self,
        snap: &RocksSnapshot,
        start: &[u8],
        end: &[u8],
        reverse: bool,
        visit: &mut dyn FnMut(&[u8], &[u8]) -> bool,
    ) -> Result<()> {
        let cf = self.db.cf_handle(rocks_cf::FEED_CF);
        rocks_cf::scan_db(cf, start, end, reverse, visit, |cf, ro| match cf {
            Some(cf) => snap.0.raw_iterator_cf_opt(cf, ro),
            None => snap.0.raw_iterator_opt(ro),
        })
        .map_err(|e| backend_error(&self.path, e))
    }

    fn apply(&self, batch: &[Mutation], _version: u64, _oldest: u64) -> Result<()> {
        self.check_owner()?;
        let mut wb = self.batch.lock();
        for m in batch {
            match m {
                Mutation::Set(k, v) => wb.put(self.family(k), k, v),
                Mutation::Clear(k) => wb.delete(self.family(k), k),
                Mutation::ClearRange(s, e) => {
                    let feed = self.db.cf_handle(rocks_cf::FEED_CF);
                    rocks_cf::delete_range(feed, s, e, |cf, s, e| wb.delete_range(cf, s, e))
                }
            }
        }
        // Written to the WAL (safe against a process crash); fsync happens in `sync`, shared.
        wb.write(&self.db).map_err(|msg| rocks_error(&self.path, msg))
    }

    fn sync(&self) -> Result<()> {
        self.check_owner()?;
        self.db.flush_wal(true).map_err(|e| backend_error(&self.path, e))?;
        WAL_SYNCS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Ok(())
    }

    fn usable(&self) -> Result<()> {
        self.check_owner()
    }
}

/// RocksDB log fsyncs this process made (see [`wal_syncs`]).
static WAL_SYNCS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// How many times this process fsynced the RocksDB log of a store it owns (each shared by
/// every commit it covers): what durability costs, and where it happens (a client's syncs
/// are its owner's). For measurements and tests.
pub fn wal_syncs() -> u64 {
    WAL_SYNCS.load(std::sync::atomic::Ordering::Relaxed)
}

/// Visits what `it` (bounded by its read options) yields, in order or in reverse, until
/// `visit` returns false. Shared by the store and its named snapshots.
pub(crate) fn visit_range(
    mut it: rocksdb::DBRawIteratorWithThreadMode<'_, DB>,
    reverse: bool,
    visit: &mut dyn FnMut(&[u8], &[u8]) -> bool,
) -> std::result::Result<(), rocksdb::Error> {
    if reverse {
        it.seek_to_last();
    } else {
        it.seek_to_first();
    }
    while let Some((k, v)) = it.item() {
        if !visit(k, v) {
            return Ok(());
        }
        if reverse {
            it.prev();
        } else {
            it.next();
        }
    }
    it.status()
}

/// A RocksDB-backed store.
pub struct RocksBackend {
    occ: Arc<OccStore<RocksEngine>>,
}

/// The memtable size `TXVFS_ROCKSDB_MEMTABLE` asks for (bytes, 64 KiB to 1 GiB; unset: RocksDB's
/// 64 MiB): a smaller one holds less memory and flushes (and recycles its log) sooner. Tests
/// use it to reach flushes and recycled logs with little data.
fn memtable_bytes() -> std::result::Result<Option<usize>, String> {
    let Some(v) = std::env::var_os("TXVFS_ROCKSDB_MEMTABLE") else { return Ok(None) };
    match v.to_str().and_then(|v| v.parse::<usize>().ok()) {
        Some(n) if ((64 << 10)..=(1 << 30)).contains(&n) => Ok(Some(n)),
        _ => Err(format!(
            "TXVFS_ROCKSDB_MEMTABLE must be a number of bytes from 65536 to 1073741824, not {v:?}"
        )),
    }
}

fn registry() -> &'static Mutex<HashMap<PathBuf, Weak<RocksBackend>>> {
    static STORES: OnceLock<Mutex<HashMap<PathBuf, Weak<RocksBackend>>>> = OnceLock::new();
    STORES.get_or_init(Default::default)
}

impl RocksBackend {
    /// The RocksDB options every store is opened with (lz4, bloom filters, a 128 MiB block
    /// cache, a recycled log). Public so that benchmarks compare against raw RocksDB
    /// configured the same way.
    pub fn db_options() -> Options {
        let mut opts = Options::default();
        opts.create_if_missing(true);
        opts.increase_parallelism(2);
        // A log whose memtable was flushed is kept and overwritten by the next one instead of
        // a new file appended to: a durable commit's fdatasync then writes the log's blocks
        // only, not its inode's new size too (35-45% of a one-file durable commit once the
        // first memtables were flushed). Recovery tells the new records from the old ones left
        // after them by the log number each record carries (recyclable format).
        opts.set_recycle_log_file_num(1);
        if let Ok(Some(bytes)) = memtable_bytes() {
            opts.set_write_buffer_size(bytes);
        }
        opts.set_compression_type(rocksdb::DBCompressionType::Lz4);
        let mut table = BlockBasedOptions::default();
        table.set_block_cache(&Cache::new_lru_cache(128 << 20));
        table.set_bloom_filter(10.0, false);
        table.set_cache_index_and_filter_blocks(true);
        opts.set_block_based_table_factory(&table);
        opts
    }

    /// Opens the RocksDB database in `canon` with its two families (see `rocks_cf.rs`),
    /// creating the change feed's in a store written before it and moving its records there.
    fn open_db(canon: &Path) -> std::result::Result<DB, rocksdb::Error> {
        let mut opts = Self::db_options();
        opts.create_missing_column_families(true);
        // One options object (its table factory and block cache) for both families.
        let families = [rocksdb::DEFAULT_COLUMN_FAMILY_NAME, rocks_cf::FEED_CF]
            .map(|name| ColumnFamilyDescriptor::new(name, opts.clone()));
        let db = DB::open_cf_descriptors(&opts, canon, families)?;
        rocks_cf::move_records(&db)?;
        Ok(db)
    }

    /// Opens (creating if needed) the store in directory `path` for this process alone (no
    /// other process may use it meanwhile; [`crate::kv::open`] opens stores shareable). A
    /// second open of the same directory through this copy of the library returns the same
    /// instance; another process, or another copy of the library in this process, holding it
    /// gives an [`ErrorKind::Busy`] error that names the holder. A store opened before fork()
    /// is not reused in the child.
    pub fn open(path: &Path) -> Result<Arc<RocksBackend>> {
        Self::open_owned(&Self::prepare_dir(path)?, true)
    }

    /// Notes in the store's owner file that this owner does not serve other processes.
    pub(crate) fn mark_exclusive(&self) {
        self.occ.engine.owner.mark_exclusive();
    }

    /// Notes in the store's owner file the abstract socket name this owner serves on.
    pub(crate) fn publish_socket(&self, name: &str) {
        self.occ.engine.owner.publish_socket(name);
    }

    /// Creates directory `path` if needed (durably) and returns its canonical path. Checks the
    /// environment's RocksDB settings first, so that a bad one creates nothing.
    pub(crate) fn prepare_dir(path: &Path) -> Result<PathBuf> {
        memtable_bytes().map_err(|m| {
            Error::new(ErrorKind::Invalid, format!("rocksdb:{}: {m}", path.display()))
        })?;
        create_dirs_durably(path).map_err(|e| {
            Error::new(
                ErrorKind::Backend,
                format!("rocksdb:{}: cannot create directory: {e}", path.display()),
            )
        })?;
        path.canonicalize()
            .map_err(|e| Error::new(ErrorKind::Backend, format!("rocksdb:{}: {e}", path.display())))
    }

    /// Opens the store in canonical directory `canon` as its owner; `exclusive` is recorded in
    /// the owner file for other processes to read.
    pub(crate) fn open_owned(canon: &Path, exclusive: bool) -> Result<Arc<RocksBackend>> {
        let canon = canon.to_path_buf();
        let mut stores = registry().lock();
        if let Some(b) = stores.get(&canon).and_then(Weak::upgrade) {
            if !b.occ.engine.owner.inherited() {
                return Ok(b);
            }
        }
        let what = format!("rocksdb:{}", canon.display());
        let owner = OwnerLock::acquire(&canon, &what, exclusive)?;
        let db = Self::open_db(&canon).map_err(|e| {
            let msg = e.into_string();
            // txvfs's own lock was free, so RocksDB's lock is held by a process that is not
            // txvfs, or (in a forked child) by the parent's instance, whose lock RocksDB's
            // process-wide table still lists here.
            if msg.contains("lock") {
                Error::new(
                    ErrorKind::Busy,
                    format!(
                        "rocksdb:{}: store is locked by RocksDB (another program, or a store this \
                         process held before fork()) ({msg})",
                        canon.display()
                    ),
                )
            } else {
                Error::new(ErrorKind::Backend, format!("rocksdb:{}: {msg}", canon.display()))
            }
        })?;
        let engine = RocksEngine {
            db: ManuallyDrop::new(db),
            path: canon.clone(),
            owner,
            batch: Mutex::new(KeptBatch::new()),
        };
        let limits = Limits {
            // RocksDB has no hard limits; these keep a runaway caller from exhausting memory.
            max_key: Some(64 << 10),
            max_value: Some(64 << 20),
            max_txn_bytes: None,
            max_txn_duration: None,
        };
        engine.owner.wait_quiet();
        let backend = Arc::new(RocksBackend { occ: OccStore::new(engine, limits) });
        stores.retain(|_, w| w.strong_count() > 0);
        stores.insert(canon, Arc::downgrade(&backend));
        Ok(backend)
    }
}

impl Backend for RocksBackend {
    fn begin(&self) -> Result<Box<dyn Txn>> {
        self.occ.engine.check_owner()?;
        self.occ.begin()
    }
    fn begin_cached(&self) -> Option<Box<dyn Txn>> {
        self.occ.engine.check_owner().ok()?;
        self.occ.begin_cached()
    }
    fn read_cache(&self) -> Option<&dyn ReadCacheControl> {
        Some(&*self.occ)
    }
    fn cache_watch(&self) -> Option<Box<dyn CacheWatch>> {
        self.occ.engine.check_owner().ok()?;
        Some(self.occ.cache_watch())
    }
    fn snapshots(&self) -> Option<&dyn Snapshots> {
        Some(self)
    }
    fn named_snapshots(&self) -> Option<&dyn NamedSnapshots> {
        Some(self)
    }
    fn limits(&self) -> Limits {
        self.occ.limits()
    }
    fn sync(&self) -> Result<()> {
        self.occ.sync_all()
    }
    fn sync_through(&self, read_version: Option<u64>) -> Result<()> {
        self.occ.sync_through(read_version)
    }
    fn describe(&self) -> String {
        format!("rocksdb:{}", self.occ.engine.path.display())
    }
    fn disk_space(&self) -> Option<(u64, u64)> {
        disk_space(&self.occ.engine.path)
    }
}

impl RocksBackend {
    /// Installs the observer of every commit this owner applies, keeping snapshots of the
    /// last `keep` versions (see [`OccStore::observe`]).
    pub(crate) fn observe_commits(
        &self,
        keep: usize,
        make: impl FnOnce(u64) -> Result<super::occ::CommitObserver>,
    ) -> Result<()> {
        self.occ.observe(keep, make)
    }

    /// Keeps snapshots of the last `keep` versions from the next commit on (see
    /// [`RocksBackend::observe_commits`]).
    pub(crate) fn keep_snapshots(&self, keep: usize) {
        self.occ.set_keep(keep)
    }

    /// A transaction reading exactly `version`, if this owner still keeps it (see
    /// [`OccStore::begin_at`]).
    pub(crate) fn begin_at(&self, version: u64) -> Option<Result<Box<dyn Txn>>> {
        if let Err(e) = self.occ.engine.check_owner() {
            return Some(Err(e));
        }
        self.occ.begin_at(version)
    }

    /// A snapshot that keeps `source` (the backend it is taken through) open while it lives.
    pub(crate) fn snapshot_keeping(
        &self,
        source: Option<Arc<dyn Backend>>,
    ) -> Result<Arc<dyn Backend>> {
        self.occ.engine.check_owner()?;
        let view = Arc::new(self.occ.pin()?);
        let what = format!("{} (snapshot)", self.describe());
        Ok(Arc::new(
            super::frozen::FrozenBackend::new(view, self.limits(), what, self.disk_space())
                .keeping(source),
        ))
    }
}

impl Snapshots for RocksBackend {
    fn snapshot(&self) -> Result<Arc<dyn Backend>> {
        let source = registry()
            .lock()
            .get(&self.occ.engine.path)
            .and_then(Weak::upgrade)
            .map(|b| b as Arc<dyn Backend>);
        self.snapshot_keeping(source)
    }
}

impl NamedSnapshots for RocksBackend {
    fn create(&self, name: &str) -> Result<()> {
        super::rocks_named::create(self, name)
    }
    fn list(&self) -> Result<Vec<String>> {
        super::rocks_named::list(self.dir())
    }
    fn delete(&self, name: &str) -> Result<()> {
        super::rocks_named::delete(self.dir(), name)
    }
    fn uri(&self, name: &str) -> Result<String> {
        super::rocks_named::uri(self.dir(), name)
    }
}

impl RocksBackend {
    /// The store's directory.
    pub(crate) fn dir(&self) -> &Path {
        &self.occ.engine.path
    }

    /// How many RocksDB snapshots are live in the engine (pinned snapshots and running
    /// transactions), for tests that check that a snapshot is released.
    pub(crate) fn engine_snapshots(&self) -> u64 {
        self.occ.engine.db.property_int_value("rocksdb.num-snapshots").ok().flatten().unwrap_or(0)
    }

    /// Writes a RocksDB checkpoint of everything committed so far into the new directory
    /// `dir` (hard links of the table files; see `rocks_named.rs`).
    pub(crate) fn checkpoint(&self, dir: &Path) -> Result<()> {
        self.occ.engine.check_owner()?;
        let db: &DB = &self.occ.engine.db;
        rocksdb::checkpoint::Checkpoint::new(db)
            .and_then(|c| c.create_checkpoint(dir))
            .map_err(|e| backend_error(&self.occ.engine.path, e))
    }
}

impl RocksBackend {
    /// True if directory `path` holds a RocksDB database (its `CURRENT` file), so that opening
    /// it creates nothing.
    pub fn exists(path: &Path) -> bool {
        path.join("CURRENT").is_file()
    }
}

/// The (total, free) bytes of the file system holding `dir` (statvfs; free counts what an
/// unprivileged user may use).
/// Creates `path` and its missing parents, then fsyncs the parent of each directory it created,
/// so that a power cut cannot take a new store away with commits acknowledged as durable
/// (RocksDB syncs the store directory's own entries, not its entry in its parent). Found by
/// the power-cut test (tests/powercut).
fn create_dirs_durably(path: &Path) -> std::io::Result<()> {
    let missing: Vec<&Path> =
        path.ancestors().take_while(|p| !p.as_os_str().is_empty() && !p.exists()).collect();
    std::fs::create_dir_all(path)?;
    for dir in missing.iter().rev() {
        let parent = match dir.parent() {
            Some(p) if !p.as_os_str().is_empty() => p,
            _ => Path::new("."),
        };
        std::fs::File::open(parent)?.sync_all()?;
    }
    Ok(())
}

pub(crate) fn disk_space(dir: &Path) -> Option<(u64, u64)> {
    use std::os::unix::ffi::OsStrExt;
    let path = std::ffi::CString::new(dir.as_os_str().as_bytes()).ok()?;
    // SAFETY: `path` is a valid C string and `st` a properly sized out-parameter.
    unsafe {
        let mut st: libc::statvfs = std::mem::zeroed();
        if libc::statvfs(path.as_ptr(), &mut st) != 0 {
            return None;
        }
        let frsize = st.f_frsize as u64;
        Some((st.f_blocks as u64 * frsize, st.f_bavail as u64 * frsize))
    }
}
