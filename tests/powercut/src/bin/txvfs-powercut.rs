//! txvfs-powercut: the driver of the power-loss test (see tests/powercut/README.md).
//!
//!   txvfs-powercut cycle STORE ACKLOG [--nosync]   check the store, then commit until killed
//!   txvfs-powercut check STORE ACKLOG              check the store only
//!
//! STORE is a RocksDB store (on the lazyfs mount); ACKLOG is a file on the real disk. Step G
//! (G = 1, 2, ...) is an explicit transaction that rewrites /tx/f0..f2 (sizes across the
//! inline and block limits, all tagged G), one 16 KiB region of /tx/big, the generation file
//! /tx/gen, renames /tx/r{G-1} to /tx/r{G}, moves money between the five /bank accounts (the
//! amounts follow from G, so the balances after G are known) and unlinks /auto/a{G-KEEP};
//! `commit()` makes it durable, then "tx G" is appended to ACKLOG and fsynced. Then an
//! auto-commit write of /auto/aG (through a handle, or `write_file`), made durable by
//! `File::sync` or `Store::sync`, acknowledged as "auto G". With --nosync (the negative
//! control) commits use `commit_durable(false)` and nothing is synced, yet every step is
//! still acknowledged: the check must then find lost acknowledged commits after a cut.
//!
//! The check prints one line per problem and exits 0 (whole, nothing acknowledged lost),
//! 3 (only acknowledged commits lost) or 4 (anything else: a torn transaction, a wrong
//! file, a store that does not open).

use std::collections::BTreeSet;
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use txvfs::{ErrorKind, FileSystem, OpenOptions, Store};

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

/// Contents of file `name` at step `g`: a header naming both, then 0..20000 bytes, so files
/// move across the 4 KiB inline limit and over one 64 KiB block boundary... sometimes.
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

/// The step the store is at (0 before step 1 committed; the layout is created with step 1).
fn current_step(store: &Store) -> txvfs::Result<u64> {
    match store.read_file("/tx/gen") {
        Ok(v) => Ok(parse_u64(&v).unwrap_or(u64::MAX)),
        Err(e) if e.kind() == ErrorKind::NotFound => Ok(0),
        Err(e) => Err(e),
    }
}

fn run_step(store: &Store, g: u64, durable: bool, balances: &mut [u64; ACCOUNTS]) -> txvfs::Result<()> {
    let tx = store.begin()?;
    if g == 1 {
        for d in ["/tx", "/bank", "/auto"] {
            tx.mkdir(d, 0o755)?;
        }
        for (i, b) in balances.iter().enumerate() {
            tx.write_file(format!("/bank/a{i}"), b.to_string().as_bytes())?;
        }
        tx.write_file("/tx/r0", b"")?;
        tx.write_file("/tx/big", &expected_big(0))?;
    }
    for name in FILES {
        tx.write_file(format!("/tx/{name}"), &contents(name, g))?;
    }
    let j = g % REGIONS;
    let big = tx.open("/tx/big", &OpenOptions::new().write(true))?;
    big.write_at(&fill(g, j, REGION), j * REGION as u64)?;
    big.close()?;
    tx.rename(format!("/tx/r{}", g - 1), format!("/tx/r{g}"))?;
    let (from, to, amount) = transfer(g, balances);
    let mut next = *balances;
    next[from] -= amount;
    next[to] += amount;
    for i in [from, to] {
        tx.write_file(format!("/bank/a{i}"), next[i].to_string().as_bytes())?;
    }
    if g > KEEP && tx.exists(format!("/auto/a{}", g - KEEP))? {
        tx.unlink(format!("/auto/a{}", g - KEEP))?;
    }
    tx.write_file("/tx/gen", g.to_string().as_bytes())?;
    tx.commit_durable(durable)?;
    *balances = next;
    Ok(())
}

/// The auto-commit half of step g: each call commits on its own; a sync makes them durable.
fn run_auto(store: &Store, g: u64, durable: bool) -> txvfs::Result<()> {
    let (path, data) = (format!("/auto/a{g}"), contents(&format!("a{g}"), g));
    if g % 2 == 0 {
        let f = store.open(&path, &OpenOptions::new().write(true).create(true).truncate(true))?;
        f.write(&data)?;
        if durable {
            f.sync()?;
        }
        f.close()
    } else {
        store.write_file(&path, &data)?;
        if durable {
            store.sync()?;
        }
        Ok(())
    }
}

struct Acks {
    tx: u64,
    auto: BTreeSet<u64>,
}

fn read_acks(path: &str) -> Acks {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let mut acks = Acks { tx: 0, auto: BTreeSet::new() };
    // Each record is one small write: a killed driver leaves whole lines only.
    for line in text.lines() {
        match line.split_once(' ') {
            Some(("tx", g)) => acks.tx = acks.tx.max(g.parse().unwrap_or(0)),
            Some(("auto", g)) => {
                acks.auto.insert(g.parse().unwrap_or(0));
            }
            _ => {}
        }
    }
    acks
}

