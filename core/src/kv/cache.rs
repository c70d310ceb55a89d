//! The read cache of the optimistic layer: values that transactions read (or commits wrote),
//! kept so that a later read at a snapshot where they are still current is answered without
//! the engine. It never lies, because every commit goes through the one `OccStore` that owns
//! it: each applied commit updates it (under the same lock that makes the commit visible)
//! before any snapshot can see the commit.
//!
//! An entry holds a key's value (or its absence) and `lo`, a version from which that value
//! has been the current one: it is the key's value at every version from `lo` to `version`,
//! the last applied commit. A read at snapshot R uses it when `lo <= R`. A fill, the value a
//! read got from the engine at R, is kept only if no commit after R wrote the key (checked
//! against the write sets of the last few commits, `recent`); otherwise the value may already
//! be old and is dropped.
//!
//! Memory is bounded (`capacity` bytes of keys, values and overhead) and the policy is a
//! segmented LRU, which resists scans: a new entry goes to the probationary segment; a second
//! use promotes it to the protected segment; eviction takes from probation while it holds more
//! than a quarter of the capacity, so a long scan only cycles through probation and the hot
//! set survives. Protected entries get a second chance (CLOCK bit) before being demoted.

use super::cache_key::Key;
use super::occ::Mutation;
use super::range_cache::{Pairs, RangeCache};
use std::collections::{BTreeSet, HashMap, VecDeque};
use std::hash::{BuildHasherDefault, Hasher};
use std::ops::Bound;
use std::sync::Arc;

/// Bytes an entry costs beyond its key and value (map slot, ordered-set node, queue slot, the
/// key copies' headers).
const OVERHEAD: usize = 128;
/// How many recent commits' write sets are kept to validate fills from older snapshots.
const RECENT: usize = 128;
/// Values larger than this are not cached. Data blocks (up to 64 KiB and a tag byte) are: the
/// cache is the process's page cache, so a hot 4 KiB `pread` is a lookup and a 4 KiB copy
/// instead of a get of the whole block from the engine. (With a cache smaller than the file
/// read, a block's fill copied 64 KiB for each miss and evicted the hot set: the default size
/// now comes from the machine, `fs::options::default_cache_size`.)
pub(crate) const MAX_VALUE: usize = (64 << 10) + 64;

struct Entry {
    value: Option<Arc<[u8]>>,
    lo: u64,
    protected: bool,
    referenced: bool,
    /// Which queue slot is the live one (older slots of this key are skipped).
    stamp: u64,
}

impl Entry {
    fn cost(&self, key: &[u8]) -> usize {
        3 * key.len() + self.value.as_ref().map_or(0, |v| v.len()) + OVERHEAD
    }
}

/// The keys and ranges one applied commit wrote.
struct Written {
    version: u64,
    points: Vec<Key>,
    ranges: Vec<(Vec<u8>, Vec<u8>)>,
}

/// See the module documentation. Not synchronised: `OccStore` keeps it under a mutex.
pub(crate) struct ReadCache {
    capacity: usize,
    /// The last applied commit the cache knows of.
    version: u64,
    /// Point lookups (every cached read) go through a hash map: a B-tree's key comparisons
    /// were a third of a `stat`'s time. `keys` keeps them in order for range clears.
    /// Keys are held inline up to 30 bytes (`cache_key.rs`): no allocation per copy.
    map: HashMap<Key, Entry, BuildHasherDefault<Fnv>>,
    keys: BTreeSet<Key>,
    probation: VecDeque<(Key, u64)>,
    protected: VecDeque<(Key, u64)>,
    probation_bytes: usize,
    protected_bytes: usize,
    next_stamp: u64,
    recent: VecDeque<Written>,
    /// Whole ranges that reads scanned (directory listings), within a quarter of `capacity`.
    ranges: RangeCache,
    /// Hits, misses (counted for tests and benchmarks).
    pub(crate) hits: u64,
    pub(crate) misses: u64,
}

