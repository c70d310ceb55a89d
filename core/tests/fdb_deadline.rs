//! No call waits for ever on FoundationDB: with every `fdbserver` of the test cluster stopped
//! (SIGSTOP), a read and a write give a clear, retryable `Busy` error once the store's
//! deadline (`timeout=SECONDS` in the `fdb:` URI) has passed, and a commit that was in flight
//! gives `CommitUnknown` (its receipt cannot be read while the cluster is away); after SIGCONT
//! the same store works again, and fsck finds it clean.
//!
//! A call that does not return is detected, not timed: each call runs on a thread of its own
//! and the test fails if no answer comes long after the deadline (a generous bound, so that a
//! slow machine never fails it; a call that hangs never answers at all).
//!
//! `#[ignore]`d: `tests/foundationdb/run` runs it with `TXVFS_FDB_CLUSTER_FILE` and
//! `TXVFS_FDB_CLUSTER_DIR` (the directory of `tests/foundationdb/cluster`, whose `pause` and
//! `resume` stop and continue the servers). A file of its own: while the cluster is stopped,
//! no other test may run against it.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::mpsc;
use std::time::Duration;
use txvfs::{ErrorKind, FileSystem, Store};

/// The store's deadline in this test, in seconds.
const DEADLINE: u64 = 2;

/// How long the test waits for an answer before it calls the call hung: far beyond the
/// deadline (a read gets one deadline, a commit at most two).
const HUNG: Duration = Duration::from_secs(60);

fn cluster_dir() -> PathBuf {
    std::env::var_os("TXVFS_FDB_CLUSTER_DIR").map(PathBuf::from).expect(
        "this test stops the cluster's servers: run it through tests/foundationdb/run \
         (TXVFS_FDB_CLUSTER_DIR names the cluster of tests/foundationdb/cluster)",
    )
}

/// `tests/foundationdb/cluster ACTION DIR`.
fn cluster(action: &str, dir: &Path) {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/foundationdb/cluster");
    let st = Command::new(script).arg(action).arg(dir).status().unwrap();
    assert!(st.success(), "cluster {action}: {st}");
}

/// Stops every server; continues them when dropped (also when the test fails).
struct Paused(PathBuf);

impl Paused {
    fn new(dir: &Path) -> Paused {
        cluster("pause", dir);
        Paused(dir.to_path_buf())
    }
}

impl Drop for Paused {
    fn drop(&mut self) {
        cluster("resume", &self.0);
    }
}

/// Runs `f` on a thread of its own; its answer, or a failure naming `what` if none comes
/// within [`HUNG`] (the thread is left behind, blocked).
fn answer<T: Send + 'static>(what: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (send, recv) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = send.send(f());
    });
    recv.recv_timeout(HUNG)
        .unwrap_or_else(|_| panic!("{what} did not return while the cluster was stopped: it hangs"))
}

/// Retries `f` while the cluster recovers from the pause (`Busy` or a retryable error).
fn once_recovered<T>(mut f: impl FnMut() -> txvfs::Result<T>) -> T {
    let mut last = None;
    for _ in 0..30 {
        match f() {
            Ok(v) => return v,
            Err(e) if e.kind() == ErrorKind::Busy || e.is_retryable() => last = Some(e),
            Err(e) => panic!("after the cluster resumed: {e}"),
        }
    }
    panic!("the cluster did not come back: {last:?}");
}

#[test]
#[ignore = "needs a FoundationDB cluster: tests/foundationdb/run"]
fn calls_on_a_stopped_cluster_fail_within_the_deadline_then_work() {
    let dir = cluster_dir();
    let cluster_file = std::env::var("TXVFS_FDB_CLUSTER_FILE").unwrap();
    let run =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos();
    let uri = format!("fdb:{cluster_file}?prefix=deadline-{run}&timeout={DEADLINE}");
    let store = Store::open(&uri).unwrap();
    store.write_file("/f", b"before").unwrap();

    {
        let _paused = Paused::new(&dir);
        let s = store.clone();
        let e = answer("stat", move || s.stat("/f")).unwrap_err();
        eprintln!("stat on the stopped cluster: {e}");
        assert_eq!(e.kind(), ErrorKind::Busy, "{e}");
        assert!(e.to_string().contains("did not answer within 2 s"), "{e}");
        let s = store.clone();
        let e = answer("write_file", move || s.write_file("/g", b"x")).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Busy, "{e}");
        let s = store.clone();
        let e = answer("read_file", move || s.read_file("/f")).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Busy, "{e}");
    }
    // A commit in flight when the cluster stops: its outcome cannot be known until it is back.
    let tx = store.begin().unwrap();
    tx.write_file("/h", b"in flight").unwrap();
    {
        let _paused = Paused::new(&dir);
        let e = answer("commit", move || tx.commit()).unwrap_err();
        eprintln!("a commit in flight on the stopped cluster: {e}");
        assert_eq!(e.kind(), ErrorKind::CommitUnknown, "{e}");
    }

    assert_eq!(once_recovered(|| store.read_file("/f")), b"before");
    once_recovered(|| store.write_file("/g", b"after"));
    assert_eq!(store.read_file("/g").unwrap(), b"after");
    drop(store);
    let report = txvfs::fsck::check_uri(&uri, false, &mut |_| {}).unwrap();
    assert!(report.is_clean(), "{report:?}");
}
