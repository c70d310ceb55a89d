//! The kv conformance suite's cases: each takes a backend and checks one part of the contract
//! every backend keeps (kv_conformance.rs runs them all against each backend).

use std::sync::Arc;
use txvfs::kv::{self, Backend, CacheStats};
use txvfs::ErrorKind;

pub fn set(b: &dyn Backend, pairs: &[(&[u8], &[u8])]) {
    let mut tx = b.begin().unwrap();
    for (k, v) in pairs {
        tx.set(k, v).unwrap();
    }
    tx.commit(false).unwrap();
}

pub fn get(b: &dyn Backend, k: &[u8]) -> Option<Vec<u8>> {
    b.begin().unwrap().get(k).unwrap()
}

pub fn keys(kvs: &[(Vec<u8>, Vec<u8>)]) -> Vec<&[u8]> {
    kvs.iter().map(|(k, _)| k.as_slice()).collect()
}

pub fn get_set_clear(b: &dyn Backend) {
    assert_eq!(get(b, b"k"), None);
    set(b, &[(b"k", b"v1")]);
    assert_eq!(get(b, b"k").as_deref(), Some(&b"v1"[..]));
    set(b, &[(b"k", b"v2")]);
    assert_eq!(get(b, b"k").as_deref(), Some(&b"v2"[..]));
    let mut tx = b.begin().unwrap();
    tx.clear(b"k").unwrap();
    tx.commit(false).unwrap();
    assert_eq!(get(b, b"k"), None);
    // Empty values are values, not absence.
    set(b, &[(b"e", b"")]);
    assert_eq!(get(b, b"e").as_deref(), Some(&b""[..]));
}

pub fn ranges(b: &dyn Backend) {
    set(b, &[(b"a", b"1"), (b"b", b"2"), (b"c", b"3"), (b"d", b"4"), (b"e", b"5")]);
    let mut tx = b.begin().unwrap();
    assert_eq!(keys(&tx.get_range(b"b", b"e", 0, false).unwrap()), vec![&b"b"[..], b"c", b"d"]);
    assert_eq!(keys(&tx.get_range(b"b", b"e", 2, false).unwrap()), vec![&b"b"[..], b"c"]);
    assert_eq!(keys(&tx.get_range(b"b", b"e", 0, true).unwrap()), vec![&b"d"[..], b"c", b"b"]);
    assert_eq!(keys(&tx.get_range(b"a", b"z", 2, true).unwrap()), vec![&b"e"[..], b"d"]);
    assert!(tx.get_range(b"x", b"z", 0, false).unwrap().is_empty());
    assert!(tx.get_range(b"c", b"c", 0, false).unwrap().is_empty());
    assert!(tx.get_range(b"d", b"b", 0, false).unwrap().is_empty());
    let kv = tx.get_range(b"c", b"d", 0, false).unwrap();
    assert_eq!(kv, vec![(b"c".to_vec(), b"3".to_vec())]);
    tx.clear_range(b"b", b"d").unwrap();
    tx.commit(false).unwrap();
    let mut tx = b.begin().unwrap();
    assert_eq!(keys(&tx.get_range(b"a", b"z", 0, false).unwrap()), vec![&b"a"[..], b"d", b"e"]);
}

pub fn read_your_writes(b: &dyn Backend) {
    set(b, &[(b"a", b"1"), (b"c", b"3"), (b"e", b"5")]);
    let mut tx = b.begin().unwrap();
    tx.set(b"b", b"2").unwrap();
    tx.set(b"c", b"33").unwrap();
    tx.clear(b"e").unwrap();
    assert_eq!(tx.get(b"b").unwrap().as_deref(), Some(&b"2"[..]));
    assert_eq!(tx.get(b"e").unwrap(), None);
    let all = tx.get_range(b"a", b"z", 0, false).unwrap();
    assert_eq!(
        all,
        vec![
            (b"a".to_vec(), b"1".to_vec()),
            (b"b".to_vec(), b"2".to_vec()),
            (b"c".to_vec(), b"33".to_vec())
        ]
    );
    assert_eq!(keys(&tx.get_range(b"a", b"z", 2, true).unwrap()), vec![&b"c"[..], b"b"]);
    tx.clear_range(b"a", b"c").unwrap();
    assert_eq!(keys(&tx.get_range(b"a", b"z", 0, false).unwrap()), vec![&b"c"[..]]);
    tx.set(b"a", b"again").unwrap();
    assert_eq!(tx.get(b"a").unwrap().as_deref(), Some(&b"again"[..]));
    assert_eq!(keys(&tx.get_range(b"a", b"z", 0, false).unwrap()), vec![&b"a"[..], b"c"]);
    // Others see none of it before commit.
    assert_eq!(get(b, b"b"), None);
    assert_eq!(get(b, b"c").as_deref(), Some(&b"3"[..]));
    tx.commit(false).unwrap();
    assert_eq!(get(b, b"b"), None); // cleared by the range after being set
    assert_eq!(get(b, b"a").as_deref(), Some(&b"again"[..]));
    assert_eq!(get(b, b"e"), None);
}

