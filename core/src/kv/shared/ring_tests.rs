//! Tests of the change ring (`ring.rs`).

use super::*;

/// The seed of a fuzzing test: `TXVFS_SEED` (a number, or `random`), else a fixed one;
/// printed.
fn fuzz_seed() -> u64 {
    let seed = match std::env::var("TXVFS_SEED").ok().as_deref() {
        Some("random") => crate::fs::leases::random_id(),
        Some(s) => s.parse().expect("TXVFS_SEED: a number or `random`"),
        None => 37,
    };
    println!("seed {seed} (TXVFS_SEED={seed} repeats this run)");
    seed
}

/// How long a fuzzing test runs: `TXVFS_FUZZ_SECS`, 2 s by default.
fn fuzz_time() -> std::time::Duration {
    let secs = std::env::var("TXVFS_FUZZ_SECS").ok().and_then(|s| s.parse().ok()).unwrap_or(2.0);
    std::time::Duration::from_secs_f64(secs)
}

fn set(k: &[u8]) -> Mutation {
    Mutation::Set(k.to_vec(), b"v".to_vec())
}

#[test]
fn a_reader_sees_each_commit_s_writes_once_and_resets_on_a_new_epoch() {
    let mut w = RingWriter::start(5).unwrap();
    let mut r = RingReader::adopt(&w.share().unwrap()).unwrap();
    assert!(matches!(r.changes(), Changes::Reset { version: 5, .. }));
    w.record(6, Some(&[set(b"a"), Mutation::ClearRange(b"b".to_vec(), b"c".to_vec())]));
    w.record(7, None);
    match r.changes() {
        Changes::Since { version: 7, writes } => {
            assert!(writes.iter().all(|(v, _)| *v == 6));
            let writes: Vec<Written> = writes.into_iter().map(|(_, w)| w).collect();
            assert!(touches(&writes, b"a") && touches(&writes, b"bb"));
            assert!(!touches(&writes, b"c") && touches_range(&writes, b"a", b"b"));
        }
        _ => panic!("expected the writes of 6 and 7"),
    }
    assert!(matches!(r.changes(), Changes::Since { version: 7, ref writes } if writes.is_empty()));
    assert_eq!(w.written_between(5, 6).unwrap().len(), 2);
    assert!(w.written_between(6, 7).unwrap().is_empty());
    assert!(w.written_between(1, 7).is_none(), "before the ring: unknown");
    // A new owner's ring: its readers start from its version.
    drop(w);
    let w = RingWriter::start(0).unwrap();
    let mut r = RingReader::adopt(&w.share().unwrap()).unwrap();
    assert!(matches!(r.changes(), Changes::Reset { version: 0, .. }));
}

