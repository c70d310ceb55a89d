//! A client's change feed is made durable by its owner (`SharedBackend::sync_through`): before
//! a watcher in a client process hands out records, it asks the store's owner, which fsyncs
//! its log once if what the client read is not durable yet, and skips the fsync when it is.
//! Counted in the owner process (`txvfs::kv::wal_syncs`), not timed.
#![cfg(feature = "rocksdb")]

mod agent;

use agent::Agent;
use txvfs::{FileSystem, Store, WatchOptions};

#[test]
fn agent_main() {
    agent::agent_main();
}

fn owner_syncs(owner: &mut Agent) -> u64 {
    let n = owner.ask("wal-syncs");
    n.parse().unwrap_or_else(|_| panic!("wal-syncs answered {n}"))
}

#[test]
fn a_clients_watcher_syncs_through_its_owner() {
    let d = tempfile::tempdir().unwrap();
    let uri = d.path().to_str().unwrap().to_string();
    let mut owner = Agent::start(&uri, "agent_main");
    assert_eq!(owner.role, "owner");
    let store = Store::open(&uri).unwrap();
    store.set_change_feed(true).unwrap();
    let mut w = store.watch(WatchOptions::default()).unwrap();
    assert!(w.poll().unwrap().is_empty());

    // An auto-commit write of the owner is visible, and not durable: no fsync yet.
    let before = owner_syncs(&mut owner);
    assert_eq!(owner.ask("write /a 1"), "ok");
    assert_eq!(owner_syncs(&mut owner), before, "an auto-commit write fsynced");
    // The client's watcher reads it, and has the owner fsync once before it hands it out.
    let got = w.poll().unwrap();
    assert_eq!(got.len(), 1, "{got:?}");
    assert_eq!(owner_syncs(&mut owner), before + 1, "the client's poll did not sync at the owner");
    // Nothing read: nothing asked.
    assert!(w.poll().unwrap().is_empty());
    assert_eq!(owner_syncs(&mut owner), before + 1, "a poll that read nothing synced");

    // A durable commit of the client is fsynced when it commits; the poll that reads it
    // finds it durable, and the owner skips the fsync.
    store.transact(|tx| tx.write_file("/b", b"2")).unwrap();
    let after_commit = owner_syncs(&mut owner);
    assert!(after_commit > before + 1, "the durable commit did not fsync");
    let got = w.poll().unwrap();
    assert_eq!(got.len(), 1, "{got:?}");
    assert_eq!(owner_syncs(&mut owner), after_commit, "the owner fsynced what was durable");
}
