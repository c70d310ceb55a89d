//! Serializable optimistic transactions over a storage engine that offers snapshots and atomic
//! batches (memory, RocksDB). This is the shape of FoundationDB's resolvers: reads happen at a
//! snapshot and record the keys and ranges they covered; a commit, in a short critical
//! section (the resolver), checks that read set against the write sets of transactions
//! committed after the snapshot, takes the next version and records its own write set. Only
//! the process that owns a store runs it (other processes are clients of its resolver, see
//! `kv/shared`), so this in-memory check is complete.
//!
//! The engine write happens after the resolver, in a pipeline: commits are applied in version
//! order, several at a time by whichever committer finds the next version ready (the leader),
//! and each becomes visible (new snapshots see it) only with every earlier one. Durable
//! commits then share fsyncs (group commit, `sync_to`). A read cache (`cache.rs`) is updated
//! as each commit is applied, under the lock that publishes the new version.

use super::cache::ReadCache;
use super::{KeyValue, Limits, Txn};
use crate::error::{Error, ErrorKind, Result};
use parking_lot::{Condvar, Mutex, RwLock};
use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::ops::Bound;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

/// One write of a committed batch.
#[derive(Clone, Debug)]
pub(crate) enum Mutation {
    Set(Vec<u8>, Vec<u8>),
    Clear(Vec<u8>),
    ClearRange(Vec<u8>, Vec<u8>),
}

/// What a storage engine gives the optimistic layer.
pub(crate) trait Engine: Send + Sync + 'static {
    type Snapshot: Send + Sync;
    /// A snapshot of the latest applied state; called inside the commit critical section.
    fn snapshot(&self, version: u64) -> Self::Snapshot;
    fn get(&self, snap: &Self::Snapshot, key: &[u8]) -> Result<Option<Vec<u8>>>;
    /// [`Engine::get`] lending the value to `read` (false: absent). The default copies.
    fn get_with(
        &self,
        snap: &Self::Snapshot,
        key: &[u8],
        read: &mut dyn FnMut(&[u8]),
    ) -> Result<bool> {
        Ok(self.get(snap, key)?.map(|v| read(&v)).is_some())
    }
    /// Reads the latest applied state; called inside the commit critical section.
    fn get_latest(&self, key: &[u8]) -> Result<Option<Vec<u8>>>;
    /// Visits `start <= key < end` in order (descending when `reverse`) until `visit` is false.
    fn scan(
        &self,
        snap: &Self::Snapshot,
        start: &[u8],
        end: &[u8],
        reverse: bool,
        visit: &mut dyn FnMut(&[u8], &[u8]) -> bool,
    ) -> Result<()>;
    /// Applies a batch atomically: all of it or, on error, none of it. `oldest_snapshot` is the
    /// oldest version a live snapshot still reads (for engines that keep versions).
    fn apply(&self, batch: &[Mutation], version: u64, oldest_snapshot: u64) -> Result<()>;
    /// Makes everything applied so far durable.
    fn sync(&self) -> Result<()>;
    /// Fails when the engine cannot be used here (RocksDB: a store inherited across fork()).
    fn usable(&self) -> Result<()> {
        Ok(())
    }
}

/// Keys and ranges written by one committed transaction.
#[derive(Default)]
struct WriteSet {
    points: Vec<Vec<u8>>,
    ranges: Vec<(Vec<u8>, Vec<u8>)>,
}

/// The resolver's state: the conflict check and version assignment happen under its lock.
struct Resolver {
    /// The last version given to a commit (applied or not yet).
    assigned: u64,
    /// Write sets of commits newer than the oldest live snapshot.
    log: VecDeque<(u64, WriteSet)>,
}

/// A commit that passed the resolver, waiting to be applied in version order.
struct Staged {
    batch: Vec<Mutation>,
    /// Atomic operations, resolved against the latest state when the batch is applied.
    atomics: Vec<(Vec<u8>, Vec<AtomicOp>)>,
}

