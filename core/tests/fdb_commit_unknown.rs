//! `commit_unknown_result` (FoundationDB's 1021: the commit may or may not have been applied)
//! on a live cluster: the outcome is resolved through the commit's receipt (kv/fdb/receipts.rs),
//! so `Store::transact` never applies a transaction twice and never leaves it unknown.
//!
//! FoundationDB gives no way to provoke a 1021 on demand, so the error is injected in this
//! process (`FdbBackend::inject_commit_unknown`, feature `testing`): the commit is sent and
//! applied and then answered with 1021, or answered with 1021 without being sent. The cluster
//! does the rest (the receipt, the resolution's read and its conflict).
//!
//! `#[ignore]`d: `tests/foundationdb/run` starts a cluster and runs it with `--ignored` and
//! `TXVFS_FDB_CLUSTER_FILE` set. A file of its own, so that the process-wide fault touches no
//! other test.

use txvfs::kv::{CommitFault, FdbBackend};
use txvfs::{FileSystem, Store};

fn fdb_uri(name: &str) -> String {
    let cluster = std::env::var("TXVFS_FDB_CLUSTER_FILE")
        .expect("the FoundationDB tests need a cluster: run tests/foundationdb/run");
    let run =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos();
    format!("fdb:{cluster}?prefix=unknown-{name}-{run}")
}

/// One increment of the counter file `/n` in a `Store::transact`; returns how many times the
/// closure ran.
fn increment(store: &Store) -> txvfs::Result<u32> {
    let mut runs = 0;
    store.transact(|tx| {
        runs += 1;
        let n: u64 = String::from_utf8_lossy(&tx.read_file("/n")?).parse().unwrap();
        tx.write_file("/n", (n + 1).to_string().as_bytes())
    })?;
    Ok(runs)
}

fn counter(store: &Store) -> String {
    String::from_utf8(store.read_file("/n").unwrap()).unwrap()
}

#[test]
#[ignore = "needs a FoundationDB cluster: tests/foundationdb/run"]
fn a_commit_unknown_result_is_resolved_and_never_applied_twice() {
    let uri = fdb_uri("resolve");
    let store = Store::open(&uri).unwrap();
    store.write_file("/n", b"0").unwrap();

    // Applied, then answered 1021: the receipt is there, so the commit succeeded, once.
    FdbBackend::inject_commit_unknown(&[CommitFault::Applied]);
    assert_eq!(increment(&store).unwrap(), 1, "applied: not run again");
    assert_eq!(counter(&store), "1");

    // Not applied, answered 1021: the resolution marks the receipt aborted, so the retry
    // is safe and applies it once.
    FdbBackend::inject_commit_unknown(&[CommitFault::NotApplied]);
    assert_eq!(increment(&store).unwrap(), 2, "not applied: run again");
    assert_eq!(counter(&store), "2");

    // Still in flight while resolved, committed after: the receipt written by the resolution
    // makes that late commit fail, so the retry applies the increment once, not twice.
    FdbBackend::inject_commit_unknown(&[CommitFault::Late]);
    assert_eq!(increment(&store).unwrap(), 2, "resolved as not applied: run again");
    assert_eq!(counter(&store), "3", "the late commit must not apply");

    // Several in one call.
    FdbBackend::inject_commit_unknown(&[CommitFault::NotApplied, CommitFault::Late]);
    assert_eq!(increment(&store).unwrap(), 3);
    assert_eq!(counter(&store), "4");
    let report = txvfs::fsck::check_uri(&uri, false, &mut |_| {}).unwrap();
    assert!(report.is_clean(), "{report:?}");
}

/// FoundationDB's other answers to a commit, each as the cluster would give it (the commit not
/// applied): the other maybe-committed error (1039 `cluster_version_changed`) and the store's
/// deadline passing in flight (1031 `transaction_timed_out`) are resolved through the receipt
/// like a 1021, then retried once; the retryable ones that say "not committed" (1020
/// `not_committed`, 1037 `process_behind`, 1213 `tag_throttled`) are retried at once. None is
/// returned to the caller, and each increment is applied once.
#[test]
#[ignore = "needs a FoundationDB cluster: tests/foundationdb/run"]
fn other_uncertain_and_retryable_commit_errors_are_retried_and_applied_once() {
    let uri = fdb_uri("codes");
    let store = Store::open(&uri).unwrap();
    store.write_file("/n", b"0").unwrap();
    for (i, code) in [1039, 1031, 1020, 1037, 1213].into_iter().enumerate() {
        FdbBackend::inject_commit_unknown(&[CommitFault::Code(code)]);
        let runs = increment(&store).unwrap_or_else(|e| panic!("error {code}: {e}"));
        assert_eq!(runs, 2, "error {code}: retried once");
        assert_eq!(counter(&store), (i + 1).to_string(), "error {code}: applied once");
    }
    let report = txvfs::fsck::check_uri(&uri, false, &mut |_| {}).unwrap();
    assert!(report.is_clean(), "{report:?}");
}
