//! Several processes on one RocksDB store (kv/shared): the second opener becomes a client of
//! the owner, sees its commits, conflicts with them, and takes over when the owner dies.
#![cfg(feature = "rocksdb")]

mod agent;

use agent::Agent;
use std::sync::Arc;
use txvfs::kv::{self, Backend, SharedBackend};
use txvfs::ErrorKind;

#[test]
fn agent_main() {
    agent::agent_main();
}

const AGENT: &str = "agent_main";

fn get(b: &dyn Backend, k: &[u8]) -> Option<Vec<u8>> {
    b.begin().unwrap().get(k).unwrap()
}

fn set(b: &dyn Backend, k: &[u8], v: &[u8]) -> txvfs::Result<()> {
    let mut t = b.begin()?;
    t.set(k, v)?;
    t.commit(false)
}

fn is_owner(dir: &std::path::Path) -> bool {
    SharedBackend::open(&dir.canonicalize().unwrap(), false).unwrap().is_owner()
}

#[test]
fn second_process_is_a_client_and_sees_commits_both_ways() {
    let d = tempfile::tempdir().unwrap();
    let uri = d.path().to_str().unwrap().to_string();
    let mut owner = Agent::start(&uri, AGENT);
    assert_eq!(owner.role, "owner");
    assert_eq!(owner.ask("set a 1"), "ok");
    let b = kv::open(&uri).unwrap();
    assert!(!is_owner(d.path()), "the second process must be a client");
    assert!(b.role().is_shared());
    assert_eq!(get(&*b, b"a").as_deref(), Some(&b"1"[..]));
    set(&*b, b"b", b"2").unwrap();
    assert_eq!(owner.ask("get b"), "2");
    b.sync().unwrap();
}

#[test]
fn a_commit_in_another_process_conflicts() {
    let d = tempfile::tempdir().unwrap();
    let uri = d.path().to_str().unwrap().to_string();
    let mut owner = Agent::start(&uri, AGENT);
    assert_eq!(owner.ask("set k 1"), "ok");
    let b = kv::open(&uri).unwrap();
    let mut t = b.begin().unwrap();
    assert_eq!(t.get(b"k").unwrap().as_deref(), Some(&b"1"[..]));
    t.set(b"x", b"mine").unwrap();
    assert_eq!(owner.ask("set k 2"), "ok");
    let e = t.commit(false).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Conflict, "{e}");
    assert_eq!(get(&*b, b"x"), None, "a failed commit changes nothing");
    // And the other way round: the owner's transaction loses to this process's commit.
    let mut client2 = Agent::start(&uri, AGENT);
    assert_eq!(client2.role, "client");
    assert_eq!(client2.ask("set k 3"), "ok");
    assert_eq!(owner.ask("get k"), "3");
}

#[test]
fn owner_killed_a_client_takes_over_with_every_commit() {
    let d = tempfile::tempdir().unwrap();
    let uri = d.path().to_str().unwrap().to_string();
    let mut owner = Agent::start(&uri, AGENT);
    let b = kv::open(&uri).unwrap();
    for i in 0..50 {
        set(&*b, format!("k{i}").as_bytes(), b"v").unwrap();
    }
    assert_eq!(owner.ask("set last yes"), "ok");
    let mut pending = b.begin().unwrap();
    pending.get(b"k0").unwrap();
    owner.kill();
    // The transaction in flight fails with a retryable error ...
    pending.set(b"after", b"kill").unwrap();
    let e = pending.commit(false).unwrap_err();
    assert!(matches!(e.kind(), ErrorKind::Conflict | ErrorKind::CommitUnknown), "{e}");
    // ... and the next one runs on the new owner: this process. Nothing acknowledged is lost.
    assert_eq!(get(&*b, b"last").as_deref(), Some(&b"yes"[..]));
    assert!(is_owner(d.path()));
    for i in 0..50 {
        assert_eq!(get(&*b, format!("k{i}").as_bytes()).as_deref(), Some(&b"v"[..]), "k{i}");
    }
    // A new process now becomes this one's client.
    let mut c = Agent::start(&uri, AGENT);
    assert_eq!(c.role, "client");
    assert_eq!(c.ask("get last"), "yes");
}

