//! A store whose directory cannot hold a socket file is still shared: its owner listens on a
//! Linux abstract socket named in the owner file (`kv/shared/endpoint.rs`). Chosen here with
//! `TXVFS_SOCKET=abstract` (the power-cut test gets it from its FUSE file system): clients
//! find the owner, a failover moves the store to a new name, and the old name is never
//! taken for the new owner.
#![cfg(feature = "rocksdb")]

mod agent;

use agent::Agent;
use std::path::Path;
use txvfs::kv;

#[test]
fn agent_main() {
    agent::agent_main();
}

const AGENT: &str = "agent_main";

/// The owner file's words: pid, mode, and the socket name after `@`, if any.
fn owner_file(dir: &Path) -> (u32, String) {
    let text = std::fs::read_to_string(dir.join("txvfs.owner")).unwrap();
    let words: Vec<&str> = text.split_whitespace().collect();
    assert_eq!(words.get(1), Some(&"shared"), "owner file {text:?}");
    let name = words.get(2).and_then(|w| w.strip_prefix('@')).unwrap_or_else(|| {
        panic!("owner file {text:?} names no abstract socket");
    });
    (words[0].parse().unwrap(), name.to_string())
}

#[test]
fn clients_reach_the_owner_on_an_abstract_socket_and_across_a_failover() {
    // Inherited by the agents: every owner of this test listens on an abstract socket.
    std::env::set_var("TXVFS_SOCKET", "abstract");
    let d = tempfile::tempdir().unwrap();
    let uri = d.path().to_str().unwrap().to_string();
    let mut first = Agent::start(&uri, AGENT);
    assert_eq!(first.role, "owner");
    let (pid, name) = owner_file(d.path());
    assert_eq!(pid, first.pid());
    assert!(name.starts_with("txvfs/"), "{name}");
    assert!(!d.path().join("txvfs.sock").exists(), "no socket file with an abstract socket");

    let mut second = Agent::start(&uri, AGENT);
    assert_eq!(second.role, "client");
    let mut third = Agent::start(&uri, AGENT);
    assert_eq!(third.role, "client");
    assert_eq!(second.ask("set a 1"), "ok");
    assert_eq!(third.ask("set b 2"), "ok");
    assert_eq!(first.ask("get a"), "1");
    assert_eq!(second.ask("get b"), "2");

    // The owner dies: its name goes with it; a client takes over on a new name, and the other
    // client follows it there.
    first.kill();
    assert_eq!(second.ask("set c 3"), "ok");
    assert_eq!(third.ask("get c"), "3");
    assert_eq!(second.ask("recoveries"), "1", "the client saw one failover");
    let (pid2, name2) = owner_file(d.path());
    assert!(pid2 == second.pid() || pid2 == third.pid(), "owner {pid2}");
    assert_ne!(name2, name, "a new owner listens on a new name");
    assert!(!d.path().join("txvfs.sock").exists());

    // This process is a client too, through the same name.
    let b = kv::open(&uri).unwrap();
    assert_eq!(b.begin().unwrap().get(b"a").unwrap().as_deref(), Some(&b"1"[..]));
}
