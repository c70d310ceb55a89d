//! Concurrency on one store (memory and RocksDB): threads that move money between files in
//! transactions while other work creates, renames and deletes files in the same directory.
//! Nothing is lost or duplicated, every count matches what the threads report, concurrent
//! snapshots always see a consistent total, and the committed transfers form a serial order
//! that replays to exactly the final balances. Creates of distinct names in one directory do
//! not conflict at all; two creates of one name have exactly one winner.

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Barrier};
use txvfs::{ErrorKind, FileSystem, OpenOptions, Store, Transaction};

const ACCOUNTS: usize = 6;
const START: i64 = 1000;

fn open_rocks() -> (Store, tempfile::TempDir) {
    let d = tempfile::tempdir().unwrap();
    (Store::open(d.path().to_str().unwrap()).unwrap(), d)
}

fn acct(i: usize) -> String {
    format!("/bank/acct{i:02}")
}

/// An account file holds "balance version"; every transfer bumps the version of both sides.
fn read_acct(tx: &Transaction, i: usize) -> txvfs::Result<(i64, u64)> {
    let s = String::from_utf8(tx.read_file(acct(i))?).unwrap();
    let (b, v) = s.split_once(' ').unwrap();
    Ok((b.parse().unwrap(), v.parse().unwrap()))
}

fn write_acct(tx: &Transaction, i: usize, (b, v): (i64, u64)) -> txvfs::Result<()> {
    tx.write_file(acct(i), format!("{b} {v}").as_bytes())
}

/// One committed transfer and the account states it read.
#[derive(Clone, Debug)]
struct Transfer {
    from: usize,
    to: usize,
    amount: i64,
    seen_from: (i64, u64),
    seen_to: (i64, u64),
}

#[derive(Default, Debug)]
struct Report {
    transfers: Vec<Transfer>,
    declined: u64,
    attempts: u64,
    receipts: Vec<String>,
    creates: u64,
    renames: u64,
    deletes: u64,
    to_hot: Vec<String>,
    /// Names this thread created and still owns (neither deleted nor moved to "hot").
    live: BTreeSet<String>,
}

fn worker(store: Store, t: usize, iterations: usize) -> Report {
    let mut rng = SmallRng::seed_from_u64(0x5eed + t as u64);
    let mut r = Report::default();
    for k in 0..iterations {
        let roll = rng.gen_range(0..100);
        if roll < 50 {
            let from = rng.gen_range(0..ACCOUNTS);
            let to = (from + rng.gen_range(1..ACCOUNTS)) % ACCOUNTS;
            let amount = rng.gen_range(1..=300);
            let receipt = (rng.gen_range(0..4) == 0).then(|| format!("/bank/r_{t}_{k}"));
            let mut attempts = 0;
            let out = store
                .transact(|tx| {
                    attempts += 1;
                    let a = read_acct(tx, from)?;
                    std::thread::yield_now(); // widen the window for conflicts
                    let b = read_acct(tx, to)?;
                    if a.0 < amount {
                        return Ok(None);
                    }
                    write_acct(tx, from, (a.0 - amount, a.1 + 1))?;
                    write_acct(tx, to, (b.0 + amount, b.1 + 1))?;
                    if let Some(p) = &receipt {
                        let f = tx.open(p, &OpenOptions::new().write(true).create_new(true))?;
                        f.write(format!("{from}->{to} {amount}").as_bytes())?;
                    }
                    Ok(Some((a, b)))
                })
                .unwrap();
            r.attempts += attempts;
            match out {
                Some((seen_from, seen_to)) => {
                    r.transfers.push(Transfer { from, to, amount, seen_from, seen_to });
                    r.receipts.extend(receipt);
                }
                None => r.declined += 1,
            }
        } else if roll < 75 {
            let name = format!("f_{t}_{k}");
            let f = store
                .open(format!("/bank/{name}"), &OpenOptions::new().write(true).create_new(true))
                .unwrap();
            f.write(name.as_bytes()).unwrap();
            f.close().unwrap();
            r.creates += 1;
            if rng.gen_bool(0.5) {
                let to = format!("g_{t}_{k}");
                store.rename(format!("/bank/{name}"), format!("/bank/{to}")).unwrap();
                r.renames += 1;
                r.live.insert(to);
            } else {
                r.live.insert(name);
            }
        } else if let Some(name) = r.live.iter().nth(rng.gen_range(0..r.live.len().max(1))).cloned()
        {
            let content =
                String::from_utf8(store.read_file(format!("/bank/{name}")).unwrap()).unwrap();
            r.live.remove(&name);
            if roll < 90 {
                store.unlink(format!("/bank/{name}")).unwrap();
                r.deletes += 1;
            } else {
                // Replaces whatever another thread put there (deleting it).
                store.rename(format!("/bank/{name}"), "/bank/hot").unwrap();
                r.to_hot.push(content);
            }
        }
    }
    r
}