#[test]
fn a_sync_after_the_owner_died_goes_to_the_new_owner() {
    // `Store::sync` (fsync of auto-commit writes) in a client whose owner was just killed:
    // it finds the new owner (here: this process) instead of failing with a lost connection.
    let d = tempfile::tempdir().unwrap();
    let uri = d.path().to_str().unwrap().to_string();
    let mut owner = Agent::start(&uri, AGENT);
    let b = kv::open(&uri).unwrap();
    set(&*b, b"before", b"sync").unwrap();
    b.sync().unwrap();
    owner.kill();
    b.sync().unwrap();
    assert!(is_owner(d.path()));
    assert_eq!(get(&*b, b"before").as_deref(), Some(&b"sync"[..]));
}

#[test]
fn exclusive_mode_refuses_sharing_both_ways() {
    let d = tempfile::tempdir().unwrap();
    let path = d.path().to_str().unwrap().to_string();
    {
        let mut owner = Agent::start(&format!("rocksdb:{path}?mode=exclusive"), AGENT);
        assert_eq!(owner.role, "owner");
        let e = kv::open(&path).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Busy);
        assert!(e.message().contains(&format!("exclusive use by process {}", owner.pid())), "{e}");
        owner.kill();
    }
    let mut shared_owner = Agent::start(&path, AGENT);
    let e = kv::open(&format!("rocksdb:{path}?mode=exclusive")).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Busy);
    assert!(
        e.message().contains(&format!(
            "exclusive use asked, but the store is in use by process {}",
            shared_owner.pid()
        )),
        "{e}"
    );
    shared_owner.kill();
    let e = kv::open(&format!("rocksdb:{path}?mode=whatever")).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Invalid);
}

#[test]
fn garbage_on_the_socket_closes_only_that_connection() {
    use std::io::{Read, Write};
    let d = tempfile::tempdir().unwrap();
    let uri = d.path().to_str().unwrap().to_string();
    let b = kv::open(&uri).unwrap();
    set(&*b, b"k", b"v").unwrap();
    let sock = d.path().join(kv::SOCKET_FILE);
    let inputs: Vec<Vec<u8>> = vec![
        b"hello there, this is not a frame".to_vec(),
        vec![0xff, 0xff, 0xff, 0xff, 1, 2, 3],
        vec![0, 0, 0, 0],
        vec![5, 0, 0, 0, 1, 0, 0, 0, 0], // a hello cut short
    ];
    for input in inputs {
        let mut s = std::os::unix::net::UnixStream::connect(&sock).unwrap();
        s.set_read_timeout(Some(std::time::Duration::from_secs(5))).unwrap();
        s.write_all(&input).unwrap();
        let _ = s.shutdown(std::net::Shutdown::Write);
        let mut rest = Vec::new();
        let _ = s.read_to_end(&mut rest); // the server answers with an error or just closes
    }
    // A client that begins a transaction, writes, and vanishes without committing.
    let mut c = Agent::start(&uri, AGENT);
    assert_eq!(c.role, "client");
    c.kill();
    assert_eq!(get(&*b, b"k").as_deref(), Some(&b"v"[..]));
    set(&*b, b"k", b"w").unwrap();
    let mut c2 = Agent::start(&uri, AGENT);
    assert_eq!(c2.ask("get k"), "w");
}

#[test]
fn the_owner_closing_hands_the_store_over() {
    let d = tempfile::tempdir().unwrap();
    let uri = d.path().to_str().unwrap().to_string();
    let b: Arc<dyn Backend> = kv::open(&uri).unwrap();
    let mut c = Agent::start(&uri, AGENT);
    assert_eq!(c.ask("set a 1"), "ok");
    drop(b); // closes the store in this process: the agent takes over
    assert_eq!(c.ask("set b 2"), "ok");
    assert_eq!(c.ask("get a"), "1");
    assert!(
        !d.path().join(kv::SOCKET_FILE).exists()
            || std::os::unix::net::UnixStream::connect(d.path().join(kv::SOCKET_FILE)).is_ok()
    );
}

