//! [`Store`]: opening a store, and the calls that are not file-system calls (tree removal,
//! sync, parameters).

#[cfg(feature = "testing")]
use super::disk_cache::DiskCacheFaults;
use super::disk_cache::DiskCacheStats;
use super::format::format_or_read;
use super::leases::{self, LeaseTable, SystemClock, DEFAULT_LEASE};
use super::locks::LockTable;
use super::ops::open_disk_cache;
use super::options::{take_uri_options, Options, PerOpen};
use super::state::StoreState;
use super::types::Credential;
use super::REMOVE_BATCH;
use crate::error::{Error, ErrorKind, Result};
use crate::kv::{self, Backend};
use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, OnceLock, Weak};

fn open_stores() -> &'static Mutex<HashMap<usize, Weak<StoreState>>> {
    static STORES: OnceLock<Mutex<HashMap<usize, Weak<StoreState>>>> = OnceLock::new();
    STORES.get_or_init(Default::default)
}

/// An open store. Cloning is cheap and shares everything; all methods are thread-safe.
/// File-system calls come from the [`FileSystem`](super::FileSystem) trait: on a `Store` each call is its own
/// transaction (auto-commit).
#[derive(Clone)]
pub struct Store {
    pub(crate) inner: Arc<StoreState>,
    pub(crate) cred: Option<Arc<Credential>>,
    /// This open's own options (read-only, sync, retries).
    pub(crate) per_open: PerOpen,
}

impl Store {
    /// Opens the store at `uri` with default options: `rocksdb:/path` or a bare path
    /// (RocksDB, created if missing), `memory:` or `memory:?limits=foundationdb`.
    pub fn open(uri: &str) -> Result<Store> {
        Store::open_with(uri, Options::default())
    }

    /// Opens the store at `uri` with `options`.
    ///
    /// ```
    /// use txvfs::{FileSystem, Options, Store};
    /// let dir = tempfile::tempdir().unwrap();
    /// let path = dir.path().join("store");
    /// let store = Store::open_with(path.to_str().unwrap(), Options { sync: false, ..Options::default() }).unwrap();
    /// store.write_file("/hello.txt", b"hi").unwrap();
    /// drop(store);
    /// let again = Store::open_with(path.to_str().unwrap(), Options { read_only: true, ..Options::default() }).unwrap();
    /// assert_eq!(again.read_file("/hello.txt").unwrap(), b"hi");
    /// assert!(again.write_file("/other.txt", b"no").is_err()); // read-only: EROFS
    /// ```
    pub fn open_with(uri: &str, mut options: Options) -> Result<Store> {
        let uri = take_uri_options(uri, &mut options)?;
        let backend = kv::open(&uri)?;
        Store::with_backend(backend, options, None)
    }

    /// Opens the existing store at `uri` with `options`; where there is none, fails with
    /// [`ErrorKind::NotFound`] ("no store there") and creates nothing (not even a RocksDB
    /// directory). For tools that must not create a store by mistake.
    pub fn open_existing(uri: &str, mut options: Options) -> Result<Store> {
        let uri = take_uri_options(uri, &mut options)?;
        let backend = kv::open_existing(&uri)?;
        Store::open_backend(backend, options, None, false)
    }

    /// Opens a store on an existing backend (for custom or wrapped backends). Opening the same
    /// backend again in this process shares handles, locks and open-file state; each open keeps
    /// its own `read_only`, `sync`, `max_retries` and credential (the store's layout options,
    /// block size and inline limit, are fixed when it is created). `space` is the (total, free) bytes
    /// that `statfs` reports; `None` asks the backend ([`Backend::disk_space`]).
    pub fn with_backend(
        backend: Arc<dyn Backend>,
        options: Options,
        space: Option<(u64, u64)>,
    ) -> Result<Store> {
        Store::open_backend(backend, options, space, true)
    }

