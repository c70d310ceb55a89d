//! A process of the store's own user that is buggy or hostile cannot take the owner down, nor
//! act for another process: a frame's length allocates nothing before its bytes arrive, a
//! connection that never says hello is closed, connections beyond the bound are refused
//! while the others are served, and a lock request acts only for the process that proves it
//! holds the id it names (its lock on `txvfs.alive`), at the owner's clock and with a bounded
//! lease. The bytes are written to `txvfs.sock` by this test; the owner is this process or
//! an agent.
#![cfg(feature = "rocksdb")]

mod agent;

use agent::Agent;
use std::alloc::{GlobalAlloc, Layout, System};
use std::io::{Read, Write};
use std::os::unix::io::AsRawFd;
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};
use txvfs::schema::{self, LockRecord, LockSpec};
use txvfs::{FileSystem, Store};

#[test]
fn agent_main() {
    agent::agent_main();
}

const AGENT: &str = "agent_main";

/// The largest single allocation of this process since the last reset.
static LARGEST: AtomicUsize = AtomicUsize::new(0);

struct Counting;

// SAFETY: forwards to the system allocator, only noting sizes.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        LARGEST.fetch_max(l.size(), Ordering::Relaxed);
        System.alloc(l)
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        System.dealloc(p, l)
    }
    unsafe fn alloc_zeroed(&self, l: Layout) -> *mut u8 {
        LARGEST.fetch_max(l.size(), Ordering::Relaxed);
        System.alloc_zeroed(l)
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, size: usize) -> *mut u8 {
        LARGEST.fetch_max(size, Ordering::Relaxed);
        System.realloc(p, l, size)
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

// The protocol's numbers (kv/shared/protocol.rs).
const VERSION: u64 = 1;
const HELLO: u8 = 1;
const BEGIN: u8 = 2;
const GET: u8 = 3;
const LOCKS: u8 = 45;
const OK: u8 = 100;
const ERR: u8 = 101;

/// Panics in this process's threads (the server's included).
static PANICS: AtomicU64 = AtomicU64::new(0);

fn count_panics() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let default = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            PANICS.fetch_add(1, Ordering::SeqCst);
            default(info);
        }));
    });
}

fn frame(op: u8, body: &[u8]) -> Vec<u8> {
    let mut f = ((body.len() + 1) as u32).to_le_bytes().to_vec();
    f.push(op);
    f.extend_from_slice(body);
    f
}

fn bytes(b: &[u8]) -> Vec<u8> {
    let mut v = (b.len() as u32).to_le_bytes().to_vec();
    v.extend_from_slice(b);
    v
}

fn connect(dir: &Path) -> UnixStream {
    let s = UnixStream::connect(dir.join("txvfs.sock")).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    s
}

/// Reads one reply frame: its operation and body.
fn reply(s: &mut UnixStream) -> (u8, Vec<u8>) {
    let mut len = [0u8; 4];
    s.read_exact(&mut len).unwrap();
    let mut body = vec![0u8; u32::from_le_bytes(len) as usize];
    s.read_exact(&mut body).unwrap();
    (body[0], body[1..].to_vec())
}

/// An error reply's message.
fn message(body: &[u8]) -> String {
    String::from_utf8_lossy(&body[8 + 4..]).into_owned()
}

/// A connection that said hello.
fn greeted(dir: &Path) -> UnixStream {
    let mut s = connect(dir);
    s.write_all(&frame(HELLO, &VERSION.to_le_bytes())).unwrap();
    assert_eq!(reply(&mut s).0, OK);
    s
}

/// Waits until the server closes `s` (within `bound`); returns what it sent.
fn closed(mut s: UnixStream, what: &str, bound: Duration) -> Vec<u8> {
    s.set_read_timeout(Some(bound)).unwrap();
    let t = Instant::now();
    let mut got = Vec::new();
    match s.read_to_end(&mut got) {
        Ok(_) => {}
        // Closed with bytes of ours unread.
        Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => {}
        Err(e) => panic!("{what}: the server kept the connection open for {:?}: {e}", t.elapsed()),
    }
    got
}

#[test]
fn a_frame_length_allocates_nothing_before_its_bytes_arrive() {
    let d = tempfile::tempdir().unwrap();
    let store = Store::open(d.path().to_str().unwrap()).unwrap();
    store.write_file("/f", b"kept").unwrap();
    let claim = 150u32 << 20;
    LARGEST.store(0, Ordering::SeqCst);
    // A hello, then a request after it, each claiming 150 MiB and bringing 1,000 bytes.
    // (A hello that long is refused at once: the bytes after its length may meet a closed
    // connection.)
    let mut s = connect(d.path());
    s.write_all(&claim.to_le_bytes()).unwrap();
    let _ = s.write_all(&[HELLO; 1000]);
    let _ = s.shutdown(std::net::Shutdown::Write);
    closed(s, "a hello claiming 150 MiB", Duration::from_secs(15));
    let mut s = greeted(d.path());
    s.write_all(&claim.to_le_bytes()).unwrap();
    s.write_all(&[BEGIN; 1000]).unwrap();
    s.shutdown(std::net::Shutdown::Write).unwrap();
    closed(s, "a request claiming 150 MiB", Duration::from_secs(15));
    let largest = LARGEST.load(Ordering::SeqCst);
    eprintln!("largest allocation meanwhile: {largest} bytes");
    assert!(largest < 8 << 20, "the owner allocated {largest} bytes for a claimed length");
    assert_eq!(store.read_file("/f").unwrap(), b"kept");
}

