//! Tests of the read cache (`cache.rs`).

use super::*;

fn key(i: usize) -> Vec<u8> {
    format!("k{i:06}").into_bytes()
}

#[test]
fn a_fill_from_an_old_snapshot_is_kept_only_if_no_later_commit_wrote_the_key() {
    let mut c = ReadCache::new(1 << 20, 5);
    c.applied(6, Some(&[Mutation::Set(b"a".to_vec(), b"new".to_vec())]));
    c.fill(b"a", 5, Some(b"old"));
    assert_eq!(
        c.get(b"a", 6).unwrap().as_deref(),
        Some(&b"new"[..]),
        "the commit's value, not the old fill, is served at 6"
    );
    assert!(c.get(b"a", 5).is_none(), "not known at 5");
    c.fill(b"b", 5, Some(b"b5"));
    assert_eq!(c.get(b"b", 6).unwrap().as_deref(), Some(&b"b5"[..]));
    c.applied(7, Some(&[Mutation::ClearRange(b"a".to_vec(), b"c".to_vec())]));
    assert!(c.get(b"b", 7).is_none(), "a cleared range leaves the cache");
    c.fill(b"b", 6, Some(b"b5"));
    assert!(c.get(b"b", 7).is_none(), "filled from before the clear");
    c.fill(b"b", 7, None);
    assert_eq!(c.get(b"b", 7), Some(None), "absence is cached too");
    assert!(c.get(b"b", 6).is_none(), "not known at an older snapshot");
}

#[test]
fn large_values_are_left_to_the_engine() {
    let mut c = ReadCache::new(1 << 20, 0);
    let big = vec![7u8; MAX_VALUE + 1];
    c.fill(b"big", 0, Some(&big));
    assert!(c.get(b"big", 0).is_none(), "a large value is not filled");
    c.fill(b"small", 0, Some(b"s"));
    c.applied(1, Some(&[Mutation::Set(b"small".to_vec(), big.clone())]));
    assert!(
        c.get(b"small", 1).is_none(),
        "a large write through leaves no entry, and no stale one"
    );
}

#[test]
fn too_old_snapshots_are_not_filled() {
    let mut c = ReadCache::new(1 << 20, 0);
    for v in 1..=(RECENT as u64 + 10) {
        c.applied(v, Some(&[]));
    }
    c.fill(b"x", 1, Some(b"1"));
    assert!(c.get(b"x", RECENT as u64 + 10).is_none());
}

#[test]
fn stamped_keys_are_recorded_but_do_not_fill() {
    let mut c = ReadCache::new(1 << 20, 0);
    c.fill(b"counter", 0, Some(b"1"));
    let batch = [
        Mutation::Set(b"a".to_vec(), b"1".to_vec()),
        Mutation::Set(b"W1".to_vec(), b"record".to_vec()),
        Mutation::Set(b"counter".to_vec(), b"2".to_vec()),
    ];
    c.applied_stamped(1, Some(&batch), 2);
    assert_eq!(c.get(b"a", 1).unwrap().as_deref(), Some(&b"1"[..]), "an ordinary write fills");
    assert!(c.get(b"W1", 1).is_none(), "a stamped key does not fill");
    // A stamped key already cached (read before) takes its new value.
    assert_eq!(c.get(b"counter", 1).unwrap().as_deref(), Some(&b"2"[..]));
}

#[test]
fn write_through_updates_cached_keys() {
    let mut c = ReadCache::new(1 << 20, 0);
    c.fill(b"a", 0, Some(b"0"));
    c.applied(
        1,
        Some(&[Mutation::Set(b"a".to_vec(), b"1".to_vec()), Mutation::Clear(b"z".to_vec())]),
    );
    assert!(c.get(b"a", 0).is_none(), "the old snapshot reads the engine");
    assert_eq!(c.get(b"a", 1).unwrap().as_deref(), Some(&b"1"[..]));
    assert!(c.get(b"z", 1).is_none(), "a clear of a key not cached adds nothing");
}

