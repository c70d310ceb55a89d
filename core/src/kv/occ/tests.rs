//! Unit tests of the resolver: range arithmetic, refresh, and a failed fsync.

use super::ranges::{coalesce, ranges_contain, ranges_overlap};
use super::*;
use crate::error::{Error, ErrorKind};
use crate::kv::{Limits, Txn};
use parking_lot::Mutex;
use std::collections::BTreeMap;
use std::ops::Bound;

/// An engine over one map whose fsync fails once `fail_sync` is set.
#[derive(Default)]
struct FlakyDisk {
    map: Mutex<BTreeMap<Vec<u8>, Vec<u8>>>,
    fail_sync: std::sync::atomic::AtomicBool,
    /// While true, `apply` waits (an engine write that takes long); `in_apply` says one does.
    hold_apply: Mutex<bool>,
    released: parking_lot::Condvar,
    in_apply: std::sync::atomic::AtomicBool,
    /// How many fsyncs were asked for.
    syncs: std::sync::atomic::AtomicUsize,
    /// Milliseconds every `apply` takes.
    apply_ms: std::sync::atomic::AtomicU64,
}

impl Engine for FlakyDisk {
    type Snapshot = BTreeMap<Vec<u8>, Vec<u8>>;
    fn snapshot(&self, _version: u64) -> Self::Snapshot {
        self.map.lock().clone()
    }
    fn get(&self, snap: &Self::Snapshot, key: &[u8]) -> Result<Option<Vec<u8>>> {
        Ok(snap.get(key).cloned())
    }
    fn get_latest(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        Ok(self.map.lock().get(key).cloned())
    }
    fn scan(
        &self,
        snap: &Self::Snapshot,
        s: &[u8],
        e: &[u8],
        _rev: bool,
        visit: &mut dyn FnMut(&[u8], &[u8]) -> bool,
    ) -> Result<()> {
        for (k, v) in snap.range::<[u8], _>((Bound::Included(s), Bound::Excluded(e))) {
            if !visit(k, v) {
                break;
            }
        }
        Ok(())
    }
    fn apply(&self, batch: &[Mutation], _version: u64, _oldest: u64) -> Result<()> {
        {
            let mut hold = self.hold_apply.lock();
            self.in_apply.store(true, std::sync::atomic::Ordering::SeqCst);
            while *hold {
                self.released.wait(&mut hold);
            }
            self.in_apply.store(false, std::sync::atomic::Ordering::SeqCst);
        }
        let ms = self.apply_ms.load(std::sync::atomic::Ordering::SeqCst);
        std::thread::sleep(std::time::Duration::from_millis(ms));
        let mut map = self.map.lock();
        for m in batch {
            match m {
                Mutation::Set(k, v) => drop(map.insert(k.clone(), v.clone())),
                Mutation::Clear(k) => drop(map.remove(k)),
                Mutation::ClearRange(..) => unimplemented!(),
            }
        }
        Ok(())
    }
    fn sync(&self) -> Result<()> {
        self.syncs.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        if self.fail_sync.load(std::sync::atomic::Ordering::SeqCst) {
            return Err(Error::new(ErrorKind::Backend, "fsync: Input/output error"));
        }
        Ok(())
    }
}

#[test]
fn refresh_moves_to_the_latest_snapshot_unless_a_read_changed() {
    let store = OccStore::new(FlakyDisk::default(), Limits::UNLIMITED);
    let mut t = store.begin().unwrap();
    assert_eq!(t.get(b"a").unwrap(), None);
    t.set(b"mine", b"1").unwrap();
    let mut other = store.begin().unwrap();
    other.set(b"b", b"2").unwrap();
    other.commit(false).unwrap();
    assert_eq!(t.get(b"b").unwrap(), None, "its snapshot");
    // `b` was read before the refresh, and changed after the snapshot: a conflict.
    assert_eq!(t.refresh().unwrap_err().kind(), ErrorKind::Conflict);

    let mut t = store.begin().unwrap();
    assert_eq!(t.get(b"a").unwrap(), None);
    t.set(b"mine", b"1").unwrap();
    let mut other = store.begin().unwrap();
    other.set(b"c", b"3").unwrap();
    other.commit(false).unwrap();
    t.refresh().unwrap();
    assert_eq!(t.get(b"c").unwrap(), Some(b"3".to_vec()), "the fresh snapshot");
    assert_eq!(t.get(b"mine").unwrap(), Some(b"1".to_vec()), "its own writes stay");
    let mut late = store.begin().unwrap();
    late.set(b"a", b"x").unwrap();
    late.commit(false).unwrap();
    assert_eq!(t.commit(false).unwrap_err().kind(), ErrorKind::Conflict, "reads still checked");
}