/// Commits between the resolver and the engine.
#[derive(Default)]
struct Pipeline {
    /// The last version applied (or failed to apply).
    applied: u64,
    staged: BTreeMap<u64, Staged>,
    /// Outcomes of applied commits not yet collected by their committer.
    done: HashMap<u64, Result<()>>,
    /// A committer is applying a group.
    leading: bool,
}

/// The optimistic layer over one engine.
pub(crate) struct OccStore<E: Engine> {
    pub(crate) engine: E,
    limits: Limits,
    resolver: Mutex<Resolver>,
    /// Every commit up to this version is applied and visible; none after it is. Snapshots
    /// are taken under its read lock and commits applied under its write lock, so a snapshot
    /// and its version always agree. Lock order: `visible`, the resolver, `live`, `cache`.
    visible: RwLock<u64>,
    /// `visible`'s value, readable without waiting for an engine write.
    visible_now: AtomicU64,
    /// Read versions of live transactions, with counts.
    live: Mutex<BTreeMap<u64, usize>>,
    /// Versions pinned by snapshots ([`OccStore::pin`]), with counts. They keep the engine's
    /// old versions, but no write sets: a snapshot never commits.
    pinned: Mutex<BTreeMap<u64, usize>>,
    /// The oldest version a live snapshot reads (or the visible version when none is live);
    /// it never decreases, so the resolver may read it without `live`'s lock.
    oldest: AtomicU64,
    pipeline: Mutex<Pipeline>,
    pipeline_moved: Condvar,
    /// What reads fetched.
    cache: Mutex<ReadCache>,
    /// Highest version known durable (group commit: one fsync covers every earlier commit).
    synced: Mutex<u64>,
    /// Set when an fsync failed. After a failed fsync the kernel may have dropped the dirty
    /// pages it could not write and report success to the next fsync (PostgreSQL learned this
    /// in 2018), so nothing written since the last good sync can be trusted to be durable:
    /// the store refuses every transaction until it is reopened (RocksDB then replays its
    /// WAL from what is really on disk).
    failed: Mutex<Option<String>>,
}

impl<E: Engine> OccStore<E> {
    pub(crate) fn new(engine: E, limits: Limits) -> Arc<Self> {
        Arc::new(OccStore {
            engine,
            limits,
            resolver: Mutex::new(Resolver { assigned: 0, log: VecDeque::new() }),
            visible: RwLock::new(0),
            visible_now: AtomicU64::new(0),
            live: Mutex::new(BTreeMap::new()),
            pinned: Mutex::new(BTreeMap::new()),
            oldest: AtomicU64::new(0),
            pipeline: Mutex::new(Pipeline::default()),
            pipeline_moved: Condvar::new(),
            cache: Mutex::new(ReadCache::new(0, 0)),
            synced: Mutex::new(0),
            failed: Mutex::new(None),
        })
    }

    /// Sets the read cache's size in bytes (0 turns it off), evicting down to it.
    pub(crate) fn set_cache_capacity(&self, bytes: usize) {
        self.cache.lock().set_capacity(bytes);
    }

    /// The read cache's (hits, misses, bytes held); `None` while it is off.
    pub(crate) fn cache_stats(&self) -> Option<(u64, u64, u64)> {
        let c = self.cache.lock();
        c.enabled().then(|| (c.hits, c.misses, c.used() as u64))
    }

    /// Registers a snapshot reader at `version` (called under `visible`'s read lock, so no
    /// commit lands between taking the version and registering it).
    fn add_live(&self, version: u64) {
        let mut live = self.live.lock();
        *live.entry(version).or_insert(0) += 1;
        self.update_oldest(&live);
    }

    fn remove_live(&self, version: u64) {
        let mut live = self.live.lock();
        if let Some(n) = live.get_mut(&version) {
            *n -= 1;
            if *n == 0 {
                live.remove(&version);
            }
        }
        self.update_oldest(&live);
    }

