//! The optimistic layer's shared state: versions, live snapshots, the read cache, durability.

use super::pipeline::Pipeline;
use super::resolver::Resolver;
use super::txn::OccTxn;
use super::Engine;
use crate::error::{Error, ErrorKind, Result};
use crate::kv::cache::ReadCache;
use crate::kv::{CacheStats, Limits, ReadCacheControl, Txn};
use parking_lot::{Condvar, Mutex, RwLock};
use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long a kept snapshot lives at least (see `OccStore::kept`).
const KEEP_FOR: std::time::Duration = std::time::Duration::from_secs(2);
/// The most snapshots kept at once, whatever their age.
const KEEP_MAX: usize = 16_384;

/// Kept snapshots: version, when it was taken, the snapshot.
pub(super) type Kept<S> = VecDeque<(u64, Instant, Arc<S>)>;

/// The optimistic layer over one engine.
pub(crate) struct OccStore<E: Engine> {
    pub(crate) engine: E,
    pub(super) limits: Limits,
    pub(super) resolver: Mutex<Resolver>,
    /// Every commit up to this version is applied and visible; none after it is. Snapshots
    /// are taken under its read lock and commits applied under its write lock, so a snapshot
    /// and its version always agree. Lock order: `visible`, the resolver, `live`, `cache`.
    pub(super) visible: RwLock<u64>,
    /// `visible`'s value, readable without waiting for an engine write.
    pub(super) visible_now: AtomicU64,
    /// Read versions of live transactions, with counts.
    pub(super) live: Mutex<BTreeMap<u64, usize>>,
    /// Versions pinned by snapshots ([`OccStore::pin`]), with counts. They keep the engine's
    /// old versions, but no write sets: a snapshot never commits.
    pub(super) pinned: Mutex<BTreeMap<u64, usize>>,
    /// The oldest version a live snapshot reads (or the visible version when none is live);
    /// it never decreases, so the resolver may read it without `live`'s lock.
    pub(super) oldest: AtomicU64,
    pub(super) pipeline: Mutex<Pipeline>,
    pub(super) pipeline_moved: Condvar,
    /// What reads fetched.
    pub(super) cache: Mutex<ReadCache>,
    /// Highest version known durable (group commit: one fsync covers every earlier commit).
    pub(super) synced: Mutex<u64>,
    /// Durable commits resolved and not yet synced, and how many of them wait in `sync_to`:
    /// the fsync's leader waits a moment for the others (see `OccStore::gather`).
    pub(super) durable_in_flight: AtomicUsize,
    pub(super) at_sync: AtomicUsize,
    /// Calls of `sync_to` so far (the leader counts who came while it waited).
    pub(super) arrivals: AtomicU64,
    /// The last fsync's duration, in nanoseconds.
    pub(super) last_sync_ns: AtomicU64,
    /// The longest a leader waits ([`MAX_GATHER`]; tests change it), and how many times it
    /// did wait.
    pub(super) max_gather_ns: AtomicU64,
    pub(super) gather_waits: AtomicU64,
    /// Set when an fsync failed. After a failed fsync the kernel may have dropped the dirty
    /// pages it could not write and report success to the next fsync (PostgreSQL learned this
    /// in 2018), so nothing written since the last good sync can be trusted to be durable:
    /// the store refuses every transaction until it is reopened (RocksDB then replays its
    /// WAL from what is really on disk).
    pub(super) failed: Mutex<Option<String>>,
    /// Set with `failed`, read without a lock on the cached read path.
    pub(super) stopped: std::sync::atomic::AtomicBool,
    /// The last versionstamp counter applied and the persisted bound of the reserved ones
    /// (`None`: not read from the engine yet; see `pipeline::STAMP_BLOCK`).
    pub(super) stamp: Mutex<Option<(u64, u64)>>,
    /// Told of every applied commit before it becomes visible (the shared store's change
    /// ring, `kv/shared/ring.rs`).
    pub(super) observer: Mutex<Option<CommitObserver>>,
    /// Snapshots of recent versions (at least the last `keep`, and every one younger than
    /// [`KEEP_FOR`], up to [`KEEP_MAX`]), registered as live, so a client whose cache
    /// read at one of them continues its transaction at exactly that version
    /// ([`OccStore::begin_at`]). Empty unless commits are observed for clients.
    pub(super) kept: Mutex<Kept<E::Snapshot>>,
    pub(super) keep: AtomicUsize,
    /// The snapshot of the last version a transaction began at, shared by every transaction
    /// that begins while no commit has landed since: an engine snapshot costs RocksDB's DB
    /// mutex twice (take and release) and two allocations, a sixth of a cached `stat`.
    pub(super) latest: Mutex<Option<(u64, Arc<E::Snapshot>)>>,
    /// Bytes of values that readers hold through a [`crate::kv::CacheWatch`], and the most
    /// they may (half the cache's capacity).
    pub(super) lent: AtomicUsize,
    pub(super) lend_limit: AtomicUsize,
}

