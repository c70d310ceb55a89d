//! txvfs-powercut: the driver of the power-loss test (see tests/powercut/README.md).
//!
//!   txvfs-powercut cycle STORE ACKLOG [--nosync] [--lanes N] [--run A:B]
//!                                   check lanes 0..N, then commit on lanes A..B until killed
//!   txvfs-powercut join STORE ACKLOG [--nosync] --run A:B
//!                                   commit on lanes A..B until killed (no check)
//!   txvfs-powercut check STORE ACKLOG [--lanes N]              check only
//!
//! STORE is a RocksDB store (on the lazyfs mount); ACKLOG is a file on the real disk. N lanes
//! (default 2) are checked, and lanes A..B (default all N) run at once, one thread each, in
//! /La, ..., so that concurrent commits share fsyncs (group commit). `join` runs more lanes
//! in another process on the same store while a `cycle` process runs: the store is shared,
//! the first process its owner and the joiners its clients (on lazyfs, through an abstract
//! socket: the file system cannot hold a socket file); each says `running as owner` or
//! `running as client`. When the owner is killed, a client takes over (a failover) and the
//! lanes go on; every process appends its acknowledgements to the same ACKLOG. Step G (G = 1, 2, ...) of a lane is an explicit transaction
//! that rewrites tx/f0..f2 (sizes across the inline limit, all tagged G), one 16 KiB region
//! of tx/big, the step file tx/gen, renames tx/r{G-1} to tx/r{G}, moves money between the
//! five bank/ accounts (the amounts follow from G, so the balances after G are known) and
//! unlinks auto/a{G-KEEP}; `commit()` makes it durable, then "tx LANE G" is appended to
//! ACKLOG and fsynced. Then an auto-commit write of auto/aG (through a write-through or a
//! write-back handle and `File::sync`, or `write_file` and `Store::sync`), acknowledged as
//! "auto LANE G"; its handle stays open past the step that unlinks the file (an orphan).
//! With --nosync (the negative control) commits use `commit_durable(false)`
//! and nothing is synced, yet every step is still acknowledged: the check must then find
//! lost acknowledged commits after a cut.
//!
//! The store's change feed is on; the owner's consumer thread reads it while the lanes run,
//! and the check resumes it and checks it against the store and the acks (see feed.rs).
//!
//! The check prints one line per problem and exits 0 (whole, nothing acknowledged lost),
//! 3 (only acknowledged commits lost) or 4 (anything else: a torn transaction, a wrong
//! file, a store that does not open).

use std::collections::{BTreeSet, VecDeque};
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::sync::{Arc, Mutex};
use txvfs::{ErrorKind, File, FileSystem, OpenOptions, QuotaLimits, Store, Watcher};

mod feed;

const FILES: [&str; 3] = ["f0", "f1", "f2"];
const REGIONS: u64 = 8;
const REGION: usize = 16 << 10;
const ACCOUNTS: usize = 5;
const OPENING: u64 = 1000;
/// Step G unlinks /auto/a{G-KEEP}.
const KEEP: u64 = 20;

fn mix(a: u64, b: u64) -> u64 {
    let mut x = a.wrapping_mul(0x9e3779b97f4a7c15) ^ b.wrapping_mul(0xbf58476d1ce4e5b9);
    x ^= x >> 31;
    x = x.wrapping_mul(0x94d049bb133111eb);
    x ^ (x >> 29)
}

fn name_code(name: &str) -> u64 {
    name.bytes().fold(0xcbf29ce484222325u64, |h, b| (h ^ b as u64).wrapping_mul(0x100000001b3))
}

/// `len` bytes determined by (tag, part).
fn fill(tag: u64, part: u64, len: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(len + 8);
    let mut x = mix(tag, part) | 1;
    while out.len() < len {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        out.extend_from_slice(&x.to_le_bytes());
    }
    out.truncate(len);
    out
}

/// Contents of file `name` (its path) at step `g`: a header naming both, then 0..20000
/// bytes, so that files move in and out of the 4 KiB inline limit.
fn contents(name: &str, g: u64) -> Vec<u8> {
    let len = (mix(g, name_code(name)) % 20_000) as usize;
    let mut v = format!("{name} {g}\n").into_bytes();
    v.extend(fill(g, name_code(name), len));
    v
}