#[test]
fn a_commit_fills_the_cache_with_the_small_values_it_wrote() {
    // A first-touch stat right after a create reads the inode the create wrote.
    let mut c = ReadCache::new(1 << 20, 0);
    c.applied(1, Some(&[Mutation::Set(b"inode".to_vec(), b"i1".to_vec())]));
    assert_eq!(c.get(b"inode", 1).unwrap().as_deref(), Some(&b"i1"[..]));
    assert!(c.get(b"inode", 0).is_none(), "not known before the commit that wrote it");
    c.applied(2, Some(&[Mutation::Set(b"inode".to_vec(), b"i2".to_vec())]));
    assert_eq!(c.get(b"inode", 2).unwrap().as_deref(), Some(&b"i2"[..]));
    c.applied(3, Some(&[Mutation::ClearRange(b"a".to_vec(), b"z".to_vec())]));
    assert!(c.get(b"inode", 3).is_none(), "a cleared range leaves the cache");
    let big = vec![7u8; MAX_VALUE + 1];
    c.applied(4, Some(&[Mutation::Set(b"big".to_vec(), big)]));
    assert!(c.get(b"big", 4).is_none(), "large values are left to the engine");
    c.applied(5, None);
    c.applied(6, Some(&[Mutation::Set(b"x".to_vec(), b"x".to_vec())]));
    let mut off = ReadCache::new(0, 0);
    off.applied(1, Some(&[Mutation::Set(b"x".to_vec(), b"x".to_vec())]));
    assert!(off.get(b"x", 1).is_none(), "off");
}

#[test]
fn rewrites_keep_a_hot_key_hot_and_the_byte_count_exact() {
    let mut c = ReadCache::new(1 << 16, 0);
    c.fill(b"hot", 0, Some(b"0"));
    assert!(c.get(b"hot", 0).is_some(), "promoted");
    let long = vec![9u8; 100]; // a key held on the heap
    for v in 1..500u64 {
        let value = vec![1u8; (v % 50) as usize];
        let batch = [
            Mutation::Set(b"hot".to_vec(), value.clone()),
            Mutation::Set(long.clone(), value.clone()),
            Mutation::Set(key(v as usize), value),
        ];
        c.applied(v, Some(&batch));
        let sum: usize = c.map.iter().map(|(k, e)| e.cost(k.as_slice())).sum();
        assert_eq!(c.used(), sum, "after commit {v}");
        assert!(c.used() <= 1 << 16);
        assert_eq!(c.get(b"hot", v).unwrap().map(|x| x.len()), Some((v % 50) as usize));
    }
    assert!(c.map[&b"hot"[..]].protected, "the rewritten hot key stayed protected");
    assert!(c.probation.len() + c.protected.len() <= 2 * c.map.len() + 64, "stale slots");
}

#[test]
fn keys_that_differ_only_at_the_end_get_different_tags() {
    // The hash table compares the top 7 bits of the hash before the key.
    use std::hash::{BuildHasher, BuildHasherDefault};
    let b = BuildHasherDefault::<Fnv>::default();
    let tags: std::collections::HashSet<u64> =
        (0..1000).map(|i| b.hash_one(format!("D-dir-f{i:06}").into_bytes()) >> 57).collect();
    assert!(tags.len() > 100, "{} distinct tags of 128", tags.len());
}

#[test]
fn stays_within_capacity_and_a_scan_does_not_evict_the_hot_set() {
    let cap = 200 * (OVERHEAD + 2 * 7 + 100);
    let mut c = ReadCache::new(cap, 0);
    let v = vec![7u8; 100];
    for i in 0..100 {
        c.fill(&key(i), 0, Some(&v));
        assert!(c.get(&key(i), 0).is_some(), "promoted");
    }
    for i in 1000..20000 {
        c.fill(&key(i), 0, Some(&v));
        assert!(c.used() <= cap);
    }
    for i in 0..100 {
        assert!(c.get(&key(i), 0).is_some(), "hot key {i} evicted by a scan");
    }
    c.set_capacity(0);
    assert_eq!(c.used(), 0);
    c.fill(b"x", 0, Some(b"1"));
    assert!(c.get(b"x", 0).is_none(), "off");
}
