//! A stopped owner (SIGSTOP: Ctrl-Z, a debugger, a paused container) must not freeze the
//! other processes of a shared store: every client call has a deadline (the URI option
//! `owner_timeout=SECONDS`, 30 s by default) and fails with EBUSY naming the owner's pid and
//! that it is stopped; a commit the owner never received is withdrawn (nothing half-done);
//! after SIGCONT everything works again.
#![cfg(feature = "rocksdb")]

mod agent;

use agent::Agent;
use std::time::{Duration, Instant};
use txvfs::{ErrorKind, FileSystem, Store};

#[test]
fn agent_main() {
    agent::agent_main();
}

const AGENT: &str = "agent_main";

/// The deadline the tests ask for, and a generous bound on how late the error may come.
const TIMEOUT: Duration = Duration::from_secs(2);
const LATE: Duration = Duration::from_secs(20);

/// Sends `sig` to the agent; after SIGSTOP, waits until the kernel has stopped it.
fn signal(agent: &Agent, sig: i32) {
    // SAFETY: sends a signal to our own child.
    assert_eq!(unsafe { libc::kill(agent.pid() as i32, sig) }, 0);
    while sig == libc::SIGSTOP && state(agent.pid()) != 'T' {
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// The state letter of process `pid` in /proc/PID/stat.
fn state(pid: u32) -> char {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    stat[stat.rfind(')').unwrap() + 1..].trim_start().chars().next().unwrap()
}

fn assert_stopped_error(e: &txvfs::Error, pid: u32, started: Instant) {
    let waited = started.elapsed();
    assert_eq!(e.kind(), ErrorKind::Busy, "{e}");
    assert!(waited >= TIMEOUT, "failed after {waited:?}, before the deadline: {e}");
    assert!(waited < LATE, "failed only after {waited:?}: {e}");
    let msg = e.to_string();
    assert!(msg.contains(&pid.to_string()), "the error names the owner's pid: {msg}");
    assert!(msg.contains("stopped"), "the error says the owner is stopped: {msg}");
}

#[test]
fn a_stopped_owner_fails_client_calls_with_ebusy_within_the_deadline() {
    let d = tempfile::tempdir().unwrap();
    let uri = d.path().to_str().unwrap().to_string();
    let mut owner = Agent::start(&uri, AGENT);
    assert_eq!(owner.role, "owner");
    assert_eq!(owner.ask("write /f hello"), "ok");
    assert_eq!(owner.ask("write /h unread"), "ok");
    let store = Store::open(&format!("{uri}?owner_timeout=2")).unwrap();
    assert_eq!(store.read_file("/f").unwrap(), b"hello");

    signal(&owner, libc::SIGSTOP);
    // What this client's cache holds it reads without the owner (kv/shared/client_cache.rs).
    assert_eq!(store.read_file("/f").unwrap(), b"hello");
    let t = Instant::now();
    let e = store.read_file("/h").unwrap_err();
    assert_stopped_error(&e, owner.pid(), t);
    // The next call fails at once (the owner is still stopped), and changes nothing.
    let t = Instant::now();
    let e = store.write_file("/g", b"withdrawn").unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Busy, "{e}");
    assert!(t.elapsed() < TIMEOUT, "the second call waited again: {e}");
    assert!(e.to_string().contains("stopped"), "{e}");

    signal(&owner, libc::SIGCONT);
    assert_eq!(store.read_file("/f").unwrap(), b"hello");
    assert!(!store.exists("/g").unwrap(), "a withdrawn commit took effect");
    store.write_file("/g", b"now").unwrap();
    assert_eq!(owner.ask("read /g"), "now");
}

#[test]
fn opening_a_store_whose_owner_is_stopped_fails_with_ebusy() {
    let d = tempfile::tempdir().unwrap();
    let uri = d.path().to_str().unwrap().to_string();
    let mut owner = Agent::start(&uri, AGENT);
    assert_eq!(owner.ask("write /f hello"), "ok");
    signal(&owner, libc::SIGSTOP);
    let t = Instant::now();
    let Err(e) = Store::open(&format!("{uri}?owner_timeout=2")) else { panic!("open must fail") };
    assert_stopped_error(&e, owner.pid(), t);
    signal(&owner, libc::SIGCONT);
    let store = Store::open(&format!("{uri}?owner_timeout=2")).unwrap();
    assert_eq!(store.read_file("/f").unwrap(), b"hello");
}

#[test]
fn a_bad_owner_timeout_is_refused() {
    let d = tempfile::tempdir().unwrap();
    let uri = d.path().to_str().unwrap().to_string();
    let e = Store::open(&format!("rocksdb:{uri}?owner_timeout=soon")).err().unwrap();
    assert_eq!(e.kind(), ErrorKind::Invalid, "{e}");
    assert!(e.to_string().contains("owner_timeout"), "{e}");
}

#[test]
fn a_commit_the_stopped_owner_never_read_is_withdrawn() {
    let d = tempfile::tempdir().unwrap();
    let uri = d.path().to_str().unwrap().to_string();
    let mut owner = Agent::start(&uri, AGENT);
    let b = txvfs::kv::open(&format!("{uri}?owner_timeout=2")).unwrap();
    let mut t = b.begin().unwrap();
    assert_eq!(t.get(b"k").unwrap(), None);
    t.set(b"k", b"from the client").unwrap();
    signal(&owner, libc::SIGSTOP);
    let started = Instant::now();
    let e = t.commit(true).unwrap_err();
    assert_stopped_error(&e, owner.pid(), started);
    assert!(e.to_string().contains("withdrawn"), "{e}");
    signal(&owner, libc::SIGCONT);
    assert_eq!(owner.ask("get k"), "none", "a withdrawn commit took effect");
    let mut t = b.begin().unwrap();
    t.set(b"k", b"again").unwrap();
    t.commit(true).unwrap();
    assert_eq!(owner.ask("get k"), "again");
}