/// The step a file's contents belong to, if they are exactly what that step writes.
fn step_of(name: &str, v: &[u8]) -> Option<u64> {
    let nl = v.iter().position(|&b| b == b'\n')?;
    let head = std::str::from_utf8(&v[..nl]).ok()?;
    let g: u64 = head.strip_prefix(name)?.strip_prefix(' ')?.parse().ok()?;
    (v == contents(name, g).as_slice()).then_some(g)
}

/// /tx/big after step g: region j holds the data of the last step that wrote it.
fn expected_big(g: u64) -> Vec<u8> {
    let mut v = Vec::with_capacity(REGIONS as usize * REGION);
    for j in 0..REGIONS {
        let last = (1..=g).rev().find(|m| m % REGIONS == j).unwrap_or(0);
        v.extend(fill(last, j, REGION));
    }
    v
}

/// The transfer of step g: (from, to, amount) given the balances before it.
fn transfer(g: u64, balances: &[u64; ACCOUNTS]) -> (usize, usize, u64) {
    let h = mix(g, 77);
    let from = (h % ACCOUNTS as u64) as usize;
    let to = ((h >> 8) % ACCOUNTS as u64) as usize;
    (from, to, ((h >> 16) % 200).min(balances[from]))
}

fn balances_after(g: u64) -> [u64; ACCOUNTS] {
    let mut b = [OPENING; ACCOUNTS];
    for m in 1..=g {
        let (from, to, amount) = transfer(m, &b);
        b[from] -= amount;
        b[to] += amount;
    }
    b
}

fn parse_u64(v: &[u8]) -> Option<u64> {
    std::str::from_utf8(v).ok()?.trim().parse().ok()
}

/// The step lane `p` (a path prefix, "/L0") is at: 0 before its step 1 committed.
fn current_step(store: &Store, p: &str) -> txvfs::Result<u64> {
    match store.read_file(format!("{p}/tx/gen")) {
        Ok(v) => Ok(parse_u64(&v).unwrap_or(u64::MAX)),
        Err(e) if e.kind() == ErrorKind::NotFound => Ok(0),
        Err(e) => Err(e),
    }
}

fn run_step(
    store: &Store,
    p: &str,
    g: u64,
    durable: bool,
    balances: &mut [u64; ACCOUNTS],
) -> txvfs::Result<()> {
    let tx = store.begin()?;
    if g == 1 {
        tx.mkdir(p, 0o755)?;
        // Each lane is a quota tree: every commit also counts its bytes and inodes there, and
        // `txvfs fsck` after each cut recounts the tree and compares (docs/quotas.md).
        tx.set_quota(p, QuotaLimits { bytes: Some(1 << 30), inodes: Some(1 << 20) })?;
        for d in ["/tx", "/bank", "/auto"] {
            tx.mkdir(format!("{p}{d}"), 0o755)?;
        }
        for (i, b) in balances.iter().enumerate() {
            tx.write_file(format!("{p}/bank/a{i}"), b.to_string().as_bytes())?;
        }
        tx.write_file(format!("{p}/tx/r0"), b"")?;
        tx.write_file(format!("{p}/tx/big"), &expected_big(0))?;
    }
    for name in FILES {
        let path = format!("{p}/tx/{name}");
        tx.write_file(&path, &contents(&path, g))?;
    }
    let j = g % REGIONS;
    let big = tx.open(format!("{p}/tx/big"), &OpenOptions::new().write(true))?;
    big.write_at(&fill(g, j, REGION), j * REGION as u64)?;
    big.close()?;
    tx.rename(format!("{p}/tx/r{}", g - 1), format!("{p}/tx/r{g}"))?;
    let (from, to, amount) = transfer(g, balances);
    let mut next = *balances;
    next[from] -= amount;
    next[to] += amount;
    for i in [from, to] {
        tx.write_file(format!("{p}/bank/a{i}"), next[i].to_string().as_bytes())?;
    }
    let old = format!("{p}/auto/a{}", g.saturating_sub(KEEP));
    if g > KEEP && tx.exists(&old)? {
        tx.unlink(&old)?;
    }
    tx.write_file(format!("{p}/tx/gen"), g.to_string().as_bytes())?;
    tx.commit_durable(durable)?;
    *balances = next;
    Ok(())
}