/// Checks the store against the ack log. Returns (lost acknowledged commits, other problems).
fn check(store: &Store, acks: &Acks) -> txvfs::Result<(Vec<String>, Vec<String>)> {
    let (mut lost, mut bad) = (Vec::new(), Vec::new());
    let g = current_step(store)?;
    if g == u64::MAX {
        bad.push("/tx/gen does not hold a step number".to_string());
        return Ok((lost, bad));
    }
    if acks.tx > g {
        lost.push(format!("step {} was acknowledged durable, the store is at step {g}", acks.tx));
    }
    if g == 0 {
        for d in ["/tx", "/bank", "/auto"] {
            if store.exists(d)? {
                bad.push(format!("{d} exists before step 1 committed (torn step 1)"));
            }
        }
    } else {
        // Every file of step g says g: the transaction is whole.
        for name in FILES {
            let v = store.read_file(format!("/tx/{name}"))?;
            match step_of(name, &v) {
                Some(s) if s == g => {}
                other => bad.push(format!("/tx/{name} holds step {other:?} ({} bytes), /tx/gen says {g}", v.len())),
            }
        }
        if store.read_file("/tx/big")? != expected_big(g) {
            bad.push(format!("/tx/big is not what steps 0..={g} wrote"));
        }
        let names: Vec<String> =
            store.readdir("/tx", None, 0)?.into_iter().map(|e| String::from_utf8_lossy(&e.name).into_owned()).collect();
        let want = ["big", "f0", "f1", "f2", "gen"].iter().map(|s| s.to_string()).chain([format!("r{g}")]).collect::<BTreeSet<_>>();
        if names.iter().cloned().collect::<BTreeSet<_>>() != want {
            bad.push(format!("/tx holds {names:?}, want {want:?}"));
        }
        let want = balances_after(g);
        for (i, w) in want.iter().enumerate() {
            let have = parse_u64(&store.read_file(format!("/bank/a{i}"))?);
            if have != Some(*w) {
                bad.push(format!("/bank/a{i} holds {have:?}, step {g} implies {w}"));
            }
        }
    }
    // Auto-commit files: an acknowledged one is there (unless a later step unlinked it); an
    // unacknowledged one may be missing, empty (created, not yet written) or whole.
    let present: BTreeSet<u64> = if g == 0 {
        BTreeSet::new()
    } else {
        store.readdir("/auto", None, 0)?.iter().filter_map(|e| std::str::from_utf8(&e.name).ok()?.strip_prefix('a')?.parse().ok()).collect()
    };
    for &k in &acks.auto {
        if k + KEEP > g && !present.contains(&k) {
            lost.push(format!("/auto/a{k} was acknowledged durable and is missing (store at step {g})"));
        }
    }
    for &k in &present {
        if k + KEEP <= g {
            bad.push(format!("/auto/a{k} should have been unlinked by step {}", k + KEEP));
            continue;
        }
        let v = store.read_file(format!("/auto/a{k}"))?;
        let whole = step_of(&format!("a{k}"), &v) == Some(k);
        if !whole && !(v.is_empty() && !acks.auto.contains(&k)) {
            bad.push(format!("/auto/a{k} is wrong ({} bytes)", v.len()));
        }
    }
    Ok((lost, bad))
}

fn append_ack(log: &mut std::fs::File, line: &str) {
    log.write_all(format!("{line}\n").as_bytes()).expect("ack log write");
    log.sync_data().expect("ack log fsync");
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let (mode, store_path, ack_path) = match args.as_slice() {
        [_, mode, s, a, ..] if mode == "cycle" || mode == "check" => (mode.as_str(), s.as_str(), a.as_str()),
        _ => {
            eprintln!("usage: txvfs-powercut cycle|check STORE ACKLOG [--nosync]");
            std::process::exit(2);
        }
    };
    let durable = !args[4..].iter().any(|a| a == "--nosync");
    let store = match Store::open(store_path) {
        Ok(s) => s,
        Err(e) => {
            println!("check: FAILED: the store does not open: {e}");
            std::process::exit(4);
        }
    };
    let acks = read_acks(ack_path);
    let (lost, bad) = match check(&store, &acks) {
        Ok(r) => r,
        Err(e) => (vec![], vec![format!("reading the store failed: {e}")]),
    };
    for p in &lost {
        println!("check: LOST ACKNOWLEDGED COMMIT: {p}");
    }
    for p in &bad {
        println!("check: FAILED: {p}");
    }
    let g = current_step(&store).unwrap_or(0);
    if !bad.is_empty() {
        std::process::exit(4);
    }
    if !lost.is_empty() {
        std::process::exit(3);
    }
    println!("check: ok: store at step {g}, acknowledged tx {} and {} auto", acks.tx, acks.auto.len());
    if mode == "check" {
        return;
    }
    let mut log = std::fs::OpenOptions::new().create(true).append(true).mode(0o644).open(ack_path).expect("ack log");
    let mut balances = balances_after(g);
    println!("running from step {}", g + 1);
    std::io::stdout().flush().unwrap();
    for step in g + 1.. {
        run_step(&store, step, durable, &mut balances).unwrap_or_else(|e| panic!("step {step}: {e}"));
        append_ack(&mut log, &format!("tx {step}"));
        run_auto(&store, step, durable).unwrap_or_else(|e| panic!("auto {step}: {e}"));
        append_ack(&mut log, &format!("auto {step}"));
    }
}