    /// [`Store::with_backend`]; without `create`, a backend without a store gives NotFound.
    fn open_backend(
        backend: Arc<dyn Backend>,
        mut options: Options,
        space: Option<(u64, u64)>,
        create: bool,
    ) -> Result<Store> {
        // A snapshot or a pack: every change fails with EROFS before it reaches the backend.
        options.read_only |= backend.read_only();
        let space = space.or_else(|| backend.disk_space());
        let cred = options.credential.clone().map(Arc::new);
        let per_open = PerOpen::of(&options);
        let key = Arc::as_ptr(&backend) as *const () as usize;
        let mut stores = open_stores().lock();
        if let Some(inner) = stores.get(&key).and_then(Weak::upgrade) {
            let open_cache = inner.disk_cache.as_ref().map(|c| c.config());
            if options.disk_cache.is_some()
                && open_cache != options.disk_cache.as_deref().map(|d| (d, options.disk_cache_size))
            {
                return Err(Error::new(
                    ErrorKind::Invalid,
                    format!(
                        "{}: already open in this process with another disk cache",
                        backend.describe()
                    ),
                ));
            }
            return Ok(Store { inner, cred, per_open });
        }
        if options.block_size < 512
            || options.block_size > 65536
            || !options.block_size.is_power_of_two()
        {
            return Err(Error::new(
                ErrorKind::Invalid,
                "block size must be a power of two from 512 to 65536",
            ));
        }
        if options.inline_limit > 65536 {
            return Err(Error::new(ErrorKind::Invalid, "inline limit must be at most 65536"));
        }
        let sb = format_or_read(&*backend, &options, create)?;
        let feed = super::feed::Feed::load(&*backend, options.max_retries)?;
        if let Some(cache) = backend.read_cache() {
            cache.set_capacity(options.cache_size);
        }
        let (disk_cache, disk_cache_off) =
            match open_disk_cache(&*backend, &options, options.max_retries) {
                Ok(cache) => (cache, None),
                Err(why) => (None, Some(why)),
            };
        // SAFETY: getuid/getgid cannot fail.
        let owner = unsafe { (libc::getuid(), libc::getgid()) };
        let shared_locks = backend.role().is_shared().then(|| {
            let table = LeaseTable::new(backend.clone(), Arc::new(SystemClock), DEFAULT_LEASE);
            table.start_renewer();
            table
        });
        let inner = Arc::new(StoreState {
            backend,
            block_size: sb.block_size,
            inline_limit: sb.inline_limit,
            read_only: options.read_only,
            sync: options.sync,
            max_retries: options.max_retries,
            owner,
            space,
            ino_range: Mutex::new((0, 0)),
            open_files: Default::default(),
            lost_write: Mutex::new(None),
            locks: LockTable::new(shared_locks),
            next_handle: AtomicU64::new(1),
            process: leases::random_id(),
            disk_cache,
            disk_cache_off,
            chunk_ids: Mutex::new((0, 0)),
            feed,
            guesses: Default::default(),
        });
        if let Some(sharing) = inner.backend.sharing() {
            sharing.register_process(inner.process)?;
            if let Some(table) = inner.locks.lease_table() {
                sharing.register_process(table.process_id())?;
                let weak = Arc::downgrade(table);
                sharing.on_sharing(Box::new(move || {
                    if let Some(t) = weak.upgrade() {
                        t.publish_all();
                    }
                }));
            }
        }
        inner.renew_liveness()?;
        inner.start_liveness();
        inner.reap_orphans()?;
        inner.collect_dead_stages()?;
        stores.retain(|_, w| w.strong_count() > 0);
        stores.insert(key, Arc::downgrade(&inner));
        Ok(Store { inner, cred, per_open })
    }

    /// A read-only view of the whole tree as it is now, which later commits do not change:
    /// each transaction committed so far is in it whole, none committed later is (data in a
    /// write-back handle's buffer is not committed yet). Cheap: no data is copied; the backend
    /// keeps the old versions of what changes while the snapshot lives. Every change through
    /// it fails with [`ErrorKind::ReadOnly`]. Supported on RocksDB and memory stores, and on
    /// clones of them; it lasts until the returned store (and its clones) are dropped. For a
    /// snapshot that survives reopening, see [`Store::create_named_snapshot`].
    pub fn snapshot(&self) -> Result<Store> {
        let b = &self.inner.backend;
        let backend = b.require(b.snapshots(), "snapshots")?.snapshot()?;
        let options = Options {
            read_only: true,
            credential: self.cred.as_deref().cloned(),
            ..Options::default()
        };
        Store::with_backend(backend, options, self.inner.space)
    }