/// The auto-commit half of step g: each call commits on its own; a sync makes them durable.
/// Returns the handle it wrote through, if any, still open.
fn run_auto(store: &Store, p: &str, g: u64, durable: bool) -> txvfs::Result<Option<File>> {
    let path = format!("{p}/auto/a{g}");
    let data = contents(&path, g);
    if g % 3 != 0 {
        // Write-through, or write-back (the sync must flush the handle's buffer first).
        let o = OpenOptions::new().write(true).create(true).truncate(true).write_back(g % 3 == 2);
        let f = store.open(&path, &o)?;
        f.write(&data)?;
        if durable {
            f.sync()?;
        }
        Ok(Some(f))
    } else {
        store.write_file(&path, &data)?;
        if durable {
            store.sync()?;
        }
        Ok(None)
    }
}

/// What the ack log says of one lane.
#[derive(Default)]
struct Acks {
    tx: u64,
    auto: BTreeSet<u64>,
}

/// The ack log, lane by lane. Each record is one small write: a killed driver leaves whole
/// lines only.
fn read_acks(path: &str, lanes: usize) -> Vec<Acks> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let mut acks: Vec<Acks> = (0..lanes).map(|_| Acks::default()).collect();
    for line in text.lines() {
        let words: Vec<&str> = line.split(' ').collect();
        let (Some(kind), Some(Ok(lane)), Some(Ok(g))) = (
            words.first(),
            words.get(1).map(|w| w.parse::<usize>()),
            words.get(2).map(|w| w.parse::<u64>()),
        ) else {
            continue;
        };
        let Some(a) = acks.get_mut(lane) else { continue };
        match *kind {
            "tx" => a.tx = a.tx.max(g),
            "auto" => {
                a.auto.insert(g);
            }
            _ => {}
        }
    }
    acks
}

/// Checks lane `p` against its acks. Adds to (lost acknowledged commits, other problems).
fn check_lane(
    store: &Store,
    p: &str,
    acks: &Acks,
    lost: &mut Vec<String>,
    bad: &mut Vec<String>,
) -> txvfs::Result<()> {
    let g = current_step(store, p)?;
    if g == u64::MAX {
        bad.push(format!("{p}/tx/gen does not hold a step number"));
        return Ok(());
    }
    if acks.tx > g {
        lost.push(format!(
            "{p}: step {} was acknowledged durable, the store is at step {g}",
            acks.tx
        ));
    }
    if g == 0 {
        if store.exists(p)? {
            bad.push(format!("{p} exists before its step 1 committed (torn step 1)"));
        }
    } else {
        // Every file of step g says g: the transaction is whole.
        for name in FILES {
            let path = format!("{p}/tx/{name}");
            let v = store.read_file(&path)?;
            match step_of(&path, &v) {
                Some(s) if s == g => {}
                other => bad.push(format!(
                    "{path} holds step {other:?} ({} bytes), {p}/tx/gen says {g}",
                    v.len()
                )),
            }
        }
        if store.read_file(format!("{p}/tx/big"))? != expected_big(g) {
            bad.push(format!("{p}/tx/big is not what steps 0..={g} wrote"));
        }
        let names: BTreeSet<String> = store
            .readdir(format!("{p}/tx"), None, 0)?
            .into_iter()
            .map(|e| String::from_utf8_lossy(&e.name).into_owned())
            .collect();
        let want: BTreeSet<String> = ["big", "f0", "f1", "f2", "gen"]
            .iter()
            .map(|s| s.to_string())
            .chain([format!("r{g}")])
            .collect();
        if names != want {
            bad.push(format!("{p}/tx holds {names:?}, want {want:?}"));
        }
        for (i, w) in balances_after(g).iter().enumerate() {
            let have = parse_u64(&store.read_file(format!("{p}/bank/a{i}"))?);
            if have != Some(*w) {
                bad.push(format!("{p}/bank/a{i} holds {have:?}, step {g} implies {w}"));
            }
        }
    }
    // Auto-commit files: an acknowledged one is there (unless a later step unlinked it); an
    // unacknowledged one may be missing, empty (created, not yet written) or whole.
    let present: BTreeSet<u64> = if g == 0 {
        BTreeSet::new()
    } else {
        store
            .readdir(format!("{p}/auto"), None, 0)?
            .iter()
            .filter_map(|e| std::str::from_utf8(&e.name).ok()?.strip_prefix('a')?.parse().ok())
            .collect()
    };
    for &k in &acks.auto {
        if k + KEEP > g && !present.contains(&k) {
            lost.push(format!(
                "{p}/auto/a{k} was acknowledged durable and is missing (store at step {g})"
            ));
        }
    }
    for &k in &present {
        let path = format!("{p}/auto/a{k}");
        if k + KEEP <= g {
            bad.push(format!("{path} should have been unlinked by step {}", k + KEEP));
            continue;
        }
        let v = store.read_file(&path)?;
        if step_of(&path, &v) == Some(k) {
            continue;
        }
        match (v.is_empty(), acks.auto.contains(&k)) {
            (true, false) => {}
            // Created by one auto-commit call, its data written by the next: that one is lost.
            (true, true) => lost.push(format!("{path} was acknowledged durable and is empty")),
            (false, _) => bad.push(format!("{path} is wrong ({} bytes)", v.len())),
        }
    }
    Ok(())
}