#[test]
fn a_connection_that_never_says_hello_is_closed() {
    let d = tempfile::tempdir().unwrap();
    let _store = Store::open(d.path().to_str().unwrap()).unwrap();
    let t = Instant::now();
    // The owner's wait for a hello is 5 s.
    let got = closed(connect(d.path()), "a silent connection", Duration::from_secs(15));
    assert!(got.is_empty(), "{got:?}");
    eprintln!("a silent connection was closed after {:?}", t.elapsed());
}

#[test]
fn connections_beyond_the_bound_are_refused_and_the_others_served() {
    let d = tempfile::tempdir().unwrap();
    let uri = d.path().to_str().unwrap().to_string();
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.env("TXVFS_MAX_CONNECTIONS", "8");
    let mut owner = Agent::try_start_cmd(cmd, &uri, AGENT).unwrap();
    assert_eq!(owner.role, "owner");
    assert_eq!(owner.ask("set k v"), "ok");
    let mut held: Vec<UnixStream> = (0..8).map(|_| greeted(d.path())).collect();
    // The ninth is told why, and closed.
    let mut s = connect(d.path());
    let (op, body) = reply(&mut s);
    assert_eq!(op, ERR, "a ninth connection was served");
    let msg = message(&body);
    assert!(msg.contains("8 connections"), "{msg}");
    closed(s, "a refused connection", Duration::from_secs(5));
    // Those admitted are served, and so is the owner itself.
    let get = frame(GET, &[&[0u8][..], &bytes(b"k")].concat());
    held[0].write_all(&[frame(BEGIN, b""), get].concat()).unwrap();
    assert_eq!(reply(&mut held[0]), (OK, [&[1u8][..], &bytes(b"v")].concat()));
    assert_eq!(owner.ask("set k2 v2"), "ok");
    // Once one closes, a new one is admitted.
    drop(held.pop());
    let t = Instant::now();
    loop {
        // A refused one may be closed before the hello is written.
        let mut s = connect(d.path());
        let _ = s.write_all(&frame(HELLO, &VERSION.to_le_bytes()));
        let mut first = [0u8; 5];
        match s.read_exact(&mut first).map(|()| first[4]) {
            Ok(OK) => break,
            _ if t.elapsed() < Duration::from_secs(10) => {
                std::thread::sleep(Duration::from_millis(20))
            }
            _ => panic!("no connection admitted 10 s after one closed"),
        }
    }
}

/// A lock request (fs/leases.rs): test flag, process, ino, owner, lease, then a lock record
/// whose expiry field carries the client's clock.
fn lock_request(
    process: u64,
    ino: u64,
    owner: u64,
    lease: u64,
    now: u64,
    locks: &[LockSpec],
) -> Vec<u8> {
    let mut v = vec![0u8];
    for n in [process, ino, owner, lease] {
        v.extend_from_slice(&n.to_le_bytes());
    }
    v.extend_from_slice(&LockRecord { expires_ms: now, locks: locks.to_vec() }.encode());
    frame(LOCKS, &bytes(&v))
}

/// The lock records of file `ino`: (process, owner, record).
fn records(uri: &str, ino: u64) -> Vec<(u64, u64, LockRecord)> {
    let b = txvfs::kv::open(uri).unwrap();
    let (s, e) = schema::lock_range(ino);
    let mut t = b.begin().unwrap();
    let pairs = t.get_range(&s, &e, 0, false).unwrap();
    pairs
        .iter()
        .map(|(k, v)| {
            let (p, o) = schema::lock_holder(k).unwrap();
            (p, o, LockRecord::decode(v).unwrap())
        })
        .collect()
}

/// Sends `bytes` with `fd` attached (SCM_RIGHTS).
fn send_with_fd(s: &UnixStream, bytes: &[u8], fd: i32) {
    let mut iov = libc::iovec { iov_base: bytes.as_ptr() as *mut _, iov_len: bytes.len() };
    let mut control = [0u64; 4];
    // SAFETY: msghdr is plain data; the buffers outlive the call; the control buffer holds
    // CMSG_SPACE(sizeof(int)).
    let n = unsafe {
        let mut msg: libc::msghdr = std::mem::zeroed();
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control.as_mut_ptr().cast();
        msg.msg_controllen = libc::CMSG_SPACE(4) as _;
        let c = libc::CMSG_FIRSTHDR(&msg);
        (*c).cmsg_level = libc::SOL_SOCKET;
        (*c).cmsg_type = libc::SCM_RIGHTS;
        (*c).cmsg_len = libc::CMSG_LEN(4) as _;
        std::ptr::write_unaligned(libc::CMSG_DATA(c).cast::<i32>(), fd);
        libc::sendmsg(s.as_raw_fd(), &msg, 0)
    };
    assert_eq!(n, bytes.len() as isize);
}

