//! The change feed across processes of one shared RocksDB store: a consumer process follows
//! the feed while three writer processes commit transactions of several files, renames across
//! directories and tree removals. The test kills the consumer (it resumes from the cursor it
//! saved) and the store's owner (another process takes over) during the writes; on
//! FoundationDB (`feed_across_processes_foundationdb`, run by `tests/foundationdb/run`), which
//! has no owner, it kills a writer instead. At the end the
//! consumer's view, replayed from the empty tree, equals the store's tree, and the order of
//! the transactions matches a commit counter each of them incremented.
#![cfg(feature = "rocksdb")]

mod feed_model;

use feed_model::{replay, tree_of, Tree};
use std::io::Write;
use std::process::{Child, Command};
use std::time::{Duration, Instant};
use txvfs::{Batch, Change, ChangeKind, Cursor, FileSystem, FileType, Store, WatchOptions};

const ROLE: &str = "TXVFS_WATCH_ROLE";
const STEPS: u64 = 60;

fn type_name(t: FileType) -> &'static str {
    match t {
        FileType::Dir => "d",
        FileType::Symlink => "l",
        _ => "f",
    }
}

/// The consumer: follows the feed from the cursor of its log's last whole batch (or `start`),
/// appending each batch as lines `C kind type ino path to` and `E cursor`, until `/stop` appears.
fn consumer(uri: &str, log: &str, start: &str) -> ! {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    // Keep whole batches only: a kill may have cut the last one.
    let keep = text.rfind("\nE ").map_or(0, |i| i + 1 + text[i + 1..].find('\n').unwrap() + 1);
    let text = &text[..keep.min(text.len())];
    let since = text.lines().rev().find_map(|l| l.strip_prefix("E ")).unwrap_or(start);
    std::fs::write(log, text).unwrap();
    let store = Store::open(uri).unwrap();
    let options = WatchOptions { since: Some(Cursor::parse(since).unwrap()), ..Default::default() };
    let mut watcher = store.watch(options).unwrap();
    let mut out = std::fs::OpenOptions::new().append(true).open(log).unwrap();
    loop {
        if std::os::unix::process::parent_id() == 1 {
            std::process::exit(3); // the test is gone
        }
        for b in watcher.wait(Duration::from_millis(200)).unwrap() {
            let mut lines = String::new();
            let mut stop = false;
            for c in &b.changes {
                let to = c.to.as_deref().map(|t| String::from_utf8_lossy(t).into_owned());
                let path = String::from_utf8_lossy(&c.path);
                stop |= c.kind == ChangeKind::Created && path == "/stop";
                lines += &format!(
                    "C {} {} {} {} {}\n",
                    c.kind.name(),
                    type_name(c.file_type),
                    c.ino,
                    path,
                    to.unwrap_or_else(|| "-".into())
                );
            }
            lines += &format!("E {}\n", b.cursor);
            out.write_all(lines.as_bytes()).unwrap();
            if stop {
                std::process::exit(0);
            }
        }
    }
}