/// How many orphan records (unlinked files still open at the crash) the store holds. The raw
/// backend is the instance `Store::open` then shares.
fn orphan_records(raw: &dyn txvfs::kv::Backend) -> txvfs::Result<usize> {
    let (start, end) = txvfs::schema::orphan_range();
    Ok(raw.begin()?.get_range(&start, &end, 0, false)?.len())
}

/// Appends one record to the ack log and fsyncs it (one write: whole lines only).
fn append_ack(log: &Mutex<std::fs::File>, line: &str) {
    let mut log = log.lock().unwrap();
    log.write_all(format!("{line}\n").as_bytes()).expect("ack log write");
    log.sync_data().expect("ack log fsync");
}

/// Runs lane `lane` from the step after `g` until the process is killed.
fn run_lane(store: Store, lane: usize, mut g: u64, durable: bool, log: Arc<Mutex<std::fs::File>>) {
    let p = format!("/L{lane}");
    let mut balances = balances_after(g);
    // Handles of auto/ files kept open past the step that unlinks them: that unlink leaves an
    // orphan, which a cut must leave recorded (fsck) and the next open reaps.
    let mut held = VecDeque::new();
    loop {
        g += 1;
        // Lanes touch disjoint files, but their first steps both create a directory in /.
        loop {
            match run_step(&store, &p, g, durable, &mut balances) {
                Err(e) if e.kind() == ErrorKind::Conflict => continue,
                r => break r.unwrap_or_else(|e| panic!("{p} step {g}: {e}")),
            }
        }
        append_ack(&log, &format!("tx {lane} {g}"));
        let f = run_auto(&store, &p, g, durable).unwrap_or_else(|e| panic!("{p} auto {g}: {e}"));
        append_ack(&log, &format!("auto {lane} {g}"));
        held.extend(f);
        if held.len() > KEEP as usize + 2 {
            held.pop_front()
                .unwrap()
                .close()
                .unwrap_or_else(|e| panic!("{p} closing an orphan: {e}"));
        }
    }
}

/// Whether this process owns the store (else it is a client of the process that does).
fn role(store_path: &str) -> &'static str {
    let canon = std::fs::canonicalize(store_path).expect("store directory");
    match txvfs::kv::SharedBackend::open(&canon, false) {
        Ok(b) if b.is_owner() => "owner",
        Ok(_) => "client",
        Err(e) => panic!("opening {store_path}: {e}"),
    }
}

/// Starts one thread per lane in `run`, each from the step the store holds, and waits for
/// them (for ever: the process is killed).
fn run_lanes(
    store: Store,
    store_path: &str,
    run: std::ops::Range<usize>,
    durable: bool,
    ack_path: &str,
    consumer: Option<Watcher>,
) -> ! {
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o644)
        .open(ack_path)
        .expect("ack log");
    let log = Arc::new(Mutex::new(log));
    let mut steps = Vec::new();
    for lane in run.clone() {
        steps.push(current_step(&store, &format!("/L{lane}")).expect("reading a lane's step"));
    }
    if let Some(w) = consumer {
        feed::consume(w, ack_path);
    }
    println!("running as {} from steps {steps:?}", role(store_path));
    std::io::stdout().flush().unwrap();
    let threads: Vec<_> = run
        .zip(steps)
        .map(|(lane, g)| {
            let (store, log) = (store.clone(), log.clone());
            std::thread::spawn(move || run_lane(store, lane, g, durable, log))
        })
        .collect();
    for t in threads {
        if t.join().is_err() {
            std::process::exit(1);
        }
    }
    std::process::exit(0);
}