/// Reads the whole directory in pages and every account, in one snapshot.
fn audit(store: &Store) -> (i64, usize) {
    store
        .transact(|tx| {
            let mut names = Vec::new();
            let mut after: Option<Vec<u8>> = None;
            loop {
                let page = tx.readdir("/bank", after.as_deref(), 7)?;
                let Some(last) = page.last() else { break };
                after = Some(last.name.to_vec());
                for e in page {
                    let p = format!("/bank/{}", String::from_utf8(e.name.to_vec()).unwrap());
                    let st = tx.stat(&p)?;
                    assert_eq!((st.ino, st.kind), (e.ino, e.kind), "{p}: entry and inode disagree");
                    names.push(e.name);
                }
            }
            let unique: BTreeSet<_> = names.iter().collect();
            assert_eq!(unique.len(), names.len(), "duplicate directory entries");
            let mut sum = 0;
            for i in 0..ACCOUNTS {
                sum += read_acct(tx, i)?.0;
            }
            Ok((sum, names.len()))
        })
        .unwrap()
}

/// Checks that the committed transfers can be put in one serial order that explains every
/// value each of them read and the final balances: per account, the versions read are exactly
/// 0, 1, 2, ... each read by one transfer, each reading what its predecessor wrote; the union
/// of these per-account orders is acyclic; replaying it gives the final state.
fn check_serial_order(transfers: &[Transfer], finals: &[(i64, u64)]) {
    let mut by_version: Vec<BTreeMap<u64, (usize, i64, i64)>> = vec![BTreeMap::new(); ACCOUNTS];
    for (i, t) in transfers.iter().enumerate() {
        for (acc, seen, delta) in [(t.from, t.seen_from, -t.amount), (t.to, t.seen_to, t.amount)] {
            let prev = by_version[acc].insert(seen.1, (i, seen.0, seen.0 + delta));
            assert!(
                prev.is_none(),
                "two transfers read version {} of account {acc} (lost update)",
                seen.1
            );
        }
    }
    let mut succ: Vec<Vec<usize>> = vec![Vec::new(); transfers.len()];
    let mut indegree = vec![0usize; transfers.len()];
    for (acc, chain) in by_version.iter().enumerate() {
        let mut balance = START;
        for (expect_v, (&v, &(i, seen, wrote))) in chain.iter().enumerate() {
            assert_eq!(v, expect_v as u64, "account {acc}: version {expect_v} was never read");
            assert_eq!(seen, balance, "account {acc} version {v}: read a balance nobody wrote");
            assert!(wrote >= 0, "account {acc} went negative");
            balance = wrote;
            if let Some((_, &(next, _, _))) = chain.range(v + 1..).next() {
                succ[i].push(next);
                indegree[next] += 1;
            }
        }
        assert_eq!(finals[acc], (balance, chain.len() as u64), "account {acc}: final state");
    }
    // Kahn's algorithm: every transfer gets a place iff the precedence graph is acyclic.
    let mut ready: VecDeque<usize> = (0..transfers.len()).filter(|&i| indegree[i] == 0).collect();
    let mut order = Vec::new();
    while let Some(i) = ready.pop_front() {
        order.push(i);
        for &n in &succ[i] {
            indegree[n] -= 1;
            if indegree[n] == 0 {
                ready.push_back(n);
            }
        }
    }
    assert_eq!(
        order.len(),
        transfers.len(),
        "transfers form a cycle: no serial order explains them"
    );
    let mut bal = vec![START; ACCOUNTS];
    for &i in &order {
        let t = &transfers[i];
        assert_eq!((bal[t.from], bal[t.to]), (t.seen_from.0, t.seen_to.0), "replay disagrees");
        bal[t.from] -= t.amount;
        bal[t.to] += t.amount;
    }
    assert_eq!(bal, finals.iter().map(|f| f.0).collect::<Vec<_>>());
}

