//! Several processes on one RocksDB store (issue 15), as ratios measured in one run:
//!
//! - per call: `stat`, open+read+close and `read_file` of a 4 KiB file, `read_dir` of 1,000
//!   entries, a 4 KiB `write_file` of an existing file and of a new name, a first-touch `stat`
//!   of 1,000 files, sequential 1 MiB
//!   reads and writes of a 64 MiB file, from a second process (a client over the store's
//!   socket) against the same calls in the process that owns the store;
//! - throughput: 4 processes creating 4 KiB files (one of them owns the store, three are
//!   clients) against one process alone;
//! - durable commits: how many fsync/fdatasync calls 1 and 4 processes need per durable commit
//!   (counted with `strace -f -c` over all the processes, when strace is installed).
//!
//!     txvfs-bench-shared [--quick] [--dir DIR]
//!
//! The other subcommands are the worker processes it starts.

use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Instant;
use txvfs::{FileSystem, OpenOptions, Store};

const FILE_4K: usize = 4096;

fn open(dir: &Path) -> Store {
    Store::open(&format!("rocksdb:{}", dir.display())).expect("open store")
}

/// What [`per_call`] measures, each as nanoseconds per call (best of 3 rounds), with its
/// row label and the target for the client/owner ratio.
const ROWS: [(&str, &str); 9] = [
    ("stat, µs per call", "<= 3x"),
    ("open+read 4 KiB+close, µs per call", "<= 3x"),
    ("read_file 4 KiB, µs per call", "<= 3x"),
    ("readdir of 1,000 entries, µs per call", "<= 3x"),
    ("write_file 4 KiB (one commit), µs per call", "<= 1.5x"),
    ("write_file 4 KiB of a new name, µs per call", "<= 1.5x"),
    ("first-touch stat of 1,000 files, µs per file", ""),
    ("sequential read 64 MiB (1 MiB reads), µs per MiB", "<= 1.43x (0.7x MB/s)"),
    ("sequential write 64 MiB (1 MiB writes), µs per MiB", "<= 1.43x (0.7x MB/s)"),
];

/// Creates what [`per_call`] reads: `/f` (4 KiB), `/dir` (1,000 files), `/big` (64 MiB).
fn prepare(store: &Store) {
    store.write_file("/f", &vec![7u8; FILE_4K]).unwrap();
    store.mkdir("/dir", 0o755).unwrap();
    for i in 0..1000 {
        store.write_file(format!("/dir/e{i:04}"), b"x").unwrap();
    }
    let f = store.open("/big", &OpenOptions::new().write(true).create(true)).unwrap();
    let mib = vec![3u8; 1 << 20];
    for i in 0..64u64 {
        f.write_at(&mib, i << 20).unwrap();
    }
    f.close().unwrap();
}

/// Best of 3 rounds of `n` calls of `f`, in nanoseconds per call.
fn best(n: usize, mut f: impl FnMut(usize)) -> f64 {
    (0..3)
        .map(|_| {
            let t = Instant::now();
            for i in 0..n {
                f(i);
            }
            t.elapsed().as_nanos() as f64 / n as f64
        })
        .fold(f64::MAX, f64::min)
}

/// Nanoseconds per call of each row of [`ROWS`]; `who` names this process's first-touch
/// files (each process stats files nobody has read yet).
fn per_call(store: &Store, n: usize, who: &str) -> Vec<f64> {
    let mut buf = vec![0u8; FILE_4K];
    let data = vec![9u8; FILE_4K];
    let fresh = format!("/fresh-{who}");
    store.mkdir(&fresh, 0o755).unwrap();
    let new_names = format!("/new-{who}");
    store.mkdir(&new_names, 0o755).unwrap();
    let mut created = 0..;
    for i in 0..1000 {
        store.write_file(format!("{fresh}/g{i:04}"), b"y").unwrap();
    }
    let mut touched = 0;
    let first_touch = {
        let t = Instant::now();
        for i in 0..1000 {
            touched += store.stat(format!("{fresh}/g{i:04}")).unwrap().size;
        }
        t.elapsed().as_nanos() as f64 / 1000.0
    };
    assert_eq!(touched, 1000);
    let big = store.open("/big", &OpenOptions::new().read(true).write(true)).unwrap();
    let mut mib = vec![0u8; 1 << 20];
    // The sequential write first, then the read of what it wrote: each process reads the
    // file in the state its own write left (RocksDB's memtable or its files, which cost 2x).
    let seq_write = best(1, |_| {
        for i in 0..64u64 {
            big.write_at(&mib, i << 20).unwrap();
        }
        big.sync().unwrap();
    }) / 64.0;
    let seq_read = best(1, |_| {
        for i in 0..64u64 {
            assert_eq!(big.read_at(&mut mib, i << 20).unwrap(), 1 << 20);
        }
    }) / 64.0;
    vec![
        best(n, |_| {
            std::hint::black_box(store.stat("/f").unwrap());
        }),
        best(n, |_| {
            let f = store.open("/f", &OpenOptions::new().read(true)).unwrap();
            assert_eq!(f.read_at(&mut buf, 0).unwrap(), FILE_4K);
            f.close().unwrap();
        }),
        best(n, |_| assert_eq!(store.read_file("/f").unwrap().len(), FILE_4K)),
        best(n / 100 + 1, |_| assert_eq!(store.readdir("/dir", None, 0).unwrap().len(), 1000)),
        best(n / 4 + 1, |i| store.write_file(format!("/w-{who}-{}", i % 64), &data).unwrap()),
        best(n / 4 + 1, |_| {
            let i = created.next().unwrap();
            store.write_file(format!("{new_names}/n{i}"), &data).unwrap()
        }),
        first_touch,
        seq_read,
        seq_write,
    ]
}

