//! Serializable optimistic transactions over a storage engine that offers snapshots and atomic
//! batches (memory, RocksDB). This is the shape of FoundationDB's resolvers: reads happen at a
//! snapshot and record the keys and ranges they covered; a commit, in a short critical
//! section, checks that read set against the write sets of transactions committed after the
//! snapshot, then applies its batch and records its own write set. Only one process opens a
//! store, so this in-memory check is complete.

use super::{KeyValue, Limits, Txn};
use crate::error::{Error, ErrorKind, Result};
use parking_lot::Mutex;
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::ops::Bound;
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
    fn apply(&self, batch: Vec<Mutation>, version: u64, oldest_snapshot: u64) -> Result<()>;
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

struct State {
    version: u64,
    /// Write sets of commits newer than the oldest live snapshot.
    log: VecDeque<(u64, WriteSet)>,
    /// Read versions of live transactions, with counts.
    live: BTreeMap<u64, usize>,
    /// Versions pinned by snapshots ([`OccStore::pin`]), with counts. They keep the engine's
    /// old versions, but no write sets: a snapshot never commits.
    pinned: BTreeMap<u64, usize>,
}

/// The optimistic layer over one engine.
pub(crate) struct OccStore<E: Engine> {
    pub(crate) engine: E,
    limits: Limits,
    state: Mutex<State>,
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
            state: Mutex::new(State { version: 0, log: VecDeque::new(), live: BTreeMap::new(), pinned: BTreeMap::new() }),
            synced: Mutex::new(0),
            failed: Mutex::new(None),
        })
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
            let mut st = self.state.lock();
            let v = st.version;
            *st.live.entry(v).or_insert(0) += 1;
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
        let target = self.state.lock().version;
        if let Err(e) = self.engine.sync() {
            *self.failed.lock() = Some(e.message().to_string());
            return Err(e);
        }
        *synced = target;
        Ok(())
    }

    pub(crate) fn sync_all(&self) -> Result<()> {
        let v = self.state.lock().version;
        self.sync_to(v)
    }

    /// A read-only view of the latest committed state, kept until the view is dropped. Taken
    /// in the commit critical section, so every commit is in it whole or not at all.
    pub(crate) fn pin(self: &Arc<Self>) -> Result<Pinned<E>> {
        self.check_healthy()?;
        let mut st = self.state.lock();
        let version = st.version;
        *st.pinned.entry(version).or_insert(0) += 1;
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
        let mut st = self.store.state.lock();
        if let Some(n) = st.pinned.get_mut(&self.version) {
            *n -= 1;
            if *n == 0 {
                st.pinned.remove(&self.version);
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
    fn scan(&self, start: &[u8], end: &[u8], reverse: bool, visit: &mut dyn FnMut(&[u8], &[u8]) -> bool) -> Result<()> {
        self.store.engine.scan(self.snap.as_ref().expect("snapshot lives until drop"), start, end, reverse, visit)
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
        let mut st = self.store.state.lock();
        if let Some(n) = st.live.get_mut(&self.read_version) {
            *n -= 1;
            if *n == 0 {
                st.live.remove(&self.read_version);
            }
        }
    }
}

impl<E: Engine> OccTxn<E> {
    /// Fails with a conflict if a commit after this transaction's snapshot wrote anything it
    /// read (`read_ranges` coalesced).
    fn check_reads(&self, st: &State, read_ranges: &[(Vec<u8>, Vec<u8>)]) -> Result<()> {
        for (v, other) in st.log.iter() {
            if *v <= self.read_version {
                continue;
            }
            let hit = other.points.iter().any(|k| self.read_points.contains(k) || ranges_contain(read_ranges, k))
                || other.ranges.iter().any(|(s, e)| {
                    self.read_points
                        .range::<[u8], _>((Bound::Included(s.as_slice()), Bound::Excluded(e.as_slice())))
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
            self.store.engine.get(self.snap(), key)?
        };
        Ok(match ops {
            Some(ops) => Some(apply_atomic(base.as_deref(), &ops)),
            None => base,
        })
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
        let mut st = self.store.state.lock();
        let checked = self.check_reads(&st, &read_ranges);
        self.read_ranges = read_ranges;
        checked?;
        let new_version = st.version;
        if new_version != self.read_version {
            *st.live.entry(new_version).or_insert(0) += 1;
            if let Some(n) = st.live.get_mut(&self.read_version) {
                *n -= 1;
                if *n == 0 {
                    st.live.remove(&self.read_version);
                }
            }
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
        let writes = std::mem::take(&mut self.writes);
        let store = self.store.clone();
        let version = {
            let mut st = store.state.lock();
            self.check_reads(&st, &read_ranges)?;
            for (k, p) in writes {
                match p {
                    Pending::Set(v) => batch.push(Mutation::Set(k.clone(), v)),
                    Pending::Clear => batch.push(Mutation::Clear(k.clone())),
                    Pending::Atomic(ops) => {
                        let base = store.engine.get_latest(&k)?;
                        batch.push(Mutation::Set(k.clone(), apply_atomic(base.as_deref(), &ops)));
                    }
                }
                ws.points.push(k);
            }
            let version = st.version + 1;
            let oldest = st.live.keys().next().copied().unwrap_or(version);
            let oldest_read = st.pinned.keys().next().map_or(oldest, |&p| p.min(oldest));
            store.engine.apply(batch, version, oldest_read)?;
            st.version = version;
            st.log.push_back((version, ws));
            while st.log.front().is_some_and(|(v, _)| *v <= oldest) {
                st.log.pop_front();
            }
            version
        };
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
