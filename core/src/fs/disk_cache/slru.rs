//! The disk cache's index: a segmented LRU over keys with sizes, bounded in bytes.
//!
//! New entries go to the probation segment; a hit there promotes the entry to the protected
//! segment (at most [`PROTECTED_SHARE`] of the capacity, its least recent entries moving back
//! to probation when it is full). Eviction takes the least recent entry of probation first, so
//! a sequential scan, which touches each entry once, only churns probation and never evicts
//! the protected hot set.

use std::collections::{BTreeMap, HashMap};

/// The share of the capacity the protected segment may hold, in percent.
pub(crate) const PROTECTED_SHARE: u64 = 80;

/// A segment of the index.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Segment {
    /// Seen once (or demoted): evicted first.
    Probation = 0,
    /// Hit at least once since it came in.
    Protected = 1,
}

struct Entry {
    size: u64,
    seg: Segment,
    tick: u64,
}

/// A segmented LRU index of keys and their sizes in bytes.
pub(crate) struct Slru {
    capacity: u64,
    entries: HashMap<Vec<u8>, Entry>,
    /// Recency order of each segment: tick -> key, least recent first.
    order: [BTreeMap<u64, Vec<u8>>; 2],
    bytes: [u64; 2],
    tick: u64,
}

impl Slru {
    /// An empty index holding at most `capacity` bytes.
    pub(crate) fn new(capacity: u64) -> Slru {
        Slru {
            capacity,
            entries: HashMap::new(),
            order: Default::default(),
            bytes: [0; 2],
            tick: 0,
        }
    }

    /// Whether `key` is in the index.
    pub(crate) fn contains(&self, key: &[u8]) -> bool {
        self.entries.contains_key(key)
    }

    /// Bytes held.
    pub(crate) fn bytes(&self) -> u64 {
        self.bytes[0] + self.bytes[1]
    }

    /// Entries held.
    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }

    /// The segment `key` is in.
    #[cfg(test)]
    pub(crate) fn segment(&self, key: &[u8]) -> Option<Segment> {
        self.entries.get(key).map(|e| e.seg)
    }

    fn place(&mut self, key: Vec<u8>, size: u64, seg: Segment) {
        self.tick += 1;
        self.order[seg as usize].insert(self.tick, key.clone());
        self.bytes[seg as usize] += size;
        self.entries.insert(key, Entry { size, seg, tick: self.tick });
    }

    fn unplace(&mut self, key: &[u8]) -> Option<Entry> {
        let e = self.entries.remove(key)?;
        self.order[e.seg as usize].remove(&e.tick);
        self.bytes[e.seg as usize] -= e.size;
        Some(e)
    }

    /// Adds `key` (`size` bytes) as the most recent entry of `seg`, unless it is there already;
    /// returns the keys evicted to make room (`key` itself when it is larger than the capacity).
    pub(crate) fn insert(&mut self, key: &[u8], size: u64, seg: Segment) -> Vec<Vec<u8>> {
        if self.entries.contains_key(key) {
            return Vec::new();
        }
        if size > self.capacity {
            return vec![key.to_vec()];
        }
        self.place(key.to_vec(), size, seg);
        self.balance();
        self.evict_to(self.capacity)
    }

    /// Records a hit on `key`: it becomes the most recent protected entry.
    pub(crate) fn touch(&mut self, key: &[u8]) {
        if let Some(e) = self.unplace(key) {
            self.place(key.to_vec(), e.size, Segment::Protected);
            self.balance();
        }
    }

    /// Removes `key`; true if it was there.
    pub(crate) fn remove(&mut self, key: &[u8]) -> bool {
        self.unplace(key).is_some()
    }

    /// Moves the least recent protected entries to probation while protected holds more than
    /// its share.
    fn balance(&mut self) {
        let limit = self.capacity / 100 * PROTECTED_SHARE;
        while self.bytes[Segment::Protected as usize] > limit {
            let Some((_, key)) = self.order[Segment::Protected as usize].pop_first() else { break };
            let e = self.entries.remove(&key).expect("ordered keys are entries");
            self.bytes[Segment::Protected as usize] -= e.size;
            self.place(key, e.size, Segment::Probation);
        }
    }

    /// Evicts least recent entries, probation first, until at most `bytes` are held; returns
    /// their keys.
    pub(crate) fn evict_to(&mut self, bytes: u64) -> Vec<Vec<u8>> {
        let mut evicted = Vec::new();
        while self.bytes() > bytes {
            let seg = if self.order[0].is_empty() { 1 } else { 0 };
            let Some((_, key)) = self.order[seg].pop_first() else { break };
            let e = self.entries.remove(&key).expect("ordered keys are entries");
            self.bytes[seg] -= e.size;
            evicted.push(key);
        }
        evicted
    }

    /// Every entry, probation then protected, each least recent first (the order that
    /// [`Slru::insert`]s rebuild the same index in).
    pub(crate) fn entries(&self) -> Vec<(Segment, &[u8])> {
        let prob = self.order[0].values().map(|k| (Segment::Probation, k.as_slice()));
        prob.chain(self.order[1].values().map(|k| (Segment::Protected, k.as_slice()))).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn k(i: u32) -> Vec<u8> {
        i.to_be_bytes().to_vec()
    }

    #[test]
    fn bounded_in_bytes_least_recent_first() {
        let mut s = Slru::new(1000);
        for i in 0..10 {
            assert!(s.insert(&k(i), 100, Segment::Probation).is_empty());
        }
        assert_eq!(s.insert(&k(10), 100, Segment::Probation), vec![k(0)]);
        assert_eq!(s.bytes(), 1000);
        assert_eq!(
            s.insert(&k(11), 1001, Segment::Probation),
            vec![k(11)],
            "larger than the whole cache"
        );
        assert!(!s.contains(&k(11)));
    }

    #[test]
    fn a_scan_does_not_evict_the_hot_set() {
        let mut s = Slru::new(100 * 100);
        // A hot set of half the capacity, each entry hit once after it came in.
        for i in 0..50 {
            s.insert(&k(i), 100, Segment::Probation);
            s.touch(&k(i));
        }
        // A scan ten times the capacity.
        for i in 1000..2000 {
            s.insert(&k(i), 100, Segment::Probation);
        }
        for i in 0..50 {
            assert_eq!(
                s.segment(&k(i)),
                Some(Segment::Protected),
                "hot entry {i} evicted by a scan"
            );
        }
        assert!(s.bytes() <= 100 * 100);
    }

    #[test]
    fn protected_keeps_its_share_and_demotes_to_probation() {
        let mut s = Slru::new(1000);
        for i in 0..10 {
            s.insert(&k(i), 100, Segment::Probation);
            s.touch(&k(i));
        }
        // 80% may be protected: the two least recent hits went back to probation.
        assert_eq!(s.segment(&k(0)), Some(Segment::Probation));
        assert_eq!(s.segment(&k(1)), Some(Segment::Probation));
        assert_eq!(s.segment(&k(2)), Some(Segment::Protected));
        assert_eq!(s.len(), 10);
        assert_eq!(s.insert(&k(99), 100, Segment::Probation), vec![k(0)]);
    }
}