impl ReadCache {
    /// An empty cache of `capacity` bytes (0: off) whose applied version is `version`.
    pub(crate) fn new(capacity: usize, version: u64) -> ReadCache {
        ReadCache {
            capacity,
            version,
            map: HashMap::default(),
            keys: BTreeSet::new(),
            probation: VecDeque::new(),
            protected: VecDeque::new(),
            probation_bytes: 0,
            protected_bytes: 0,
            next_stamp: 0,
            recent: VecDeque::new(),
            ranges: RangeCache::default(),
            hits: 0,
            misses: 0,
        }
    }

    /// True if the cache keeps anything.
    pub(crate) fn enabled(&self) -> bool {
        self.capacity > 0
    }

    /// Changes the capacity, evicting down to it (0 empties and turns the cache off).
    pub(crate) fn set_capacity(&mut self, capacity: usize) {
        self.capacity = capacity;
        self.evict();
        self.ranges.shrink(capacity / 4);
    }

    /// Bytes held (keys, values and overhead).
    pub(crate) fn used(&self) -> usize {
        self.probation_bytes + self.protected_bytes
    }

    /// Bytes held, whole ranges included.
    pub(crate) fn used_all(&self) -> usize {
        self.used() + self.ranges.bytes()
    }

    /// Every pair of `[start, end)` at snapshot `at`, if the cache holds that whole range.
    pub(crate) fn get_range(&mut self, start: &[u8], end: &[u8], at: u64) -> Option<Pairs> {
        let r = self.ranges.get(start, end, at);
        if r.is_some() {
            self.hits += 1;
        }
        r
    }

    /// Keeps `pairs`, all of `[start, end)` as read from the engine at snapshot `at`, if no
    /// commit after `at` wrote into the range.
    pub(crate) fn fill_range(&mut self, start: &[u8], end: &[u8], at: u64, pairs: Pairs) {
        if start >= end || !self.enabled() || !self.range_current_since(start, end, at) {
            return;
        }
        self.ranges.fill(start, end, pairs, at, self.capacity / 4);
    }

    /// Was nothing in `[start, end)` written by an applied commit after `at`?
    fn range_current_since(&self, start: &[u8], end: &[u8], at: u64) -> bool {
        self.unwritten_since(at, |w| {
            w.points.iter().any(|k| start <= k.as_slice() && k.as_slice() < end)
                || w.ranges.iter().any(|(s, e)| s.as_slice() < end && start < e.as_slice())
        })
    }

    /// Did no applied commit after `at` write what `touched` looks for?
    fn unwritten_since(&self, at: u64, touched: impl Fn(&Written) -> bool) -> bool {
        if at >= self.version {
            // Nothing applied since (the common case of a fill right after its read).
            return true;
        }
        self.knows_since(at) && !self.since(at).any(touched)
    }

    /// The write sets in `recent` of the commits after `at`, newest first (`recent` is in
    /// version order: only its tail is walked).
    fn since(&self, at: u64) -> impl Iterator<Item = &Written> {
        self.recent.iter().rev().take_while(move |w| w.version > at)
    }

    /// Are the write sets of every applied commit after `at` in `recent`?
    fn knows_since(&self, at: u64) -> bool {
        // Versions are consecutive: the oldest one kept must follow `at`.
        at >= self.version || self.recent.front().is_some_and(|w| w.version <= at + 1)
    }

    /// Tells `f` each key in `[start, end)` that an applied commit after `at` wrote (`None`)
    /// and each range overlapping it that one cleared (`Some(range end)`); false, having told
    /// nothing, if the cache no longer knows every commit since `at`.
    pub(crate) fn written_since(
        &self,
        at: u64,
        start: &[u8],
        end: &[u8],
        mut f: impl FnMut(&[u8], Option<&[u8]>),
    ) -> bool {
        if !self.knows_since(at) {
            return false;
        }
        for w in self.since(at) {
            for k in w.points.iter().map(Key::as_slice).filter(|k| start <= *k && *k < end) {
                f(k, None);
            }
            for (s, e) in w.ranges.iter().filter(|(s, e)| s.as_slice() < end && start < e) {
                f(s, Some(e));
            }
        }
        true
    }

