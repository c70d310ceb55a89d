//! txvfs on FoundationDB (issue 27), as ratios to the cluster's own operations measured in the
//! same run: a read version, a point read (a new transaction's read: read version + get), a
//! read of 2 or 5 keys together (read version + one batch, what a stat should cost), and a
//! commit of one small key. Each figure is the best of several rounds, and the rounds
//! interleave every operation, so a slow moment of the cluster hits all of them alike.
//!
//!     txvfs-bench-fdb [--quick] [--feed] [--rounds N] [CLUSTER-FILE]
//!
//! The cluster file is the argument, else `$TXVFS_FDB_CLUSTER_FILE`. The store and the raw
//! keys live under fresh prefixes (`bench-*`), left in the cluster afterwards.
//! `--quick`: fewer calls, 16 MiB instead of 256 MiB sequential. `--feed`: with the change
//! feed on (each writing transaction also writes its record and the feed's notify key).

use std::time::Instant;
use txvfs::kv::{Backend, FdbBackend};
use txvfs::{FileSystem, OpenOptions, Store};

const KIB4: usize = 4096;
const CHUNK: usize = 1 << 20;
const VALUE: usize = 64 << 10;

struct Best(Vec<(String, f64)>);

impl Best {
    fn put(&mut self, name: &str, v: f64) {
        match self.0.iter_mut().find(|(n, _)| n == name) {
            Some((_, b)) => *b = b.min(v),
            None => self.0.push((name.to_string(), v)),
        }
    }
    fn get(&self, name: &str) -> f64 {
        self.0.iter().find(|(n, _)| n == name).map_or(f64::NAN, |(_, v)| *v)
    }
}

/// Microseconds per call of `f` over `n` calls.
fn per_call(n: usize, mut f: impl FnMut(usize)) -> f64 {
    let t = Instant::now();
    for i in 0..n {
        f(i);
    }
    t.elapsed().as_secs_f64() * 1e6 / n as f64
}

/// Operations per second of `threads` threads, each calling `f(thread, i)` `n` times.
fn concurrent(threads: usize, n: usize, f: impl Fn(usize, usize) + Sync) -> f64 {
    let t = Instant::now();
    std::thread::scope(|s| {
        for th in 0..threads {
            let f = &f;
            s.spawn(move || (0..n).for_each(|i| f(th, i)));
        }
    });
    (threads * n) as f64 / t.elapsed().as_secs_f64()
}

fn raw_commit(raw: &FdbBackend, key: &[u8], value: &[u8]) {
    let mut tx = raw.begin().unwrap();
    tx.set(key, value).unwrap();
    tx.commit(true).unwrap();
}

