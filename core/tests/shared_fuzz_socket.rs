//! A seeded random fuzzer of the owner's socket protocol (`kv/shared/protocol.rs`): sessions of
//! requests of every operation with random fields, some mutated, cut short or plain garbage,
//! sent to an owner (this process) for `TXVFS_FUZZ_SECS` seconds (3 by default) from seed
//! `TXVFS_SEED` (a number, or `random`; 37 by default), printed. Nothing may panic, no
//! session may hold the owner, and afterwards another process still commits and reads
//! through the owner. A longer run:
//! `TXVFS_FUZZ_SECS=600 TXVFS_SEED=random cargo test --release -p txvfs --test shared_fuzz_socket -- --nocapture`.
#![cfg(feature = "rocksdb")]

mod agent;

use agent::Agent;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

#[test]
fn agent_main() {
    agent::agent_main();
}

const AGENT: &str = "agent_main";

/// Panics in this process's threads (the server's included).
static PANICS: AtomicU64 = AtomicU64::new(0);

/// The fields of a request, as the protocol lays them out.
#[derive(Clone, Copy)]
enum F {
    U8,
    U64,
    Bytes,
    /// A count, then that many byte strings (BEGIN_AT's keys).
    Keys,
    /// A count, then that many pairs of byte strings (BEGIN_AT's ranges).
    Ranges,
}

/// Every operation of the protocol and its fields (trailing optional fields included).
const OPS: &[(u8, &[F])] = &[
    (1, &[F::U64, F::U64]),                             // HELLO
    (2, &[]),                                           // BEGIN
    (3, &[F::U8, F::Bytes]),                            // GET
    (4, &[F::U8, F::Bytes, F::Bytes, F::U64, F::U8]),   // GET_RANGE
    (5, &[F::Bytes, F::Bytes]),                         // SET
    (6, &[F::Bytes]),                                   // CLEAR
    (7, &[F::Bytes, F::Bytes]),                         // CLEAR_RANGE
    (8, &[F::Bytes, F::U64]),                           // ATOMIC_ADD
    (9, &[F::Bytes, F::U64]),                           // ATOMIC_MAX
    (10, &[F::U8, F::Bytes]),                           // COMMIT
    (11, &[]),                                          // ROLLBACK
    (12, &[]),                                          // REFRESH
    (13, &[]),                                          // SYNC
    (14, &[F::Bytes, F::Bytes]),                        // SET_VERSIONSTAMPED
    (15, &[F::U64, F::U64, F::Keys, F::Ranges]),        // BEGIN_AT
    (40, &[F::Bytes]),                                  // OUTCOME
    (41, &[]),                                          // SNAPSHOT
    (42, &[F::U64, F::Bytes]),                          // SNAPSHOT_GET
    (43, &[F::U64, F::Bytes, F::Bytes, F::U64, F::U8]), // SNAPSHOT_RANGE
    (44, &[F::Bytes]),                                  // NAMED_SNAPSHOT
    (45, &[F::Bytes]),                                  // LOCKS
];

fn seed() -> u64 {
    let seed = match std::env::var("TXVFS_SEED").ok().as_deref() {
        Some("random") => {
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos()
                as u64
        }
        Some(s) => s.parse().expect("TXVFS_SEED: a number or `random`"),
        None => 37,
    };
    println!("seed {seed} (TXVFS_SEED={seed} repeats this run)");
    seed
}

/// A short byte string: keys near each other (so that reads meet writes), names, garbage.
fn bytes(rng: &mut SmallRng) -> Vec<u8> {
    match rng.gen_range(0..10) {
        0 => Vec::new(),
        1 => (0..rng.gen_range(0..300)).map(|_| rng.gen()).collect(),
        2 => b"snap-a".to_vec(),
        3 => b"../x".to_vec(),
        _ => {
            let mut k = b"z".to_vec();
            k.extend((0..rng.gen_range(0..4)).map(|_| b"abc"[rng.gen_range(0..3)]));
            k
        }
    }
}

fn integer(rng: &mut SmallRng) -> u64 {
    match rng.gen_range(0..6) {
        0 => 0,
        1 => 1,
        2 => u64::MAX,
        3 => rng.gen_range(0..100),
        4 => 1 << rng.gen_range(0..64),
        _ => rng.gen(),
    }
}