impl<E: Engine> Drop for OccStore<E> {
    fn drop(&mut self) {
        // Before the engine (the first field) goes: they read it.
        self.kept.get_mut().clear();
        *self.latest.get_mut() = None;
    }
}

/// See [`OccStore::observe`]: a commit's version and its batch (`None`: it failed to apply
/// and changed nothing).
pub(crate) type CommitObserver = Box<dyn FnMut(u64, Option<&[super::Mutation]>) + Send>;

impl<E: Engine> OccStore<E> {
    pub(crate) fn new(engine: E, limits: Limits) -> Arc<Self> {
        Arc::new(OccStore {
            engine,
            limits,
            resolver: Mutex::new(Resolver::new()),
            visible: RwLock::new(0),
            visible_now: AtomicU64::new(0),
            live: Mutex::new(BTreeMap::new()),
            pinned: Mutex::new(BTreeMap::new()),
            oldest: AtomicU64::new(0),
            pipeline: Mutex::new(Pipeline::default()),
            pipeline_moved: Condvar::new(),
            cache: Mutex::new(ReadCache::new(0, 0)),
            synced: Mutex::new(0),
            durable_in_flight: AtomicUsize::new(0),
            at_sync: AtomicUsize::new(0),
            arrivals: AtomicU64::new(0),
            last_sync_ns: AtomicU64::new(0),
            max_gather_ns: AtomicU64::new(MAX_GATHER.as_nanos() as u64),
            gather_waits: AtomicU64::new(0),
            failed: Mutex::new(None),
            lent: AtomicUsize::new(0),
            lend_limit: AtomicUsize::new(0),
            stopped: std::sync::atomic::AtomicBool::new(false),
            stamp: Mutex::new(None),
            observer: Mutex::new(None),
            kept: Mutex::new(VecDeque::new()),
            keep: AtomicUsize::new(0),
            latest: Mutex::new(None),
        })
    }

    /// Installs the commit observer that `make` returns for the current visible version
    /// (taken under the lock that publishes commits, so it sees every commit after it), and
    /// keeps snapshots of the last `keep` versions from then on (see `kept`).
    pub(crate) fn observe(
        &self,
        keep: usize,
        make: impl FnOnce(u64) -> Result<CommitObserver>,
    ) -> Result<()> {
        let vis = self.visible.write();
        *self.observer.lock() = Some(make(*vis)?);
        self.keep.store(keep, Ordering::SeqCst);
        Ok(())
    }

    /// Keeps snapshots of the last `keep` versions from the next commit on (0: none).
    pub(crate) fn set_keep(&self, keep: usize) {
        self.keep.store(keep, Ordering::SeqCst);
    }

