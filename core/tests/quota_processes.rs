//! Quotas across processes of one RocksDB store (a shared store: one owner process, the others
//! its clients): three worker processes and the test's own thread race at a small tree's limit,
//! checking after every change that the counter is within the limits; at the end the tree
//! holds no more than its limits and its counter equals a walk of it, and fsck's recount is
//! clean. Then the same writers SIGKILLed at random (every other time the store's owner) for
//! a few seconds: after the last kill, fsck on the closed store finds every tree's counter
//! equal to its recount, and the tree is within its limits.
//!
//! Seed: fixed (printed); TXVFS_QUOTA_SEED=N replays another.
#![cfg(feature = "rocksdb")]

mod quota_common;

use quota_common::{assert_recount, check_tree, make_tree, writer, LIMITS, TREE};
use rand::{Rng, SeedableRng};
use std::os::unix::process::ExitStatusExt;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use txvfs::{FileSystem, Store};

const ROLE: &str = "TXVFS_QUOTA_WORKER";

fn seed() -> u64 {
    std::env::var("TXVFS_QUOTA_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or(20261129)
}

/// A worker process: `ops` random changes in the tree, checking the counter after each.
fn worker(spec: &str) -> ! {
    let mut parts = spec.split('|');
    let (uri, who, seed, ops) = (
        parts.next().unwrap(),
        parts.next().unwrap(),
        parts.next().unwrap(),
        parts.next().unwrap(),
    );
    let store = Store::open(uri).unwrap();
    let edquot =
        writer(&store, who, seed.parse().unwrap(), ops.parse().unwrap(), || within_limits(&store));
    println!("@@ {who} done, {edquot} EDQUOT");
    drop(store);
    std::process::exit(0)
}

fn within_limits(s: &Store) {
    let q = s.quota(TREE).unwrap().unwrap();
    assert!(q.bytes_used <= LIMITS.bytes.unwrap(), "over the byte limit: {q:?}");
    assert!(q.inodes_used <= LIMITS.inodes.unwrap(), "over the inode limit: {q:?}");
}

fn spawn(test: &str, uri: &str, who: &str, seed: u64, ops: usize) -> Child {
    Command::new(std::env::current_exe().unwrap())
        .args(["--exact", test, "--include-ignored", "--nocapture", "--test-threads=1", "-q"])
        .env(ROLE, format!("{uri}|{who}|{seed}|{ops}"))
        .stdout(Stdio::piped())
        .spawn()
        .unwrap()
}

#[test]
fn processes_racing_at_the_limit_never_pass_it() {
    if let Ok(spec) = std::env::var(ROLE) {
        worker(&spec);
    }
    let d = tempfile::tempdir().unwrap();
    race_processes(d.path().to_str().unwrap(), "processes_racing_at_the_limit_never_pass_it");
}

/// The same race with every process a client of a FoundationDB cluster (as separate machines
/// would be); `tests/foundationdb/run` runs it.
#[test]
#[ignore = "needs a FoundationDB cluster: tests/foundationdb/run"]
fn processes_racing_at_the_limit_foundationdb() {
    if let Ok(spec) = std::env::var(ROLE) {
        worker(&spec);
    }
    let cluster = std::env::var("TXVFS_FDB_CLUSTER_FILE")
        .expect("the FoundationDB tests need a cluster: run tests/foundationdb/run");
    let run =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos();
    let uri = format!("fdb:{cluster}?prefix=quota-processes-{run}");
    race_processes(&uri, "processes_racing_at_the_limit_foundationdb");
}

/// Three worker processes and this thread race in the tree of the store at `uri`.
fn race_processes(uri: &str, test: &str) {
    let seed = seed();
    println!("quota processes: seed {seed} (TXVFS_QUOTA_SEED), {uri}");
    let uri = uri.to_string();
    let s = Store::open(&uri).unwrap();
    make_tree(&s);
    let children: Vec<Child> =
        (0..3).map(|i| spawn(test, &uri, &format!("p{i}"), seed + i, 300)).collect();
    let edquot = writer(&s, "main", seed + 100, 300, || within_limits(&s));
    println!("main: {edquot} EDQUOT");
    for (i, c) in children.into_iter().enumerate() {
        let out = c.wait_with_output().unwrap();
        let out = String::from_utf8_lossy(&out.stdout);
        print!("{out}");
        assert!(out.contains(&format!("@@ p{i} done")), "worker p{i} did not run its workload");
    }
    // The counter includes files unlinked while another process may have had them open
    // (orphans, freed at the next open), as fsck's recount does.
    assert_recount(&*s.backend());
    drop(s);
    let s = Store::open(&uri).unwrap();
    check_tree(&s);
    assert_recount(&*s.backend());
}

#[test]
fn writers_killed_at_random_leave_exact_counters() {
    if let Ok(spec) = std::env::var(ROLE) {
        worker(&spec);
    }
    let seed = seed();
    println!("quota kills: seed {seed} (TXVFS_QUOTA_SEED)");
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let d = tempfile::tempdir().unwrap();
    let uri = d.path().to_str().unwrap().to_string();
    {
        let s = Store::open(&uri).unwrap();
        make_tree(&s);
    }
    let test = "writers_killed_at_random_leave_exact_counters";
    let mut next = 0;
    let mut start_one = |rng: &mut rand::rngs::StdRng| {
        next += 1;
        spawn(test, &uri, &format!("k{next}"), rng.gen(), 1_000_000)
    };
    let mut workers: Vec<Child> = (0..4).map(|_| start_one(&mut rng)).collect();
    let begun = Instant::now();
    let mut kills = 0;
    while begun.elapsed() < Duration::from_secs(6) {
        std::thread::sleep(Duration::from_millis(rng.gen_range(100..500)));
        let owner = std::fs::read_to_string(d.path().join("txvfs.owner"))
            .ok()
            .and_then(|s| s.split_whitespace().next()?.parse::<u32>().ok());
        let victim = match workers.iter().position(|w| Some(w.id()) == owner) {
            Some(i) if kills % 2 == 0 => i,
            _ => rng.gen_range(0..workers.len()),
        };
        kill(workers.swap_remove(victim));
        kills += 1;
        workers.push(start_one(&mut rng));
    }
    for w in workers {
        kill(w);
    }
    println!("quota kills: {kills} workers SIGKILLed, then the rest");
    // fsck on the store as the kills left it (opening it would first reap orphans).
    let r = txvfs::fsck::check_uri(&uri, false, &mut |_| {}).unwrap();
    assert!(r.is_clean(), "fsck after the kills:\n{r}");
    let s = Store::open(&uri).unwrap();
    check_tree(&s);
    assert_recount(&*s.backend());
}

/// SIGKILLs a worker, which must still have been running (a panic or exit fails the test).
fn kill(mut w: Child) {
    if let Some(status) = w.try_wait().unwrap() {
        panic!("worker {} stopped by itself before its kill: {status:?}", w.id());
    }
    // SAFETY: signals a child process of this test.
    unsafe { libc::kill(w.id() as i32, libc::SIGKILL) };
    let status = w.wait().unwrap();
    assert_eq!(status.signal(), Some(libc::SIGKILL), "worker {}: {status:?}", w.id());
}