/// Locks the byte of process id `id` in `file` (an open description of `txvfs.alive`), as a
/// process registers itself alive.
fn register(file: &std::fs::File, id: u64) {
    // SAFETY: flock is plain data; F_OFD_SETLK on an open descriptor.
    let r = unsafe {
        let mut fl: libc::flock = std::mem::zeroed();
        fl.l_type = libc::F_WRLCK as libc::c_short;
        fl.l_whence = libc::SEEK_SET as libc::c_short;
        fl.l_start = (id >> 2) as libc::off_t;
        fl.l_len = 1;
        libc::fcntl(file.as_raw_fd(), libc::F_OFD_SETLK, &mut fl)
    };
    assert_eq!(r, 0, "{}", std::io::Error::last_os_error());
}

const WHOLE_EX: LockSpec = LockSpec { whole_file: true, exclusive: true, start: 0, end: u64::MAX };

#[test]
fn a_lock_request_acts_only_for_the_process_that_holds_its_id() {
    count_panics();
    let d = tempfile::tempdir().unwrap();
    let uri = d.path().to_str().unwrap().to_string();
    let store = Store::open(&uri).unwrap();
    store.write_file("/f", b"f").unwrap();
    store.write_file("/g", b"g").unwrap();
    let (f, g) = (store.stat("/f").unwrap().ino, store.stat("/g").unwrap().ino);
    let mut a = Agent::start(&uri, AGENT);
    assert_eq!(a.role, "client");
    assert_eq!(a.ask("flock /f"), "ok");
    let recs = records(&uri, f);
    assert_eq!(recs.len(), 1, "{recs:?}");
    let (pa, oa, _) = recs[0].clone();

    // A connection that proves nothing asks to release A's lock: refused, nothing changes.
    let mut s = greeted(d.path());
    s.write_all(&lock_request(pa, f, oa, 10_000, 0, &[])).unwrap();
    let (op, body) = reply(&mut s);
    assert_eq!(op, ERR, "a lock request released another process's lock");
    assert!(message(&body).contains("does not hold"), "{}", message(&body));
    assert_eq!(records(&uri, f).len(), 1, "A's lock record is gone");
    let mut b = Agent::start(&uri, AGENT);
    assert_ne!(b.ask("flock /f"), "ok", "a second process took A's exclusive flock");

    // A connection that attaches its own liveness file to its requests and holds its id
    // there: its requests for that id run, at the owner's clock with a bounded lease whatever
    // it claims; one for A's id is refused all the same.
    let alive = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(d.path().join("txvfs.alive"))
        .unwrap();
    let mine = 0x5eed_0000_0000_0004u64;
    register(&alive, mine);
    let mut s = greeted(d.path());
    send_with_fd(&s, &lock_request(mine, g, 1, u64::MAX, u64::MAX, &[WHOLE_EX]), alive.as_raw_fd());
    let (op, body) = reply(&mut s);
    assert_eq!(op, OK, "its own request was refused: {}", message(&body));
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap();
    let recs = records(&uri, g);
    assert_eq!(recs.len(), 1, "{recs:?}");
    assert_eq!((recs[0].0, recs[0].2.locks.clone()), (mine, vec![WHOLE_EX]));
    let expires = recs[0].2.expires_ms;
    let bound = now.as_millis() as u64 + 11 * 60 * 1000;
    assert!(
        expires < bound,
        "the lease runs to {expires}, past {bound} (the owner's clock + 11 min)"
    );
    assert_ne!(b.ask("flock /g"), "ok", "its lock does not hold");
    send_with_fd(&s, &lock_request(pa, f, oa, 10_000, 0, &[]), alive.as_raw_fd());
    let (op, body) = reply(&mut s);
    assert_eq!(op, ERR, "a lock request released another process's lock");
    assert!(message(&body).contains("does not hold"), "{}", message(&body));
    assert_ne!(b.ask("flock /f"), "ok", "a second process took A's exclusive flock");

    // A releases; B takes the lock: the requests of real processes work as before. A
    // killed process's lock is free at once (the owner keeps no descriptor of its file).
    assert_eq!(a.ask("unlock"), "ok");
    assert_eq!(b.ask("flock /f"), "ok");
    b.kill();
    assert_eq!(a.ask("flock /f"), "ok", "a killed process's lock outlived it");
    assert_eq!(PANICS.load(Ordering::SeqCst), 0, "a thread panicked");
}
