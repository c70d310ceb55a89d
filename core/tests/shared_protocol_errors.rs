//! A bad or stalled peer on a shared store's socket affects only its own connection: garbage
//! (a bad frame length, a frame over the limit, an unknown operation, truncated or trailing
//! fields, a request before the hello), and a client that sends half a frame and stalls, get
//! their connection closed, with an error reply saying why where one can be sent; never a
//! panic or a server thread waiting for ever; and another process keeps committing meanwhile.
//! The bytes are written to `txvfs.sock` by this test; the owner is this process.
#![cfg(feature = "rocksdb")]

mod agent;

use agent::Agent;
use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use txvfs::{FileSystem, Store};

#[test]
fn agent_main() {
    agent::agent_main();
}

const AGENT: &str = "agent_main";

// The protocol's numbers (kv/shared/protocol.rs).
const VERSION: u64 = 1;
const MAX_FRAME: u32 = 160 << 20;
const HELLO: u8 = 1;
const BEGIN: u8 = 2;
const GET: u8 = 3;
const SET: u8 = 5;
const COMMIT: u8 = 10;
const OK: u8 = 100;
const ERR: u8 = 101;

/// How long the server may take to give up on a half-sent frame (its wait is 5 s).
const STALL_BOUND: Duration = Duration::from_secs(15);

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

/// A connection that said hello.
fn greeted(dir: &Path) -> UnixStream {
    let mut s = connect(dir);
    s.write_all(&frame(HELLO, &VERSION.to_le_bytes())).unwrap();
    assert_eq!(reply(&mut s).0, OK);
    s
}

/// Waits until the server closes `s` (within `bound`); returns what it sent first (an error
/// reply's message, if any).
fn closed(mut s: UnixStream, what: &str, bound: Duration) -> String {
    s.set_read_timeout(Some(bound)).unwrap();
    let t = Instant::now();
    let mut got = Vec::new();
    match s.read_to_end(&mut got) {
        Ok(_) => {}
        Err(e) => panic!("{what}: the server kept the connection open for {:?}: {e}", t.elapsed()),
    }
    if got.len() > 5 && got[4] == ERR {
        // code (8 bytes), then the message as a byte string
        let msg = &got[5 + 8..];
        String::from_utf8_lossy(&msg[4..]).into_owned()
    } else {
        assert!(got.is_empty(), "{what}: unexpected bytes {got:?}");
        String::new()
    }
}

/// Panics in this process's threads (the server's included).
static PANICS: AtomicU64 = AtomicU64::new(0);

