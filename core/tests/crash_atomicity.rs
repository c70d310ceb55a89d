//! Crash atomicity on RocksDB with a real `kill -9`: a child process (this test binary, run
//! again) commits multi-file transactions in a loop while the parent kills it at a random
//! moment, reopens the store and checks it, hundreds of times over one store.
//!
//! Transaction N rewrites /t/a, /t/b and /t/c (each tagged with N and a checksum, sizes moving
//! across the inline limit), sets an xattr to N, renames /t/r{N-1} to /t/r{N}, creates /t/c{N}
//! and unlinks /t/c{N-2}, updates one 64 KiB region of /t/big (every fifth transaction
//! rewrites all of it), and unlinks /o/h{N}, which the child holds open: an orphan. After each
//! kill the parent checks that every transaction is whole or absent (every file and name
//! agrees on one N, /t/big is exactly what N implies), that no transaction the child reported
//! committed is lost, and that reopening reaped every orphan and leaked nothing (no orphan
//! records; inodes, blocks and counters match the reachable tree).

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use std::collections::{BTreeMap, BTreeSet};
use std::io::BufRead;
use std::os::unix::process::ExitStatusExt;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};
use txvfs::kv::{self, decode_counter};
use txvfs::schema::{self, Meta};
use txvfs::{File, FileSystem, OpenOptions, Store, XattrFlags};

const TEST_NAME: &str = "sigkill_never_tears_a_transaction_or_loses_a_reported_commit";
const CHILD_ENV: &str = "TXVFS_CRASH_CHILD_DIR";
const KILLS: usize = 300;

const BS: usize = 64 << 10;
const REGIONS: u64 = 4;
const HEAD: usize = 1000;
const TAIL: usize = 100;
const BIG_LEN: usize = HEAD + REGIONS as usize * BS + TAIL;
const FULL_EVERY: u64 = 5;
const HELD_ORPHANS: usize = 6;

/// `len` bytes determined by (tag, part): a 16-byte header naming them, then pseudo-random.
fn fill(tag: u64, part: u64, len: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(len);
    out.extend_from_slice(&tag.to_le_bytes());
    out.extend_from_slice(&part.to_le_bytes());
    let mut x = tag.wrapping_mul(0x9e3779b97f4a7c15) ^ part.wrapping_mul(0xbf58476d1ce4e5b9) | 1;
    while out.len() < len {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        out.extend_from_slice(&x.to_le_bytes());
    }
    out.truncate(len);
    out
}

fn fnv(data: &[u8]) -> u64 {
    data.iter().fold(0xcbf29ce484222325u64, |h, &b| (h ^ b as u64).wrapping_mul(0x100000001b3))
}

fn code(name: &str) -> u64 {
    fnv(name.as_bytes())
}

/// Contents of small file `name` at transaction `n`: "name n len\n", a body, a checksum.
/// Lengths range over 0..9000, so files move in and out of the 4 KiB inline limit.
fn encode(name: &str, n: u64) -> Vec<u8> {
    let len = (fnv(&[&n.to_le_bytes()[..], name.as_bytes()].concat()) % 9000) as usize;
    let mut v = format!("{name} {n} {len}\n").into_bytes();
    v.extend(fill(n, code(name), len));
    let sum = fnv(&v);
    v.extend(format!("\n{sum:016x}").into_bytes());
    v
}

/// The N a small file was written at, after checking its checksum and body.
fn decode(name: &str, v: &[u8]) -> u64 {
    let nl = v.iter().position(|&b| b == b'\n').unwrap_or_else(|| panic!("{name}: no header"));
    let head = std::str::from_utf8(&v[..nl]).unwrap();
    let parts: Vec<&str> = head.split(' ').collect();
    assert_eq!(parts.len(), 3, "{name}: bad header {head:?}");
    assert_eq!(parts[0], name, "{name}: header names another file");
    let n: u64 = parts[1].parse().unwrap();
    assert_eq!(v, encode(name, n).as_slice(), "{name}: torn or corrupt contents for N={n}");
    n
}