/// A writer: `STEPS` transactions, each taking the next commit number from `/counter` and
/// creating `/seq/N`, with files, renames across directories and now and then a tree removal.
fn writer(uri: &str, name: &str) -> ! {
    let store = Store::open(uri).unwrap();
    for i in 0..STEPS {
        let dir = format!("/{name}/d{i}");
        // A commit cut short by the owner's death may or may not have happened: the step runs
        // again (each run is a whole new transaction; the feed must tell which ones committed).
        let unknown = |e: &txvfs::Error| e.kind() == txvfs::ErrorKind::CommitUnknown;
        while let Err(e) = store.transact(|tx| {
            let n: u64 = String::from_utf8(tx.read_file("/counter")?).unwrap().parse().unwrap();
            tx.write_file("/counter", (n + 1).to_string().as_bytes())?;
            tx.write_file(format!("/seq/{}", n + 1), b"")?;
            tx.mkdir_all(format!("{dir}/sub"), 0o755)?;
            tx.write_file(format!("{dir}/a"), b"a")?;
            tx.write_file(format!("{dir}/sub/b"), b"b")?;
            tx.rename(format!("{dir}/a"), format!("/moved/{name}-{i}"))
        }) {
            assert!(unknown(&e), "{e}");
        }
        if i % 4 == 3 {
            match store.remove_all(format!("/{name}/d{}", i - 1)) {
                Err(e) if !unknown(&e) && e.kind() != txvfs::ErrorKind::NotFound => panic!("{e}"),
                _ => {}
            }
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    std::process::exit(0)
}

/// Runs this test binary's test `test` as a child in role `args`.
fn spawn(test: &str, args: &str) -> Child {
    Command::new(std::env::current_exe().unwrap())
        .args(["--exact", test, "--nocapture", "--test-threads=1", "-q", "--include-ignored"])
        .env(ROLE, args)
        .spawn()
        .unwrap()
}

fn parse_log(log: &str) -> Vec<Batch> {
    let text = std::fs::read_to_string(log).unwrap();
    let mut batches = Vec::new();
    let mut changes = Vec::new();
    for line in text.lines() {
        if let Some(c) = line.strip_prefix("E ") {
            let cursor = Cursor::parse(c).unwrap();
            batches.push(Batch { cursor, time_ms: 0, changes: std::mem::take(&mut changes) });
            continue;
        }
        let f: Vec<&str> = line.split(' ').collect();
        assert_eq!(f[0], "C", "{line}");
        changes.push(Change {
            kind: ChangeKind::from_name(f[1]).unwrap(),
            file_type: match f[2] {
                "d" => FileType::Dir,
                "l" => FileType::Symlink,
                _ => FileType::File,
            },
            ino: f[3].parse().unwrap(),
            path: f[4].as_bytes().to_vec(),
            to: (f[5] != "-").then(|| f[5].as_bytes().to_vec()),
        });
    }
    batches
}

fn owner_pid(dir: &std::path::Path) -> Option<u32> {
    std::fs::read_to_string(dir.join("txvfs.owner")).ok()?.split_whitespace().next()?.parse().ok()
}

fn child_role() {
    if let Ok(role) = std::env::var(ROLE) {
        let f: Vec<&str> = role.split('|').collect();
        match f[0] {
            "consumer" => consumer(f[1], f[2], f[3]),
            _ => writer(f[1], f[2]),
        }
    }
}

#[test]
fn feed_across_processes() {
    child_role();
    let d = tempfile::tempdir().unwrap();
    let uri = d.path().join("s").to_str().unwrap().to_string();
    let owner_dir = d.path().join("s");
    // Kill the owner (a writer or the consumer) during the writes.
    across_processes("feed_across_processes", &uri, d.path(), &|| owner_pid(&owner_dir));
}

/// The same on FoundationDB, which has no owner: a writer is killed during the writes.
#[test]
#[ignore = "needs a FoundationDB cluster: tests/foundationdb/run"]
fn feed_across_processes_foundationdb() {
    child_role();
    let cluster = std::env::var("TXVFS_FDB_CLUSTER_FILE")
        .expect("the FoundationDB tests need a cluster: run tests/foundationdb/run");
    let run =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos();
    let uri = format!("fdb:{cluster}?prefix=watch-processes-{run}");
    let d = tempfile::tempdir().unwrap();
    let (log, w2) = (d.path().join("consumer.log"), d.path().join("w2.pid"));
    across_processes("feed_across_processes_foundationdb", &uri, d.path(), &|| {
        // w2, once the consumer has seen a few of its steps.
        let seen = std::fs::read_to_string(&log).unwrap_or_default().matches("/w2/d").count();
        if seen < 12 {
            return None;
        }
        std::fs::read_to_string(&w2).ok()?.trim().parse().ok()
    });
}

/// The test: a consumer and three writers (see the module docs); `victim` names the process to
/// kill once during the writes (the consumer or a writer), when it has one.
fn across_processes(
    test: &str,
    uri: &str,
    tmp: &std::path::Path,
    victim: &dyn Fn() -> Option<u32>,
) {
    let log = tmp.join("consumer.log").to_str().unwrap().to_string();
    let start = {
        let s = Store::open(uri).unwrap();
        s.set_change_feed(true).unwrap();
        let start = s.watch(WatchOptions::default()).unwrap().cursor();
        s.write_file("/counter", b"0").unwrap();
        for dir in ["/seq", "/moved", "/w1", "/w2", "/w3"] {
            s.mkdir(dir, 0o755).unwrap();
        }
        start
    };
    std::fs::write(&log, "").unwrap();
    let consumer_args = format!("consumer|{uri}|{log}|{start}");
    let mut consumer = spawn(test, &consumer_args);
    let mut writers: Vec<(String, Child)> = ["w1", "w2", "w3"]
        .iter()
        .map(|n| (n.to_string(), spawn(test, &format!("writer|{uri}|{n}"))))
        .collect();
    for (n, w) in &writers {
        std::fs::write(tmp.join(format!("{n}.pid")), w.id().to_string()).unwrap();
    }

    // Kill the consumer once it has seen something, and start it again.
    let t0 = Instant::now();
    while std::fs::metadata(&log).unwrap().len() < 2000 && t0.elapsed() < Duration::from_secs(60) {
        std::thread::sleep(Duration::from_millis(10));
    }
    consumer.kill().unwrap();
    consumer.wait().unwrap();
    consumer = spawn(test, &consumer_args);

    // Kill the victim during the writes; a writer killed starts again under a new name (its
    // committed steps stay; the feed must say exactly what they did).
    let mut killed = false;
    let mut restarts = 0;
    while t0.elapsed() < Duration::from_secs(120) {
        let victim = if killed { None } else { victim() };
        if let Some(victim) = victim {
            if consumer.id() == victim {
                consumer.kill().unwrap();
                consumer.wait().unwrap();
                consumer = spawn(test, &consumer_args);
                killed = true;
            } else if let Some(i) = writers.iter().position(|(_, w)| w.id() == victim) {
                let (name, mut w) = writers.swap_remove(i);
                w.kill().unwrap();
                w.wait().unwrap();
                restarts += 1;
                let name = format!("{name}r{restarts}");
                let s = Store::open(uri).unwrap();
                s.mkdir(format!("/{name}"), 0o755).unwrap();
                drop(s);
                writers.push((name.clone(), spawn(test, &format!("writer|{uri}|{name}"))));
                killed = true;
            }
        }
        let mut running = false;
        for (_, w) in writers.iter_mut() {
            if w.try_wait().unwrap().is_none() {
                running = true;
            } else {
                assert!(w.try_wait().unwrap().unwrap().success(), "a writer failed");
            }
        }
        if !running {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(killed, "nothing was killed during the writes");
    println!("watch_processes: {restarts} writer(s) restarted after a kill");
    {
        let s = Store::open(uri).unwrap();
        s.write_file("/stop", b"").unwrap();
    }
    let status = consumer.wait().unwrap();
    assert!(status.success());

    let batches = parse_log(&log);
    let store = Store::open(uri).unwrap();
    let mut tree = Tree::new();
    replay(&mut tree, &batches);
    assert_eq!(tree, tree_of(&store), "the feed replayed differs from the store");
    // No batch twice, in increasing cursor order.
    assert!(batches.windows(2).all(|w| w[0].cursor < w[1].cursor));
    // Commit order: /seq/N appear as 1, 2, 3, ... with nothing missing or repeated.
    let seq: Vec<u64> = batches
        .iter()
        .flat_map(|b| &b.changes)
        .filter_map(|c| {
            let p = std::str::from_utf8(&c.path).unwrap();
            p.strip_prefix("/seq/").filter(|_| c.kind == ChangeKind::Created)?.parse().ok()
        })
        .collect();
    let n: u64 = String::from_utf8(store.read_file("/counter").unwrap()).unwrap().parse().unwrap();
    assert!(n >= STEPS * 3, "only {n} transactions");
    assert_eq!(seq, (1..=n).collect::<Vec<_>>());
}