#[test]
fn garbage_and_stalls_on_the_socket_close_only_their_connection() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        PANICS.fetch_add(1, Ordering::SeqCst);
        default(info);
    }));
    let d = tempfile::tempdir().unwrap();
    let uri = d.path().to_str().unwrap().to_string();
    let store = Store::open(&uri).unwrap();
    store.write_file("/f", b"kept").unwrap();
    let dir = d.path();

    // Another process commits all along.
    let stop = Arc::new(AtomicBool::new(false));
    let committed = Arc::new(AtomicU64::new(0));
    let mut committer = Agent::start(&format!("{uri}?owner_timeout=10"), AGENT);
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
            committer
        })
    };
    let progress = |what: &str| {
        let before = committed.load(Ordering::SeqCst);
        let t = Instant::now();
        while committed.load(Ordering::SeqCst) < before + 3 {
            assert!(t.elapsed() < Duration::from_secs(10), "no commits since {what}");
            std::thread::sleep(Duration::from_millis(2));
        }
    };
    let quick = Duration::from_secs(5);

    // Before the hello.
    let mut s = connect(dir);
    s.write_all(&0u32.to_le_bytes()).unwrap();
    let msg = closed(s, "a zero frame length", quick);
    assert!(msg.contains("frame length"), "{msg:?}");
    let mut s = connect(dir);
    s.write_all(&(MAX_FRAME + 1).to_le_bytes()).unwrap();
    let msg = closed(s, "a frame over the limit", quick);
    assert!(msg.contains("frame length"), "{msg:?}");
    let mut s = connect(dir);
    s.write_all(&u32::MAX.to_le_bytes()).unwrap();
    closed(s, "a frame length of 4 GiB", quick);
    let mut s = connect(dir);
    s.write_all(&frame(SET, &bytes(b"k"))).unwrap();
    let msg = closed(s, "a request before the hello", quick);
    assert!(msg.contains("hello"), "{msg:?}");
    let mut s = connect(dir);
    s.write_all(&frame(HELLO, &999u64.to_le_bytes())).unwrap();
    let msg = closed(s, "a hello of another version", quick);
    assert!(msg.contains("version"), "{msg:?}");
    progress("garbage before the hello");

    // After the hello.
    let mut s = greeted(dir);
    s.write_all(&frame(99, b"")).unwrap();
    let msg = closed(s, "an unknown operation", quick);
    assert!(msg.contains("unknown request 99"), "{msg:?}");
    let mut s = greeted(dir);
    s.write_all(&(MAX_FRAME + 1).to_le_bytes()).unwrap();
    let msg = closed(s, "a frame over the limit after the hello", quick);
    assert!(msg.contains("frame length"), "{msg:?}");
    // Inside a transaction: a write whose key is cut short, one with trailing bytes; neither
    // commits anything.
    let mut s = greeted(dir);
    let mut body = 1000u32.to_le_bytes().to_vec();
    body.extend_from_slice(b"abc");
    s.write_all(&[frame(BEGIN, b""), frame(SET, &body), frame(COMMIT, &[1])].concat()).unwrap();
    let msg = closed(s, "a truncated field", quick);
    assert!(msg.contains("malformed"), "{msg:?}");
    let mut s = greeted(dir);
    let mut body = [bytes(b"/x"), bytes(b"v")].concat();
    body.push(7);
    s.write_all(&[frame(BEGIN, b""), frame(SET, &body), frame(COMMIT, &[1])].concat()).unwrap();
    let msg = closed(s, "trailing bytes", quick);
    assert!(msg.contains("trailing"), "{msg:?}");
    // A request that needs a transaction outside one: an error reply, and the connection
    // goes on serving.
    let mut s = greeted(dir);
    s.write_all(&frame(GET, &[&[0u8][..], &bytes(b"k")].concat())).unwrap();
    let (op, body) = reply(&mut s);
    assert_eq!(op, ERR);
    assert!(String::from_utf8_lossy(&body).contains("outside a transaction"));
    s.write_all(&[frame(BEGIN, b""), frame(GET, &[&[0u8][..], &bytes(b"k")].concat())].concat())
        .unwrap();
    assert_eq!(reply(&mut s), (OK, vec![0]));
    drop(s);
    progress("malformed requests");

    // Half a frame, then nothing: before the hello, after it, and inside a transaction (with
    // half a length, and with a length and part of its body). Each is closed within a bound.
    let stalls: Vec<(&str, UnixStream)> = vec![
        ("half a length before the hello", {
            let mut s = connect(dir);
            s.write_all(&[9, 0]).unwrap();
            s
        }),
        ("half a hello", {
            let mut s = connect(dir);
            s.write_all(&frame(HELLO, &VERSION.to_le_bytes())[..7]).unwrap();
            s
        }),
        ("half a length in a transaction", {
            let mut s = greeted(dir);
            s.write_all(&frame(BEGIN, b"")).unwrap();
            s.write_all(&[40, 0]).unwrap();
            s
        }),
        ("part of a large write in a transaction", {
            let mut s = greeted(dir);
            s.write_all(&frame(BEGIN, b"")).unwrap();
            let whole = frame(SET, &[bytes(b"/big"), bytes(&vec![7u8; 1 << 20])].concat());
            s.write_all(&whole[..300_000]).unwrap();
            s
        }),
    ];
    let t = Instant::now();
    for (what, s) in stalls {
        closed(s, what, STALL_BOUND);
        progress(what);
    }
    eprintln!("stalled connections closed after {:?}", t.elapsed());

    stop.store(true, Ordering::SeqCst);
    let mut committer = worker.join().unwrap();
    let n = committed.load(Ordering::SeqCst);
    eprintln!("the other process committed {n} transactions meanwhile");
    assert_eq!(committer.ask(&format!("get c{}", n - 1)), (n - 1).to_string());
    assert_eq!(store.read_file("/f").unwrap(), b"kept");
    assert!(!store.exists("/x").unwrap() && !store.exists("/big").unwrap());
    assert_eq!(PANICS.load(Ordering::SeqCst), 0, "a thread panicked");
}

#[test]
fn a_client_that_stops_reading_delays_the_owners_close_by_at_most_a_few_seconds() {
    let d = tempfile::tempdir().unwrap();
    let uri = d.path().to_str().unwrap().to_string();
    let b = txvfs::kv::open(&uri).unwrap();
    let mut t = b.begin().unwrap();
    t.set(b"big", &vec![9u8; 8 << 20]).unwrap();
    t.commit(true).unwrap();
    // A client (stopped, as far as the server can tell) asks for 8 MiB and never reads them.
    let mut s = greeted(d.path());
    s.write_all(&[frame(BEGIN, b""), frame(GET, &[&[0u8][..], &bytes(b"big")].concat())].concat())
        .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let t = Instant::now();
    drop(b);
    let took = t.elapsed();
    eprintln!("the owner closed in {took:?}");
    assert!(took < Duration::from_secs(8), "the owner's close waited {took:?} on a client");
    // The store is free: another process takes it over.
    let mut next = Agent::start(&uri, AGENT);
    assert_eq!(next.role, "owner");
    assert_eq!(next.ask("set k v"), "ok");
    drop(s);
}

#[test]
fn the_replies_to_requests_before_a_bad_frame_come_before_its_error() {
    // The owner writes the replies to requests that arrived together in one write; a bad
    // frame among them must not swallow the replies to those before it.
    let d = tempfile::tempdir().unwrap();
    let _store = Store::open(d.path().to_str().unwrap()).unwrap();
    let mut s = greeted(d.path());
    let get = frame(GET, &[&[0u8][..], &bytes(b"k")].concat());
    s.write_all(&[frame(BEGIN, b""), get, 0u32.to_le_bytes().to_vec()].concat()).unwrap();
    assert_eq!(reply(&mut s), (OK, vec![0]), "the read's reply first");
    let msg = closed(s, "a zero frame length after a read", Duration::from_secs(5));
    assert!(msg.contains("frame length"), "{msg:?}");
}