fn full_tag(n: u64) -> u64 {
    n - n % FULL_EVERY
}

/// /t/big after transaction `n`: each region holds the data of the last transaction that
/// wrote it, the head and tail those of the last full rewrite.
fn expected_big(n: u64) -> Vec<u8> {
    let full = full_tag(n);
    let mut v = fill(full, 100, HEAD);
    for j in 0..REGIONS {
        let last = (full + 1..=n).rev().find(|m| m % REGIONS == j).unwrap_or(full);
        v.extend(fill(last, j, BS));
    }
    v.extend(fill(full, 101, TAIL));
    v
}

fn run_transaction(store: &Store, n: u64, held: &mut Vec<File>) -> txvfs::Result<()> {
    if n > 0 {
        // An orphan-to-be: created and written on its own, unlinked by the transaction.
        let wb = OpenOptions::new().write(true).create(true).truncate(true).write_back(true);
        let h = store.open(format!("/o/h{n}"), &wb)?;
        h.write(&fill(n, 200, 70_000))?;
        held.push(h);
        if held.len() > HELD_ORPHANS {
            held.remove(0).close()?; // the last close of an unlinked file frees it
        }
    }
    let tx = store.begin()?;
    if n == 0 {
        tx.mkdir("/t", 0o755)?;
        tx.mkdir("/o", 0o755)?;
        tx.write_file("/t/r0", &encode("r", 0))?;
    }
    for name in ["a", "b", "c"] {
        tx.write_file(format!("/t/{name}"), &encode(name, n))?;
    }
    tx.setxattr("/t/a", "user.n", n.to_string().as_bytes(), XattrFlags::Any)?;
    if n % FULL_EVERY == 0 {
        tx.write_file("/t/big", &expected_big(n))?;
    } else {
        let j = n % REGIONS;
        let f = tx.open("/t/big", &OpenOptions::new().write(true))?;
        // Unaligned: spans two blocks, read-modify-write of both.
        f.write_at(&fill(n, j, BS), (HEAD + j as usize * BS) as u64)?;
    }
    if n > 0 {
        tx.rename(format!("/t/r{}", n - 1), format!("/t/r{n}"))?;
        if n % 2 == 0 {
            tx.write_file(format!("/t/r{n}"), &encode("r", n))?;
        }
        tx.unlink(format!("/o/h{n}"))?;
    }
    // Asks for write-back: a transaction's handle must still put every write in the commit.
    let c = tx.open(
        format!("/t/c{n}"),
        &OpenOptions::new().write(true).create_new(true).write_back(true),
    )?;
    c.write(&encode("c", n))?;
    if n >= 2 {
        tx.unlink(format!("/t/c{}", n - 2))?;
    }
    tx.commit()
}

/// The child: commit transactions until killed, reporting each after its commit returns.
fn child(dir: &str) -> ! {
    let store = Store::open(dir).unwrap();
    println!("opened");
    let mut n = match store.read_file("/t/a") {
        Ok(v) => decode("a", &v) + 1,
        Err(_) => 0,
    };
    let mut held = Vec::new();
    loop {
        run_transaction(&store, n, &mut held).unwrap();
        println!("committed {n}");
        n += 1;
    }
}

/// Everything reachable from the root: ino -> (is regular file, size), and every path.
fn walk(store: &Store) -> (BTreeMap<u64, (bool, u64)>, Vec<String>) {
    let mut inos = BTreeMap::new();
    let mut paths = Vec::new();
    let mut dirs = vec![String::new()];
    inos.insert(store.stat("/").unwrap().ino, (false, 0));
    while let Some(d) = dirs.pop() {
        for e in store.readdir(if d.is_empty() { "/" } else { &d }, None, 0).unwrap() {
            let p = format!("{d}/{}", String::from_utf8(e.name.into_vec()).unwrap());
            let st = store.lstat(&p).unwrap();
            assert_eq!(st.ino, e.ino, "{p}: entry and inode disagree");
            inos.insert(st.ino, (st.is_file(), st.size));
            if st.is_dir() {
                dirs.push(p.clone());
            }
            paths.push(p);
        }
    }
    (inos, paths)
}

