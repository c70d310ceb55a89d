//! What the processes of a store share in memory (the change ring that keeps clients' caches
//! exact, the bell that wakes watchers) is beyond the reach of any other process of the
//! store's user: truncating or scribbling on files in the store directory (`txvfs.ring`,
//! `txvfs.bell`, where they lived in shared file mappings before issue 37) makes no process
//! fault (SIGBUS) and no client serve a stale value as right. The owner and the client are
//! agents; this test plays the misbehaving process.
#![cfg(feature = "rocksdb")]

mod agent;

use agent::Agent;
use std::os::unix::fs::FileExt;
use std::path::Path;

#[test]
fn agent_main() {
    agent::agent_main();
}

const AGENT: &str = "agent_main";

/// An owner and a client that caches reads, both using the bell; the client has read `/f`.
fn owner_and_client(uri: &str) -> (Agent, Agent) {
    let mut a = Agent::start(uri, AGENT);
    assert_eq!(a.role, "owner");
    let mut b = Agent::start(uri, AGENT);
    assert_eq!(b.role, "client");
    assert_eq!(a.ask("ring"), "ok");
    assert_eq!(b.ask("ring"), "ok");
    assert_eq!(b.ask("write /f a"), "ok");
    assert_eq!(b.ask("read /f"), "a");
    (a, b)
}

/// Every regular file of the store directory whose name is `txvfs.ring` or `txvfs.bell`.
fn shared_files(dir: &Path) -> Vec<std::fs::File> {
    ["txvfs.ring", "txvfs.bell"]
        .iter()
        .filter_map(|n| std::fs::OpenOptions::new().read(true).write(true).open(dir.join(n)).ok())
        .collect()
}

#[test]
fn truncating_files_in_the_store_directory_faults_no_process() {
    let d = tempfile::tempdir().unwrap();
    let uri = d.path().to_str().unwrap().to_string();
    let (mut a, mut b) = owner_and_client(&uri);
    let files = shared_files(d.path());
    eprintln!("{} shared-memory files in the store directory", files.len());
    for f in &files {
        f.set_len(0).unwrap();
    }
    // The owner rings the bell and records a commit in the ring; the client reads through
    // its cache and rings: none of them faults, and the client reads the new value.
    assert_eq!(a.ask("ring"), "ok");
    assert_eq!(a.ask("write /f b"), "ok");
    assert_eq!(b.ask("read /f"), "b");
    assert_eq!(b.ask("ring"), "ok");
    assert_eq!(b.ask("write /f c"), "ok");
    assert_eq!(a.ask("read /f"), "c");
}

#[test]
fn scribbling_on_files_in_the_store_directory_serves_no_stale_read() {
    let d = tempfile::tempdir().unwrap();
    let uri = d.path().to_str().unwrap().to_string();
    let (mut a, mut b) = owner_and_client(&uri);
    // Whatever a ring file's header says before the owner's next commit is written back
    // after it: a reader of that file would take it that nothing changed.
    let files = shared_files(d.path());
    let saved: Vec<Vec<u8>> = files
        .iter()
        .map(|f| {
            let mut h = vec![0u8; 64];
            let n = f.read_at(&mut h, 0).unwrap();
            h.truncate(n);
            h
        })
        .collect();
    assert_eq!(a.ask("write /f b"), "ok");
    for (f, h) in files.iter().zip(&saved) {
        f.write_all_at(h, 0).unwrap();
    }
    assert_eq!(b.ask("read /f"), "b", "the client served a stale value");
    // Garbage all over them changes nothing either.
    for f in &files {
        let len = f.metadata().unwrap().len().min(1 << 20);
        let junk: Vec<u8> = (0..len).map(|i| (i * 7919 % 251) as u8).collect();
        f.write_all_at(&junk, 0).unwrap();
    }
    assert_eq!(a.ask("write /f c"), "ok");
    assert_eq!(b.ask("read /f"), "c");
    assert_eq!(b.ask("ring"), "ok");
    assert_eq!(a.ask("ring"), "ok");
}