    /// Keeps a snapshot of the whole tree as it is now under `name` (1 to 100 of
    /// `A-Z a-z 0-9 . _ -`), surviving reopening; open it read-only with the URI
    /// [`Store::named_snapshot_uri`] gives (`rocksdb:/path?snapshot=NAME`). On RocksDB it is a
    /// checkpoint under the store directory (`snapshots/NAME`): hard links to the store's
    /// table files, no data copied. `Exists` if the name is taken.
    pub fn create_named_snapshot(&self, name: &str) -> Result<()> {
        self.named()?.create(name)
    }

    /// The names of this store's named snapshots, sorted.
    pub fn named_snapshots(&self) -> Result<Vec<String>> {
        self.named()?.list()
    }

    /// Deletes the named snapshot `name`: `NotFound` if there is none, `Busy` while it is
    /// open (by this or another process, a clone over it included). A clone whose lower
    /// layer it is cannot be opened afterwards.
    pub fn delete_named_snapshot(&self, name: &str) -> Result<()> {
        self.named()?.delete(name)
    }

    /// The URI that opens the named snapshot `name` read-only, with [`Store::open`] or any
    /// binding: `rocksdb:/path?snapshot=NAME`.
    pub fn named_snapshot_uri(&self, name: &str) -> Result<String> {
        self.named()?.uri(name)
    }

    fn named(&self) -> Result<&dyn crate::kv::NamedSnapshots> {
        let b = &self.inner.backend;
        b.require(b.named_snapshots(), "named snapshots")
    }

    /// Makes the new, empty store at `upper_uri` a writable clone of the read-only store at
    /// `lower_uri` (a named snapshot such as `rocksdb:/path?snapshot=NAME`, or a pack) and
    /// opens it with `options`. Reads fall through to the lower store; changes, deletions
    /// and renames of its files included, go to the clone only: the lower store is never
    /// modified. Costs one key whatever the size of the tree. Later, `Store::open(upper_uri)`
    /// opens the clone (it records `lower_uri`, which must stay valid).
    pub fn create_clone(lower_uri: &str, upper_uri: &str, options: Options) -> Result<Store> {
        let backend = kv::create_clone(lower_uri, upper_uri)?;
        Store::open_backend(backend, options, None, false)
    }

    /// [`Store::create_clone`] without opening the clone: makes the new, empty store at
    /// `upper_uri` a clone of `lower_uri` and closes it, for a caller that opens it later with
    /// options of its own (the C and Python bindings).
    pub fn prepare_clone(lower_uri: &str, upper_uri: &str) -> Result<()> {
        kv::create_clone(lower_uri, upper_uri).map(drop)
    }

    /// The backend the store lives on (to read it at one snapshot, as `pack::pack_backend`
    /// does).
    pub fn backend(&self) -> Arc<dyn Backend> {
        self.inner.backend.clone()
    }

    /// The same store, checking permissions as `cred` (or as the owner with `None`).
    pub fn with_credential(&self, cred: Option<Credential>) -> Store {
        Store { inner: self.inner.clone(), cred: cred.map(Arc::new), per_open: self.per_open }
    }

    /// Removes `path` and everything below it, like `rm -r`, for trees of any size.
    ///
    /// The first transaction detaches the tree: its name disappears atomically, so no one
    /// sees a half-deleted tree. The contents are then deleted in bounded transactions of
    /// [`REMOVE_BATCH`] entries each, so the removal fits FoundationDB's limits whatever the
    /// size of the tree. If the process stops midway, the rest is deleted the next time the
    /// store is opened (the detached directories are recorded as orphans). A file or symlink
    /// is simply unlinked. With a non-root credential, every directory in the tree must be
    /// writable and searchable (checked before anything changes; the sticky bit is only
    /// checked at the top).
    ///
    /// Errors: `NotFound`, `Busy` for the root, `Access`/`NotPermitted`, and backend errors;
    /// an error after the detach leaves the rest for the next open (or the next call to
    /// [`Store::remove_all`] on another path, which does not resume it).
    ///
    /// [`Store::remove_all_with`] does the same and reports its progress.
    pub fn remove_all(&self, path: impl AsRef<[u8]>) -> Result<()> {
        self.remove_all_with(path, &mut |_| {})
    }