    /// The value of `key` at snapshot `at`, if the cache knows it: `Some(None)` means absent.
    pub(crate) fn get(&mut self, key: &[u8], at: u64) -> Option<Option<Arc<[u8]>>> {
        let stamp = self.next_stamp;
        let Some(e) = self.map.get_mut(key).filter(|e| e.lo <= at) else {
            self.misses += 1;
            return None;
        };
        self.hits += 1;
        let value = e.value.clone();
        if e.protected {
            e.referenced = true;
        } else {
            // A second use: promote to the protected segment.
            let cost = e.cost(key);
            e.protected = true;
            e.referenced = false;
            e.stamp = stamp;
            self.next_stamp += 1;
            self.probation_bytes -= cost;
            self.protected_bytes += cost;
            self.protected.push_back((Key::from(key), stamp));
            self.evict();
        }
        Some(value)
    }

    /// The value of `key` after the last applied commit, if cached (`Some(None)`: absent);
    /// for the commit pipeline, which applies in version order under the lock that updates
    /// this cache, so an entry there is the key's latest value. Counts no hit or miss.
    pub(crate) fn latest(&self, key: &[u8]) -> Option<Option<Arc<[u8]>>> {
        self.map.get(key).map(|e| e.value.clone())
    }

    /// Keeps `value`, read from the engine at snapshot `at`, if it is still current.
    pub(crate) fn fill(&mut self, key: &[u8], at: u64, value: Option<&[u8]>) {
        if !self.enabled() || !self.current_since(key, at) {
            return;
        }
        if let Some(e) = self.map.get_mut(key) {
            // Current at `at` and now, so it is the value the entry holds.
            e.lo = e.lo.min(at);
            return;
        }
        if value.is_some_and(|v| v.len() > MAX_VALUE) {
            return;
        }
        self.insert(key, value.map(Arc::from), at);
    }

    /// Was `key` written by no applied commit after `at`?
    fn current_since(&self, key: &[u8], at: u64) -> bool {
        self.unwritten_since(at, |w| {
            w.points.iter().any(|k| k.as_slice() == key)
                || w.ranges.iter().any(|(s, e)| s.as_slice() <= key && key < e.as_slice())
        })
    }

    /// Records commit `version`'s batch (already applied to the engine, or `None` if applying
    /// it failed and nothing changed): written keys take their new values, cleared ranges
    /// leave the cache.
    #[cfg(test)]
    pub(crate) fn applied(&mut self, version: u64, batch: Option<&[Mutation]>) {
        self.applied_stamped(version, batch, 0);
    }

    /// [`ReadCache::applied`], where the last `stamped` mutations of the batch set keys that
    /// no read has asked for yet (versionstamped keys, such as the change feed's records, and
    /// the stamp counter): they are recorded as written but do not fill the cache (they are
    /// read by range, once, if ever; filling evicted what is read).
    pub(crate) fn applied_stamped(
        &mut self,
        version: u64,
        batch: Option<&[Mutation]>,
        stamped: usize,
    ) {
        self.version = version;
        if !self.enabled() {
            // Nothing cached; a gap in `recent` would make later fills wrong, so none is kept.
            self.recent.clear();
            return;
        }
        let mut written = Written { version, points: Vec::new(), ranges: Vec::new() };
        let batch = batch.unwrap_or(&[]);
        for m in batch {
            match m {
                Mutation::Set(k, _) | Mutation::Clear(k) => self.ranges.written(k),
                Mutation::ClearRange(s, e) => self.ranges.clear_overlapping(s, e),
            }
        }
        let fresh_from = batch.len().saturating_sub(stamped);
        for (i, m) in batch.iter().enumerate() {
            match m {
                Mutation::Set(k, _) if i >= fresh_from && !self.map.contains_key(k.as_slice()) => {
                    written.points.push(Key::from(k.as_slice()));
                }
                Mutation::ClearRange(s, e) => {
                    let keys: Vec<Key> = self
                        .keys
                        .range::<[u8], _>((
                            Bound::Included(s.as_slice()),
                            Bound::Excluded(e.as_slice()),
                        ))
                        .cloned()
                        .collect();
                    for k in keys {
                        self.remove(k.as_slice());
                    }
                    written.ranges.push((s.clone(), e.clone()));
                }
                Mutation::Set(k, v) => {
                    self.write_through(k, Some(v), version);
                    written.points.push(Key::from(k.as_slice()));
                }
                Mutation::Clear(k) => {
                    self.write_through(k, None, version);
                    written.points.push(Key::from(k.as_slice()));
                }
            }
        }
        self.recent.push_back(written);
        while self.recent.len() > RECENT {
            self.recent.pop_front();
        }
    }

