//! What the quota tests share: the backends, the recount, and the workload that races at a
//! tree's limit (threads here; processes in `quota_processes.rs`).
#![allow(dead_code)]

use rand::{Rng, SeedableRng};
use std::sync::Arc;
use txvfs::kv::{self, Backend};
use txvfs::{ErrorKind, FileSystem, OpenOptions, QuotaLimits, Store};

/// The race's tree and limits: small, so that the writers hit them often.
pub const TREE: &str = "/race";
pub const LIMITS: QuotaLimits = QuotaLimits { bytes: Some(40_000), inodes: Some(40) };

/// A fresh memory and a fresh RocksDB backend (with the directory that holds it).
pub fn backends() -> Vec<(&'static str, Arc<dyn Backend>, Option<tempfile::TempDir>)> {
    let dir = tempfile::tempdir().unwrap();
    let rocks = kv::open(dir.path().join("db").to_str().unwrap()).unwrap();
    vec![("memory", kv::open("memory:").unwrap(), None), ("rocksdb", rocks, Some(dir))]
}

/// A store under a fresh prefix of the FoundationDB cluster `tests/foundationdb/run` started.
pub fn fdb_store(name: &str) -> (Store, Arc<dyn Backend>) {
    let cluster = std::env::var("TXVFS_FDB_CLUSTER_FILE")
        .expect("the FoundationDB tests need a cluster: run tests/foundationdb/run");
    let run =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos();
    let backend = kv::open(&format!("fdb:{cluster}?prefix=quota-{name}-{run}")).unwrap();
    (Store::with_backend(backend.clone(), txvfs::Options::default(), None).unwrap(), backend)
}

/// fsck recounts every tree's usage from its inodes and compares it with the counters (and
/// checks the rest of the store): it must be clean.
pub fn assert_recount(backend: &dyn Backend) {
    let r = txvfs::fsck::check(backend, false, &mut |_| {}).unwrap();
    assert!(r.is_clean(), "fsck after the quota case:\n{r}");
}

/// `statfs` counts every inode of the store once, in quota trees or not (the store's
/// counters hold what is outside the trees, and statfs adds the outermost trees' usage).
pub fn assert_statfs(s: &Store) {
    let mut seen = std::collections::HashSet::from([s.stat("/").unwrap().ino]);
    let mut pending = vec![String::new()];
    while let Some(dir) = pending.pop() {
        for e in s.readdir(if dir.is_empty() { "/" } else { &dir }, None, 0).unwrap() {
            let p = format!("{dir}/{}", String::from_utf8_lossy(&e.name));
            let st = s.lstat(&p).unwrap();
            if seen.insert(st.ino) && st.is_dir() {
                pending.push(p);
            }
        }
    }
    let files = s.statfs().unwrap().files;
    assert_eq!(files, seen.len() as u64, "statfs's inode count against a walk of /");
}

/// The bytes and inodes under `top` (itself included), found by walking it.
pub fn walk_usage(s: &Store, top: &str) -> (u64, u64) {
    let (mut bytes, mut inodes) = (0, 1);
    let mut pending = vec![top.to_string()];
    while let Some(dir) = pending.pop() {
        for e in s.readdir(&dir, None, 0).unwrap() {
            let p = format!("{dir}/{}", String::from_utf8_lossy(&e.name));
            let st = s.lstat(&p).unwrap();
            inodes += 1;
            if st.is_file() {
                bytes += st.size;
            }
            if st.is_dir() {
                pending.push(p);
            }
        }
    }
    (bytes, inodes)
}

/// Creates the race's tree with its quota.
pub fn make_tree(s: &Store) {
    s.mkdir(TREE, 0o755).unwrap();
    s.set_quota(TREE, LIMITS).unwrap();
}

/// One writer of the race: `ops` random creates, appends, truncates and unlinks of its own
/// files in the tree (named after `who`), seeded with `seed`. Returns how many failed with
/// EDQUOT; `after_each` is called after each acknowledged change.
pub fn writer(s: &Store, who: &str, seed: u64, ops: usize, mut after_each: impl FnMut()) -> u64 {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let mut edquot = 0;
    let mut mine: Vec<String> = Vec::new();
    let mut next = 0;
    for _ in 0..ops {
        let r = match rng.gen_range(0..10) {
            0..=4 => {
                next += 1;
                let p = format!("{TREE}/{who}-{next}");
                let len = rng.gen_range(0..3000);
                let r = s.write_file(&p, &vec![1u8; len]);
                if r.is_ok() {
                    mine.push(p);
                }
                r
            }
            5..=6 if !mine.is_empty() => {
                let p = &mine[rng.gen_range(0..mine.len())];
                let len = rng.gen_range(1..3000);
                s.open(p, &OpenOptions::new().append(true)).and_then(|f| {
                    f.write(&vec![2u8; len])?;
                    f.close()
                })
            }
            7 if !mine.is_empty() => {
                let p = &mine[rng.gen_range(0..mine.len())];
                s.truncate(p, rng.gen_range(0..6000))
            }
            8..=9 if !mine.is_empty() && rng.gen_bool(0.5) => {
                let p = mine.swap_remove(rng.gen_range(0..mine.len()));
                s.unlink(&p)
            }
            _ => continue,
        };
        match r {
            Ok(()) => after_each(),
            Err(e) if e.kind() == ErrorKind::QuotaExceeded => edquot += 1,
            Err(e) => panic!("{who}: {e}"),
        }
    }
    edquot
}

/// Checks the tree after a race: within its limits, its counter equals the walk.
pub fn check_tree(s: &Store) {
    let q = s.quota(TREE).unwrap().unwrap();
    let (bytes, inodes) = walk_usage(s, TREE);
    println!("race: tree holds {bytes} bytes and {inodes} inodes; limits {:?}", q.limits);
    assert!(bytes <= LIMITS.bytes.unwrap(), "over the byte limit: {bytes}");
    assert!(inodes <= LIMITS.inodes.unwrap(), "over the inode limit: {inodes}");
    assert_eq!((q.bytes_used, q.inodes_used), (bytes, inodes), "counter differs from the walk");
}

/// `threads` writers race in one tree at its limit: it is never passed, the counter equals
/// a recount. Seed printed.
pub fn race_threads(s: &Store, threads: usize, seed: u64) {
    println!("race: seed {seed}, {threads} threads");
    make_tree(s);
    let edquot: u64 = std::thread::scope(|sc| {
        let hs: Vec<_> = (0..threads)
            .map(|t| {
                sc.spawn(move || {
                    writer(s, &format!("t{t}"), seed + t as u64, 800, || {
                        // The counter, read at one snapshot, is within the limits after every change
                        // (and equals a recount at the end): an overshoot that a later free would hide
                        // is seen here.
                        let q = s.quota(TREE).unwrap().unwrap();
                        assert!(
                            q.bytes_used <= LIMITS.bytes.unwrap(),
                            "over the byte limit: {q:?}"
                        );
                        assert!(
                            q.inodes_used <= LIMITS.inodes.unwrap(),
                            "over the inode limit: {q:?}"
                        );
                    })
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).sum()
    });
    println!("race: {edquot} EDQUOT");
    check_tree(s);
    assert!(edquot > 0, "the race never reached the limit");
}