    /// Keeps a snapshot of `version`, just applied (called by the pipeline under `visible`'s
    /// write lock), and lets the oldest kept one go.
    pub(super) fn keep_snapshot(&self, version: u64) {
        let keep = self.keep.load(Ordering::Relaxed);
        if keep == 0 {
            return;
        }
        let snap = self.snapshot_at(version);
        self.add_live(version);
        let mut kept = self.kept.lock();
        let now = Instant::now();
        kept.push_back((version, now, snap));
        // A transaction descheduled between its begin and its first miss (a loaded machine,
        // thousands of commits a second) still finds its version: age counts, not only number.
        while kept.len() > KEEP_MAX
            || (kept.len() > keep && kept.front().is_some_and(|f| now - f.1 > KEEP_FOR))
        {
            let (v, _, s) = kept.pop_front().expect("not empty");
            drop(s);
            self.remove_live(v);
        }
    }

    /// A transaction reading exactly `version`, if a snapshot of it is still kept.
    pub(crate) fn begin_at(self: &Arc<Self>, version: u64) -> Option<Result<Box<dyn Txn>>> {
        if let Err(e) = self.check_healthy() {
            return Some(Err(e));
        }
        let kept = self.kept.lock();
        let i = kept.binary_search_by_key(&version, |k| k.0).ok()?;
        let snap = kept[i].2.clone();
        self.add_live(version);
        drop(kept);
        Some(Ok(Box::new(OccTxn::new(self.clone(), version, snap))))
    }

    /// Registers a snapshot reader at `version` (called under `visible`'s read lock, so no
    /// commit lands between taking the version and registering it).
    pub(super) fn add_live(&self, version: u64) {
        let mut live = self.live.lock();
        *live.entry(version).or_insert(0) += 1;
        self.update_oldest(&live);
    }

    pub(super) fn remove_live(&self, version: u64) {
        let mut live = self.live.lock();
        if let Some(n) = live.get_mut(&version) {
            *n -= 1;
            if *n == 0 {
                live.remove(&version);
            }
        }
        self.update_oldest(&live);
    }

    pub(super) fn update_oldest(&self, live: &BTreeMap<u64, usize>) {
        let oldest = live.keys().next().copied().unwrap_or(self.visible_now.load(Ordering::SeqCst));
        self.oldest.fetch_max(oldest, Ordering::SeqCst);
    }

    /// Stops the store after a failed fsync (see `failed`).
    pub(super) fn stop(&self, why: &str) {
        *self.failed.lock() = Some(why.to_string());
        self.stopped.store(true, Ordering::Release);
    }

    /// Fails once an fsync has failed; see `failed`.
    pub(super) fn check_healthy(&self) -> Result<()> {
        match &*self.failed.lock() {
            None => Ok(()),
            Some(why) => Err(Error::new(
                ErrorKind::Backend,
                format!("the store stopped after a failed fsync ({why}); close every handle and reopen it"),
            )),
        }
    }

    pub(crate) fn engine(&self) -> &E {
        &self.engine
    }

    pub(crate) fn limits(&self) -> Limits {
        self.limits
    }

    /// Starts a transaction; fails once an fsync has failed.
    pub(crate) fn begin(self: &Arc<Self>) -> Result<Box<dyn Txn>> {
        self.check_healthy()?;
        let (version, snap) = {
            let vis = self.visible.read();
            let v = *vis;
            self.add_live(v);
            (v, self.snapshot_at(v))
        };
        Ok(Box::new(OccTxn::new(self.clone(), version, snap)))
    }

    /// A snapshot of `version`, the visible one (called under `visible`'s lock, read or write):
    /// the shared one if it is of that version, else a new one that becomes the shared one.
    pub(super) fn snapshot_at(&self, version: u64) -> Arc<E::Snapshot> {
        let mut latest = self.latest.lock();
        match &*latest {
            Some((v, snap)) if *v == version => snap.clone(),
            _ => {
                let snap = Arc::new(self.engine.snapshot(version));
                // The old one goes after the lock is released (it may be the last user).
                let old = latest.replace((version, snap.clone()));
                drop(latest);
                drop(old);
                snap
            }
        }
    }