/// Worker: opens the store, says "ready", waits for a line, creates `m` 4 KiB files under
/// `/w{id}` (each its own commit, durable when asked), prints the seconds it took, and waits
/// for a second line before it exits.
fn create_worker(dir: &Path, id: usize, m: usize, durable: bool) {
    let store = open(dir);
    store.mkdir_all(format!("/w{id}"), 0o755).unwrap();
    let data = vec![id as u8; FILE_4K];
    println!("ready");
    std::io::stdout().flush().unwrap();
    let mut line = String::new();
    std::io::stdin().read_line(&mut line).unwrap();
    let t = Instant::now();
    for i in 0..m {
        let path = format!("/w{id}/f{i}");
        if durable {
            store.transact_durable(true, |tx| tx.write_file(&path, &data)).unwrap();
        } else {
            store.write_file(&path, &data).unwrap();
        }
    }
    println!("{}", t.elapsed().as_secs_f64());
    std::io::stdout().flush().unwrap();
    // Stay until every worker is done: the owner leaving hands the store over, which costs the
    // others a failover (and their commits in flight).
    std::io::stdin().read_line(&mut line).unwrap();
}

fn spawn(args: &[String], prefix: &[&str]) -> Child {
    let me = std::env::current_exe().unwrap();
    let (prog, pre): (PathBuf, Vec<String>) = match prefix.split_first() {
        Some((p, rest)) => (
            PathBuf::from(p),
            rest.iter().map(|s| s.to_string()).chain([me.display().to_string()]).collect(),
        ),
        None => (me, vec![]),
    };
    Command::new(prog)
        .args(pre)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn worker")
}

/// Runs `p` create workers on a fresh store in `dir`, started together; returns files per
/// second over all of them (wall time from the start signal to the last one done).
fn create_run(dir: &Path, p: usize, m: usize, durable: bool) -> f64 {
    let mut kids: Vec<Child> = Vec::new();
    let mut outs = Vec::new();
    for id in 0..p {
        // One at a time until each has opened the store (the first becomes its owner).
        let mut c = spawn(
            &[
                "create-worker".into(),
                dir.display().to_string(),
                id.to_string(),
                m.to_string(),
                durable.to_string(),
            ],
            &[],
        );
        let mut out = BufReader::new(c.stdout.take().unwrap());
        let mut line = String::new();
        out.read_line(&mut line).unwrap();
        assert_eq!(line.trim(), "ready", "worker {id}");
        kids.push(c);
        outs.push(out);
    }
    let t = Instant::now();
    for c in &mut kids {
        writeln!(c.stdin.as_mut().unwrap(), "go").unwrap();
    }
    for out in &mut outs {
        let mut line = String::new();
        out.read_line(&mut line).unwrap();
        let _: f64 = line.trim().parse().expect("worker time");
    }
    let rate = (p * m) as f64 / t.elapsed().as_secs_f64();
    for (mut c, mut out) in kids.into_iter().zip(outs) {
        writeln!(c.stdin.as_mut().unwrap(), "exit").unwrap();
        out.read_to_string(&mut String::new()).unwrap();
        assert!(c.wait().unwrap().success());
    }
    rate
}