    fn update_oldest(&self, live: &BTreeMap<u64, usize>) {
        let oldest = live.keys().next().copied().unwrap_or(self.visible_now.load(Ordering::SeqCst));
        self.oldest.fetch_max(oldest, Ordering::SeqCst);
    }

    /// Applies commit `version` once every earlier one is, and returns its outcome. The
    /// committer that finds the next version ready applies every consecutive ready commit
    /// (its own and others'), so the engine sees them in order and one at a time.
    fn publish(&self, version: u64, staged: Staged) -> Result<()> {
        let mut p = self.pipeline.lock();
        p.staged.insert(version, staged);
        loop {
            if let Some(r) = p.done.remove(&version) {
                return r;
            }
            let next = p.applied + 1;
            if !p.leading && p.staged.contains_key(&next) {
                p.leading = true;
                let mut group = Vec::new();
                let mut v = next;
                while let Some(s) = p.staged.remove(&v) {
                    group.push((v, s));
                    v += 1;
                }
                drop(p);
                let outcomes = self.apply_group(group);
                p = self.pipeline.lock();
                for (v, r) in outcomes {
                    p.done.insert(v, r);
                    p.applied = v;
                }
                p.leading = false;
                self.pipeline_moved.notify_all();
                continue;
            }
            self.pipeline_moved.wait(&mut p);
        }
    }

    /// Applies consecutive commits in order, each made visible (with the cache updated) as it
    /// lands. A commit that fails to apply changed nothing; later ones still apply (they were
    /// checked against its write set, which only makes them more cautious).
    fn apply_group(&self, group: Vec<(u64, Staged)>) -> Vec<(u64, Result<()>)> {
        let mut out = Vec::with_capacity(group.len());
        for (version, staged) in group {
            let mut vis = self.visible.write();
            let oldest = self.live.lock().keys().next().copied().unwrap_or(version);
            let oldest = self.pinned.lock().keys().next().map_or(oldest, |&p| p.min(oldest));
            let mut batch = staged.batch;
            let mut r = Ok(());
            for (k, ops) in staged.atomics {
                match self.engine.get_latest(&k) {
                    Ok(base) => batch.push(Mutation::Set(k, apply_atomic(base.as_deref(), &ops))),
                    Err(e) => {
                        r = Err(e);
                        break;
                    }
                }
            }
            if r.is_ok() {
                r = self.engine.apply(&batch, version, oldest);
            }
            self.cache.lock().applied(version, r.is_ok().then_some(&batch[..]));
            *vis = version;
            self.visible_now.store(version, Ordering::SeqCst);
            self.update_oldest(&self.live.lock());
            drop(vis);
            out.push((version, r));
        }
        out
    }

    /// Fails once an fsync has failed; see `failed`.
    fn check_healthy(&self) -> Result<()> {
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
            (v, self.engine.snapshot(v))
        };
        Ok(Box::new(OccTxn {
            snap: Some(snap),
            store: self.clone(),
            read_version: version,
            started: Instant::now(),
            read_points: BTreeSet::new(),
            read_ranges: Vec::new(),
            writes: BTreeMap::new(),
            cleared: Vec::new(),
            bytes: 0,
        }))
    }

    /// Group commit: makes every commit up to `version` durable with at most one fsync shared
    /// by all callers waiting at the same time.
    /// A failed fsync stops the store (see `failed`).
    pub(crate) fn sync_to(&self, version: u64) -> Result<()> {
        let mut synced = self.synced.lock();
        self.check_healthy()?;
        if *synced >= version {
            return Ok(());
        }
        let target = self.visible_now.load(Ordering::SeqCst);
        if let Err(e) = self.engine.sync() {
            *self.failed.lock() = Some(e.message().to_string());
            return Err(e);
        }
        *synced = target;
        Ok(())
    }

    pub(crate) fn sync_all(&self) -> Result<()> {
        let v = self.visible_now.load(Ordering::SeqCst);
        self.sync_to(v)
    }

    /// A read-only view of the latest committed state, kept until the view is dropped. Taken
    /// under `visible`'s read lock, so every commit is in it whole or not at all.
    pub(crate) fn pin(self: &Arc<Self>) -> Result<Pinned<E>> {
        self.check_healthy()?;
        let vis = self.visible.read();
        let version = *vis;
        *self.pinned.lock().entry(version).or_insert(0) += 1;
        Ok(Pinned { snap: Some(self.engine.snapshot(version)), store: self.clone(), version })
    }
}