    /// Group commit: makes every commit up to `version` durable with at most one fsync shared
    /// by all callers waiting at the same time.
    /// A failed fsync stops the store (see `failed`).
    pub(crate) fn sync_to(&self, version: u64) -> Result<()> {
        self.at_sync.fetch_add(1, Ordering::SeqCst);
        self.arrivals.fetch_add(1, Ordering::SeqCst);
        let result = self.sync_to_counted(version);
        self.at_sync.fetch_sub(1, Ordering::SeqCst);
        result
    }

    fn sync_to_counted(&self, version: u64) -> Result<()> {
        let mut synced = self.synced.lock();
        self.check_healthy()?;
        if *synced >= version {
            return Ok(());
        }
        self.gather();
        let target = self.visible_now.load(Ordering::SeqCst);
        let start = Instant::now();
        if let Err(e) = self.engine.sync() {
            self.stop(e.message());
            return Err(e);
        }
        self.last_sync_ns.store(start.elapsed().as_nanos() as u64, Ordering::Relaxed);
        *synced = target;
        Ok(())
    }

    /// Commit delay (PostgreSQL's `commit_delay`, chosen by what is in flight): before its
    /// fsync, the leader waits while other durable commits are resolved but have not reached
    /// `sync_to` yet (they are being applied), at most half an fsync and [`MAX_GATHER`], so
    /// that the one fsync covers them too. It waits only for those in flight when it began:
    /// under a steady stream of commits, others keep arriving, and waiting for them all made
    /// every fsync wait its whole limit. A lone committer never waits.
    fn gather(&self) {
        let in_flight = self.durable_in_flight.load(Ordering::SeqCst);
        let others = in_flight.saturating_sub(self.at_sync.load(Ordering::SeqCst)) as u64;
        if others == 0 {
            return;
        }
        self.gather_waits.fetch_add(1, Ordering::Relaxed);
        let limit = (self.last_sync_ns.load(Ordering::Relaxed) / 2)
            .min(self.max_gather_ns.load(Ordering::Relaxed));
        let (start, arrived) = (Instant::now(), self.arrivals.load(Ordering::SeqCst));
        while self.arrivals.load(Ordering::SeqCst) - arrived < others
            && self.durable_in_flight.load(Ordering::SeqCst) > self.at_sync.load(Ordering::SeqCst)
            && (start.elapsed().as_nanos() as u64) < limit
        {
            std::thread::yield_now();
        }
    }

    /// Counts a durable commit from its resolution until its sync ended (see `gather`).
    pub(super) fn durable_commit(&self) -> DurableCommit<'_, E> {
        self.durable_in_flight.fetch_add(1, Ordering::SeqCst);
        DurableCommit(self)
    }

    pub(crate) fn sync_all(&self) -> Result<()> {
        let v = self.visible_now.load(Ordering::SeqCst);
        self.sync_to(v)
    }

    /// [`crate::kv::Backend::sync_through`]: `sync_to(read_version)`, or everything visible.
    pub(crate) fn sync_through(&self, read_version: Option<u64>) -> Result<()> {
        match read_version {
            Some(v) => self.sync_to(v),
            None => self.sync_all(),
        }
    }
}

/// The longest a commit's fsync waits for others (see `OccStore::gather`).
const MAX_GATHER: Duration = Duration::from_micros(200);

/// A durable commit in flight (see [`OccStore::durable_commit`]).
pub(super) struct DurableCommit<'a, E: Engine>(&'a OccStore<E>);

impl<E: Engine> Drop for DurableCommit<'_, E> {
    fn drop(&mut self) {
        self.0.durable_in_flight.fetch_sub(1, Ordering::SeqCst);
    }
}

impl<E: Engine> ReadCacheControl for OccStore<E> {
    fn set_capacity(&self, bytes: u64) {
        let bytes = usize::try_from(bytes).unwrap_or(usize::MAX);
        self.cache.lock().set_capacity(bytes);
        self.lend_limit.store(bytes / 2, Ordering::SeqCst);
    }
    fn stats(&self) -> Option<CacheStats> {
        let c = self.cache.lock();
        c.enabled().then(|| CacheStats {
            hits: c.hits,
            misses: c.misses,
            bytes: c.used_all() as u64,
        })
    }
}