    /// [`Store::remove_all`], calling `progress` after each committed batch with the number
    /// of entries removed so far, for a progress display. The count grows to the number of
    /// names in the tree, the top included: each file, symlink and directory name counts
    /// once (for a tree without hard links, the number of inodes freed). Removing a file or
    /// symlink reports 1. The total is not known in advance; the first call comes after the
    /// detach and the first batch. On an error, the last count reported is what was
    /// deleted for good.
    pub fn remove_all_with(
        &self,
        path: impl AsRef<[u8]>,
        progress: &mut dyn FnMut(u64),
    ) -> Result<()> {
        let p = path.as_ref();
        let cred = self.cred.as_deref();
        if cred.is_some_and(|c| c.uid != 0) {
            self.check_tree_removable(p)?;
        }
        match self.inner.auto_commit(cred, |op| op.detach_tree(p))? {
            Some(ino) => self.inner.reap_tree(ino, progress),
            None => {
                progress(1);
                Ok(())
            }
        }
    }

    /// Walks the tree at `p` in read-only pages, checking that every directory may be emptied.
    fn check_tree_removable(&self, p: &[u8]) -> Result<()> {
        let cred = self.cred.as_deref();
        let root = self.inner.auto_commit(cred, |op| {
            let r = op.resolve(p, false)?;
            Ok(r.entry.filter(|e| e.kind == crate::FileType::Dir).map(|e| e.ino))
        })?;
        let mut pending: Vec<u64> = root.into_iter().collect();
        while let Some(dir) = pending.pop() {
            let mut after: Option<Vec<u8>> = None;
            loop {
                let (subdirs, next) = self
                    .inner
                    .auto_commit(cred, |op| op.check_removable(dir, after.as_deref(), REMOVE_BATCH))
                    .map_err(|e| {
                        Error::new(e.kind(), format!("{}: {}", String::from_utf8_lossy(p), e))
                    })?;
                pending.extend(subdirs);
                match next {
                    Some(n) => after = Some(n),
                    None => break,
                }
            }
        }
        Ok(())
    }

    /// Makes every change committed so far durable (what `fsync` does for auto-commit writes).
    /// Also reports, once, data of a write-back handle that was dropped without `close` and
    /// could not be written (like a failed write-back reported by the next `fsync`).
    pub fn sync(&self) -> Result<()> {
        let synced = self.inner.backend.sync();
        match self.inner.lost_write.lock().take() {
            Some(e) => Err(e),
            None => synced,
        }
    }

    /// The store's block size.
    pub fn block_size(&self) -> u32 {
        self.inner.block_size
    }

    /// The store's inline limit.
    pub fn inline_limit(&self) -> u32 {
        self.inner.inline_limit
    }

    /// What the store's local disk cache ([`Options::disk_cache`]) has done since it was opened
    /// (hits, misses, bytes held, ...); `None` when the store was opened without one. When the
    /// cache directory could not be used, `disabled` says why (the store reads its backend).
    pub fn disk_cache_stats(&self) -> Option<DiskCacheStats> {
        self.inner.disk_cache_stats()
    }

    /// The fault switches of the store's disk cache, for tests of a slow or failing cache disk.
    #[cfg(feature = "testing")]
    pub fn disk_cache_faults(&self) -> Option<&DiskCacheFaults> {
        self.inner.disk_cache.as_ref().map(|c| c.faults())
    }

    /// Waits until the disk cache has written the chunks queued so far (tests, benchmarks).
    pub fn disk_cache_flush(&self) {
        if let Some(c) = &self.inner.disk_cache {
            c.flush();
        }
    }

    /// The backend's description, such as `rocksdb:/path`.
    pub fn describe(&self) -> String {
        self.inner.backend.describe()
    }

    /// True when `other` is a handle on the same store as `self`, whatever each open's own
    /// options: the same backend instance (two opens of one RocksDB directory in this process
    /// share one), or the same stored tree by its description (two opens of one `fdb:`
    /// cluster and prefix). Two `memory:` stores are never the same.
    pub fn same_store(&self, other: &Store) -> bool {
        if Arc::ptr_eq(&self.inner, &other.inner) {
            return true;
        }
        let (a, b) = (self.describe(), other.describe());
        !a.starts_with("memory") && a == b
    }
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Store({})", self.describe())
    }
}