pub fn atomic_ops(b: &dyn Backend) {
    let mut tx = b.begin().unwrap();
    tx.atomic_add(b"n", 5).unwrap();
    tx.atomic_add(b"n", -2).unwrap();
    assert_eq!(kv::decode_counter(tx.get(b"n").unwrap().as_deref()), 3);
    tx.atomic_max(b"m", 10).unwrap();
    tx.atomic_max(b"m", 7).unwrap();
    tx.commit(false).unwrap();
    assert_eq!(kv::decode_counter(get(b, b"n").as_deref()), 3);
    assert_eq!(kv::decode_counter(get(b, b"m").as_deref()), 10);
    // Two concurrent atomic adds on one key both commit: atomics add no read conflict.
    let mut t1 = b.begin().unwrap();
    let mut t2 = b.begin().unwrap();
    t1.atomic_add(b"n", 10).unwrap();
    t2.atomic_add(b"n", 100).unwrap();
    t1.atomic_max(b"m", 20).unwrap();
    t2.atomic_max(b"m", 15).unwrap();
    t1.commit(false).unwrap();
    t2.commit(false).unwrap();
    assert_eq!(kv::decode_counter(get(b, b"n").as_deref()), 113);
    assert_eq!(kv::decode_counter(get(b, b"m").as_deref()), 20);
    // A set after an atomic replaces it; an atomic after a set applies to it.
    let mut tx = b.begin().unwrap();
    tx.set(b"n", &1u64.to_le_bytes()).unwrap();
    tx.atomic_add(b"n", 1).unwrap();
    tx.commit(false).unwrap();
    assert_eq!(kv::decode_counter(get(b, b"n").as_deref()), 2);
}

pub fn snapshot_isolation(b: &dyn Backend) {
    set(b, &[(b"k", b"old"), (b"r1", b"x")]);
    let mut reader = b.begin().unwrap();
    assert_eq!(reader.get(b"k").unwrap().as_deref(), Some(&b"old"[..]));
    set(b, &[(b"k", b"new"), (b"r2", b"y")]);
    let mut tx = b.begin().unwrap();
    tx.clear(b"r1").unwrap();
    tx.commit(false).unwrap();
    // The reader keeps its snapshot for points and ranges.
    assert_eq!(reader.get(b"k").unwrap().as_deref(), Some(&b"old"[..]));
    assert_eq!(keys(&reader.get_range(b"r", b"s", 0, false).unwrap()), vec![&b"r1"[..]]);
    // A read-only transaction always commits.
    reader.commit(false).unwrap();
}

pub fn expect_conflict(r: txvfs::Result<()>) {
    let e = r.expect_err("commit should conflict");
    assert_eq!(e.kind(), ErrorKind::Conflict, "{e}");
    assert!(e.is_retryable());
}

pub fn read_write_conflict(b: &dyn Backend) {
    set(b, &[(b"k", b"1")]);
    let mut t1 = b.begin().unwrap();
    t1.get(b"k").unwrap();
    t1.set(b"out", b"derived from k").unwrap();
    set(b, &[(b"k", b"2")]);
    expect_conflict(t1.commit(false));
    // The failed commit changed nothing.
    assert_eq!(get(b, b"out"), None);
    // Blind writes (no read) do not conflict; the later commit wins.
    let mut t1 = b.begin().unwrap();
    let mut t2 = b.begin().unwrap();
    t1.set(b"w", b"1").unwrap();
    t2.set(b"w", b"2").unwrap();
    t2.commit(false).unwrap();
    t1.commit(false).unwrap();
    assert_eq!(get(b, b"w").as_deref(), Some(&b"1"[..]));
}

