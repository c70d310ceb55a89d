//! One optimistic transaction: reads at a snapshot (through the read cache), buffered writes,
//! and the commit that goes through the resolver and the pipeline.

use super::pipeline::Staged;
use super::ranges::{coalesce, ReadKeys};
use super::reader::Reader;
use super::resolver::WriteSet;
use super::{Engine, Mutation, OccStore};
use crate::error::{Error, ErrorKind, Result};
use crate::kv::range_cache::RangeKeeper;
use crate::kv::{KeyValue, SnapshotReader, Txn};
use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

#[derive(Clone, Debug)]
pub(super) enum Pending {
    Set(Vec<u8>),
    Clear,
    /// Atomic operations, applied in order to the committed value at commit time.
    Atomic(Vec<AtomicOp>),
}

#[derive(Clone, Copy, Debug)]
pub(super) enum AtomicOp {
    Add(i64),
    Max(u64),
}

pub(super) fn apply_atomic(base: Option<&[u8]>, ops: &[AtomicOp]) -> Vec<u8> {
    let mut v = crate::kv::decode_counter(base);
    for op in ops {
        v = match *op {
            AtomicOp::Add(d) => v.wrapping_add(d as u64),
            AtomicOp::Max(m) => v.max(m),
        };
    }
    v.to_le_bytes().to_vec()
}

pub(super) struct OccTxn<E: Engine> {
    // Declared before `store` so the snapshot is released before the engine can go away.
    snap: Option<Arc<E::Snapshot>>,
    store: Arc<OccStore<E>>,
    read_version: u64,
    started: Instant,
    read_points: ReadKeys,
    read_ranges: Vec<(Vec<u8>, Vec<u8>)>,
    writes: BTreeMap<Vec<u8>, Pending>,
    /// Ranges cleared by this transaction, applied before the point writes at commit.
    cleared: Vec<(Vec<u8>, Vec<u8>)>,
    /// Versionstamped writes: key prefix (with room for the stamp, appended at apply time)
    /// and value.
    stamped: Vec<(Vec<u8>, Vec<u8>)>,
    bytes: usize,
}

impl<E: Engine> Drop for OccTxn<E> {
    fn drop(&mut self) {
        self.snap = None;
        self.store.remove_live(self.read_version);
    }
}

impl<E: Engine> OccTxn<E> {
    /// True when this transaction wrote or cleared a key in `[start, end)`: a read of that
    /// range must merge its own writes in.
    fn wrote_into(&self, start: &[u8], end: &[u8]) -> bool {
        self.writes
            .range::<[u8], _>((Bound::Included(start), Bound::Excluded(end)))
            .next()
            .is_some()
            || self.cleared.iter().any(|(s, e)| s.as_slice() < end && start < e.as_slice())
    }

    /// A transaction reading `snap`, taken at `version` (already registered as live).
    pub(super) fn new(store: Arc<OccStore<E>>, version: u64, snap: Arc<E::Snapshot>) -> Self {
        OccTxn {
            snap: Some(snap),
            store,
            read_version: version,
            started: Instant::now(),
            read_points: ReadKeys::default(),
            read_ranges: Vec::new(),
            writes: BTreeMap::new(),
            cleared: Vec::new(),
            stamped: Vec::new(),
            bytes: 0,
        }
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
        self.check_key_len(key.len())
    }

