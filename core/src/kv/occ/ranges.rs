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