fn bank_and_directory_churn(store: Store, threads: usize, iterations: usize) {
    store.mkdir("/bank", 0o755).unwrap();
    store.transact(|tx| (0..ACCOUNTS).try_for_each(|i| write_acct(tx, i, (START, 0)))).unwrap();
    let files_before = store.statfs().unwrap().files;
    let done = Arc::new(AtomicBool::new(false));
    let audits = Arc::new(AtomicU64::new(0));
    let auditor = {
        let (store, done, audits) = (store.clone(), done.clone(), audits.clone());
        std::thread::spawn(move || {
            while !done.load(Ordering::SeqCst) {
                let (sum, _) = audit(&store);
                assert_eq!(sum, START * ACCOUNTS as i64, "a snapshot saw money appear or vanish");
                audits.fetch_add(1, Ordering::Relaxed);
            }
        })
    };
    let started = std::time::Instant::now();
    let workers: Vec<_> = (0..threads)
        .map(|t| {
            let store = store.clone();
            std::thread::spawn(move || worker(store, t, iterations))
        })
        .collect();
    let reports: Vec<Report> = workers.into_iter().map(|w| w.join().unwrap()).collect();
    done.store(true, Ordering::SeqCst);
    auditor.join().unwrap();

    // Money: nothing lost, and a serial order explains every transfer.
    let finals: Vec<(i64, u64)> =
        store.transact(|tx| (0..ACCOUNTS).map(|i| read_acct(tx, i)).collect()).unwrap();
    assert_eq!(finals.iter().map(|f| f.0).sum::<i64>(), START * ACCOUNTS as i64, "money lost");
    let transfers: Vec<Transfer> =
        reports.iter().flat_map(|r| r.transfers.iter().cloned()).collect();
    check_serial_order(&transfers, &finals);

    // Names: exactly the accounts, receipts, surviving files and "hot", each once and stat-able.
    let mut expected: BTreeSet<String> = (0..ACCOUNTS).map(|i| format!("acct{i:02}")).collect();
    for r in &reports {
        expected.extend(r.live.iter().cloned());
        expected.extend(r.receipts.iter().map(|p| p.trim_start_matches("/bank/").to_string()));
    }
    let hot: BTreeSet<&String> = reports.iter().flat_map(|r| &r.to_hot).collect();
    if !hot.is_empty() {
        expected.insert("hot".into());
    }
    let entries = store.readdir("/bank", None, 0).unwrap();
    let names: Vec<String> =
        entries.iter().map(|e| String::from_utf8(e.name.to_vec()).unwrap()).collect();
    assert!(names.windows(2).all(|w| w[0] < w[1]), "readdir not sorted or has duplicates");
    for e in &entries {
        let st = store.stat(format!("/bank/{}", String::from_utf8_lossy(&e.name))).unwrap();
        assert_eq!(st.ino, e.ino);
        assert_eq!(st.nlink, 1);
    }
    let got: BTreeSet<String> = names.iter().cloned().collect();
    assert_eq!(got, expected, "directory contents differ from what the threads did");
    if !hot.is_empty() {
        let content = String::from_utf8(store.read_file("/bank/hot").unwrap()).unwrap();
        assert!(hot.contains(&content), "hot holds a file nobody moved there: {content}");
    }
    let creates: u64 = reports.iter().map(|r| r.creates).sum();
    let deletes: u64 = reports.iter().map(|r| r.deletes).sum();
    let moved_hot: usize = reports.iter().map(|r| r.to_hot.len()).sum();
    let live: usize = reports.iter().map(|r| r.live.len()).sum();
    assert_eq!(creates as usize - deletes as usize - moved_hot, live);
    let receipts: usize = reports.iter().map(|r| r.receipts.len()).sum();
    // Inode counter: replaced "hot" files and deleted files are really gone.
    let files = store.statfs().unwrap().files;
    assert_eq!(
        files,
        files_before + live as u64 + receipts as u64 + !hot.is_empty() as u64,
        "inode count"
    );
    assert_eq!(audit(&store), (START * ACCOUNTS as i64, expected.len()));

    let attempts: u64 = reports.iter().map(|r| r.attempts).sum();
    let declined: u64 = reports.iter().map(|r| r.declined).sum();
    let renames: u64 = reports.iter().map(|r| r.renames).sum();
    eprintln!(
        "{}: {threads} threads in {:?}: {} transfers ({declined} declined, {} retries), {receipts} receipts, \
         {creates} creates, {renames} renames, {deletes} deletes, {moved_hot} onto hot, {} audits",
        store.describe(),
        started.elapsed(),
        transfers.len(),
        attempts - transfers.len() as u64 - declined,
        audits.load(Ordering::Relaxed)
    );
    assert!(transfers.len() > threads * iterations / 4, "too few transfers went through");
}

