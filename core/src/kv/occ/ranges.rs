//! Range arithmetic for read-conflict sets.

/// Sorts and merges ranges so that lookups can binary-search them.
pub(super) fn coalesce(mut ranges: Vec<(Vec<u8>, Vec<u8>)>) -> Vec<(Vec<u8>, Vec<u8>)> {
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
pub(super) fn ranges_overlap(ranges: &[(Vec<u8>, Vec<u8>)], s: &[u8], e: &[u8]) -> bool {
    // First range whose end is past `s`.
    let i = ranges.partition_point(|r| r.1.as_slice() <= s);
    i < ranges.len() && ranges[i].0.as_slice() < e
}

pub(super) fn ranges_contain(ranges: &[(Vec<u8>, Vec<u8>)], k: &[u8]) -> bool {
    let mut end = k.to_vec();
    end.push(0);
    ranges_overlap(ranges, k, &end)
}

/// The keys a transaction read with a conflict, kept in one buffer: a read costs no
/// allocation of its own (a set of key copies cost one or two per read, a sixth of a `stat`).
/// Repeated keys are merged when the buffer is compacted, and by [`ReadKeys::sorted`].
#[derive(Default)]
pub(super) struct ReadKeys {
    bytes: Vec<u8>,
    ends: Vec<usize>,
    /// Compact when `ends` grows past this (repeated reads of the same keys stay bounded).
    compact_at: usize,
}

impl ReadKeys {
    /// Records a read of `key`.
    pub(super) fn insert(&mut self, key: &[u8]) {
        if self.last() == Some(key) {
            return;
        }
        self.bytes.extend_from_slice(key);
        self.ends.push(self.bytes.len());
        if self.ends.len() > self.compact_at.max(1024) {
            let unique: Vec<Vec<u8>> = self.sorted().into_iter().map(<[u8]>::to_vec).collect();
            self.bytes.clear();
            self.ends.clear();
            for k in &unique {
                self.bytes.extend_from_slice(k);
                self.ends.push(self.bytes.len());
            }
            self.compact_at = 2 * self.ends.len();
        }
    }

    fn last(&self) -> Option<&[u8]> {
        let n = self.ends.len();
        let end = *self.ends.last()?;
        let start = if n > 1 { self.ends[n - 2] } else { 0 };
        Some(&self.bytes[start..end])
    }

    /// True if no key was read.
    pub(super) fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }

    /// The keys read, sorted, each once.
    pub(super) fn sorted(&self) -> Vec<&[u8]> {
        let mut start = 0;
        let mut keys: Vec<&[u8]> = self
            .ends
            .iter()
            .map(|&end| {
                let k = &self.bytes[start..end];
                start = end;
                k
            })
            .collect();
        keys.sort_unstable();
        keys.dedup();
        keys
    }
}

#[cfg(test)]
mod tests {
    use super::ReadKeys;

    #[test]
    fn read_keys_are_sorted_once_each_and_compacted() {
        let mut r = ReadKeys::default();
        assert!(r.is_empty() && r.sorted().is_empty());
        for k in [&b"b"[..], b"a", b"a", b"", b"c", b"a"] {
            r.insert(k);
        }
        assert_eq!(r.sorted(), vec![&b""[..], b"a", b"b", b"c"]);
        for i in 0..10_000u32 {
            r.insert(&(i % 100).to_be_bytes());
        }
        assert!(r.ends.len() <= 2100, "compacted: {}", r.ends.len());
        assert_eq!(r.sorted().len(), 104);
    }
}