/// A snapshot pinned at one version (see [`OccStore::pin`]).
pub(crate) struct Pinned<E: Engine> {
    // Declared before `store` so the snapshot is released before the engine can go away.
    snap: Option<E::Snapshot>,
    store: Arc<OccStore<E>>,
    version: u64,
}

impl<E: Engine> Drop for Pinned<E> {
    fn drop(&mut self) {
        self.snap = None;
        let mut pinned = self.store.pinned.lock();
        if let Some(n) = pinned.get_mut(&self.version) {
            *n -= 1;
            if *n == 0 {
                pinned.remove(&self.version);
            }
        }
    }
}

impl<E: Engine> super::frozen::FrozenRead for Pinned<E> {
    fn usable(&self) -> Result<()> {
        self.store.engine.usable()
    }
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.store.engine.get(self.snap.as_ref().expect("snapshot lives until drop"), key)
    }
    fn scan(
        &self,
        start: &[u8],
        end: &[u8],
        reverse: bool,
        visit: &mut dyn FnMut(&[u8], &[u8]) -> bool,
    ) -> Result<()> {
        self.store.engine.scan(
            self.snap.as_ref().expect("snapshot lives until drop"),
            start,
            end,
            reverse,
            visit,
        )
    }
}

#[derive(Clone, Debug)]
enum Pending {
    Set(Vec<u8>),
    Clear,
    /// Atomic operations, applied in order to the committed value at commit time.
    Atomic(Vec<AtomicOp>),
}

#[derive(Clone, Copy, Debug)]
enum AtomicOp {
    Add(i64),
    Max(u64),
}

fn apply_atomic(base: Option<&[u8]>, ops: &[AtomicOp]) -> Vec<u8> {
    let mut v = super::decode_counter(base);
    for op in ops {
        v = match *op {
            AtomicOp::Add(d) => v.wrapping_add(d as u64),
            AtomicOp::Max(m) => v.max(m),
        };
    }
    v.to_le_bytes().to_vec()
}

struct OccTxn<E: Engine> {
    // Declared before `store` so the snapshot is released before the engine can go away.
    snap: Option<E::Snapshot>,
    store: Arc<OccStore<E>>,
    read_version: u64,
    started: Instant,
    read_points: BTreeSet<Vec<u8>>,
    read_ranges: Vec<(Vec<u8>, Vec<u8>)>,
    writes: BTreeMap<Vec<u8>, Pending>,
    /// Ranges cleared by this transaction, applied before the point writes at commit.
    cleared: Vec<(Vec<u8>, Vec<u8>)>,
    bytes: usize,
}

impl<E: Engine> Drop for OccTxn<E> {
    fn drop(&mut self) {
        self.snap = None;
        self.store.remove_live(self.read_version);
    }
}

impl<E: Engine> OccTxn<E> {
    /// Fails with a conflict if a commit after this transaction's snapshot wrote anything it
    /// read (`read_ranges` coalesced).
    fn check_reads(&self, st: &Resolver, read_ranges: &[(Vec<u8>, Vec<u8>)]) -> Result<()> {
        for (v, other) in st.log.iter() {
            if *v <= self.read_version {
                continue;
            }
            let hit = other
                .points
                .iter()
                .any(|k| self.read_points.contains(k) || ranges_contain(read_ranges, k))
                || other.ranges.iter().any(|(s, e)| {
                    self.read_points
                        .range::<[u8], _>((
                            Bound::Included(s.as_slice()),
                            Bound::Excluded(e.as_slice()),
                        ))
                        .next()
                        .is_some()
                        || ranges_overlap(read_ranges, s, e)
                });
            if hit {
                return Err(Error::new(
                    ErrorKind::Conflict,
                    "transaction conflict: data it read was changed by a concurrent commit",
                ));
            }
        }
        Ok(())
    }