fn main() {
    let mut quick = false;
    let mut feed = false;
    let mut rounds = 0;
    let mut cluster = std::env::var("TXVFS_FDB_CLUSTER_FILE").ok();
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--quick" => quick = true,
            "--feed" => feed = true,
            "--rounds" => rounds = args.next().and_then(|s| s.parse().ok()).expect("--rounds N"),
            _ if !a.starts_with('-') => cluster = Some(a),
            _ => {
                eprintln!("usage: txvfs-bench-fdb [--quick] [--feed] [--rounds N] [CLUSTER-FILE]");
                std::process::exit(2)
            }
        }
    }
    let cluster = cluster.expect("a cluster file: the argument or TXVFS_FDB_CLUSTER_FILE");
    let rounds = if rounds > 0 {
        rounds
    } else if quick {
        3
    } else {
        5
    };
    let n = if quick { 50 } else { 200 };
    let seq_mib = if quick { 16 } else { 256 };
    let clients = 8;
    let run =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis();
    let raw = FdbBackend::open(&format!("fdb:{cluster}?prefix=bench-raw-{run}")).unwrap();
    let store = Store::open(&format!("fdb:{cluster}?prefix=bench-{run}")).unwrap();
    // Before the clients open the store: each reads the setting at its open.
    store.set_change_feed(feed).unwrap();

    // Setup: a 4 KiB file, a directory of 1,000 entries, a raw key.
    let data = vec![7u8; KIB4];
    store.write_file("/f", &data).unwrap();
    for d in ["/c", "/t", "/dir", "/seq"] {
        store.mkdir(d, 0o755).unwrap();
    }
    for k in 0..clients {
        store.mkdir(format!("/p{k}"), 0o755).unwrap();
    }
    store.mkdir_all("/d1/d2/d3", 0o755).unwrap();
    store.write_file("/d1/d2/d3/f", &data).unwrap();
    for b in 0..10 {
        store
            .transact(|tx| {
                for i in 0..100 {
                    tx.write_file(format!("/dir/e{:04}", b * 100 + i), b"")?;
                }
                Ok(())
            })
            .unwrap();
    }
    // Files opened once each (a different one per call and round): an open of a file this
    // process has not opened in the last few seconds, which must write its open mark.
    store.mkdir("/cold", 0o755).unwrap();
    for r in 0..rounds {
        for start in (0..n).step_by(100) {
            store
                .transact(|tx| {
                    for i in start..(start + 100).min(n) {
                        tx.write_file(format!("/cold/{r}-{i}"), &data)?;
                    }
                    Ok(())
                })
                .unwrap();
        }
    }
    raw_commit(&raw, b"point", &[1u8; 16]);
    for k in 0..5 {
        raw_commit(&raw, format!("k{k}").as_bytes(), &[1u8; 100]);
    }
    let chunk = vec![3u8; CHUNK];

    let mut best = Best(Vec::new());
    let started = Instant::now();
    for r in 0..rounds {
        best.put(
            "grv",
            per_call(n, |_| {
                std::hint::black_box(raw.read_version().unwrap());
            }),
        );
        best.put(
            "read",
            per_call(n, |_| {
                let mut tx = raw.begin().unwrap();
                std::hint::black_box(tx.get(b"point").unwrap());
            }),
        );
        // What a stat should cost (issue 27): a read version and one batched read of the keys
        // a path needs (2 for /f, 5 for /d1/d2/d3/f); and 5 reads one after the other, as path
        // resolution made them before it batched.
        for (name, keys) in [("read 2 together", 2), ("read 5 together", 5)] {
            let keys: Vec<Vec<u8>> = (0..keys).map(|k| format!("k{k}").into_bytes()).collect();
            let refs: Vec<&[u8]> = keys.iter().map(Vec::as_slice).collect();
            best.put(
                name,
                per_call(n, |_| {
                    let mut tx = raw.begin().unwrap();
                    tx.snapshot_get_many(&refs, &mut |_, v| {
                        std::hint::black_box(v);
                    })
                    .unwrap();
                }),
            );
        }
        best.put(
            "read 5 in turn",
            per_call(n, |_| {
                let mut tx = raw.begin().unwrap();
                for k in 0..5 {
                    std::hint::black_box(tx.get(format!("k{k}").as_bytes()).unwrap());
                }
            }),
        );
        best.put("commit", per_call(n, |i| raw_commit(&raw, b"point", &i.to_le_bytes())));
        best.put(
            "stat",
            per_call(n, |_| {
                std::hint::black_box(store.stat("/f").unwrap());
            }),
        );
        best.put(
            "stat deep",
            per_call(n, |_| {
                std::hint::black_box(store.stat("/d1/d2/d3/f").unwrap());
            }),
        );
        let mut buf = vec![0u8; KIB4];
        best.put(
            "open+read 4 KiB",
            per_call(n, |_| {
                let f = store.open("/f", &OpenOptions::new().read(true)).unwrap();
                assert_eq!(f.read_at(&mut buf, 0).unwrap(), KIB4);
                f.close().unwrap();
            }),
        );
        best.put(
            "open+read 4 KiB cold",
            per_call(n, |i| {
                let f =
                    store.open(format!("/cold/{r}-{i}"), &OpenOptions::new().read(true)).unwrap();
                assert_eq!(f.read_at(&mut buf, 0).unwrap(), KIB4);
                f.close().unwrap();
            }),
        );
        best.put(
            "create 4 KiB",
            per_call(n, |i| store.write_file(format!("/c/{r}-{i}"), &data).unwrap()),
        );
        best.put("delete", per_call(n, |i| store.unlink(format!("/c/{r}-{i}")).unwrap()));
        best.put(
            "readdir 1,000",
            per_call(n / 10, |_| assert_eq!(store.readdir("/dir", None, 0).unwrap().len(), 1000)),
        );
        best.put(
            "3-file transaction",
            per_call(n, |i| {
                store
                    .transact(|tx| {
                        for f in ["a", "b", "c"] {
                            tx.write_file(format!("/t/{f}"), &i.to_le_bytes())?;
                        }
                        Ok(())
                    })
                    .unwrap()
            }),
        );
        // Sequential: 1 MiB calls, each its own commit; FoundationDB's own: 1 MiB transactions
        // of 16 values of 64 KiB (txvfs's block size).
        best.put(
            "seq write",
            per_call(seq_mib, |i| {
                let f = store.open("/seq/f", &OpenOptions::new().write(true).create(true)).unwrap();
                f.write_at(&chunk, (i * CHUNK) as u64).unwrap();
                f.close().unwrap();
            }),
        );
        best.put(
            "raw seq write",
            per_call(seq_mib, |i| {
                let mut tx = raw.begin().unwrap();
                for j in 0..CHUNK / VALUE {
                    tx.set(format!("seq/{i:06}/{j:02}").as_bytes(), &chunk[..VALUE]).unwrap();
                }
                tx.commit(true).unwrap();
            }),
        );
        let f = store.open("/seq/f", &OpenOptions::new().read(true)).unwrap();
        let mut big = vec![0u8; CHUNK];
        best.put(
            "seq read",
            per_call(seq_mib, |i| {
                assert_eq!(f.read_at(&mut big, (i * CHUNK) as u64).unwrap(), CHUNK)
            }),
        );
        f.close().unwrap();
        best.put(
            "raw seq read",
            per_call(seq_mib, |i| {
                let mut tx = raw.begin().unwrap();
                for j in 0..CHUNK / VALUE {
                    let v = tx.get(format!("seq/{i:06}/{j:02}").as_bytes()).unwrap().unwrap();
                    assert_eq!(v.len(), VALUE);
                }
            }),
        );
        // 8 clients at once (threads, one store each, as 8 processes would have), against 8
        // threads committing one small key each.
        let stores: Vec<Store> = (0..clients)
            .map(|_| Store::open(&format!("fdb:{cluster}?prefix=bench-{run}")).unwrap())
            .collect();
        let m = n / 2;
        let ops = concurrent(clients, m, |k, i| {
            stores[k].write_file(format!("/p{k}/{r}-{i}"), &data).unwrap()
        });
        best.put("8 clients create (us/op aggregate)", 1e6 / ops);
        let ops = concurrent(clients, m, |k, i| {
            raw_commit(&raw, format!("c{k}").as_bytes(), &i.to_le_bytes())
        });
        best.put("8 clients raw commit (us/op aggregate)", 1e6 / ops);
        eprintln!("round {} of {rounds} done ({:.0?})", r + 1, started.elapsed());
    }

    let (grv, read, commit) = (best.get("grv"), best.get("read"), best.get("commit"));
    println!(
        "txvfs-bench-fdb: {n} calls per operation, best of {rounds} interleaved rounds, \
         {seq_mib} MiB sequential, {clients} clients"
    );
    println!();
    println!("| operation | txvfs | FoundationDB's own | ratio |");
    println!("|---|---:|---|---:|");
    println!("| get read version | {grv:.0} µs | | |");
    println!("| point read (new transaction) | {read:.0} µs | | |");
    println!("| commit one small key | {commit:.0} µs | | |");
    let (two, five) = (best.get("read 2 together"), best.get("read 5 together"));
    println!("| read 2 keys together (new transaction) | {two:.0} µs | | |");
    println!("| read 5 keys together (new transaction) | {five:.0} µs | | |");
    println!(
        "| read 5 keys one after the other (new transaction) | {:.0} µs | | |",
        best.get("read 5 in turn")
    );
    let row = |name: &str, v: f64, refname: &str, refv: f64| {
        println!("| {name} | {v:.0} µs | {refname} {refv:.0} µs | {:.2} |", v / refv);
    };
    row("stat", best.get("stat"), "point read", read);
    row("stat", best.get("stat"), "2 keys together", two);
    row("stat /d1/d2/d3/f (4 levels)", best.get("stat deep"), "point read", read);
    row("stat /d1/d2/d3/f (4 levels)", best.get("stat deep"), "5 keys together", five);
    row("open+read 4 KiB (same file again)", best.get("open+read 4 KiB"), "point read", read);
    row(
        "open+read 4 KiB (a file not opened recently)",
        best.get("open+read 4 KiB cold"),
        "commit",
        commit,
    );
    row("create 4 KiB", best.get("create 4 KiB"), "commit", commit);
    row("delete", best.get("delete"), "commit", commit);
    row("readdir 1,000 entries", best.get("readdir 1,000"), "point read", read);
    row("durable 3-file transaction", best.get("3-file transaction"), "commit", commit);
    let tput = |name: &str, us: f64, refname: &str, refus: f64| {
        println!(
            "| {name} | {:.0} MiB/s | {refname} {:.0} MiB/s | {:.2} |",
            1e6 / us,
            1e6 / refus,
            refus / us
        );
    };
    tput(
        &format!("sequential write {seq_mib} MiB (1 MiB calls)"),
        best.get("seq write"),
        "1 MiB transactions of 64 KiB values",
        best.get("raw seq write"),
    );
    tput(
        &format!("sequential read {seq_mib} MiB (1 MiB calls)"),
        best.get("seq read"),
        "reads of 16 × 64 KiB values",
        best.get("raw seq read"),
    );
    let (c8, r8) = (
        best.get("8 clients create (us/op aggregate)"),
        best.get("8 clients raw commit (us/op aggregate)"),
    );
    println!(
        "| {clients} clients creating 4 KiB files | {:.0} creates/s | {clients} clients committing: \
         {:.0} commits/s | {:.2} |",
        1e6 / c8,
        1e6 / r8,
        r8 / c8
    );
    println!();
    println!(
        "Ratios: txvfs's time over the reference's (throughput rows: txvfs's rate over the \
         reference's). One client creating alone: {:.0} creates/s; {clients} clients: {:.1}× that.",
        1e6 / best.get("create 4 KiB"),
        best.get("create 4 KiB") / c8
    );
}