/// The value after flag `name` in `args`, parsed.
fn flag<T: std::str::FromStr>(args: &[String], name: &str) -> Option<T> {
    let i = args.iter().position(|a| a == name)?;
    Some(args.get(i + 1).and_then(|v| v.parse().ok()).unwrap_or_else(|| panic!("{name} VALUE")))
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let (mode, store_path, ack_path) = match args.as_slice() {
        [_, mode, s, a, ..] if ["cycle", "check", "join"].contains(&mode.as_str()) => {
            (mode.as_str(), s.as_str(), a.as_str())
        }
        _ => {
            eprintln!(
                "usage: txvfs-powercut cycle|check|join STORE ACKLOG [--nosync] [--lanes N] \
                 [--run A:B]"
            );
            std::process::exit(2);
        }
    };
    let durable = !args[4..].iter().any(|a| a == "--nosync");
    let lanes: usize = flag(&args[4..], "--lanes").unwrap_or(2);
    assert!(lanes >= 1, "--lanes N, N >= 1");
    let run = match flag::<String>(&args[4..], "--run") {
        Some(r) => {
            let (a, b) = r.split_once(':').expect("--run A:B");
            a.parse().expect("--run A:B")..b.parse().expect("--run A:B")
        }
        None => 0..lanes,
    };
    if mode == "join" {
        let store = Store::open(store_path).unwrap_or_else(|e| panic!("joining: {e}"));
        run_lanes(store, store_path, run, durable, ack_path, None);
    }
    let opened = txvfs::kv::open(store_path).and_then(|raw| {
        let orphans = orphan_records(&*raw)?;
        let store = Store::open(store_path)?;
        feed::enable(&store, ack_path)?;
        Ok((store, raw, orphans))
    });
    let (store, raw, orphans) = match opened {
        Ok(s) => s,
        Err(e) => {
            println!("check: FAILED: the store does not open: {e}");
            std::process::exit(4);
        }
    };
    let acks = read_acks(ack_path, lanes);
    let (mut lost, mut bad, mut steps) = (Vec::new(), Vec::new(), Vec::new());
    for (lane, a) in acks.iter().enumerate() {
        let p = format!("/L{lane}");
        if let Err(e) = check_lane(&store, &p, a, &mut lost, &mut bad) {
            bad.push(format!("{p}: reading the store failed: {e}"));
        }
        steps.push(current_step(&store, &p).unwrap_or(0));
        // Step 1 made the lane's directory and its quota together.
        let quota = matches!(store.quota(&p), Ok(Some(q)) if q.path == p.as_bytes());
        if store.exists(&p).unwrap_or(false) && !quota {
            bad.push(format!("{p} is not a quota tree"));
        }
    }
    match orphan_records(&*raw) {
        Ok(0) => {}
        Ok(n) => bad.push(format!("{n} orphan records survived reopening")),
        Err(e) => bad.push(format!("reading the orphan records failed: {e}")),
    }
    let steps_known: Vec<u64> = steps.iter().map(|&g| if g == u64::MAX { 0 } else { g }).collect();
    let (consumer, fed) = feed::check(&store, ack_path, &acks, &steps_known, &mut lost, &mut bad);
    println!("check: {fed}");
    for problem in &lost {
        println!("check: LOST ACKNOWLEDGED COMMIT: {problem}");
    }
    for problem in &bad {
        println!("check: FAILED: {problem}");
    }
    if !bad.is_empty() {
        std::process::exit(4);
    }
    if !lost.is_empty() {
        std::process::exit(3);
    }
    let acked: Vec<String> =
        acks.iter().map(|a| format!("tx {} auto {}", a.tx, a.auto.len())).collect();
    println!(
        "check: ok: lanes at steps {steps:?}, acknowledged {}, {orphans} orphans reaped",
        acked.join(", ")
    );
    if mode == "check" {
        return;
    }
    drop(raw);
    run_lanes(store, store_path, run, durable, ack_path, consumer);
}