    fn check_age(&self) -> Result<()> {
        if let Some(max) = self.store.limits.max_txn_duration {
            if self.started.elapsed() > max {
                return Err(Error::new(
                    ErrorKind::TooOld,
                    format!("transaction older than the backend's limit of {max:?}"),
                ));
            }
        }
        Ok(())
    }

    fn check_key(&self, key: &[u8]) -> Result<()> {
        if let Some(max) = self.store.limits.max_key {
            if key.len() > max {
                return Err(Error::new(
                    ErrorKind::TooLarge,
                    format!("key of {} bytes exceeds the backend's limit of {max}", key.len()),
                ));
            }
        }
        Ok(())
    }

    fn add_bytes(&mut self, n: usize) -> Result<()> {
        self.bytes += n;
        if let Some(max) = self.store.limits.max_txn_bytes {
            if self.bytes > max {
                return Err(Error::new(
                    ErrorKind::TooLarge,
                    format!("transaction writes more than the backend's limit of {max} bytes"),
                ));
            }
        }
        Ok(())
    }

    fn in_cleared(&self, key: &[u8]) -> bool {
        self.cleared.iter().any(|(s, e)| s.as_slice() <= key && key < e.as_slice())
    }

    fn snap(&self) -> &E::Snapshot {
        self.snap.as_ref().expect("snapshot lives until drop")
    }

    fn read(&mut self, key: &[u8], conflict: bool) -> Result<Option<Vec<u8>>> {
        self.check_key(key)?;
        self.check_age()?;
        let ops = match self.writes.get(key) {
            Some(Pending::Set(v)) => return Ok(Some(v.clone())),
            Some(Pending::Clear) => return Ok(None),
            Some(Pending::Atomic(ops)) => Some(ops.clone()),
            None => None,
        };
        let base = if self.in_cleared(key) {
            None
        } else {
            if conflict {
                self.read_points.insert(key.to_vec());
            }
            self.cached_get(key)?
        };
        Ok(match ops {
            Some(ops) => Some(apply_atomic(base.as_deref(), &ops)),
            None => base,
        })
    }