/// fsync + fdatasync calls of `p` workers making `m` durable commits each, counted by
/// `strace -f -c` (None without strace).
fn fsyncs(base: &Path, p: usize, m: usize) -> Option<u64> {
    Command::new("strace").arg("-V").stdout(Stdio::null()).status().ok()?.success().then_some(())?;
    let dir = base.join(format!("durable{p}"));
    let log = base.join(format!("strace{p}.txt"));
    let me = std::env::current_exe().unwrap();
    let st = Command::new("strace")
        .args(["-f", "-c", "-e", "trace=fsync,fdatasync", "-o"])
        .arg(&log)
        .arg(me)
        .args(["durable-run", &dir.display().to_string(), &p.to_string(), &m.to_string()])
        .stdout(Stdio::null())
        .status()
        .ok()?;
    assert!(st.success());
    let text = std::fs::read_to_string(&log).ok()?;
    // strace -c rows: % time, seconds, usecs/call, calls, [errors,] syscall.
    Some(
        text.lines()
            .filter(|l| l.ends_with(" fsync") || l.ends_with(" fdatasync"))
            .filter_map(|l| l.split_whitespace().nth(3)?.parse::<u64>().ok())
            .sum(),
    )
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    match args.get(1).map(String::as_str) {
        Some("per-call") => {
            let row = per_call(&open(Path::new(&args[2])), args[3].parse().unwrap(), "client");
            println!("{}", row.iter().map(|v| v.to_string()).collect::<Vec<_>>().join(" "));
            return;
        }
        Some("create-worker") => {
            return create_worker(
                Path::new(&args[2]),
                args[3].parse().unwrap(),
                args[4].parse().unwrap(),
                args[5] == "true",
            );
        }
        // One create row alone, for a profiler: `create-run DIR PROCESSES FILES` (each
        // process creates FILES), `durable-run` the same durably.
        Some(run @ ("create-run" | "durable-run")) => {
            let rate = create_run(
                Path::new(&args[2]),
                args[3].parse().unwrap(),
                args[4].parse().unwrap(),
                run == "durable-run",
            );
            println!("{rate}");
            return;
        }
        _ => {}
    }
    let quick = args.iter().any(|a| a == "--quick");
    let base: PathBuf = match args.iter().position(|a| a == "--dir") {
        Some(i) => PathBuf::from(&args[i + 1]),
        None => tempfile::tempdir().expect("tempdir").keep(),
    };
    std::fs::create_dir_all(&base).unwrap();
    let (calls, files, durable) = if quick { (2_000, 1_000, 100) } else { (20_000, 5_000, 400) };

    // Per call: this process owns the store; a second process is a client, measured between
    // two runs of the owner.
    let dir = base.join("percall");
    let store = open(&dir);
    prepare(&store);
    let own = per_call(&store, calls, "owner");
    let out = spawn(&["per-call".into(), dir.display().to_string(), calls.to_string()], &[])
        .wait_with_output()
        .unwrap();
    assert!(out.status.success());
    let s = String::from_utf8(out.stdout).unwrap();
    let client: Vec<f64> = s.split_whitespace().map(|x| x.parse::<f64>().unwrap()).collect();
    assert_eq!(client.len(), ROWS.len());
    // The owner again, after the client: each row's best of the two. The rows change the
    // store (the sequential write rewrites /big, and RocksDB flushes it), so a row measured
    // only before the client would read a different store than the client's.
    let again = per_call(&store, calls, "owner-again");
    let own: Vec<f64> = own.iter().zip(&again).map(|(a, b)| a.min(*b)).collect();
    drop(store);

    let one = create_run(&base.join("create1"), 1, files * 4, false);
    let four = create_run(&base.join("create4"), 4, files, false);
    let d1 = create_run(&base.join("dur1"), 1, durable * 4, true);
    let d4 = create_run(&base.join("dur4"), 4, durable, true);
    let f1 = fsyncs(&base, 1, durable * 4);
    let f4 = fsyncs(&base, 4, durable);

    println!("| measurement | owner / 1 process | client / 4 processes | ratio | target |");
    println!("|---|---|---|---|---|");
    for ((label, target), (o, c)) in ROWS.iter().zip(own.iter().zip(&client)) {
        println!("| {label} | {:.2} | {:.2} | {:.2}x | {target} |", o / 1e3, c / 1e3, c / o);
    }
    println!(
        "| create 4 KiB files, files/s | {one:.0} | {four:.0} | {:.2}x | >= 1.5x |",
        four / one
    );
    println!("| durable creates, commits/s | {d1:.0} | {d4:.0} | {:.2}x | >= 2x |", d4 / d1);
    let n = (durable * 4) as f64;
    match (f1, f4) {
        (Some(a), Some(b)) => println!(
            "| durable creates, fsync+fdatasync per commit | {:.2} | {:.2} | {:.2}x | <= 0.5 with 4 |",
            a as f64 / n,
            b as f64 / n,
            (b as f64) / (a as f64).max(1.0)
        ),
        _ => println!("| durable creates, fsyncs per commit | (strace not installed) | | | |"),
    }
    println!("({calls} calls per round, best of 3; {} files per run; {} durable commits per run; store in {})", files * 4, durable * 4, base.display());
}