    /// Records commits of another process up to `version` that wrote `points` and cleared
    /// `ranges` (`kv/shared/client_cache.rs`): their entries leave the cache, since the new
    /// values are not known here.
    pub(crate) fn invalidated(
        &mut self,
        version: u64,
        points: Vec<Vec<u8>>,
        ranges: Vec<(Vec<u8>, Vec<u8>)>,
    ) {
        self.version = version;
        if !self.enabled() {
            self.recent.clear();
            return;
        }
        for k in &points {
            self.remove(k);
            self.ranges.written(k);
        }
        for (s, e) in &ranges {
            self.ranges.clear_overlapping(s, e);
            let keys: Vec<Key> = self
                .keys
                .range::<[u8], _>((Bound::Included(s.as_slice()), Bound::Excluded(e.as_slice())))
                .cloned()
                .collect();
            for k in keys {
                self.remove(k.as_slice());
            }
        }
        // One entry for possibly several commits: `current_since` is then conservative.
        let points = points.iter().map(|k| Key::from(k.as_slice())).collect();
        self.recent.push_back(Written { version, points, ranges });
        while self.recent.len() > RECENT {
            self.recent.pop_front();
        }
    }

    /// Forgets every entry; the cache is now at `version` (of a new owner's numbering).
    pub(crate) fn reset(&mut self, version: u64) {
        let capacity = self.capacity;
        let (hits, misses) = (self.hits, self.misses);
        *self = ReadCache::new(capacity, version);
        self.hits = hits;
        self.misses = misses;
    }

    /// The last commit the cache knows of.
    pub(crate) fn version(&self) -> u64 {
        self.version
    }

    /// A committed write becomes the entry of its key: a read of what was just written is a
    /// common pattern (a `stat` of every file right after creating them reads the inodes the
    /// creates wrote). A key not cached is added only for a small value it was set to (large
    /// ones are the engine's; a clear of an uncached key adds nothing), as a new probationary
    /// entry, so a stream of writes cycles through probation and leaves the hot set alone.
    fn write_through(&mut self, key: &[u8], value: Option<&[u8]>, version: u64) {
        let small = value.is_none_or(|v| v.len() <= MAX_VALUE);
        let Some(e) = self.map.get_mut(key) else {
            if let Some(v) = value.filter(|_| small) {
                self.insert(key, Some(Arc::from(v)), version);
            }
            return;
        };
        let old_cost = e.cost(key);
        let new_cost = 3 * key.len() + value.map_or(0, <[u8]>::len) + OVERHEAD;
        if !small || new_cost > self.capacity / 8 {
            self.remove(key);
            return;
        }
        // Updated in place (a removal and a new entry touched the map and the ordered set
        // twice); like a new entry it goes to the newest end of its segment, and a hot key
        // stays in the protected one: the rewrite of a hot key is still hot.
        e.value = value.map(Arc::from);
        e.lo = version;
        e.referenced = false;
        e.stamp = self.next_stamp;
        self.next_stamp += 1;
        let slot = (Key::from(key), e.stamp);
        if e.protected {
            self.protected_bytes = self.protected_bytes - old_cost + new_cost;
            self.protected.push_back(slot);
        } else {
            self.probation_bytes = self.probation_bytes - old_cost + new_cost;
            self.probation.push_back(slot);
        }
        self.drop_stale_slots();
        self.evict();
    }