/// A store whose directory cannot hold the socket (a file system without Unix sockets, as the
/// power-cut test's FUSE file system; simulated by a directory in the socket's place) is still
/// shared: its owner serves on an abstract socket named in the owner file
/// (`kv/shared/endpoint.rs`), and another process is its client. (It used to open for its
/// process alone, refusing every other process.)
#[test]
fn a_store_whose_directory_cannot_hold_the_socket_is_shared_all_the_same() {
    let d = tempfile::tempdir().unwrap();
    let uri = d.path().to_str().unwrap().to_string();
    std::fs::create_dir_all(d.path().join(kv::SOCKET_FILE).join("in-the-way")).unwrap();
    let b = kv::open(&uri).unwrap();
    set(&*b, b"k", b"v").unwrap();
    let owner_file = std::fs::read_to_string(d.path().join("txvfs.owner")).unwrap();
    assert!(owner_file.contains(" shared @txvfs/"), "{owner_file:?}");
    let mut other = Agent::start(&uri, AGENT);
    assert_eq!(other.role, "client");
    assert_eq!(other.ask("get k"), "v");
    assert_eq!(other.ask("set k w"), "ok");
    assert_eq!(get(&*b, b"k").as_deref(), Some(&b"w"[..]));
}

#[test]
fn a_clean_owner_exit_drains_in_flight_commits() {
    let d = tempfile::tempdir().unwrap();
    let uri = d.path().to_str().unwrap().to_string();
    let mut owner = Agent::start(&uri, AGENT);
    let b = kv::open(&uri).unwrap();
    assert!(!is_owner(d.path()));
    let mut t = b.begin().unwrap();
    assert_eq!(t.get(b"k").unwrap(), None);
    t.set(b"k", b"drained").unwrap();
    // The owner is stopped while the commit is sent, and told to close before it runs again:
    // its server stops with the commit queued on the connection.
    // SAFETY: signals our own child.
    unsafe { libc::kill(owner.pid() as i32, libc::SIGSTOP) };
    let commit = std::thread::spawn(move || t.commit(true));
    std::thread::sleep(std::time::Duration::from_millis(300));
    owner.send("close");
    // SAFETY: as above.
    unsafe { libc::kill(owner.pid() as i32, libc::SIGCONT) };
    commit.join().unwrap().expect("the in-flight commit is carried out and acknowledged");
    // Acknowledged by the old owner itself, not found by a failover (which would have made
    // this process the owner).
    assert!(!is_owner(d.path()), "the commit's outcome came from a failover, not the owner");
    // The owner is going away: a read may meet its closed connection (a retryable conflict).
    let read = || b.begin().and_then(|mut t| t.get(b"k"));
    let v = (0..100).find_map(|_| read().ok()).expect("the store is taken over");
    assert_eq!(v.as_deref(), Some(&b"drained"[..]));
}

/// Processes that open the store (`Store::open`: several transactions) while its owner closes
/// it cleanly all succeed, on the old owner or the new one. The bank with clean exits once saw
/// `Store::open` fail with "lost contact with process N serving the store (it exited); the
/// transaction did not commit: retry it": a retryable error that nothing retried.
#[test]
fn opens_racing_a_clean_owner_exit_all_succeed() {
    const ROUNDS: u64 = 12;
    const OPENERS: usize = 4;
    for round in 0..ROUNDS {
        let d = tempfile::tempdir().unwrap();
        let uri = d.path().to_str().unwrap().to_string();
        let mut owner = Agent::start(&uri, AGENT);
        assert_eq!(owner.ask("write /seed x"), "ok");
        let mut openers: Vec<Agent> = (0..OPENERS).map(|_| Agent::start(&uri, AGENT)).collect();
        // Each opener's first file call opens its Store; the owner closes at the same time.
        for (i, a) in openers.iter_mut().enumerate() {
            a.send(&format!("write /f{i} x"));
        }
        std::thread::sleep(std::time::Duration::from_millis(round % 4));
        owner.send("close");
        for (i, a) in openers.iter_mut().enumerate() {
            assert_eq!(a.answer(), "ok", "round {round}, opener {i}: open and write");
            assert_eq!(a.ask(&format!("read /f{i}")), "x", "round {round}, opener {i}");
        }
    }
}
