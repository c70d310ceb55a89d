//! Real processes sharing one `fdb:` store on a live FoundationDB cluster (each other process
//! is an `agent`, this test binary started again): flocks and byte-range locks between them,
//! a blocking waiter woken by the other process's unlock, a file unlinked here while open
//! there, and the lease expiry that frees all of it once the other process is SIGKILLed; and
//! the disk cache of one process, whose hits never go stale when another process changes the
//! files (both with a disk cache, so that both write blocks as chunks).
//!
//! All `#[ignore]`d: `tests/foundationdb/run` starts a cluster and runs them with `--ignored`
//! and `TXVFS_FDB_CLUSTER_FILE` set.

mod agent;

use std::sync::mpsc;
use std::time::Duration;
use txvfs::kv;
use txvfs::{ErrorKind, FileSystem, FlockOp, OpenOptions, Options, RangeLockKind, Store};

/// Far beyond the 10 s leases: a wait that has not ended by then never ends.
const HUNG: Duration = Duration::from_secs(90);

/// A fresh store in the cluster named by `TXVFS_FDB_CLUSTER_FILE`.
fn fdb_uri(name: &str) -> String {
    let cluster = std::env::var("TXVFS_FDB_CLUSTER_FILE")
        .expect("the FoundationDB tests need a cluster: run tests/foundationdb/run");
    let run =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos();
    format!("fdb:{cluster}?prefix=proc-{name}-{run}")
}

/// Waits up to `limit` for `cond`, polling.
fn eventually(limit: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let end = std::time::Instant::now() + limit;
    while std::time::Instant::now() < end {
        if cond() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    cond()
}

/// Runs `f` on a thread of its own and waits for its answer; fails naming `what` if it never
/// comes (a wait that does not end).
fn waits_for<T: Send + 'static>(what: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (send, recv) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = send.send(f());
    });
    recv.recv_timeout(HUNG).unwrap_or_else(|_| panic!("{what}: the wait never ended"))
}

#[test]
fn agent_main() {
    agent::agent_main();
}

#[test]
#[ignore = "needs a FoundationDB cluster: tests/foundationdb/run"]
fn locks_and_open_files_between_processes_and_their_lease_expiry_foundationdb() {
    let uri = fdb_uri("locks");
    let store = Store::open(&uri).unwrap();
    let raw = kv::open_raw(&uri).unwrap();
    let inode_exists = |ino: u64| {
        let key = [&[b'I'][..], &ino.to_be_bytes()].concat();
        raw.begin().unwrap().get(&key).unwrap().is_some()
    };
    store.write_file("/f", b"locked").unwrap();
    store.write_file("/r", &[0u8; 100]).unwrap();
    store.write_file("/g", b"held open").unwrap();
    let ino = store.stat("/g").unwrap().ino;
    let read = OpenOptions::new().read(true);
    let rw = OpenOptions::new().read(true).write(true);
    let mut other = agent::Agent::start(&uri, "agent_main");
    assert_eq!(other.role, "peer");

    // flock: held there, refused here; a waiter here is woken by the unlock there.
    assert_eq!(other.ask("flock /f"), "ok");
    let f = store.open("/f", &read).unwrap();
    assert_eq!(f.flock(FlockOp::Shared, false).unwrap_err().kind(), ErrorKind::WouldBlock);
    let (send, got) = mpsc::channel();
    let waiter = std::thread::spawn(move || {
        let r = f.flock(FlockOp::Exclusive, true);
        let _ = send.send(());
        r.map(|()| f)
    });
    assert!(got.recv_timeout(Duration::from_millis(300)).is_err(), "must wait while held");
    assert_eq!(other.ask("unlock"), "ok");
    got.recv_timeout(HUNG).expect("the waiter was not woken by the other process's unlock");
    let f = waiter.join().unwrap().unwrap();
    assert!(other.ask("flock /f").starts_with("error"), "held here now");
    f.close().unwrap();

    // Byte ranges: a write lock there refuses an overlapping read lock here, not a disjoint one.
    assert_eq!(other.ask("lockrange /r 10 10"), "ok");
    let r = store.open("/r", &rw).unwrap();
    let refused = r.lock_range(RangeLockKind::Read, 15, 1, false).unwrap_err();
    assert_eq!(refused.kind(), ErrorKind::WouldBlock);
    r.lock_range(RangeLockKind::Write, 20, 0, false).unwrap(); // [20, EOF)
    let seen = r.test_lock(false, 0, 0).unwrap().expect("the other process's range is visible");
    assert_eq!((seen.kind, seen.start, seen.len), (RangeLockKind::Write, 10, 10));

    // A file unlinked here while open there stays readable there.
    assert_eq!(other.ask("open /g"), "ok");
    store.unlink("/g").unwrap();
    assert_eq!(other.ask("hread"), "held open");
    assert!(inode_exists(ino), "kept while the other process has it open");

    // The other process dies holding a flock, a byte range and the unlinked file: once its
    // leases lapse (10 s), blocking waiters here get the locks and the file is freed.
    assert_eq!(other.ask("flock /f"), "ok");
    other.kill();
    let f = store.open("/f", &read).unwrap();
    let f = waits_for("flock after the holder was killed", move || {
        f.flock(FlockOp::Exclusive, true).map(|()| f)
    })
    .unwrap();
    let r = waits_for("byte-range lock after the holder was killed", move || {
        r.lock_range(RangeLockKind::Write, 10, 10, true).map(|()| r)
    })
    .unwrap();
    assert!(eventually(HUNG, || !inode_exists(ino)), "the dead process's file was not freed");
    drop((f, r));
    drop(store);
    let report = txvfs::fsck::check_uri(&uri, false, &mut |_| {}).unwrap();
    assert!(report.is_clean(), "{report:?}");
}

