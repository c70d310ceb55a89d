//! A client process stopped (SIGSTOP: Ctrl-Z, a debugger, a paused container) while it holds
//! a flock and a byte-range lock on a shared store: the others are kept out of those locks and
//! nothing else. A non-blocking attempt answers EWOULDBLOCK at once, F_GETLK names the lock, a
//! blocking wait waits (its own semantics) and every other call goes on; once the stopped
//! process is killed, its locks are free at a waiter's next check.
#![cfg(feature = "rocksdb")]

mod agent;

use agent::Agent;
use std::time::{Duration, Instant};
use txvfs::{ErrorKind, FileSystem, FlockOp, OpenOptions, RangeLockKind, Store};

#[test]
fn agent_main() {
    agent::agent_main();
}

const AGENT: &str = "agent_main";

/// How long an answer that needs no waiting may take (a loaded 2-core machine).
const PROMPT: Duration = Duration::from_secs(2);

fn stop(agent: &Agent) {
    // SAFETY: signals our own child.
    assert_eq!(unsafe { libc::kill(agent.pid() as i32, libc::SIGSTOP) }, 0);
    loop {
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", agent.pid())).unwrap();
        if stat[stat.rfind(')').unwrap() + 1..].trim_start().starts_with('T') {
            return;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Runs `f`, checks that it answered within [`PROMPT`], and returns its answer.
fn promptly<T>(what: &str, f: impl FnOnce() -> T) -> T {
    let t = Instant::now();
    let r = f();
    assert!(t.elapsed() < PROMPT, "{what} took {:?}", t.elapsed());
    r
}

#[test]
fn a_stopped_client_holding_locks_keeps_others_out_of_them_only_until_it_is_killed() {
    let d = tempfile::tempdir().unwrap();
    let uri = d.path().to_str().unwrap().to_string();
    let store = Store::open(&uri).unwrap();
    store.write_file("/lockme", b"x").unwrap();
    store.write_file("/ranges", &[0u8; 100]).unwrap();
    let mut holder = Agent::start(&format!("{uri}?owner_timeout=5"), AGENT);
    assert_eq!(holder.role, "client");
    assert_eq!(holder.ask("flock /lockme"), "ok");
    assert_eq!(holder.ask("lockrange /ranges 10 10"), "ok");
    let mut other = Agent::start(&format!("{uri}?owner_timeout=5"), AGENT);
    assert_eq!(other.role, "client");
    stop(&holder);

    // The owner: EWOULDBLOCK at once for both kinds of lock; F_GETLK names the range.
    let f = store.open("/lockme", &OpenOptions::new().read(true)).unwrap();
    let e = promptly("a non-blocking flock", || f.flock(FlockOp::Exclusive, false)).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::WouldBlock, "{e}");
    let rw = OpenOptions::new().read(true).write(true);
    let g = store.open("/ranges", &rw).unwrap();
    let e =
        promptly("a non-blocking range lock", || g.lock_range(RangeLockKind::Read, 15, 1, false))
            .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::WouldBlock, "{e}");
    let seen = promptly("F_GETLK", || g.test_lock(false, 0, 0)).unwrap().expect("a blocker");
    assert_eq!((seen.kind, seen.start, seen.len), (RangeLockKind::Write, 10, 10));
    promptly("a range that does not overlap", || g.lock_range(RangeLockKind::Write, 20, 5, false))
        .unwrap();
    // Another client: the same answer, as promptly; and it goes on committing.
    let answer = promptly("a client's flock", || other.ask("flock /lockme"));
    assert!(answer.starts_with("error"), "{answer}");
    assert!(answer.contains("locked by another"), "{answer}");
    let answer = promptly("a client's range lock", || other.ask("lockrange /ranges 0 11"));
    assert!(answer.starts_with("error"), "{answer}");
    assert_eq!(promptly("a client's write", || other.ask("write /o 1")), "ok");
    assert_eq!(promptly("a client's lock elsewhere", || other.ask("lockrange /ranges 30 5")), "ok");
    promptly("the owner's write", || store.write_file("/w", b"2")).unwrap();

    // A blocking wait waits while the holder lives (stopped or not), and gets the lock soon
    // after the holder is killed.
    let waiter = std::thread::spawn(move || {
        f.flock(FlockOp::Exclusive, true).unwrap();
        Instant::now()
    });
    let range_waiter = std::thread::spawn(move || {
        g.lock_range(RangeLockKind::Write, 0, 20, true).unwrap();
        Instant::now()
    });
    std::thread::sleep(Duration::from_millis(500));
    assert!(!waiter.is_finished(), "a blocking flock got a stopped process's lock");
    assert!(!range_waiter.is_finished(), "a blocking range lock got a stopped process's lock");
    let killed = Instant::now();
    holder.kill();
    let got = waiter.join().unwrap();
    let got_range = range_waiter.join().unwrap();
    assert!(got - killed < PROMPT, "the flock came {:?} after the kill", got - killed);
    assert!(got_range - killed < PROMPT, "the range came {:?} after the kill", got_range - killed);
    eprintln!(
        "locks free after the kill: flock {:?}, range {:?}",
        got - killed,
        got_range - killed
    );
    assert_eq!(other.ask("write /after 3"), "ok");
}