pub fn write_skew(b: &dyn Backend) {
    // Two doctors on call: each reads both and takes one off. Serializable forbids both.
    set(b, &[(b"alice", b"on"), (b"bob", b"on")]);
    let mut t1 = b.begin().unwrap();
    let mut t2 = b.begin().unwrap();
    for t in [&mut t1, &mut t2] {
        assert!(t.get(b"alice").unwrap().is_some() && t.get(b"bob").unwrap().is_some());
    }
    t1.set(b"alice", b"off").unwrap();
    t2.set(b"bob", b"off").unwrap();
    t1.commit(false).unwrap();
    expect_conflict(t2.commit(false));
    assert_eq!(get(b, b"bob").as_deref(), Some(&b"on"[..]));
}

pub fn phantoms(b: &dyn Backend) {
    // A range read conflicts with a later insert into the range (readdir vs create).
    set(b, &[(b"dir/a", b"1")]);
    let mut t1 = b.begin().unwrap();
    assert_eq!(t1.get_range(b"dir/", b"dir0", 0, false).unwrap().len(), 1);
    t1.set(b"count", b"1").unwrap();
    set(b, &[(b"dir/b", b"2")]);
    expect_conflict(t1.commit(false));
    // ... and with a clear_range that removes keys from it.
    let mut t1 = b.begin().unwrap();
    t1.get_range(b"dir/", b"dir0", 0, false).unwrap();
    t1.set(b"count", b"2").unwrap();
    let mut t2 = b.begin().unwrap();
    t2.clear_range(b"dir/", b"dir0").unwrap();
    t2.commit(false).unwrap();
    expect_conflict(t1.commit(false));
    // A limited range read covers only what it returned: inserting past it is no conflict.
    set(b, &[(b"p/1", b""), (b"p/2", b""), (b"p/3", b"")]);
    let mut t1 = b.begin().unwrap();
    assert_eq!(t1.get_range(b"p/", b"p0", 2, false).unwrap().len(), 2);
    t1.set(b"q", b"").unwrap();
    set(b, &[(b"p/4", b"")]);
    t1.commit(false).unwrap();
    // Reverse limited reads cover from the last key returned to the end.
    let mut t1 = b.begin().unwrap();
    assert_eq!(keys(&t1.get_range(b"p/", b"p0", 1, true).unwrap()), vec![&b"p/4"[..]]);
    t1.set(b"q", b"").unwrap();
    set(b, &[(b"p/0", b"")]);
    t1.commit(false).unwrap();
    let mut t1 = b.begin().unwrap();
    t1.get_range(b"p/", b"p0", 1, true).unwrap();
    t1.set(b"q", b"").unwrap();
    set(b, &[(b"p/5", b"")]);
    expect_conflict(t1.commit(false));
    // A conflict range added without reading: a write into it conflicts, one beside it not.
    for (key, conflicts) in [(&b"r/9"[..], true), (&b"r0"[..], false)] {
        let mut t1 = b.begin().unwrap();
        t1.get(b"q").unwrap(); // fixes the snapshot where the read version is taken lazily
        t1.add_read_conflict_range(b"r/", b"r0").unwrap();
        t1.set(b"q", b"").unwrap();
        set(b, &[(key, b"")]);
        if conflicts {
            expect_conflict(t1.commit(false));
        } else {
            t1.commit(false).unwrap();
        }
    }
    // visit_range lends what get_range returns (this transaction's writes merged in) and
    // covers the whole range for conflicts.
    set(b, &[(b"v/1", b"a"), (b"v/2", b"b"), (b"v/3", b"c")]);
    let visited = |t: &mut Box<dyn kv::Txn>| {
        let mut seen = Vec::new();
        t.visit_range(b"v/", b"v0", &mut |k, v| seen.push((k.to_vec(), v.to_vec()))).unwrap();
        seen
    };
    let mut t1 = b.begin().unwrap();
    assert_eq!(visited(&mut t1), t1.get_range(b"v/", b"v0", 0, false).unwrap());
    t1.set(b"v/25", b"mine").unwrap();
    t1.clear(b"v/3").unwrap();
    let mine = visited(&mut t1);
    assert_eq!(keys(&mine), vec![&b"v/1"[..], b"v/2", b"v/25"]);
    let mut t2 = b.begin().unwrap();
    visited(&mut t2);
    t2.set(b"q", b"").unwrap();
    set(b, &[(b"v/9", b"")]);
    expect_conflict(t2.commit(false));
}

