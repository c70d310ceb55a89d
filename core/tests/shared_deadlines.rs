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

/// The deadline the tests ask for, and how late the error may come: one and a half deadlines
/// (the promise is one).
const TIMEOUT: Duration = Duration::from_secs(2);
const LATE: Duration = Duration::from_millis(3000);

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

/// Fills the listen backlog of the store socket in `dir` with connections that nobody accepts
/// (its owner is stopped): connects without blocking until the kernel says the queue is full.
/// The returned descriptors keep it full.
fn fill_backlog(dir: &std::path::Path) -> Vec<std::os::fd::OwnedFd> {
    use std::os::fd::FromRawFd;
    let path = dir.join("txvfs.sock");
    let path = path.as_os_str().as_encoded_bytes();
    // SAFETY: a zeroed sockaddr_un is valid; the path fits (checked).
    let mut addr: libc::sockaddr_un = unsafe { std::mem::zeroed() };
    addr.sun_family = libc::AF_UNIX as libc::sa_family_t;
    assert!(path.len() < addr.sun_path.len());
    for (d, s) in addr.sun_path.iter_mut().zip(path) {
        *d = *s as libc::c_char;
    }
    let mut held = Vec::new();
    for _ in 0..100_000 {
        // SAFETY: plain socket calls; the descriptor is owned at once or closed.
        unsafe {
            let fd = libc::socket(
                libc::AF_UNIX,
                libc::SOCK_STREAM | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
                0,
            );
            assert!(fd >= 0, "socket: {}", std::io::Error::last_os_error());
            let owned = std::os::fd::OwnedFd::from_raw_fd(fd);
            let len = std::mem::size_of::<libc::sockaddr_un>() as libc::socklen_t;
            if libc::connect(fd, (&addr as *const libc::sockaddr_un).cast(), len) == 0 {
                held.push(owned);
                continue;
            }
            let e = std::io::Error::last_os_error();
            assert_eq!(e.raw_os_error(), Some(libc::EAGAIN), "connect: {e}");
            return held;
        }
    }
    panic!("the backlog never filled");
}

/// Runs `f` on a thread and waits at most `limit` for it; None if it is still running then.
fn within<T: Send + 'static>(limit: Duration, f: impl FnOnce() -> T + Send + 'static) -> Option<T> {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(limit).ok()
}

#[test]
fn connecting_to_a_stopped_owner_with_a_full_backlog_fails_within_the_deadline() {
    let d = tempfile::tempdir().unwrap();
    let uri = d.path().to_str().unwrap().to_string();
    let mut owner = Agent::start(&uri, AGENT);
    assert_eq!(owner.ask("write /f hello"), "ok");
    // A client already connected, whose second transaction needs a new connection.
    let b = txvfs::kv::open(&format!("{uri}?owner_timeout=2")).unwrap();
    let first = b.begin().unwrap();
    signal(&owner, libc::SIGSTOP);
    let queued = fill_backlog(d.path());
    eprintln!("backlog full after {} connections", queued.len());

    // New processes opening the store (many at once), and this process's new connection:
    // each fails with EBUSY naming the stopped owner, within the deadline (not the 20 s a
    // failover may take, and not for ever).
    let opens: Vec<_> = (0..4)
        .map(|_| {
            let uri = format!("{uri}?owner_timeout=2");
            std::thread::spawn(move || {
                let t = Instant::now();
                let r = Agent::try_start(&uri, AGENT).map(|a| a.role.clone());
                (r, t.elapsed())
            })
        })
        .collect();
    let t = Instant::now();
    let b2 = b.clone();
    let Some(r) = within(LATE, move || b2.begin().map(|_| ())) else {
        signal(&owner, libc::SIGCONT);
        panic!("a new connection to the stopped owner was still waiting after {LATE:?}");
    };
    let e = r.expect_err("a new connection to a stopped owner");
    let waited = t.elapsed();
    assert_stopped_error(&e, owner.pid(), t);
    eprintln!("new connection of a connected client: failed after {waited:?}");
    let t = Instant::now();
    let path = uri.clone();
    let Some(r) = within(LATE, move || Store::open(&format!("{path}?owner_timeout=2")).map(|_| ()))
    else {
        signal(&owner, libc::SIGCONT);
        panic!("opening the store was still waiting after {LATE:?}");
    };
    // This process already waited for the owner: a Store on the same backend fails at once.
    let e = r.expect_err("opening a store whose owner is stopped");
    assert_eq!(e.kind(), ErrorKind::Busy, "{e}");
    assert!(e.to_string().contains("stopped"), "{e}");
    assert!(t.elapsed() < TIMEOUT, "waited again: {:?}", t.elapsed());
    for o in opens {
        let (r, waited) = o.join().unwrap();
        let answer = r.expect_err("another process opened a store whose owner is stopped");
        assert!(answer.contains("stopped"), "{answer}");
        assert!(answer.contains(&owner.pid().to_string()), "{answer}");
        assert!(waited < LATE, "another process waited {waited:?}: {answer}");
        eprintln!("open in another process: failed after {waited:?}");
    }

    // Continued, the owner serves again (after answering the queued connections' ends).
    drop(queued);
    drop(first);
    signal(&owner, libc::SIGCONT);
    let store = Store::open(&format!("{uri}?owner_timeout=10")).unwrap();
    assert_eq!(store.read_file("/f").unwrap(), b"hello");
    store.write_file("/g", b"after").unwrap();
    assert_eq!(owner.ask("read /g"), "after");
}