/// Checks the reopened store; returns the N it holds (None: not even transaction 0) and how
/// many orphan records the killed child left behind.
fn check(dir: &str) -> (Option<u64>, usize) {
    // Count the orphan records through the raw backend first; the store then opens the same
    // instance and must reap them.
    let raw = kv::open(dir).unwrap();
    let (os, oe) = schema::orphan_range();
    let left = raw.begin().unwrap().get_range(&os, &oe, 0, false).unwrap().len();
    let store = Store::open(dir).unwrap();

    // No leaks: orphan records were reaped at open; every inode, block and xattr key belongs
    // to a reachable inode, and the counters agree with the tree.
    let (inos, paths) = walk(&store);
    let mut tx = raw.begin().unwrap();
    let orphans = tx.get_range(&os, &oe, 0, false).unwrap();
    assert!(orphans.is_empty(), "{} orphan records survived reopening", orphans.len());
    let all = tx.get_range(&[], &[0xff], 0, false).unwrap();
    let ino_of = |k: &[u8]| u64::from_be_bytes(k[1..9].try_into().unwrap());
    let mut stored_inodes = BTreeSet::new();
    for (k, _) in &all {
        match k[0] {
            b'I' if k.len() == 9 => {
                stored_inodes.insert(ino_of(k));
            }
            b'I' | b'X' => {
                assert!(inos.contains_key(&ino_of(k)), "key {k:?} of an unreachable inode")
            }
            b'B' => {
                let (is_file, size) =
                    *inos.get(&ino_of(k)).unwrap_or_else(|| panic!("block of unreachable inode"));
                assert!(is_file, "block of a non-file");
                let idx = u64::from_be_bytes(k[9..17].try_into().unwrap());
                assert!(idx * (BS as u64) < size, "block {idx} beyond the size {size}");
            }
            _ => {}
        }
    }
    let reachable: BTreeSet<u64> = inos.keys().copied().collect();
    assert_eq!(
        stored_inodes, reachable,
        "stored inodes differ from reachable ones (leak or dangling entry)"
    );
    let mut counter = |m| decode_counter(tx.snapshot_get(&schema::meta_key(m)).unwrap().as_deref());
    assert_eq!(counter(Meta::Inodes), inos.len() as u64, "inode counter");
    assert_eq!(store.statfs().unwrap().files, inos.len() as u64);
    let bytes: u64 = inos.values().filter(|v| v.0).map(|v| v.1).sum();
    assert_eq!(counter(Meta::Bytes), bytes, "byte counter");

    // Atomicity: one N everywhere.
    let Ok(a) = store.read_file("/t/a") else {
        assert_eq!(paths.len(), 0, "transaction 0 is partly there: {paths:?}");
        return (None, left);
    };
    let n = decode("a", &a);
    for name in ["b", "c"] {
        assert_eq!(
            decode(name, &store.read_file(format!("/t/{name}")).unwrap()),
            n,
            "/t/{name} vs /t/a"
        );
    }
    assert_eq!(store.getxattr("/t/a", "user.n").unwrap(), n.to_string().as_bytes());
    let big = store.read_file("/t/big").unwrap();
    assert_eq!(big.len(), BIG_LEN);
    if big != expected_big(n) {
        let regions: Vec<_> = big
            .chunks(BS)
            .map(|c| (u64::from_le_bytes(c[..8].try_into().unwrap()), fnv(c)))
            .collect();
        panic!("/t/big does not match N={n}: {regions:?}");
    }
    let mut want: BTreeSet<String> = ["a", "b", "c", "big"]
        .iter()
        .map(|s| format!("/t/{s}"))
        .chain([format!("/t/r{n}"), format!("/t/c{n}")])
        .collect();
    if n >= 1 {
        want.insert(format!("/t/c{}", n - 1));
    }
    want.insert("/t".into());
    want.insert("/o".into());
    // The orphan-to-be of the next transaction may exist: created, not yet unlinked.
    let next = format!("/o/h{}", n + 1);
    let got: BTreeSet<String> = paths.into_iter().filter(|p| *p != next).collect();
    assert_eq!(got, want, "names disagree with N={n}");
    assert_eq!(decode("r", &store.read_file(format!("/t/r{n}")).unwrap()), n - n % 2);
    assert_eq!(decode("c", &store.read_file(format!("/t/c{n}")).unwrap()), n);
    if n >= 1 {
        assert_eq!(decode("c", &store.read_file(format!("/t/c{}", n - 1)).unwrap()), n - 1);
    }
    (Some(n), left)
}