#[test]
fn a_reader_lapped_by_the_writer_resets() {
    let mut w = RingWriter::start(0).unwrap();
    let mut r = RingReader::adopt(&w.share().unwrap()).unwrap();
    let _ = r.changes();
    let big = vec![7u8; 60_000];
    for v in 1..=80 {
        w.record(v, Some(&[set(&big)]));
    }
    assert!(matches!(r.changes(), Changes::Reset { version: 80, .. }));
    w.record(81, Some(&[set(b"k")]));
    assert!(matches!(r.changes(), Changes::Since { version: 81, ref writes } if writes.len() == 1));
}
/// A reader racing the writer never claims a version whose writes it has not seen, and
/// never sees a commit's writes under an older version: what a client's cache holds at
/// the version it claims is exact (a torn (version, head) pair made a cache keep a stale
/// value for ever: SQLite's mptest then never saw new rows).
#[test]
fn a_reader_racing_the_writer_sees_each_version_whole() {
    let mut w = RingWriter::start(0).unwrap();
    let mut r = RingReader::adopt(&w.share().unwrap()).unwrap();
    let _ = r.changes();
    let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let stop = done.clone();
    let writer = std::thread::spawn(move || {
        for v in 1..=3_000_000u64 {
            // Every commit writes its own key; every tenth writes nothing.
            if v % 10 == 0 {
                w.record(v, Some(&[]));
            } else {
                w.record(v, Some(&[set(&v.to_be_bytes())]));
            }
        }
        stop.store(true, Ordering::SeqCst);
    });
    // The versions whose writes this reader knows of, as a cache would: all up to `known`.
    let mut known = 0u64;
    let mut checks = 0u64;
    while !done.load(Ordering::SeqCst) {
        match r.changes() {
            Changes::Reset { version, .. } => known = version,
            Changes::Since { version, writes } => {
                let mut expect = known + 1;
                for (v, w) in writes {
                    assert!(v <= version, "a write of {v} seen under version {version}");
                    while expect % 10 == 0 {
                        expect += 1;
                    }
                    assert_eq!(v, expect, "writes of versions {known}..={version} skipped");
                    assert_eq!(w, Written::Key(v.to_be_bytes().to_vec()));
                    expect += 1;
                }
                while expect <= version && expect % 10 == 0 {
                    expect += 1;
                }
                assert!(expect > version, "version {version} claimed, writes seen to {expect}");
                known = version;
            }
        }
        checks += 1;
    }
    writer.join().unwrap();
    assert!(checks > 100, "the reader ran alongside the writer ({checks} reads)");
}
/// A writer stopped (or killed) inside the sequence lock: readers give up at once on
/// this look, in an epoch no owner writes, instead of waiting; a new owner's ring works.
#[test]
fn a_writer_stuck_inside_the_lock_does_not_hold_readers() {
    let mut w = RingWriter::start(3).unwrap();
    let mut r = RingReader::adopt(&w.share().unwrap()).unwrap();
    assert!(matches!(r.changes(), Changes::Reset { version: 3, .. }));
    w.record(4, Some(&[set(b"a")]));
    let seq = w.map.seq().load(Ordering::SeqCst);
    w.map.seq().store(seq | 1, Ordering::SeqCst);
    assert!(matches!(r.changes(), Changes::Reset { epoch: 0, version: 0 }));
    drop(w);
    let mut w2 = RingWriter::start(9).unwrap();
    let mut r = RingReader::adopt(&w2.share().unwrap()).unwrap();
    assert!(matches!(r.changes(), Changes::Reset { version: 9, .. }));
    w2.record(10, Some(&[set(b"b")]));
    assert!(matches!(r.changes(), Changes::Since { version: 10, ref writes } if writes.len() == 1));
}

/// Issue 37, item 1: a reader exactly one ring behind copies the ring while the writer has
/// written the next commit's records (at the reader's start position) but not yet announced
/// them. The copy must not be taken for the old commits: version 1's key would be lost and
/// the cache it keeps stale for ever.
#[test]
fn records_written_but_not_announced_never_pass_for_older_ones() {
    let mut w = RingWriter::start(0).unwrap();
    let mut r = RingReader::adopt(&w.share().unwrap()).unwrap();
    assert!(matches!(r.changes(), Changes::Reset { version: 0, .. }));
    // 64-byte records (a 43-byte key): 65,536 of them fill the ring exactly.
    let key = |v: u64| {
        let mut k = vec![b'k'; 35];
        k.extend_from_slice(&v.to_be_bytes());
        k
    };
    let per_ring = CAPACITY / 64;
    for v in 1..=per_ring {
        w.record(v, Some(&[set(&key(v))]));
    }
    assert_eq!(w.map.head().load(Ordering::SeqCst), CAPACITY);
    // The next commit's record lands on position 0 (where the reader starts) unannounced.
    let _ = w.write_records(per_ring + 1, Some(&[set(&key(per_ring + 1))]));
    match r.changes() {
        Changes::Reset { .. } => {}
        Changes::Since { version, writes } => {
            assert_eq!(version, per_ring);
            let first = writes.first().map(|(v, w)| (*v, w.clone()));
            assert_eq!(first, Some((1, Written::Key(key(1)))), "version 1's write lost");
            assert_eq!(writes.len() as u64, per_ring);
        }
    }
}