#[test]
fn owner_timeout_zero_fails_at_once_when_the_owner_is_stopped() {
    let d = tempfile::tempdir().unwrap();
    let uri = d.path().to_str().unwrap().to_string();
    let mut owner = Agent::start(&uri, AGENT);
    assert_eq!(owner.ask("write /f hello"), "ok");
    let store = Store::open(&format!("{uri}?owner_timeout=0")).unwrap();
    signal(&owner, libc::SIGSTOP);
    let t = Instant::now();
    let r = within(LATE, move || store.read_file("/f"));
    let waited = t.elapsed();
    signal(&owner, libc::SIGCONT);
    let Some(r) = r else { panic!("owner_timeout=0 still waited after {LATE:?}") };
    let e = r.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Busy, "{e}");
    // "At once": well below any deadline a store would be given (a round trip is micro-
    // to milliseconds; the machine may be loaded).
    assert!(waited < Duration::from_millis(500), "owner_timeout=0 waited {waited:?}: {e}");
    let msg = e.to_string();
    assert!(msg.contains(&owner.pid().to_string()) && msg.contains("stopped"), "{msg}");
}

/// Takes the store's owner lock in `dir` as a new owner does before it serves (an
/// open-file-description lock on `txvfs.owner`, with this process's pid in it), and keeps it
/// while the returned descriptor lives.
fn hold_owner_lock(dir: &std::path::Path) -> std::fs::File {
    use std::io::Write;
    use std::os::fd::AsRawFd;
    let mut f =
        std::fs::OpenOptions::new().read(true).write(true).open(dir.join("txvfs.owner")).unwrap();
    // SAFETY: a zeroed flock is valid; the descriptor is open.
    let mut fl: libc::flock = unsafe { std::mem::zeroed() };
    fl.l_type = libc::F_WRLCK as libc::c_short;
    fl.l_whence = libc::SEEK_SET as libc::c_short;
    let rc = unsafe { libc::fcntl(f.as_raw_fd(), libc::F_OFD_SETLK, &mut fl) };
    assert_eq!(rc, 0, "the owner lock: {}", std::io::Error::last_os_error());
    f.set_len(0).unwrap();
    writeln!(f, "{} shared", std::process::id()).unwrap();
    f
}

#[test]
fn a_client_gives_up_when_nobody_serves_the_store_for_twenty_seconds() {
    let d = tempfile::tempdir().unwrap();
    let uri = d.path().to_str().unwrap().to_string();
    let mut owner = Agent::start(&uri, AGENT);
    assert_eq!(owner.ask("write /f hello"), "ok");
    let store = Store::open(&format!("{uri}?owner_timeout=2")).unwrap();
    assert_eq!(store.read_file("/f").unwrap(), b"hello");
    owner.kill();
    // The lock a new owner takes, held by a process that never serves.
    let lock = hold_owner_lock(d.path());
    let t = Instant::now();
    let e = store.write_file("/g", b"x").unwrap_err();
    let waited = t.elapsed();
    drop(lock);
    assert_eq!(e.kind(), ErrorKind::Busy, "{e}");
    // The longer of RECOVERY_TIMEOUT (20 s) and owner_timeout (2 s).
    assert_eq!(txvfs::kv::RECOVERY_TIMEOUT, Duration::from_secs(20));
    assert!(waited >= Duration::from_secs(20), "gave up after {waited:?}: {e}");
    assert!(waited < Duration::from_secs(23), "gave up only after {waited:?}: {e}");
    let msg = e.to_string();
    assert!(msg.contains(&std::process::id().to_string()), "names the holder: {msg}");
    assert!(msg.contains("does not serve"), "{msg}");
    // Once the lock is free, the next call takes the store over.
    store.write_file("/g", b"after").unwrap();
    assert_eq!(store.read_file("/f").unwrap(), b"hello");
}