#[test]
fn memory_bank_transfers_and_directory_churn_are_serializable() {
    bank_and_directory_churn(Store::open("memory:").unwrap(), 4, 3000);
}

#[test]
fn rocksdb_bank_transfers_and_directory_churn_are_serializable() {
    let (store, _d) = open_rocks();
    bank_and_directory_churn(store, 4, 1000);
}

/// Creates of distinct names (files and directories) in one directory, from several threads,
/// never conflict: every transaction commits at its first attempt, and every name is there.
fn distinct_creates_never_conflict(store: Store) {
    const THREADS: usize = 4;
    const EACH: usize = 250;
    store.mkdir("/flat", 0o755).unwrap();
    let files_before = store.statfs().unwrap().files;
    let start = Arc::new(Barrier::new(THREADS));
    let handles: Vec<_> = (0..THREADS)
        .map(|t| {
            let (store, start) = (store.clone(), start.clone());
            std::thread::spawn(move || {
                start.wait();
                let mut attempts = 0;
                for k in 0..EACH {
                    store
                        .transact(|tx| {
                            attempts += 1;
                            let p = format!("/flat/n_{t}_{k}");
                            if k % 10 == 0 {
                                tx.mkdir(&p, 0o755)
                            } else {
                                let f =
                                    tx.open(&p, &OpenOptions::new().write(true).create_new(true))?;
                                f.write(p.as_bytes()).map(|_| ())
                            }
                        })
                        .unwrap();
                }
                attempts
            })
        })
        .collect();
    let attempts: usize = handles.into_iter().map(|h| h.join().unwrap()).sum();
    let entries = store.readdir("/flat", None, 0).unwrap();
    assert_eq!(entries.len(), THREADS * EACH, "creates lost");
    let names: BTreeSet<_> = entries.iter().map(|e| e.name.clone()).collect();
    assert_eq!(names.len(), entries.len(), "duplicate entries");
    for t in 0..THREADS {
        for k in 0..EACH {
            let p = format!("/flat/n_{t}_{k}");
            let st = store.stat(&p).unwrap();
            assert_eq!(st.is_dir(), k % 10 == 0);
            if !st.is_dir() {
                assert_eq!(store.read_file(&p).unwrap(), p.as_bytes());
            }
        }
    }
    let dirs = THREADS * EACH.div_ceil(10);
    assert_eq!(store.stat("/flat").unwrap().nlink, 2 + dirs as u64, "directory link count");
    assert_eq!(
        store.statfs().unwrap().files,
        files_before + (THREADS * EACH) as u64,
        "inode count"
    );
    assert_eq!(
        attempts,
        THREADS * EACH,
        "creates of distinct names conflicted ({} retries)",
        attempts - THREADS * EACH
    );
}

#[test]
fn memory_distinct_creates_in_one_directory_never_conflict() {
    distinct_creates_never_conflict(Store::open("memory:").unwrap());
}

#[test]
fn rocksdb_distinct_creates_in_one_directory_never_conflict() {
    let (store, _d) = open_rocks();
    distinct_creates_never_conflict(store);
}

