//! Whole ranges that reads scanned (a directory's entries), kept beside the read cache of
//! single keys (`cache.rs`) and exact by the same rule: every applied commit drops the ranges
//! it wrote into, under the lock that makes it visible. A hot directory listing is then a
//! walk over a vector in memory instead of an engine iterator.
//!
//! An entry holds every pair of `[start, end)` and `lo`, a version from which they have been
//! the current ones; a read at snapshot R uses it when `lo <= R`. A scan at R fills it only if
//! no commit after R wrote into the range (the caller checks that against the recent write
//! sets). Memory is bounded; the least recently used range goes first.

use std::collections::BTreeMap;
use std::sync::Arc;

/// One pair of a cached range.
type Pair = (Box<[u8]>, Box<[u8]>);

/// The pairs of one cached range.
pub(crate) type Pairs = Arc<[Pair]>;

struct Range {
    end: Vec<u8>,
    pairs: Pairs,
    lo: u64,
    cost: usize,
    used: u64,
}

/// See the module documentation.
#[derive(Default)]
pub(crate) struct RangeCache {
    /// By start key; ranges never overlap.
    ranges: BTreeMap<Vec<u8>, Range>,
    bytes: usize,
    clock: u64,
}

/// Bytes a pair costs beyond its key and value.
const PAIR_OVERHEAD: usize = 48;

/// Bytes of keys and values a scanned range may hold to be kept whole.
const KEEP_MAX: usize = 16 << 20;

/// Collects what a scan visits, to keep the range whole afterwards; gives up beyond
/// [`KEEP_MAX`] bytes (or from the start, when the cache keeps nothing).
pub(crate) struct RangeKeeper {
    pairs: Option<Vec<Pair>>,
    bytes: usize,
}

impl RangeKeeper {
    pub(crate) fn new(keep: bool) -> RangeKeeper {
        RangeKeeper { pairs: keep.then(Vec::new), bytes: 0 }
    }

    pub(crate) fn add(&mut self, key: &[u8], value: &[u8]) {
        if let Some(pairs) = &mut self.pairs {
            self.bytes += key.len() + value.len();
            if self.bytes > KEEP_MAX {
                self.pairs = None;
            } else {
                pairs.push((Box::from(key), Box::from(value)));
            }
        }
    }

    /// Every pair visited, unless it gave up.
    pub(crate) fn finish(self) -> Option<Pairs> {
        self.pairs.map(Pairs::from)
    }
}

impl RangeCache {
    /// The pairs of exactly `[start, end)` at snapshot `at`, if cached.
    pub(crate) fn get(&mut self, start: &[u8], end: &[u8], at: u64) -> Option<Pairs> {
        self.clock += 1;
        let r = self.ranges.get_mut(start).filter(|r| r.end == end && r.lo <= at)?;
        r.used = self.clock;
        Some(r.pairs.clone())
    }

    /// Keeps `pairs`, all of `[start, end)` current since `lo`, within `budget` bytes.
    pub(crate) fn fill(&mut self, start: &[u8], end: &[u8], pairs: Pairs, lo: u64, budget: usize) {
        let cost = start.len()
            + end.len()
            + 128
            + pairs.iter().map(|(k, v)| k.len() + v.len() + PAIR_OVERHEAD).sum::<usize>();
        if cost > budget / 4 {
            return;
        }
        self.clear_overlapping(start, end);
        self.clock += 1;
        self.bytes += cost;
        let r = Range { end: end.to_vec(), pairs, lo, cost, used: self.clock };
        self.ranges.insert(start.to_vec(), r);
        self.shrink(budget);
    }

    /// Drops the range holding `key`, if any.
    pub(crate) fn written(&mut self, key: &[u8]) {
        if self.ranges.is_empty() {
            return;
        }
        let hit = self
            .ranges
            .range::<[u8], _>((std::ops::Bound::Unbounded, std::ops::Bound::Included(key)))
            .next_back()
            .filter(|(_, r)| key < r.end.as_slice())
            .map(|(s, _)| s.clone());
        if let Some(s) = hit {
            self.drop_range(&s);
        }
    }

    /// Drops every range overlapping `[start, end)`.
    pub(crate) fn clear_overlapping(&mut self, start: &[u8], end: &[u8]) {
        if self.ranges.is_empty() {
            return;
        }
        let mut hit: Vec<Vec<u8>> = self
            .ranges
            .range::<[u8], _>((std::ops::Bound::Included(start), std::ops::Bound::Excluded(end)))
            .map(|(s, _)| s.clone())
            .collect();
        // The range starting before `start` may reach into it.
        if let Some((s, r)) = self
            .ranges
            .range::<[u8], _>((std::ops::Bound::Unbounded, std::ops::Bound::Excluded(start)))
            .next_back()
        {
            if start < r.end.as_slice() {
                hit.push(s.clone());
            }
        }
        for s in hit {
            self.drop_range(&s);
        }
    }

    /// Bytes held.
    pub(crate) fn bytes(&self) -> usize {
        self.bytes
    }

    /// Evicts the least recently used ranges until they fit `budget`.
    pub(crate) fn shrink(&mut self, budget: usize) {
        while self.bytes > budget {
            let Some(oldest) =
                self.ranges.iter().min_by_key(|(_, r)| r.used).map(|(s, _)| s.clone())
            else {
                break;
            };
            self.drop_range(&oldest);
        }
    }

    fn drop_range(&mut self, start: &[u8]) {
        if let Some(r) = self.ranges.remove(start) {
            self.bytes -= r.cost;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs(n: u8) -> Pairs {
        (0..n).map(|i| (vec![b'k', i].into_boxed_slice(), vec![i].into_boxed_slice())).collect()
    }

    #[test]
    fn a_write_inside_a_range_drops_it_and_one_outside_does_not() {
        let mut c = RangeCache::default();
        c.fill(b"k", b"l", pairs(3), 5, 1 << 20);
        assert!(c.get(b"k", b"l", 4).is_none(), "older than its lo");
        assert_eq!(c.get(b"k", b"l", 5).unwrap().len(), 3);
        assert!(c.get(b"k", b"m", 5).is_none(), "another range");
        c.written(b"j");
        c.written(b"l");
        assert!(c.get(b"k", b"l", 6).is_some());
        c.written(b"k\x09");
        assert!(c.get(b"k", b"l", 6).is_none());
        assert_eq!(c.bytes(), 0);
        c.fill(b"k", b"l", pairs(3), 7, 1 << 20);
        c.clear_overlapping(b"a", b"k\x00");
        assert!(c.get(b"k", b"l", 7).is_none());
    }

    #[test]
    fn the_least_recently_used_range_goes_first() {
        let mut c = RangeCache::default();
        for s in [b"a", b"b", b"c"] {
            let mut e = s.to_vec();
            e.push(0);
            c.fill(s, &e, pairs(10), 1, 1 << 20);
        }
        assert!(c.get(b"a", b"a\x00", 1).is_some());
        let each = c.bytes() / 3;
        c.shrink(2 * each);
        assert!(c.get(b"b", b"b\x00", 1).is_none());
        assert!(c.get(b"a", b"a\x00", 1).is_some() && c.get(b"c", b"c\x00", 1).is_some());
    }
}