    fn insert(&mut self, key: &[u8], value: Option<Arc<[u8]>>, lo: u64) {
        let stamp = self.next_stamp;
        self.next_stamp += 1;
        let e = Entry { value, lo, protected: false, referenced: false, stamp };
        let cost = e.cost(key);
        if cost > self.capacity / 8 {
            return;
        }
        self.probation_bytes += cost;
        let key = Key::from(key);
        self.probation.push_back((key.clone(), stamp));
        self.keys.insert(key.clone());
        self.map.insert(key, e);
        self.evict();
    }

    fn remove(&mut self, key: &[u8]) {
        if let Some(e) = self.map.remove(key) {
            self.keys.remove(key);
            let cost = e.cost(key);
            if e.protected {
                self.protected_bytes -= cost;
            } else {
                self.probation_bytes -= cost;
            }
        }
        // Its queue slot goes stale and is skipped.
        self.drop_stale_slots();
    }

    /// Drops the queue slots of removed or moved entries once they dominate.
    fn drop_stale_slots(&mut self) {
        if self.probation.len() + self.protected.len() > 2 * self.map.len() + 64 {
            let map = &self.map;
            let live = |(k, s): &(Key, u64), prot: bool| {
                map.get(k).is_some_and(|e| e.stamp == *s && e.protected == prot)
            };
            self.probation.retain(|slot| live(slot, false));
            self.protected.retain(|slot| live(slot, true));
        }
    }

    /// Evicts until the cache fits its capacity.
    fn evict(&mut self) {
        while self.used() > self.capacity {
            let from_probation =
                self.probation_bytes > self.capacity / 4 || self.protected_bytes == 0;
            if from_probation {
                let Some((k, stamp)) = self.probation.pop_front() else { break };
                if self.map.get(&k).is_some_and(|e| e.stamp == stamp && !e.protected) {
                    self.remove(k.as_slice());
                }
            } else {
                let Some((k, stamp)) = self.protected.pop_front() else { break };
                let next = self.next_stamp;
                let Some(e) = self.map.get_mut(&k).filter(|e| e.stamp == stamp && e.protected)
                else {
                    continue;
                };
                e.stamp = next;
                self.next_stamp += 1;
                if e.referenced {
                    // Second chance.
                    e.referenced = false;
                    self.protected.push_back((k, next));
                } else {
                    // Demoted to the probationary segment's newest end.
                    let cost = e.cost(k.as_slice());
                    e.protected = false;
                    self.protected_bytes -= cost;
                    self.probation_bytes += cost;
                    self.probation.push_back((k, next));
                }
            }
        }
    }
}

/// FNV-1a: keys are short byte strings from this process, so a fast hash beats SipHash's
/// flooding resistance here. Its state is finished with a mixer (MurmurHash3's fmix64): in
/// FNV-1a the last bytes never reach the top bits, which the hash table uses as the tag it
/// compares before the key, so keys that differ only at the end (`f001234`, `f001235`: every
/// dentry of a directory) all had one tag and a lookup compared key after key (a memcmp was
/// a sixth of a cached `stat`).
#[derive(Default)]
pub(crate) struct Fnv(u64);

impl Hasher for Fnv {
    fn finish(&self) -> u64 {
        let mut h = self.0;
        h ^= h >> 33;
        h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
        h ^= h >> 33;
        h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
        h ^ (h >> 33)
    }
    fn write(&mut self, bytes: &[u8]) {
        let mut h = if self.0 == 0 { 0xcbf2_9ce4_8422_2325 } else { self.0 };
        for &b in bytes {
            h = (h ^ b as u64).wrapping_mul(0x0100_0000_01b3);
        }
        self.0 = h;
    }
}

#[cfg(test)]
#[path = "cache_tests.rs"]
mod tests;