    /// The engine's value of `key` at this snapshot, from the read cache when it knows it.
    fn cached_get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        {
            let mut c = self.store.cache.lock();
            if !c.enabled() {
                drop(c);
                return self.store.engine.get(self.snap(), key);
            }
            if let Some(v) = c.get(key, self.read_version) {
                return Ok(v.map(|v| v.to_vec()));
            }
        }
        let v = self.store.engine.get(self.snap(), key)?;
        self.store.cache.lock().fill(key, self.read_version, v.as_deref());
        Ok(v)
    }

    fn read_range(
        &mut self,
        start: &[u8],
        end: &[u8],
        limit: usize,
        reverse: bool,
        conflict: bool,
    ) -> Result<Vec<KeyValue>> {
        self.check_key(start)?;
        self.check_key(end)?;
        self.check_age()?;
        if start >= end {
            return Ok(Vec::new());
        }
        let limit = if limit == 0 { usize::MAX } else { limit };
        // This transaction's own writes in the range, atomics resolved, in scan order.
        let mut local: Vec<(Vec<u8>, Option<Vec<u8>>)> = Vec::new();
        let keys: Vec<(Vec<u8>, bool)> = self
            .writes
            .range::<[u8], _>((Bound::Included(start), Bound::Excluded(end)))
            .map(|(k, p)| (k.clone(), matches!(p, Pending::Atomic(_))))
            .collect();
        for (k, atomic) in keys {
            let v = if atomic {
                self.read(&k, conflict)?
            } else {
                match &self.writes[&k] {
                    Pending::Set(v) => Some(v.clone()),
                    _ => None,
                }
            };
            local.push((k, v));
        }
        if reverse {
            local.reverse();
        }
        let before = |a: &[u8], b: &[u8]| if reverse { a > b } else { a < b };
        let mut out: Vec<KeyValue> = Vec::new();
        let mut li = 0;
        {
            let writes = &self.writes;
            let cleared = &self.cleared;
            let mut visit = |k: &[u8], v: &[u8]| -> bool {
                while li < local.len() && before(&local[li].0, k) && out.len() < limit {
                    if let Some(val) = &local[li].1 {
                        out.push((local[li].0.clone(), val.clone()));
                    }
                    li += 1;
                }
                if out.len() >= limit {
                    return false;
                }
                let shadowed = writes.contains_key(k)
                    || cleared.iter().any(|(s, e)| s.as_slice() <= k && k < e.as_slice());
                if !shadowed {
                    out.push((k.to_vec(), v.to_vec()));
                }
                out.len() < limit
            };
            let snap = self.snap.as_ref().expect("snapshot lives until drop");
            self.store.engine.scan(snap, start, end, reverse, &mut visit)?;
        }
        while li < local.len() && out.len() < limit {
            if let Some(val) = &local[li].1 {
                out.push((local[li].0.clone(), val.clone()));
            }
            li += 1;
        }
        if conflict {
            // The range actually covered: up to the last key returned when the limit stopped us.
            let range = match (out.len() >= limit, out.last()) {
                (true, Some((last, _))) if !reverse => {
                    let mut e = last.clone();
                    e.push(0);
                    (start.to_vec(), e)
                }
                (true, Some((last, _))) => (last.clone(), end.to_vec()),
                _ => (start.to_vec(), end.to_vec()),
            };
            self.read_ranges.push(range);
        }
        Ok(out)
    }

    fn write(&mut self, key: &[u8], p: Pending, extra: usize) -> Result<()> {
        self.check_key(key)?;
        self.add_bytes(key.len() + extra)?;
        self.writes.insert(key.to_vec(), p);
        Ok(())
    }

    fn atomic(&mut self, key: &[u8], op: AtomicOp) -> Result<()> {
        self.check_key(key)?;
        self.add_bytes(key.len() + 8)?;
        let cleared = self.in_cleared(key);
        let entry = match self.writes.remove(key) {
            Some(Pending::Set(v)) => Pending::Set(apply_atomic(Some(&v), &[op])),
            Some(Pending::Clear) => Pending::Set(apply_atomic(None, &[op])),
            Some(Pending::Atomic(mut ops)) => {
                ops.push(op);
                Pending::Atomic(ops)
            }
            None if cleared => Pending::Set(apply_atomic(None, &[op])),
            None => Pending::Atomic(vec![op]),
        };
        self.writes.insert(key.to_vec(), entry);
        Ok(())
    }
}

/// Sorts and merges ranges so that lookups can binary-search them.
fn coalesce(mut ranges: Vec<(Vec<u8>, Vec<u8>)>) -> Vec<(Vec<u8>, Vec<u8>)> {
    ranges.sort();
    let mut out: Vec<(Vec<u8>, Vec<u8>)> = Vec::with_capacity(ranges.len());
    for (s, e) in ranges {
        match out.last_mut() {
            Some(last) if s <= last.1 => {
                if e > last.1 {
                    last.1 = e;
                }
            }
            _ => out.push((s, e)),
        }
    }
    out
}

/// Does any of the sorted, disjoint `ranges` intersect `[s, e)`?
fn ranges_overlap(ranges: &[(Vec<u8>, Vec<u8>)], s: &[u8], e: &[u8]) -> bool {
    // First range whose end is past `s`.
    let i = ranges.partition_point(|r| r.1.as_slice() <= s);
    i < ranges.len() && ranges[i].0.as_slice() < e
}

