//! A snapshot taken in the process that owns a shared store must not lock the other processes
//! out when that process drops its `Store` and keeps the snapshot: the store goes on being
//! served while the snapshot lives, and is handed over once it is dropped.
#![cfg(feature = "rocksdb")]

mod agent;

use agent::Agent;
use txvfs::{FileSystem, Store};

#[test]
fn agent_main() {
    agent::agent_main();
}

const AGENT: &str = "agent_main";

#[test]
fn an_owner_snapshot_outliving_its_store_does_not_lock_others_out() {
    let d = tempfile::tempdir().unwrap();
    let uri = d.path().to_str().unwrap().to_string();
    let store = Store::open(&uri).unwrap();
    store.write_file("/a", b"1").unwrap();
    let snap = store.snapshot().unwrap();
    drop(store);
    let mut other = Agent::try_start(&format!("{uri}?owner_timeout=5"), AGENT)
        .expect("another process can open the store while the snapshot lives");
    assert_eq!(other.role, "client");
    assert_eq!(other.ask("write /b 2"), "ok");
    assert_eq!(snap.read_file("/a").unwrap(), b"1");
    assert!(!snap.exists("/b").unwrap(), "the snapshot sees a later commit");
    drop(snap);
    // The snapshot gone, the store is handed over: the other process takes it and goes on.
    assert_eq!(other.ask("write /c 3"), "ok");
    assert_eq!(other.ask("read /b"), "2");
}