#[test]
#[ignore = "needs a FoundationDB cluster: tests/foundationdb/run"]
fn disk_cache_hits_never_go_stale_when_another_process_writes_foundationdb() {
    let uri = fdb_uri("disk-cache");
    let dir = tempfile::tempdir().unwrap();
    let options = Options {
        disk_cache: Some(dir.path().to_path_buf()),
        disk_cache_size: 64 << 20,
        ..Options::default()
    };
    let open = || Store::open_with(&uri, options.clone()).unwrap();
    let cached = open();
    // The other process has a cache of its own, so that it too writes blocks as chunks (only
    // chunks are cached: they never change; docs/disk-cache.md).
    let other_dir = tempfile::tempdir().unwrap();
    let other_uri = format!("{uri}&disk_cache={}", other_dir.path().display());
    let mut other = agent::Agent::start(&other_uri, "agent_main");
    let len = 300_000; // several 64 KiB blocks
    let file = |c: &str, n: usize| c.repeat(n).into_bytes();

    assert_eq!(other.ask(&format!("fill /f a {len}")), "ok");
    assert_eq!(cached.read_file("/f").unwrap(), file("a", len));
    let hit = |s: &Store| {
        eventually(Duration::from_secs(20), || {
            assert_eq!(s.read_file("/f").unwrap().len(), s.stat("/f").unwrap().size as usize);
            s.disk_cache_stats().unwrap().hits > 0
        })
    };
    assert!(hit(&cached), "no read was a hit: {:?}", cached.disk_cache_stats());

    // Every change of the other process is seen at once: overwritten, shorter, gone.
    assert_eq!(other.ask(&format!("fill /f b {len}")), "ok");
    assert_eq!(cached.read_file("/f").unwrap(), file("b", len));
    assert_eq!(other.ask("fill /f c 100000"), "ok");
    assert_eq!(cached.read_file("/f").unwrap(), file("c", 100_000));
    assert_eq!(other.ask("unlink /f"), "ok");
    assert_eq!(cached.read_file("/f").unwrap_err().kind(), ErrorKind::NotFound);

    // Changed while this process was away: the reopened cache serves no stale entry.
    assert_eq!(other.ask(&format!("fill /f d {len}")), "ok");
    assert_eq!(cached.read_file("/f").unwrap(), file("d", len));
    assert!(hit(&cached));
    drop(cached);
    assert_eq!(other.ask(&format!("fill /f e {len}")), "ok");
    let cached = open();
    assert_eq!(cached.read_file("/f").unwrap(), file("e", len));
    assert!(hit(&cached), "no hit after the reopen: {:?}", cached.disk_cache_stats());
    assert_eq!(cached.read_file("/f").unwrap(), file("e", len));
}