#[test]
fn a_failed_fsync_is_an_unknown_outcome_and_stops_the_store() {
    let store = OccStore::new(FlakyDisk::default(), Limits::UNLIMITED);
    let mut tx = store.begin().unwrap();
    tx.set(b"a", b"1").unwrap();
    tx.commit(true).unwrap();
    store.engine.fail_sync.store(true, std::sync::atomic::Ordering::SeqCst);
    let mut tx = store.begin().unwrap();
    tx.set(b"b", b"2").unwrap();
    let e = tx.commit(true).unwrap_err();
    // Never "failed, nothing changed": the batch was applied before the fsync failed.
    assert_eq!(e.kind(), ErrorKind::CommitUnknown, "{e}");
    assert!(!e.is_retryable());
    // Even once the disk answers again, nothing written since may be trusted: the store
    // refuses transactions and syncs until it is reopened.
    store.engine.fail_sync.store(false, std::sync::atomic::Ordering::SeqCst);
    let e = store.begin().err().expect("refused after a failed fsync");
    assert!(e.message().contains("failed fsync"), "{e}");
    assert!(store.sync_all().is_err());
}

#[test]
fn a_durable_commit_waits_for_those_in_flight_and_shares_their_fsync() {
    use std::sync::atomic::Ordering::SeqCst;
    let store = OccStore::new(FlakyDisk::default(), Limits::UNLIMITED);
    // Waits are bounded by half the last fsync and by the maximum: both made long here.
    let long = || store.last_sync_ns.store(60_000_000_000, SeqCst);
    store.max_gather_ns.store(30_000_000_000, SeqCst);
    long();
    // A lone committer never waits.
    let mut tx = store.begin().unwrap();
    tx.set(b"alone", b"1").unwrap();
    tx.commit(true).unwrap();
    assert_eq!(store.gather_waits.load(SeqCst), 0, "a lone durable commit waited");
    assert_eq!(store.engine.syncs.load(SeqCst), 1);
    // Two committers: the first is held in its engine write until the second was resolved
    // (and waits behind it); each write then takes 50 ms. The first to reach its fsync waits
    // for the other, so one fsync covers both (without the wait, the first synced alone).
    // Both begin first: a transaction cannot begin while a commit is being applied.
    store.engine.apply_ms.store(50, SeqCst);
    long();
    let mut txs: Vec<_> = (0..2u8)
        .map(|i| {
            let mut tx = store.begin().unwrap();
            tx.set(&[b'k', i], b"v").unwrap();
            tx
        })
        .collect();
    *store.engine.hold_apply.lock() = true;
    let commit = |tx: Box<dyn Txn>| std::thread::spawn(move || tx.commit(true).unwrap());
    let wait_for = |what: &dyn Fn() -> bool| {
        let start = std::time::Instant::now();
        while !what() {
            assert!(start.elapsed() < std::time::Duration::from_secs(30), "stuck");
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
    };
    let first = commit(txs.remove(0));
    wait_for(&|| store.engine.in_apply.load(SeqCst));
    let second = commit(txs.remove(0));
    wait_for(&|| store.durable_in_flight.load(SeqCst) == 2);
    *store.engine.hold_apply.lock() = false;
    store.engine.released.notify_all();
    first.join().unwrap();
    second.join().unwrap();
    assert_eq!(store.engine.syncs.load(SeqCst), 2, "the two commits did not share an fsync");
    assert_eq!(store.gather_waits.load(SeqCst), 1);
}

#[test]
fn range_overlap_is_half_open() {
    let r = coalesce(vec![(b"b".to_vec(), b"d".to_vec()), (b"c".to_vec(), b"e".to_vec())]);
    assert_eq!(r, vec![(b"b".to_vec(), b"e".to_vec())]);
    assert!(ranges_contain(&r, b"b"));
    assert!(ranges_contain(&r, b"dz"));
    assert!(!ranges_contain(&r, b"e"));
    assert!(!ranges_contain(&r, b"a"));
    assert!(ranges_overlap(&r, b"a", b"c"));
    assert!(!ranges_overlap(&r, b"a", b"b"));
    assert!(!ranges_overlap(&r, b"e", b"f"));
}

/// The resolver's critical section holds no engine write: while one commit's batch is being
/// written (held here), another commit is checked and answered (a conflict, here).
#[test]
fn the_resolver_answers_while_an_engine_write_is_in_progress() {
    use std::sync::atomic::Ordering::SeqCst;
    let store = OccStore::new(FlakyDisk::default(), Limits::UNLIMITED);
    let mut b = store.begin().unwrap();
    assert_eq!(b.get(b"x").unwrap(), None);
    b.set(b"y", b"1").unwrap();
    *store.engine.hold_apply.lock() = true;
    let s = store.clone();
    let a = std::thread::spawn(move || {
        let mut a = s.begin().unwrap();
        a.set(b"x", b"1").unwrap();
        a.commit(false)
    });
    while !store.engine.in_apply.load(SeqCst) {
        std::thread::yield_now();
    }
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || tx.send(b.commit(false).map_err(|e| e.kind())));
    let answer = rx.recv_timeout(std::time::Duration::from_secs(10));
    *store.engine.hold_apply.lock() = false;
    store.engine.released.notify_all();
    a.join().unwrap().unwrap();
    let answer = answer.expect("the resolver waited for another commit's engine write");
    assert_eq!(answer, Err(ErrorKind::Conflict));
    let mut t = store.begin().unwrap();
    assert_eq!(t.get(b"x").unwrap().as_deref(), Some(&b"1"[..]));
    assert_eq!(t.get(b"y").unwrap(), None);
}