/// Two transactions create the same name: exactly one commits; the other conflicts, and on
/// retry sees the winner's file and gets EEXIST.
fn same_name_has_one_winner(store: Store) {
    let new = OpenOptions::new().write(true).create_new(true);
    // Interleaved by hand.
    let t1 = store.begin().unwrap();
    let t2 = store.begin().unwrap();
    t1.open("/race", &new).unwrap().write(b"one").unwrap();
    t2.open("/race", &new).unwrap().write(b"two").unwrap();
    t1.commit().unwrap();
    assert_eq!(t2.commit().unwrap_err().kind(), ErrorKind::Conflict);
    assert_eq!(
        store.transact(|tx| tx.open("/race", &new).map(|_| ())).unwrap_err().kind(),
        ErrorKind::Exists
    );
    assert_eq!(store.read_file("/race").unwrap(), b"one");

    // Racing threads, both past their create before either commits.
    for round in 0..40 {
        let p = format!("/race{round}");
        let gate = Arc::new(Barrier::new(2));
        let handles: Vec<_> = (0..2)
            .map(|t| {
                let (store, gate, p, new) = (store.clone(), gate.clone(), p.clone(), new.clone());
                std::thread::spawn(move || {
                    let mut attempt = 0;
                    let r = store.transact(|tx| {
                        attempt += 1;
                        if round % 2 == 0 {
                            tx.open(&p, &new)?.write(format!("{t}").as_bytes())?;
                        } else {
                            tx.mkdir(&p, 0o700 + t as u32)?;
                        }
                        if attempt == 1 {
                            gate.wait();
                        }
                        Ok(())
                    });
                    (r, attempt)
                })
            })
            .collect();
        let results: Vec<_> = handles.into_iter().map(|h| h.join().unwrap()).collect();
        let winners: Vec<usize> = (0..2).filter(|&t| results[t].0.is_ok()).collect();
        assert_eq!(winners.len(), 1, "round {round}: {results:?}");
        let (w, l) = (winners[0], 1 - winners[0]);
        assert_eq!(results[l].0.as_ref().unwrap_err().kind(), ErrorKind::Exists, "round {round}");
        assert!(results[l].1 >= 2, "the loser must have retried");
        if round % 2 == 0 {
            assert_eq!(store.read_file(&p).unwrap(), format!("{w}").as_bytes());
        } else {
            assert_eq!(store.stat(&p).unwrap().mode & 0o777, 0o700 + w as u32);
        }
    }
    let names: Vec<_> = store.readdir("/", None, 0).unwrap().into_iter().map(|e| e.name).collect();
    assert_eq!(names.len(), 41);
    assert_eq!(store.stat("/").unwrap().nlink, 2 + 20);
}

#[test]
fn memory_same_name_creates_have_one_winner() {
    same_name_has_one_winner(Store::open("memory:").unwrap());
}

#[test]
fn rocksdb_same_name_creates_have_one_winner() {
    let (store, _d) = open_rocks();
    same_name_has_one_winner(store);
}

/// An unlink that commits while another thread closes the file's last handle frees the file:
/// the close cannot see the orphan record yet, so the unlink must notice the close.
fn unlink_racing_last_close_frees_the_file(store: Store, rounds: usize) {
    let read = OpenOptions::new().read(true);
    let base = store.statfs().unwrap().files;
    // Deterministic: the last handle closes inside the unlinking transaction's lifetime.
    for i in 0..20 {
        let p = format!("/u{i}");
        store.write_file(&p, &[7; 10_000]).unwrap();
        let h = store.open(&p, &read).unwrap();
        let tx = store.begin().unwrap();
        tx.unlink(&p).unwrap();
        h.close().unwrap();
        tx.commit().unwrap();
        assert_eq!(
            store.statfs().unwrap().files,
            base,
            "round {i}: the unlinked, closed file was kept"
        );
    }
    // Racing: one thread unlinks while another closes the handle.
    let (send, recv) = std::sync::mpsc::sync_channel::<txvfs::File>(0);
    let closer = std::thread::spawn(move || {
        for h in recv {
            h.close().unwrap();
        }
    });
    for i in 0..rounds {
        let p = format!("/r{i}");
        store.write_file(&p, b"x").unwrap();
        send.send(store.open(&p, &read).unwrap()).unwrap();
        store.unlink(&p).unwrap();
    }
    drop(send);
    closer.join().unwrap();
    assert_eq!(
        store.statfs().unwrap().files,
        base,
        "files unlinked while their last handle closed leaked"
    );
}

#[test]
fn memory_unlink_racing_last_close_frees_the_file() {
    unlink_racing_last_close_frees_the_file(Store::open("memory:").unwrap(), 20_000);
}

#[test]
fn rocksdb_unlink_racing_last_close_frees_the_file() {
    let (store, _d) = open_rocks();
    unlink_racing_last_close_frees_the_file(store, 3000);
}
