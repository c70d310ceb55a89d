//! The change feed hands out only durable commits (issue 31): before `poll`, `wait` or the
//! iterator return records, or move the cursor past them, the watcher asks the backend to make
//! them durable ([`txvfs::kv::Backend::sync_through`]) once; a sync that fails fails the call,
//! and nothing is handed out. Counted through a [`FaultyBackend`] (no timing): over memory,
//! and over RocksDB, where the sync is the WAL's fsync.

use std::sync::Arc;
use std::time::Duration;
use txvfs::kv::{Backend, FaultPlan, FaultyBackend, MemoryBackend, RocksBackend};
use txvfs::{ErrorKind, FileSystem, Options, Store, WatchOptions};

fn stores() -> Vec<(Store, Arc<FaultPlan>, Option<tempfile::TempDir>)> {
    let d = tempfile::tempdir().unwrap();
    let rocks: Arc<dyn Backend> = RocksBackend::open(&d.path().join("s")).unwrap();
    let mem: Arc<dyn Backend> = Arc::new(MemoryBackend::new(txvfs::kv::Limits::UNLIMITED));
    let mut out = Vec::new();
    for (inner, dir) in [(mem, None), (rocks, Some(d))] {
        let (faulty, plan) = FaultyBackend::new(inner);
        // Auto-commit writes (write_file) are not durable until the next sync.
        let store = Store::with_backend(faulty, Options::default(), None).unwrap();
        store.set_change_feed(true).unwrap();
        out.push((store, plan, dir));
    }
    out
}

#[test]
fn a_poll_syncs_once_before_it_hands_out_records_and_never_when_it_has_none() {
    for (store, plan, _dir) in stores() {
        let mut w = store.watch(WatchOptions::default()).unwrap();
        let at = plan.syncs();
        assert!(w.poll().unwrap().is_empty());
        assert_eq!(plan.syncs(), at, "nothing read, no sync");

        store.write_file("/a", b"1").unwrap(); // not durable: an auto-commit
        assert_eq!(plan.syncs(), at, "the write did not sync");
        let got = w.poll().unwrap();
        assert_eq!(got.len(), 1);
        assert_eq!(plan.syncs(), at + 1, "one sync before the batch was returned");

        for i in 0..3 {
            store.write_file(format!("/b{i}"), b"2").unwrap();
        }
        assert_eq!(w.poll().unwrap().len(), 3);
        assert_eq!(plan.syncs(), at + 2, "one sync per poll, not per record");
        assert!(w.poll().unwrap().is_empty());
        assert_eq!(plan.syncs(), at + 2);
    }
}

#[test]
fn a_failed_sync_fails_the_poll_and_hands_out_nothing() {
    for (store, plan, _dir) in stores() {
        let mut w = store.watch(WatchOptions::default()).unwrap();
        let before = w.cursor();
        store.write_file("/a", b"1").unwrap();
        plan.fail_syncs(1);
        let e = w.poll().expect_err("the sync failed: nothing may be delivered");
        assert_eq!(e.kind(), ErrorKind::Backend, "{e}");
        assert_eq!(w.cursor(), before, "the cursor did not move past what is not durable");
        // The next poll syncs again, then delivers the batch, once.
        let got = w.poll().unwrap();
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].changes[0].path, b"/a");
        assert_eq!(w.cursor(), got[0].cursor);
        assert!(w.poll().unwrap().is_empty());

        // wait and the iterator likewise.
        store.write_file("/b", b"2").unwrap();
        plan.fail_syncs(1);
        w.wait(Duration::from_secs(5)).expect_err("wait: the sync failed");
        assert_eq!(w.cursor(), got[0].cursor);
        assert_eq!(w.wait(Duration::from_secs(5)).unwrap()[0].changes[0].path, b"/b");
        store.write_file("/c", b"3").unwrap();
        plan.fail_syncs(1);
        assert!(w.next().unwrap().is_err(), "the iterator: the sync failed");
        assert_eq!(w.next().unwrap().unwrap().changes[0].path, b"/c");

        // A new watcher starts at a durable cursor: watch() fails with its sync.
        store.write_file("/d", b"4").unwrap();
        plan.fail_syncs(1);
        assert!(store.watch(WatchOptions::default()).is_err(), "watch: the sync failed");
    }
}

#[test]
fn records_passed_by_the_filters_are_synced_before_the_cursor_moves_past_them() {
    for (store, plan, _dir) in stores() {
        let only_x = WatchOptions { prefixes: vec![b"/x".to_vec()], ..Default::default() };
        let mut w = store.watch(only_x).unwrap();
        let before = w.cursor();
        store.write_file("/y", b"1").unwrap();
        plan.fail_syncs(1);
        w.wait(Duration::ZERO).expect_err("the sync failed");
        assert_eq!(w.cursor(), before);
        let at = plan.syncs();
        assert!(w.wait(Duration::ZERO).unwrap().is_empty());
        assert_eq!(plan.syncs(), at + 1);
        assert!(w.cursor() > before, "past the durable, filtered record");
    }
}