fn ranges_contain(ranges: &[(Vec<u8>, Vec<u8>)], k: &[u8]) -> bool {
    let mut end = k.to_vec();
    end.push(0);
    ranges_overlap(ranges, k, &end)
}

impl<E: Engine> Txn for OccTxn<E> {
    fn get(&mut self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.read(key, true)
    }
    fn snapshot_get(&mut self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.read(key, false)
    }
    fn get_with(&mut self, key: &[u8], read: &mut dyn FnMut(&[u8])) -> Result<bool> {
        // Only a plain read of a committed value is lent; everything else goes through `read`.
        if self.writes.contains_key(key) || self.in_cleared(key) {
            return Ok(self.read(key, true)?.map(|v| read(&v)).is_some());
        }
        self.check_key(key)?;
        self.check_age()?;
        self.read_points.insert(key.to_vec());
        let cached = {
            let mut c = self.store.cache.lock();
            if !c.enabled() {
                drop(c);
                return self.store.engine.get_with(self.snap(), key, read);
            }
            c.get(key, self.read_version)
        };
        if let Some(v) = cached {
            return Ok(v.map(|v| read(&v)).is_some());
        }
        // A miss: the value is lent to `read` and offered to the cache, which copies it only
        // if it keeps it.
        let (store, at) = (&self.store, self.read_version);
        let found = store.engine.get_with(self.snap(), key, &mut |v| {
            read(v);
            store.cache.lock().fill(key, at, Some(v));
        })?;
        if !found {
            store.cache.lock().fill(key, at, None);
        }
        Ok(found)
    }
    fn visit_range(
        &mut self,
        start: &[u8],
        end: &[u8],
        visit: &mut dyn FnMut(&[u8], &[u8]),
    ) -> Result<()> {
        let own_writes = self
            .writes
            .range::<[u8], _>((Bound::Included(start), Bound::Excluded(end)))
            .next()
            .is_some()
            || self.cleared.iter().any(|(s, e)| s.as_slice() < end && start < e.as_slice());
        if own_writes || start >= end {
            // This transaction's writes must be merged in: the copying path does that.
            for (k, v) in self.read_range(start, end, 0, false, true)? {
                visit(&k, &v);
            }
            return Ok(());
        }
        self.check_key(start)?;
        self.check_key(end)?;
        self.check_age()?;
        self.store.engine.scan(self.snap(), start, end, false, &mut |k, v| {
            visit(k, v);
            true
        })?;
        self.read_ranges.push((start.to_vec(), end.to_vec()));
        Ok(())
    }
    fn add_read_conflict_range(&mut self, start: &[u8], end: &[u8]) -> Result<()> {
        self.check_key(start)?;
        self.check_key(end)?;
        if start < end {
            self.read_ranges.push((start.to_vec(), end.to_vec()));
        }
        Ok(())
    }
    fn get_range(&mut self, s: &[u8], e: &[u8], limit: usize, rev: bool) -> Result<Vec<KeyValue>> {
        self.read_range(s, e, limit, rev, true)
    }
    fn snapshot_get_range(
        &mut self,
        s: &[u8],
        e: &[u8],
        limit: usize,
        rev: bool,
    ) -> Result<Vec<KeyValue>> {
        self.read_range(s, e, limit, rev, false)
    }
    fn set(&mut self, key: &[u8], value: &[u8]) -> Result<()> {
        if let Some(max) = self.store.limits.max_value {
            if value.len() > max {
                return Err(Error::new(
                    ErrorKind::TooLarge,
                    format!("value of {} bytes exceeds the backend's limit of {max}", value.len()),
                ));
            }
        }
        self.write(key, Pending::Set(value.to_vec()), value.len())
    }
    fn clear(&mut self, key: &[u8]) -> Result<()> {
        self.write(key, Pending::Clear, 0)
    }
    fn clear_range(&mut self, start: &[u8], end: &[u8]) -> Result<()> {
        self.check_key(start)?;
        self.check_key(end)?;
        if start >= end {
            return Ok(());
        }
        self.add_bytes(start.len() + end.len())?;
        let inside: Vec<Vec<u8>> = self
            .writes
            .range::<[u8], _>((Bound::Included(start), Bound::Excluded(end)))
            .map(|(k, _)| k.clone())
            .collect();
        for k in inside {
            self.writes.remove(&k);
        }
        self.cleared.push((start.to_vec(), end.to_vec()));
        Ok(())
    }
    fn atomic_add(&mut self, key: &[u8], delta: i64) -> Result<()> {
        self.atomic(key, AtomicOp::Add(delta))
    }
    fn atomic_max(&mut self, key: &[u8], value: u64) -> Result<()> {
        self.atomic(key, AtomicOp::Max(value))
    }