pub fn snapshot_reads_add_no_conflict(b: &dyn Backend) {
    set(b, &[(b"hot", b"1"), (b"r/1", b"")]);
    let mut t1 = b.begin().unwrap();
    t1.snapshot_get(b"hot").unwrap();
    t1.snapshot_get_range(b"r/", b"r0", 0, false).unwrap();
    t1.set(b"mine", b"").unwrap();
    set(b, &[(b"hot", b"2"), (b"r/2", b"")]);
    t1.commit(false).unwrap();
}

/// `snapshot_get_many` reads several keys at the transaction's snapshot, its own writes
/// included, in order, adding no conflict; `note_read` then makes one a read that conflicts.
pub fn batched_snapshot_reads(b: &dyn Backend) {
    set(b, &[(b"m/a", b"1"), (b"m/b", b"2"), (b"m/c", b"3")]);
    let mut t1 = b.begin().unwrap();
    t1.set(b"m/b", b"mine").unwrap();
    t1.clear(b"m/c").unwrap();
    let keys: [&[u8]; 4] = [b"m/c", b"m/a", b"m/none", b"m/b"];
    let mut got = vec![None; 4];
    t1.snapshot_get_many(&keys, &mut |i, v| got[i] = Some(v.map(<[u8]>::to_vec))).unwrap();
    let want: Vec<Option<Option<Vec<u8>>>> =
        vec![Some(None), Some(Some(b"1".to_vec())), Some(None), Some(Some(b"mine".to_vec()))];
    assert_eq!(got, want);
    set(b, &[(b"m/a", b"changed")]);
    t1.commit(false).unwrap(); // snapshot reads: no conflict
    let mut t2 = b.begin().unwrap();
    let mut a = None;
    t2.snapshot_get_many(&[b"m/a"], &mut |_, v| a = v.map(<[u8]>::to_vec)).unwrap();
    assert_eq!(a.as_deref(), Some(&b"changed"[..]));
    t2.note_read(b"m/a", a.as_deref()).unwrap();
    t2.set(b"w", b"").unwrap();
    set(b, &[(b"m/a", b"again")]);
    assert_eq!(t2.commit(false).unwrap_err().kind(), ErrorKind::Conflict);
}

pub fn rollback_and_drop(b: &dyn Backend) {
    let mut tx = b.begin().unwrap();
    tx.set(b"gone", b"1").unwrap();
    drop(tx);
    assert_eq!(get(b, b"gone"), None);
}

pub fn durable_commit_and_sync(b: &dyn Backend) {
    let mut tx = b.begin().unwrap();
    tx.set(b"d", b"1").unwrap();
    tx.commit(true).unwrap();
    b.sync().unwrap();
    assert_eq!(get(b, b"d").as_deref(), Some(&b"1"[..]));
}