/// A reader that lets the writer get almost a ring ahead before each look, racing a writer
/// of records of varied sizes that is descheduled between writing a commit's records and
/// announcing them whenever they reach over the reader's start (the writer waits there for
/// the reader's next look, as a preempted owner would): every write the reader accepts is the
/// one its version wrote, and no version is skipped (a torn copy fails one of the two).
#[test]
fn a_reader_a_ring_behind_a_writer_of_varied_records_never_keeps_a_torn_copy() {
    use rand::{Rng, SeedableRng};
    use std::sync::atomic::AtomicBool;
    use std::sync::Arc;
    use std::time::{Duration, Instant};
    let seed: u64 =
        std::env::var("TXVFS_RING_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or(37);
    println!("seed {seed} (TXVFS_RING_SEED)");
    let mut w = RingWriter::start(0).unwrap();
    let mut r = RingReader::adopt(&w.share().unwrap()).unwrap();
    let probe = RingReader::adopt(&w.share().unwrap()).unwrap();
    let _ = r.changes();
    // The key of version v: its length and bytes follow from v alone. Records are 32 or 40
    // bytes, so that a lap often ends exactly on the start of a record of the same length
    // (where a torn copy parses cleanly instead of failing, as in the test above).
    fn key(v: u64) -> Vec<u8> {
        let len = 11 + 8 * (v.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 63) as usize;
        let mut k = v.to_be_bytes().to_vec();
        k.resize(len, (v % 251) as u8);
        k
    }
    let done = Arc::new(AtomicBool::new(false));
    // Where the reader's next copy starts; how often the writer paused and the reader looked.
    let (reader_at, pauses, looks) =
        (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let writer = {
        let (done, reader_at, pauses, looks) =
            (done.clone(), reader_at.clone(), pauses.clone(), looks.clone());
        std::thread::spawn(move || {
            let mut v = 0u64;
            while !done.load(Ordering::SeqCst) {
                v += 1;
                let before = w.map.head().load(Ordering::Relaxed);
                let head = w.write_records(v, Some(&[set(&key(v))]));
                let over = reader_at.load(Ordering::SeqCst) + CAPACITY;
                if before <= over && head > over {
                    let p = pauses.fetch_add(1, Ordering::SeqCst) + 1;
                    let until = Instant::now() + Duration::from_millis(100);
                    while looks.load(Ordering::SeqCst) < p && Instant::now() < until {
                        std::thread::yield_now();
                    }
                }
                w.publish_records(v, head);
            }
        })
    };
    let mut rng = rand::rngs::SmallRng::seed_from_u64(seed);
    let (mut known, mut checked, mut resets) = (0u64, 0u64, 0u64);
    let deadline = Instant::now() + Duration::from_secs(3);
    while Instant::now() < deadline {
        // Let the writer get to just under a ring ahead of this reader's position (or to
        // where it pauses over the reader's start).
        // Every other look half a ring behind, where it must succeed.
        let lag = if rng.gen_bool(0.5) { CAPACITY / 2 } else { CAPACITY - rng.gen_range(0..512) };
        let target = r.pos + lag;
        reader_at.store(r.pos, Ordering::SeqCst);
        let paused = pauses.load(Ordering::SeqCst);
        while probe.map.head().load(Ordering::Acquire) < target
            && pauses.load(Ordering::SeqCst) == paused
            && Instant::now() < deadline
        {
            std::hint::spin_loop();
        }
        let changes = r.changes();
        looks.store(pauses.load(Ordering::SeqCst), Ordering::SeqCst);
        match changes {
            Changes::Reset { version, .. } => {
                known = version;
                resets += 1;
            }
            Changes::Since { version, writes } => {
                for (i, (v, wr)) in writes.iter().enumerate() {
                    assert_eq!(*v, known + 1 + i as u64, "version skipped or repeated");
                    assert_eq!(*wr, Written::Key(key(*v)), "a torn write under version {v}");
                }
                assert_eq!(known + writes.len() as u64, version, "writes missing");
                known = version;
                checked += writes.len() as u64;
            }
        }
    }
    done.store(true, Ordering::SeqCst);
    writer.join().unwrap();
    let pauses = pauses.load(Ordering::SeqCst);
    println!("{checked} writes checked, {resets} resets, {pauses} pauses over the reader");
    assert!(checked > 1_000 && pauses > 10, "the race ran ({checked} writes, {pauses} pauses)");
}

/// The ring's memory, as a client holds it: nobody but the owner's mapping can change it,
/// nor shrink or grow it (a reader's mapping would fault), not even by reopening it through
/// /proc; and only such a memory is adopted.
#[test]
fn a_client_can_neither_write_nor_resize_the_ring() {
    use std::os::fd::{AsRawFd, FromRawFd};
    let mut w = RingWriter::start(0).unwrap();
    let fd = w.share().unwrap();
    let reopened = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(format!("/proc/self/fd/{}", fd.as_raw_fd()))
        .unwrap();
    for raw in [fd.as_raw_fd(), reopened.as_raw_fd()] {
        // SAFETY: plain system calls on open descriptors, from a live buffer.
        unsafe {
            assert_eq!(libc::pwrite(raw, b"x".as_ptr().cast(), 1, 0), -1, "written");
            assert_eq!(libc::ftruncate(raw, 0), -1, "shrunk");
            assert_eq!(libc::ftruncate(raw, (LEN * 2) as libc::off_t), -1, "grown");
            let p = libc::mmap(
                std::ptr::null_mut(),
                LEN,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                raw,
                0,
            );
            assert_eq!(p, libc::MAP_FAILED, "mapped for writing");
        }
    }
    // The owner still writes, and a reader of the memory sees it.
    let mut r = RingReader::adopt(&fd).unwrap();
    let _ = r.changes();
    w.record(1, Some(&[set(b"a")]));
    assert!(matches!(r.changes(), Changes::Since { version: 1, ref writes } if writes.len() == 1));
    // A memory that could still be written, or resized, is refused.
    let open = area::sealed_memfd(c"t", LEN).unwrap();
    assert!(RingReader::adopt(&open).is_err());
    // SAFETY: a plain system call, its descriptor owned at once.
    let unsealed = unsafe { OwnedFd::from_raw_fd(libc::memfd_create(c"t".as_ptr(), 0)) };
    assert!(RingReader::adopt(&unsealed).is_err());
}

/// Whatever bytes the ring holds, a reader parses them without panicking: into records or
/// into a refusal (fuzzed, seeded: `TXVFS_SEED`, for `TXVFS_FUZZ_SECS` seconds, 2 by default).
#[test]
fn the_ring_parser_takes_any_bytes() {
    use rand::{Rng, SeedableRng};
    let seed = fuzz_seed();
    let mut rng = rand::rngs::SmallRng::seed_from_u64(seed);
    let deadline = std::time::Instant::now() + fuzz_time();
    let mut runs = 0u64;
    // Valid records to mutate.
    let mut valid = Vec::new();
    for (v, k) in [(1u64, &b"key"[..]), (2, b""), (3, &[0xff; 40])] {
        let len = 4 + 8 + 1 + 4 + k.len() + 4;
        valid.extend_from_slice(&(len as u32).to_le_bytes());
        valid.extend_from_slice(&v.to_le_bytes());
        valid.push(0);
        valid.extend_from_slice(&(k.len() as u32).to_le_bytes());
        valid.extend_from_slice(k);
        valid.extend_from_slice(&0u32.to_le_bytes());
    }
    assert_eq!(parse(&valid, u64::MAX).map(|w| w.len()), Some(3));
    while std::time::Instant::now() < deadline {
        let bytes: Vec<u8> = if rng.gen_bool(0.5) {
            let mut b = valid.clone();
            for _ in 0..rng.gen_range(1..8) {
                let i = rng.gen_range(0..b.len());
                b[i] = rng.gen();
            }
            b.truncate(rng.gen_range(0..=b.len()));
            b
        } else {
            (0..rng.gen_range(0..256)).map(|_| rng.gen()).collect()
        };
        if let Some(writes) = parse(&bytes, rng.gen()) {
            assert!(writes.len() <= bytes.len() / 21, "more records than bytes allow");
        }
        runs += 1;
    }
    println!("ring parser: {runs} inputs, seed {seed}");
}
