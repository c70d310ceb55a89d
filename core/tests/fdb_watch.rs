//! The change feed's foundations on a live FoundationDB cluster: versionstamped keys (FoundationDB's
//! `SET_VERSIONSTAMPED_KEY`) sort in commit order across clients, and a waiter is woken by a
//! FoundationDB watch when another client commits, without polling. The feed's own cases run
//! on the cluster from `core/tests/watch.rs` (`*_foundationdb`).
//!
//! All `#[ignore]`d: `tests/foundationdb/run` starts a cluster and runs them with `--ignored`
//! and `TXVFS_FDB_CLUSTER_FILE` set.

use std::sync::mpsc;
use std::sync::Arc;
use std::time::{Duration, Instant};
use txvfs::kv::{self, Backend};
use txvfs::{ErrorKind, FileSystem, Store, WatchOptions};

/// A fresh store name in the cluster named by `TXVFS_FDB_CLUSTER_FILE`.
fn fdb_uri(name: &str) -> String {
    let cluster = std::env::var("TXVFS_FDB_CLUSTER_FILE")
        .expect("the FoundationDB tests need a cluster: run tests/foundationdb/run");
    let run =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos();
    format!("fdb:{cluster}?prefix=fdbwatch-{name}-{run}")
}

const PREFIX: &[u8] = b"Wtest";

fn stamped(b: &dyn Backend, value: &[u8]) {
    let mut tx = b.begin().unwrap();
    tx.set_versionstamped_key(PREFIX, value).unwrap();
    tx.commit(false).unwrap();
}

fn records(b: &dyn Backend) -> Vec<(Vec<u8>, Vec<u8>)> {
    b.begin().unwrap().get_range(PREFIX, b"Wtesu", 0, false).unwrap()
}

#[test]
#[ignore = "needs a FoundationDB cluster: tests/foundationdb/run"]
fn versionstamped_keys_sort_in_commit_order_foundationdb() {
    let uri = fdb_uri("order");
    // Two clients (two database handles), committing in turn.
    let (a, b) = (kv::open_raw(&uri).unwrap(), kv::open_raw(&uri).unwrap());
    for i in 0u32..20 {
        let who: &dyn Backend = if i % 3 == 0 { &*b } else { &*a };
        stamped(who, &i.to_be_bytes());
    }
    let got = records(&*a);
    assert_eq!(got.len(), 20);
    assert!(got.iter().all(|(k, _)| k.len() == PREFIX.len() + 10));
    let order: Vec<u32> =
        got.iter().map(|(_, v)| u32::from_be_bytes(v[..].try_into().unwrap())).collect();
    assert_eq!(order, (0..20).collect::<Vec<_>>());
    // The stamp has no index within a transaction: a second key under one prefix is refused,
    // under another prefix it is fine.
    let mut tx = a.begin().unwrap();
    tx.set_versionstamped_key(PREFIX, b"one").unwrap();
    let e = tx.set_versionstamped_key(PREFIX, b"two").unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Invalid, "{e}");
    tx.set_versionstamped_key(b"Wother", b"three").unwrap();
    tx.commit(false).unwrap();
    assert_eq!(records(&*a).len(), 21);
}

#[test]
#[ignore = "needs a FoundationDB cluster: tests/foundationdb/run"]
fn a_watch_wakes_a_waiter_when_another_client_commits_foundationdb() {
    let uri = fdb_uri("wake");
    let (waiter, writer) = (kv::open_raw(&uri).unwrap(), kv::open_raw(&uri).unwrap());
    stamped(&*writer, b"first");
    let newest = records(&*waiter).last().unwrap().0[PREFIX.len()..].to_vec();
    let arm = |after: &[u8]| {
        let (tx, rx) = mpsc::channel::<Instant>();
        let w = waiter
            .wake_on_stamped(PREFIX, after, Box::new(move || tx.send(Instant::now()).unwrap()))
            .unwrap()
            .expect("FoundationDB wakes waiters");
        (w, rx)
    };
    // Behind the newest stamp: woken at once.
    let (_w, rx) = arm(&[0; 10]);
    rx.recv_timeout(Duration::from_secs(5)).expect("not woken for a stamp already there");
    // At the newest stamp: nothing until another client commits one.
    let (w, rx) = arm(&newest);
    assert!(rx.recv_timeout(Duration::from_millis(300)).is_err(), "woken without a commit");
    let t0 = Instant::now();
    stamped(&*writer, b"second");
    let committed = Instant::now();
    let woke = rx.recv_timeout(Duration::from_secs(10)).expect("the watch did not fire");
    eprintln!(
        "fdb watch: commit took {:?}, woken {:?} after it returned",
        committed - t0,
        woke.saturating_duration_since(committed)
    );
    drop(w);
    // A wake-up dropped before its commit is never called.
    let newest = records(&*waiter).last().unwrap().0[PREFIX.len()..].to_vec();
    let (w, rx) = arm(&newest);
    drop(w);
    stamped(&*writer, b"third");
    assert!(rx.recv_timeout(Duration::from_millis(500)).is_err(), "a dropped wake-up ran");
}

#[test]
#[ignore = "needs a FoundationDB cluster: tests/foundationdb/run"]
fn a_commit_through_another_store_wakes_a_waiting_watcher_foundationdb() {
    let uri = fdb_uri("store");
    // Two opens of one URI in one process are two clients: no shared in-process state, so
    // only FoundationDB can wake the watcher.
    let reader = Store::open(&uri).unwrap();
    reader.set_change_feed(true).unwrap();
    let writer = Arc::new(Store::open(&uri).unwrap());
    let mut w = reader.watch(WatchOptions::default()).unwrap();
    let mut latencies = Vec::new();
    for i in 0..5 {
        let wr = writer.clone();
        let t = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(200));
            wr.write_file(format!("/f{i}"), b"x").unwrap();
            Instant::now()
        });
        let got = w.wait(Duration::from_secs(30)).unwrap();
        let woke = Instant::now();
        let committed = t.join().unwrap();
        assert_eq!(got.len(), 1, "{got:?}");
        assert_eq!(got[0].changes[0].path, format!("/f{i}").as_bytes());
        latencies.push(woke.saturating_duration_since(committed));
    }
    eprintln!("fdb watcher woken after another store's commit returned: {latencies:?}");
}

/// A watch waits past the store's deadline (`timeout=1` here): the deadline bounds waits on
/// the cluster, not a waiter's wait for other clients' commits. The watch is neither cancelled
/// nor fired by it, and a commit after it still wakes the waiter.
#[test]
#[ignore = "needs a FoundationDB cluster: tests/foundationdb/run"]
fn a_watch_outlives_the_store_deadline_foundationdb() {
    let uri = format!("{}&timeout=1", fdb_uri("deadline"));
    let (waiter, writer) = (kv::open_raw(&uri).unwrap(), kv::open_raw(&uri).unwrap());
    stamped(&*writer, b"first");
    let newest = records(&*waiter).last().unwrap().0[PREFIX.len()..].to_vec();
    let (tx, rx) = mpsc::channel::<()>();
    let _w = waiter
        .wake_on_stamped(PREFIX, &newest, Box::new(move || tx.send(()).unwrap()))
        .unwrap()
        .expect("FoundationDB wakes waiters");
    // Well past the 1 s deadline of the watch's transaction.
    assert!(rx.recv_timeout(Duration::from_millis(2_500)).is_err(), "woken without a commit");
    stamped(&*writer, b"second");
    rx.recv_timeout(Duration::from_secs(10)).expect("the watch did not fire after the deadline");
}