    /// Moves to the latest snapshot if nothing this transaction read has changed since its
    /// own (then its reads are equally valid at the new one); a conflict otherwise. Writes
    /// stay buffered. Reads after this see every commit made so far.
    fn refresh(&mut self) -> Result<()> {
        self.check_age()?;
        let read_ranges = coalesce(std::mem::take(&mut self.read_ranges));
        let vis = self.store.visible.read();
        let checked = self.check_reads(&self.store.resolver.lock(), &read_ranges);
        self.read_ranges = read_ranges;
        checked?;
        let new_version = *vis;
        if new_version != self.read_version {
            self.store.add_live(new_version);
            self.store.remove_live(self.read_version);
            // The old snapshot goes first, as in `drop`.
            self.snap = None;
            self.snap = Some(self.store.engine.snapshot(new_version));
            self.read_version = new_version;
        }
        Ok(())
    }

    fn commit(mut self: Box<Self>, durable: bool) -> Result<()> {
        if self.writes.is_empty() && self.cleared.is_empty() {
            // Read-only: serializable at its snapshot, nothing to check or apply.
            return Ok(());
        }
        self.check_age()?;
        self.store.check_healthy()?;
        let read_ranges = coalesce(std::mem::take(&mut self.read_ranges));
        let mut ws = WriteSet::default();
        let mut batch = Vec::with_capacity(self.cleared.len() + self.writes.len());
        for (s, e) in std::mem::take(&mut self.cleared) {
            batch.push(Mutation::ClearRange(s.clone(), e.clone()));
            ws.ranges.push((s, e));
        }
        let mut atomics = Vec::new();
        for (k, p) in std::mem::take(&mut self.writes) {
            match p {
                Pending::Set(v) => batch.push(Mutation::Set(k.clone(), v)),
                Pending::Clear => batch.push(Mutation::Clear(k.clone())),
                Pending::Atomic(ops) => atomics.push((k.clone(), ops)),
            }
            ws.points.push(k);
        }
        let store = self.store.clone();
        let version = {
            let mut r = store.resolver.lock();
            self.check_reads(&r, &read_ranges)?;
            // From here the version must reach `publish`, or the pipeline waits for it forever.
            r.assigned += 1;
            let version = r.assigned;
            r.log.push_back((version, ws));
            let oldest = store.oldest.load(Ordering::SeqCst);
            while r.log.front().is_some_and(|(v, _)| *v <= oldest) {
                r.log.pop_front();
            }
            version
        };
        store.publish(version, Staged { batch, atomics })?;
        if durable {
            // Applied and visible to others: a failure now cannot be "nothing changed".
            store.sync_to(version).map_err(|e| {
                Error::new(
                    ErrorKind::CommitUnknown,
                    format!("commit applied but its fsync failed, so it may not survive a power loss: {}", e.message()),
                )
            })?;
        }
        Ok(())
    }
}

#[cfg(test)]
#[path = "occ_tests.rs"]
mod tests;