fn field(rng: &mut SmallRng, f: F, out: &mut Vec<u8>) {
    let put = |b: &[u8], out: &mut Vec<u8>| {
        out.extend_from_slice(&(b.len() as u32).to_le_bytes());
        out.extend_from_slice(b);
    };
    match f {
        F::U8 => out.push(rng.gen_range(0..3)),
        F::U64 => out.extend_from_slice(&integer(rng).to_le_bytes()),
        F::Bytes => put(&bytes(rng), out),
        F::Keys | F::Ranges => {
            let n = rng.gen_range(0..4u64);
            // Now and then a count far beyond what follows.
            let claimed = if rng.gen_bool(0.1) { integer(rng) } else { n };
            out.extend_from_slice(&claimed.to_le_bytes());
            for _ in 0..n {
                put(&bytes(rng), out);
                if matches!(f, F::Ranges) {
                    put(&bytes(rng), out);
                }
            }
        }
    }
}

/// One request: well formed, mutated, or garbage.
fn request(rng: &mut SmallRng) -> Vec<u8> {
    let (op, fields) = OPS[rng.gen_range(0..OPS.len())];
    let mut body = vec![if rng.gen_bool(0.03) { rng.gen() } else { op }];
    let n = if rng.gen_bool(0.9) { fields.len() } else { rng.gen_range(0..=fields.len()) };
    for &f in &fields[..n] {
        field(rng, f, &mut body);
    }
    if rng.gen_bool(0.15) {
        for _ in 0..rng.gen_range(1..4) {
            let i = rng.gen_range(0..body.len());
            body[i] = rng.gen();
        }
    }
    let mut len = (body.len() as u32).to_le_bytes();
    match rng.gen_range(0..40) {
        0 => len = rng.gen::<u32>().to_le_bytes(),
        1 => len = 0u32.to_le_bytes(),
        _ => {}
    }
    let mut frame = len.to_vec();
    frame.extend_from_slice(&body);
    if rng.gen_bool(0.02) {
        frame.truncate(rng.gen_range(0..frame.len()));
    }
    frame
}

#[test]
fn random_sessions_on_the_socket_never_hurt_the_owner() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        PANICS.fetch_add(1, Ordering::SeqCst);
        default(info);
    }));
    let seed = seed();
    let secs: f64 =
        std::env::var("TXVFS_FUZZ_SECS").ok().and_then(|s| s.parse().ok()).unwrap_or(3.0);
    let d = tempfile::tempdir().unwrap();
    let uri = d.path().to_str().unwrap().to_string();
    let b = txvfs::kv::open(&uri).unwrap();
    let mut t = b.begin().unwrap();
    t.set(b"kept", b"1").unwrap();
    t.commit(true).unwrap();
    let mut rng = SmallRng::seed_from_u64(seed);
    let deadline = Instant::now() + Duration::from_secs_f64(secs);
    let (mut sessions, mut requests, mut replied) = (0u64, 0u64, 0u64);
    while Instant::now() < deadline {
        let mut s = UnixStream::connect(d.path().join("txvfs.sock")).unwrap();
        let mut out = Vec::new();
        if rng.gen_bool(0.9) {
            out.extend_from_slice(&9u32.to_le_bytes());
            out.push(1);
            out.extend_from_slice(&1u64.to_le_bytes());
        }
        for _ in 0..rng.gen_range(1..30) {
            out.extend_from_slice(&request(&mut rng));
            requests += 1;
        }
        // The whole session, then the end of it: the owner answers what it can and closes.
        let _ = s.write_all(&out);
        let _ = s.shutdown(std::net::Shutdown::Write);
        s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        let t = Instant::now();
        let mut got = Vec::new();
        match s.read_to_end(&mut got) {
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => {}
            Err(e) => panic!("session {sessions} (seed {seed}): held {:?}: {e}", t.elapsed()),
        }
        replied += got.len() as u64;
        sessions += 1;
    }
    println!("{sessions} sessions, {requests} requests, {replied} bytes of replies");
    assert!(sessions > 10, "the fuzzer ran ({sessions} sessions)");
    assert_eq!(PANICS.load(Ordering::SeqCst), 0, "a thread panicked (seed {seed})");
    // The owner still serves another process, and its own data is there.
    let mut other = Agent::start(&uri, AGENT);
    assert_eq!(other.role, "client");
    assert_eq!(other.ask("set after fuzz"), "ok");
    assert_eq!(other.ask("get after"), "fuzz");
    let mut t = b.begin().unwrap();
    assert!(t.get(b"kept").unwrap().is_some() || t.get(b"after").unwrap().is_some());
}