    fn check_key_len(&self, len: usize) -> Result<()> {
        if let Some(max) = self.store.limits.max_key {
            if len > max {
                return Err(Error::new(
                    ErrorKind::TooLarge,
                    format!("key of {len} bytes exceeds the backend's limit of {max}"),
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
        self.snap.as_deref().expect("snapshot lives until drop")
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
                self.read_points.insert(key);
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
            let snap = self.snap.as_deref().expect("snapshot lives until drop");
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

impl<E: Engine> Txn for OccTxn<E> {
    fn get(&mut self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.read(key, true)
    }
    fn snapshot_get(&mut self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.read(key, false)
    }
    fn local_reads(&self) -> bool {
        true
    }
    fn get_with(&mut self, key: &[u8], read: &mut dyn FnMut(&[u8])) -> Result<bool> {
        // Only a plain read of a committed value is lent; everything else goes through `read`.
        if self.writes.contains_key(key) || self.in_cleared(key) {
            return Ok(self.read(key, true)?.map(|v| read(&v)).is_some());
        }
        self.check_key(key)?;
        self.check_age()?;
        self.read_points.insert(key);
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
    fn lend(&mut self, key: &[u8]) -> Result<Option<Arc<[u8]>>> {
        // The cache's own buffer of a committed value: filled from the engine on a miss, lent
        // only if the cache kept it (then it is exactly the value at this snapshot).
        if self.writes.contains_key(key)
            || self.in_cleared(key)
            || !self.store.cache.lock().enabled()
        {
            return Ok(None);
        }
        self.check_key(key)?;
        self.check_age()?;
        self.read_points.insert(key);
        let (store, at) = (&self.store, self.read_version);
        if let Some(v) = store.cache.lock().get(key, at) {
            return Ok(v);
        }
        let found = store.engine.get_with(self.snap(), key, &mut |v| {
            store.cache.lock().fill(key, at, Some(v));
        })?;
        Ok(if found { store.cache.lock().get(key, at).flatten() } else { None })
    }
    fn visit_range(
        &mut self,
        start: &[u8],
        end: &[u8],
        visit: &mut dyn FnMut(&[u8], &[u8]),
    ) -> Result<()> {
        let own_writes = self.wrote_into(start, end);
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
        self.read_ranges.push((start.to_vec(), end.to_vec()));
        let (enabled, cached) = {
            let mut c = self.store.cache.lock();
            (c.enabled(), c.get_range(start, end, self.read_version))
        };
        if let Some(pairs) = cached {
            for (k, v) in pairs.iter() {
                visit(k, v);
            }
            return Ok(());
        }
        // A scan small enough is kept whole for the next one (a hot directory's listing).
        let mut keep = RangeKeeper::new(enabled);
        self.store.engine.scan(self.snap(), start, end, false, &mut |k, v| {
            visit(k, v);
            keep.add(k, v);
            true
        })?;
        if let Some(pairs) = keep.finish() {
            self.store.cache.lock().fill_range(start, end, self.read_version, pairs);
        }
        Ok(())
    }
    fn parallel_reader(
        &mut self,
        start: &[u8],
        end: &[u8],
    ) -> Result<Option<Arc<dyn SnapshotReader>>> {
        let own_writes = self.wrote_into(start, end);
        if own_writes || start >= end {
            return Ok(None);
        }
        self.check_key(start)?;
        self.check_key(end)?;
        self.check_age()?;
        self.read_ranges.push((start.to_vec(), end.to_vec()));
        let snap = self.snap.clone().expect("snapshot lives until drop");
        Ok(Some(Arc::new(Reader {
            snap,
            store: self.store.clone(),
            range: (start.to_vec(), end.to_vec()),
        })))
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
    fn set_versionstamped_key(&mut self, prefix: &[u8], value: &[u8]) -> Result<()> {
        self.set_versionstamped_key_vec(prefix, value.to_vec())
    }
    fn set_versionstamped_key_vec(&mut self, prefix: &[u8], value: Vec<u8>) -> Result<()> {
        self.check_key_len(prefix.len() + super::pipeline::STAMP_LEN)?;
        if self.stamped.len() >= u16::MAX as usize {
            return Err(Error::new(
                ErrorKind::TooLarge,
                "more than 65535 versionstamped keys in one transaction",
            ));
        }
        self.add_bytes(prefix.len() + super::pipeline::STAMP_LEN + value.len())?;
        // The key with room for its stamp, appended when the commit is applied.
        let mut key = Vec::with_capacity(prefix.len() + super::pipeline::STAMP_LEN);
        key.extend_from_slice(prefix);
        self.stamped.push((key, value));
        Ok(())
    }

    fn read_version(&self) -> Option<u64> {
        Some(self.read_version)
    }
    /// Moves to the latest snapshot if nothing this transaction read has changed since its
    /// own (then its reads are equally valid at the new one); a conflict otherwise. Writes
    /// stay buffered. Reads after this see every commit made so far.
    fn refresh(&mut self) -> Result<()> {
        self.check_age()?;
        let read_ranges = coalesce(std::mem::take(&mut self.read_ranges));
        let vis = self.store.visible.read();
        let checked =
            self.store.resolver.lock().check(self.read_version, &self.read_points, &read_ranges);
        self.read_ranges = read_ranges;
        checked?;
        let new_version = *vis;
        if new_version != self.read_version {
            self.store.add_live(new_version);
            self.store.remove_live(self.read_version);
            // The old snapshot goes first, as in `drop`.
            self.snap = None;
            self.snap = Some(self.store.snapshot_at(new_version));
            self.read_version = new_version;
        }
        Ok(())
    }

    fn commit(self: Box<Self>, durable: bool) -> Result<()> {
        self.commit_versioned(durable).map(|_| ())
    }

    fn commit_versioned(mut self: Box<Self>, durable: bool) -> Result<Option<u64>> {
        if self.writes.is_empty() && self.cleared.is_empty() && self.stamped.is_empty() {
            // Read-only: serializable at its snapshot, nothing to check or apply.
            return Ok(None);
        }
        self.check_age()?;
        self.store.check_healthy()?;
        let read_ranges = coalesce(std::mem::take(&mut self.read_ranges));
        let mut ws = WriteSet {
            points: Vec::with_capacity(self.writes.len()),
            ranges: Vec::with_capacity(self.cleared.len() + self.stamped.len()),
        };
        // Room for the stamped keys and the stamp counter the pipeline adds.
        let room = self.cleared.len() + self.writes.len() + self.stamped.len() + 1;
        let mut batch = Vec::with_capacity(room);
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
        let stamped = std::mem::take(&mut self.stamped);
        for (prefix, _) in &stamped {
            // Readers of the range the stamped keys land in conflict with this commit.
            ws.ranges.push((prefix.clone(), crate::kv::prefix_end(prefix)));
        }
        let store = self.store.clone();
        let version = {
            let mut r = store.resolver.lock();
            r.check(self.read_version, &self.read_points, &read_ranges)?;
            r.assign(ws, store.oldest.load(Ordering::SeqCst))
        };
        let _in_flight = durable.then(|| store.durable_commit());
        store.publish(version, Staged { batch, atomics, stamped })?;
        if durable {
            // Applied and visible to others: a failure now cannot be "nothing changed".
            store.sync_to(version).map_err(|e| {
                Error::new(
                    ErrorKind::CommitUnknown,
                    format!("commit applied but its fsync failed, so it may not survive a power loss: {}", e.message()),
                )
            })?;
        }
        Ok(Some(version))
    }
}