/// Commits applied as a group by one committer each get their own outcome, in order, and
/// become visible only together with every earlier one.
#[test]
fn commits_waiting_behind_a_slow_write_are_applied_in_order() {
    use std::sync::atomic::Ordering::SeqCst;
    let store = OccStore::new(FlakyDisk::default(), Limits::UNLIMITED);
    // Begun first: a snapshot waits while a commit is being applied.
    let mut txns: Vec<_> = (1..=4u8)
        .map(|i| {
            let mut t = store.begin().unwrap();
            t.atomic_add(b"count", 1).unwrap();
            t.set(&[b'k', b'0' + i], &[b'0' + i]).unwrap();
            t
        })
        .collect();
    *store.engine.hold_apply.lock() = true;
    let commit = |t: Box<dyn Txn>| std::thread::spawn(move || t.commit(false));
    let first = commit(txns.remove(0));
    while !store.engine.in_apply.load(SeqCst) {
        std::thread::yield_now();
    }
    let later: Vec<_> = txns.into_iter().map(commit).collect();
    // Wait until the three later commits passed the resolver and wait in the pipeline.
    while store.resolver.lock().assigned < 4 {
        std::thread::yield_now();
    }
    assert_eq!(store.visible_now.load(SeqCst), 0, "nothing visible while the first write is held");
    *store.engine.hold_apply.lock() = false;
    store.engine.released.notify_all();
    first.join().unwrap().unwrap();
    for t in later {
        t.join().unwrap().unwrap();
    }
    let mut t = store.begin().unwrap();
    assert_eq!(
        super::super::decode_counter(t.get(b"count").unwrap().as_deref()),
        4,
        "atomics resolved in order"
    );
    assert_eq!(t.get(b"k4").unwrap().as_deref(), Some(&b"4"[..]));
}