pub fn concurrent_counters(b: Arc<dyn Backend>) {
    // Read-modify-write increments from threads, retried on conflict: none may be lost.
    set(&*b, &[(b"ctr", &0u64.to_le_bytes())]);
    let threads: Vec<_> = (0..4)
        .map(|_| {
            let b = b.clone();
            std::thread::spawn(move || {
                for _ in 0..50 {
                    loop {
                        let mut tx = b.begin().unwrap();
                        let v = kv::decode_counter(tx.get(b"ctr").unwrap().as_deref());
                        tx.set(b"ctr", &(v + 1).to_le_bytes()).unwrap();
                        match tx.commit(false) {
                            Ok(()) => break,
                            Err(e) if e.is_retryable() => continue,
                            Err(e) => panic!("{e}"),
                        }
                    }
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    assert_eq!(kv::decode_counter(get(&*b, b"ctr").as_deref()), 200);
}

pub fn commits_become_visible_in_order(b: Arc<dyn Backend>) {
    // One thread commits `a = i`, then `b = i`; other threads commit meanwhile, so commits
    // are applied in groups. A snapshot that sees `b = i` must see `a >= i`: a transaction
    // never sees a commit without every commit that finished before it began.
    set(&*b, &[(b"a", &0u64.to_le_bytes()), (b"b", &0u64.to_le_bytes())]);
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let noise: Vec<_> = (0..2u8)
        .map(|t| {
            let (b, stop) = (b.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut i = 0u64;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    set(&*b, &[(&[b'n', t], &i.to_le_bytes())]);
                    i += 1;
                }
            })
        })
        .collect();
    let reader = {
        let (b, stop) = (b.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut checks = 0;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) || checks == 0 {
                let mut tx = b.begin().unwrap();
                let bv = kv::decode_counter(tx.get(b"b").unwrap().as_deref());
                let av = kv::decode_counter(tx.get(b"a").unwrap().as_deref());
                assert!(av >= bv, "snapshot sees b = {bv} but a = {av}");
                checks += 1;
            }
        })
    };
    for i in 1..=300u64 {
        set(&*b, &[(b"a", &i.to_le_bytes())]);
        set(&*b, &[(b"b", &i.to_le_bytes())]);
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    for t in noise {
        t.join().unwrap();
    }
    reader.join().unwrap();
}

pub fn reads_after_commits_see_them(b: &dyn Backend) {
    // Reads repeated across transactions (what a read cache answers) follow every commit:
    // point writes, deletes, range clears, atomics, and a commit that lands between a
    // snapshot's read and a new transaction's.
    set(b, &[(b"c1", b"1"), (b"c2", b"2"), (b"c3", &3u64.to_le_bytes())]);
    for _ in 0..3 {
        assert_eq!(get(b, b"c1").as_deref(), Some(&b"1"[..]));
        assert_eq!(get(b, b"nothing"), None);
    }
    set(b, &[(b"c1", b"10"), (b"nothing", b"now")]);
    assert_eq!(get(b, b"c1").as_deref(), Some(&b"10"[..]));
    assert_eq!(get(b, b"nothing").as_deref(), Some(&b"now"[..]));
    let mut tx = b.begin().unwrap();
    tx.clear_range(b"c1", b"c3").unwrap();
    tx.atomic_add(b"c3", 1).unwrap();
    tx.commit(false).unwrap();
    assert_eq!(get(b, b"c1"), None);
    assert_eq!(get(b, b"c2"), None);
    assert_eq!(kv::decode_counter(get(b, b"c3").as_deref()), 4);
    // An old snapshot reads a key a later commit changed: what it read is its snapshot's
    // value and must not be what later transactions get.
    let mut old = b.begin().unwrap();
    // A first read fixes the snapshot (a client of a shared store and FoundationDB take their
    // read version at the first read, not at begin).
    assert_eq!(old.get(b"c2").unwrap(), None);
    set(b, &[(b"late", b"new")]);
    assert_eq!(old.get(b"late").unwrap(), None);
    assert_eq!(old.get(b"late").unwrap(), None);
    assert_eq!(get(b, b"late").as_deref(), Some(&b"new"[..]));
    drop(old);
    for _ in 0..3 {
        assert_eq!(get(b, b"late").as_deref(), Some(&b"new"[..]));
    }
    // A read that the cache answers still enters the read-conflict set.
    let mut t1 = b.begin().unwrap();
    assert_eq!(t1.get(b"late").unwrap().as_deref(), Some(&b"new"[..]));
    t1.set(b"out", b"1").unwrap();
    set(b, &[(b"late", b"newer")]);
    expect_conflict(t1.commit(false));
    if let Some(CacheStats { hits, .. }) = b.read_cache().and_then(|c| c.stats()) {
        assert!(
            hits > 0,
            "the read cache answered nothing: the cached configuration tests nothing"
        );
    }
}
