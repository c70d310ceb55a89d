//! A client's transaction left idle past the owner's limit (`IDLE_TXN`, 30 s; here 300 ms
//! through `TXVFS_IDLE_TXN_MS` in the owner's environment) ends that transaction only: its
//! next request gets a clear, retryable error (TooOld, saying it was idle), another process
//! keeps committing meanwhile, and the idle client's next transaction works on the same
//! owner, without the failover a lost connection would start.
#![cfg(feature = "rocksdb")]

mod agent;

use agent::Agent;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use txvfs::kv::{self, SharedBackend};

#[test]
fn agent_main() {
    agent::agent_main();
}

const AGENT: &str = "agent_main";

#[test]
fn an_idle_client_transaction_ends_only_that_transaction() {
    // Read by this process's server (the owner): a short limit for the test.
    std::env::set_var("TXVFS_IDLE_TXN_MS", "300");
    let d = tempfile::tempdir().unwrap();
    let uri = d.path().to_str().unwrap().to_string();
    let owner = kv::open(&uri).unwrap();
    let canon = d.path().canonicalize().unwrap();
    assert!(SharedBackend::open(&canon, false).unwrap().is_owner());

    // Another client commits all along.
    let stop = Arc::new(AtomicBool::new(false));
    let committed = Arc::new(AtomicU64::new(0));
    let mut committer = Agent::start(&uri, AGENT);
    assert_eq!(committer.role, "client");
    let worker = {
        let (stop, committed) = (stop.clone(), committed.clone());
        std::thread::spawn(move || {
            let mut i = 0u64;
            while !stop.load(Ordering::SeqCst) {
                assert_eq!(committer.ask(&format!("set c{i} {i}")), "ok");
                i += 1;
                committed.store(i, Ordering::SeqCst);
            }
        })
    };

    let mut idle = Agent::start(&uri, AGENT);
    assert_eq!(idle.role, "client");
    let pid_before = std::fs::read_to_string(d.path().join("txvfs.owner")).unwrap();
    assert_eq!(idle.ask("recoveries"), "0");
    // A key never read before: the read reaches the owner, which then holds the transaction.
    assert_eq!(idle.ask("hold never-read"), "none");
    let before = committed.load(Ordering::SeqCst);
    // Well past the limit, while the committer goes on.
    std::thread::sleep(Duration::from_millis(1500));
    let t = Instant::now();
    while committed.load(Ordering::SeqCst) < before + 3 {
        assert!(t.elapsed() < Duration::from_secs(20), "the other client stopped committing");
        std::thread::sleep(Duration::from_millis(2));
    }
    let answer = idle.ask("hcommit x 1");
    assert!(answer.starts_with("error TooOld"), "the idle transaction's commit: {answer}");
    assert!(answer.contains("idle"), "the error says why: {answer}");
    assert!(!answer.contains("exited"), "not a lost owner: {answer}");

    // The same client's next transactions work, on the same owner.
    assert_eq!(idle.ask("set y 2"), "ok");
    assert_eq!(idle.ask("hold y"), "2");
    assert_eq!(idle.ask("hcommit z 3"), "ok");
    assert_eq!(idle.ask("recoveries"), "0", "the idle client looked for a new owner");
    stop.store(true, Ordering::SeqCst);
    worker.join().unwrap();
    let mut t = owner.begin().unwrap();
    assert_eq!(t.get(b"z").unwrap().as_deref(), Some(&b"3"[..]));
    assert_eq!(t.get(b"x").unwrap(), None, "the idle transaction's write is not there");
    assert_eq!(std::fs::read_to_string(d.path().join("txvfs.owner")).unwrap(), pid_before);
}