struct Run {
    reported: Option<u64>,
    ms_after_open: u64,
}

fn kill_child(dir: &str, rng: &mut SmallRng) -> Run {
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", TEST_NAME, "--nocapture", "--test-threads=1"])
        .env(CHILD_ENV, dir)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let (send, recv) = mpsc::channel();
    let reader = std::thread::spawn(move || {
        for line in std::io::BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if send.send(line).is_err() {
                break;
            }
        }
    });
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        match recv.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
            Ok(l) if l.ends_with("opened") => break, // libtest may precede it on the line
            Ok(_) => {}
            Err(e) => {
                let _ = child.kill();
                panic!("child never opened the store ({e}); status {:?}", child.wait());
            }
        }
    }
    let ms_after_open = rng.gen_range(2..=100);
    std::thread::sleep(Duration::from_millis(ms_after_open));
    child.kill().unwrap();
    let status = child.wait().unwrap();
    reader.join().unwrap();
    let mut reported = None;
    for line in recv.try_iter() {
        if let Some(n) = line.strip_prefix("committed ") {
            reported = Some(n.parse::<u64>().unwrap());
        }
    }
    assert_eq!(status.signal(), Some(9), "child ended other than by SIGKILL: {status:?}");
    Run { reported, ms_after_open }
}

#[test]
fn sigkill_never_tears_a_transaction_or_loses_a_reported_commit() {
    if let Ok(dir) = std::env::var(CHILD_ENV) {
        child(&dir);
    }
    let started = Instant::now();
    let d = tempfile::tempdir().unwrap();
    let dir = d.path().join("store");
    let dir = dir.to_str().unwrap();
    let mut rng = SmallRng::seed_from_u64(std::process::id() as u64);
    let mut prev: Option<u64> = None;
    let (mut in_flight, mut idle, mut total_delay, mut orphans) = (0, 0, 0, 0);
    for i in 0..KILLS {
        let run = kill_child(dir, &mut rng);
        total_delay += run.ms_after_open;
        let (now, left) = check(dir);
        orphans += left;
        // Never lose a commit the child saw return; at most the one in flight appears extra.
        if let Some(r) = run.reported {
            assert!(now >= Some(r), "kill {i}: reported commit {r} lost, store holds {now:?}");
            assert!(now <= Some(r + 1), "kill {i}: store holds {now:?}, beyond {r} + 1");
            in_flight += (now == Some(r + 1)) as u32;
        } else {
            // Nothing reported: the store holds what it held, or one more transaction.
            let one_more = prev.map_or(Some(0), |p| Some(p + 1));
            assert!(now == prev || now == one_more, "kill {i}: {prev:?} became {now:?}");
            idle += 1;
        }
        assert!(now >= prev, "kill {i}: the store went back from {prev:?} to {now:?}");
        prev = now;
    }
    eprintln!(
        "{KILLS} kills in {:?} (mean delay {} ms): {} transactions committed, {in_flight} kills \
         left an unreported transaction committed, {idle} kills before any report, {orphans} \
         orphans reaped at reopen",
        started.elapsed(),
        total_delay / KILLS as u64,
        prev.map_or(0, |p| p + 1),
    );
    assert!(prev.unwrap_or(0) as usize > KILLS, "too few transactions to mean anything");
    assert!(orphans > KILLS, "kills left too few orphans to test reaping");
}