/// The versionstamp counter is persisted once per block of stamps, not by every stamped commit
/// (a key per commit was two fifths of the change feed's instructions), and a store opened
/// again on the same engine (a restart, a crash, a new owner) gives stamps above every earlier
/// one, whether or not the earlier owner used up its block.
#[test]
fn stamps_persist_their_counter_once_per_block_and_grow_across_reopens() {
    use super::pipeline::{STAMP_BLOCK, STAMP_KEY};
    let stamp = |store: &std::sync::Arc<OccStore<FlakyDisk>>, n: u64| {
        for _ in 0..n {
            let mut t = store.begin().unwrap();
            t.set(b"k", b"v").unwrap();
            t.set_versionstamped_key(b"W", b"r").unwrap();
            t.commit(false).unwrap();
        }
    };
    let counters = |store: &OccStore<FlakyDisk>| -> Vec<u64> {
        let map = store.engine.map.lock();
        let keys = map.range::<[u8], _>((Bound::Included(&b"W"[..]), Bound::Excluded(&b"X"[..])));
        keys.map(|(k, _)| u64::from_be_bytes(k[1..9].try_into().unwrap())).collect()
    };
    let persisted = |store: &OccStore<FlakyDisk>| {
        super::super::decode_counter(store.engine.map.lock().get(STAMP_KEY).map(|v| &v[..]))
    };
    let store = OccStore::new(FlakyDisk::default(), Limits::UNLIMITED);
    stamp(&store, 3);
    assert_eq!(counters(&store), vec![1, 2, 3]);
    assert_eq!(persisted(&store), STAMP_BLOCK, "one bound for the whole block");
    stamp(&store, STAMP_BLOCK);
    assert_eq!(persisted(&store), 2 * STAMP_BLOCK, "raised by the first stamp past it");
    assert_eq!(*counters(&store).last().unwrap(), STAMP_BLOCK + 3);

    // Opened again on what the engine holds: above every stamp, and past the unused ones.
    let disk =
        FlakyDisk { map: Mutex::new(store.engine.map.lock().clone()), ..FlakyDisk::default() };
    drop(store);
    let store = OccStore::new(disk, Limits::UNLIMITED);
    stamp(&store, 2);
    let c = counters(&store);
    assert_eq!(c.len() as u64, STAMP_BLOCK + 5);
    assert!(c.windows(2).all(|w| w[0] < w[1]), "stamps grow in commit order");
    assert_eq!(c[c.len() - 2..], [2 * STAMP_BLOCK + 1, 2 * STAMP_BLOCK + 2]);
    assert_eq!(persisted(&store), 3 * STAMP_BLOCK);
}

/// A commit that raises the persisted stamp bound makes it durable before its stamp is
/// visible, even when the commit itself is not durable: a power cut that loses commits a
/// consumer already saw cannot make the next owner give their stamps again (it would skip the
/// new commits that got them). Commits within the block ask for no fsync.
#[test]
fn a_new_stamp_block_is_durable_before_its_first_stamp_is_visible() {
    use std::sync::atomic::Ordering::SeqCst;
    let store = OccStore::new(FlakyDisk::default(), Limits::UNLIMITED);
    let stamped = || {
        let mut t = store.begin().unwrap();
        t.set_versionstamped_key(b"W", b"r").unwrap();
        t.commit(false).unwrap();
    };
    stamped();
    assert_eq!(store.engine.syncs.load(SeqCst), 1, "the first block's bound synced");
    stamped();
    stamped();
    assert_eq!(store.engine.syncs.load(SeqCst), 1, "no fsync within the block");
}

/// `sync_through` (what the change feed calls before it hands out records) fsyncs only when
/// the version read is past the synced mark: a durable commit's records cost the reader no
/// fsync, a non-durable one's cost one, which also covers every commit visible by then.
#[test]
fn sync_through_fsyncs_only_past_the_synced_mark() {
    use std::sync::atomic::Ordering::SeqCst;
    let store = OccStore::new(FlakyDisk::default(), Limits::UNLIMITED);
    let commit = |durable: bool| {
        let mut t = store.begin().unwrap();
        t.set(b"k", b"v").unwrap();
        t.commit_versioned(durable).unwrap().unwrap()
    };
    let v1 = commit(true);
    let after_durable = store.engine.syncs.load(SeqCst);
    store.sync_through(Some(v1)).unwrap();
    assert_eq!(store.engine.syncs.load(SeqCst), after_durable, "already durable: no fsync");
    let v2 = commit(false);
    let v3 = commit(false);
    assert_eq!(store.engine.syncs.load(SeqCst), after_durable, "non-durable commits: no fsync");
    store.sync_through(Some(v2)).unwrap();
    assert_eq!(store.engine.syncs.load(SeqCst), after_durable + 1, "one fsync for v2");
    store.sync_through(Some(v3)).unwrap();
    store.sync_through(None).unwrap();
    assert_eq!(store.engine.syncs.load(SeqCst), after_durable + 1, "it covered v3 too");
    store.engine.fail_sync.store(true, SeqCst);
    let v4 = commit(false);
    assert!(store.sync_through(Some(v4)).is_err(), "a failed fsync fails the reader");
}
