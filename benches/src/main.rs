//! Side-by-side benchmark: txvfs on RocksDB versus `std::fs` on the same disk and raw RocksDB
//! with the same options, measured in one run and reported as ratios.
//!
//! Run: `cargo run --release -p txvfs-bench -- [--quick] [--rounds N] [--block-size B] [--cache-size B] [--dir DIR] [--results FILE]`
//! `--quick` shrinks every workload (a smoke run); DIR defaults to a fresh temp directory.
//! Besides the table, the measurements go to FILE as CSV (default `benches/results/core.csv`
//! for a full run, none for `--quick`), which `benches/charts.py` turns into SVG charts.

use rand::{rngs::SmallRng, Rng, SeedableRng};
use rocksdb::{WriteOptions, DB};
use std::io::{Read, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use txvfs::{FileSystem, OpenOptions, Store};

mod report;
mod small;
mod sqlite;

use report::{print_table, print_targets, write_results, Row};

struct Sizes {
    small_files: usize,
    big_dir: usize,
    big_file: u64,
    preads: usize,
}

fn time<R>(f: impl FnOnce() -> R) -> (Duration, R) {
    let t = Instant::now();
    let r = f();
    (t.elapsed(), r)
}

/// Raw RocksDB with the options txvfs's backend uses.
fn raw_rocks(path: &Path) -> DB {
    DB::open(&txvfs::kv::RocksBackend::db_options(), path).expect("open raw rocksdb")
}

fn payload(n: usize, seed: u64) -> Vec<u8> {
    let mut rng = SmallRng::seed_from_u64(seed);
    // Half random, half repeated: compressible like typical data, not trivially so.
    (0..n).map(|i| if i % 2 == 0 { rng.gen() } else { b'a' + (i % 26) as u8 }).collect()
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let quick = args.iter().any(|a| a == "--quick");
    let value = |name: &str| args.iter().position(|a| a == name).map(|i| args[i + 1].clone());
    let base: PathBuf = match value("--dir") {
        Some(d) => PathBuf::from(d),
        None => tempfile::tempdir().expect("tempdir").keep(),
    };
    let rounds: usize = value("--rounds").map_or(1, |n| n.parse().expect("--rounds N"));
    let mut options = txvfs::Options::default();
    if let Some(b) = value("--block-size") {
        options.block_size = b.parse().expect("--block-size BYTES");
    }
    if let Some(c) = value("--cache-size") {
        options.cache_size = c.parse().expect("--cache-size BYTES");
    }
    let s = if quick {
        Sizes { small_files: 500, big_dir: 2_000, big_file: 8 << 20, preads: 2_000 }
    } else {
        Sizes { small_files: 10_000, big_dir: 100_000, big_file: 256 << 20, preads: 20_000 }
    };
    // Each round runs everything in fresh directories; each cell keeps its best round.
    let mut best: Option<(Vec<Row>, f64)> = None;
    for round in 0..rounds {
        let dir = base.join(format!("round{round}"));
        let (rows, create_ratio) = run_round(&dir, &s, quick, &options);
        std::fs::remove_dir_all(&dir).ok();
        best = Some(match best {
            None => (rows, create_ratio),
            Some((mut b, c)) => {
                for (b, r) in b.iter_mut().zip(rows) {
                    b.txvfs = b.txvfs.min(r.txvfs);
                    b.fs = b.fs.zip(r.fs).map(|(x, y)| x.min(y));
                    b.rocks = b.rocks.zip(r.rocks).map(|(x, y)| x.min(y));
                    b.sqlite = b.sqlite.zip(r.sqlite).map(|(x, y)| x.min(y));
                }
                (b, c.min(create_ratio))
            }
        });
    }
    let (rows, create_ratio) = best.expect("at least one round");
    println!(
        "block size {} B, cache {} B, best of {rounds} round{}",
        options.block_size,
        options.cache_size,
        if rounds == 1 { "" } else { "s" }
    );
    print_table(&rows, create_ratio, quick);
    print_targets(&rows);
    let default_results =
        (!quick).then(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("results/core.csv"));
    let results = match args.iter().position(|a| a == "--results") {
        Some(i) => Some(PathBuf::from(&args[i + 1])),
        None => default_results,
    };
    if let Some(path) = results {
        write_results(&rows, &path).unwrap_or_else(|e| panic!("writing {}: {e}", path.display()));
        println!("results: {}", path.display());
    }
}

/// One round of every workload in directory `base`; returns the rows and the ratio of a
/// create in a big directory to one in an empty directory.
fn run_round(base: &Path, s: &Sizes, quick: bool, options: &txvfs::Options) -> (Vec<Row>, f64) {
    std::fs::create_dir_all(base).unwrap();
    let store =
        Store::open_with(&format!("rocksdb:{}", base.join("txvfs").display()), options.clone())
            .expect("open store");
    let native = base.join("native");
    std::fs::create_dir_all(&native).unwrap();
    let raw = raw_rocks(&base.join("raw"));
    let sql = sqlite::Sqlite::open(&base.join("sqlite.db"));
    let mut wo = WriteOptions::default();
    wo.set_sync(false);
    let mut rows = Vec::new();
    let data4k = payload(4096, 1);

    // --- 10,000 files of 4 KiB in 100 directories: create, stat (first touch and hot),
    // open+read, rename, delete ---
    let systems = small::Systems { store: &store, native: &native, raw: &raw, wo: &wo, sql: &sql };
    rows.extend(small::rows(&systems, s.small_files, &data4k));

    // --- readdir of 1,000 and of a big directory ---
    for (label, n) in [("1,000", 1_000usize), (if quick { "2,000" } else { "100,000" }, s.big_dir)]
    {
        let dir = format!("/dir{n}");
        store.mkdir(&dir, 0o755).unwrap();
        let ndir = native.join(format!("dir{n}"));
        std::fs::create_dir_all(&ndir).unwrap();
        for chunk in (0..n).collect::<Vec<_>>().chunks(1000) {
            store
                .transact(|tx| {
                    for i in chunk {
                        tx.write_file(format!("{dir}/entry-{i:07}"), b"")?;
                    }
                    Ok(())
                })
                .unwrap();
            sql.exec("BEGIN");
            for i in chunk {
                std::fs::File::create(ndir.join(format!("entry-{i:07}"))).unwrap();
                raw.put_opt(format!("{dir}/entry-{i:07}"), b"", &wo).unwrap();
                sql.create(&dir, &format!("entry-{i:07}"), b"");
            }
            sql.exec("COMMIT");
        }
        let reps = if n <= 1000 { 200 } else { 5 };
        let (t_tx, _) = time(|| {
            for _ in 0..reps {
                assert_eq!(store.readdir(&dir, None, 0).unwrap().len(), n);
            }
        });
        let (t_fs, _) = time(|| {
            for _ in 0..reps {
                assert_eq!(std::fs::read_dir(&ndir).unwrap().count(), n);
            }
        });
        let (t_rk, _) = time(|| {
            for _ in 0..reps {
                // Bounded like txvfs's range reads: the scan stops at the prefix's end instead of
                // stepping over the deleted keys after it (rename and delete rows leave 20,000).
                let prefix = format!("{dir}/");
                let mut ro = rocksdb::ReadOptions::default();
                ro.set_iterate_upper_bound(format!("{dir}0").into_bytes());
                let c = raw
                    .iterator_opt(
                        rocksdb::IteratorMode::From(prefix.as_bytes(), rocksdb::Direction::Forward),
                        ro,
                    )
                    .count();
                assert_eq!(c, n);
            }
        });
        let (t_sq, _) = time(|| {
            for _ in 0..reps {
                assert_eq!(sql.list(&dir), n);
            }
        });
        rows.push(Row {
            name: format!("readdir of {label} entries"),
            unit: "listing",
            txvfs: t_tx,
            fs: Some(t_fs),
            rocks: Some(t_rk),
            sqlite: Some(t_sq),
            ops: reps,
        });
    }

    // --- create in an empty directory versus in the big one ---
    store.mkdir("/empty", 0o755).unwrap();
    let creates = 1000;
    let (t_empty, _) = time(|| {
        for i in 0..creates {
            store.write_file(format!("/empty/new-{i}"), b"x").unwrap();
        }
    });
    let big = format!("/dir{}", s.big_dir);
    let (t_big, _) = time(|| {
        for i in 0..creates {
            store.write_file(format!("{big}/new-{i}"), b"x").unwrap();
        }
    });
    rows.push(Row {
        name: format!("create in a dir of {} (vs empty dir)", s.big_dir),
        unit: "file",
        txvfs: t_big,
        fs: None,
        rocks: None,
        sqlite: None,
        ops: creates,
    });
    let create_ratio = t_big.as_secs_f64() / t_empty.as_secs_f64();

    // --- sequential write and read of a big file, 1 MiB at a time ---
    let chunk = payload(1 << 20, 3);
    let nchunks = (s.big_file >> 20) as usize;
    let (t_tx, _) = time(|| {
        let f = store.create("/big").unwrap();
        for _ in 0..nchunks {
            f.write(&chunk).unwrap();
        }
        f.sync().unwrap();
    });
    let (t_fs, _) = time(|| {
        let mut f = std::fs::File::create(native.join("big")).unwrap();
        for _ in 0..nchunks {
            f.write_all(&chunk).unwrap();
        }
        f.sync_all().unwrap();
    });
    let (t_rk, _) = time(|| {
        for c in 0..nchunks {
            for b in 0..16 {
                raw.put_opt(format!("big/{:08}", c * 16 + b), &chunk[b << 16..(b + 1) << 16], &wo)
                    .unwrap();
            }
        }
        raw.flush_wal(true).unwrap();
    });
    // SQLite: the file as 64 KiB rows like raw RocksDB's, one transaction per MiB, the last
    // one synced.
    let (t_sq, _) = time(|| {
        for c in 0..nchunks {
            if c + 1 == nchunks {
                sql.exec("PRAGMA synchronous=FULL");
            }
            sql.exec("BEGIN");
            for b in 0..16 {
                sql.create("/big", &format!("{:08}", c * 16 + b), &chunk[b << 16..(b + 1) << 16]);
            }
            sql.exec("COMMIT");
        }
        sql.exec("PRAGMA synchronous=NORMAL");
    });
    let mb = (s.big_file >> 20) as usize;
    rows.push(Row {
        name: format!("sequential write {mb} MiB"),
        unit: "MiB",
        txvfs: t_tx,
        fs: Some(t_fs),
        rocks: Some(t_rk),
        sqlite: Some(t_sq),
        ops: mb,
    });
    let (t_tx, _) = time(|| {
        let f = store.open("/big", &OpenOptions::new().read(true)).unwrap();
        assert_eq!(read_to_end_in_mib_chunks(f), s.big_file);
    });
    let (t_fs, _) = time(|| {
        let f = std::fs::File::open(native.join("big")).unwrap();
        assert_eq!(read_to_end_in_mib_chunks(f), s.big_file);
    });
    let (t_rk, _) = time(|| {
        let mut total = 0;
        for kv in raw.prefix_iterator(b"big/") {
            let (k, v) = kv.unwrap();
            if !k.starts_with(b"big/") {
                break;
            }
            total += v.len();
        }
        assert_eq!(total as u64, s.big_file);
    });
    let (t_sq, _) = time(|| {
        let mut buf = vec![0u8; 1 << 20];
        let mut at = 0;
        let total = sql.scan("/big", |v| {
            // Copied into a 1 MiB buffer, like the 1 MiB reads of the others.
            buf[at..at + v.len()].copy_from_slice(v);
            at = (at + v.len()) % buf.len();
        });
        assert_eq!(total as u64, s.big_file);
    });
    rows.push(Row {
        name: format!("sequential read {mb} MiB, 1 MiB reads"),
        unit: "MiB",
        txvfs: t_tx,
        fs: Some(t_fs),
        rocks: Some(t_rk),
        sqlite: Some(t_sq),
        ops: mb,
    });
    // The whole file in one call: one core read of the full size (no raw RocksDB equivalent).
    let (t_tx, _) = time(|| assert_eq!(store.read_file("/big").unwrap().len() as u64, s.big_file));
    let (t_fs, _) =
        time(|| assert_eq!(std::fs::read(native.join("big")).unwrap().len() as u64, s.big_file));
    rows.push(Row {
        name: format!("read {mb} MiB in one call"),
        unit: "MiB",
        txvfs: t_tx,
        fs: Some(t_fs),
        rocks: None,
        sqlite: None,
        ops: mb,
    });

    // --- random 4 KiB pread in the big file ---
    let mut rng = SmallRng::seed_from_u64(11);
    let offsets: Vec<u64> =
        (0..s.preads).map(|_| rng.gen_range(0..(s.big_file >> 12)) << 12).collect();
    let (t_tx, _) = time(|| {
        let f = store.open("/big", &OpenOptions::new().read(true)).unwrap();
        let mut buf = vec![0u8; 4096];
        for &o in &offsets {
            assert_eq!(f.read_at(&mut buf, o).unwrap(), 4096);
        }
    });
    let (t_fs, _) = time(|| {
        let f = std::fs::File::open(native.join("big")).unwrap();
        let mut buf = vec![0u8; 4096];
        for &o in &offsets {
            f.read_exact_at(&mut buf, o).unwrap();
        }
    });
    let (t_rk, _) = time(|| {
        for &o in &offsets {
            let v = raw.get_pinned(format!("big/{:08}", o >> 16)).unwrap().unwrap();
            assert!(v.len() >= ((o & 0xffff) + 4096) as usize);
        }
    });
    let (t_sq, _) = time(|| {
        let mut buf = vec![0u8; 4096];
        for &o in &offsets {
            let row = format!("{:08}", o >> 16);
            assert_eq!(sql.read_at("/big", &row, (o & 0xffff) as usize, &mut buf), 4096);
        }
    });
    rows.push(Row {
        name: format!("random 4 KiB pread in {mb} MiB"),
        unit: "read",
        txvfs: t_tx,
        fs: Some(t_fs),
        rocks: Some(t_rk),
        sqlite: Some(t_sq),
        ops: s.preads,
    });

    // --- durable transactions writing K files of 4 KiB at once, against one synced batch ---
    let txns = if quick { 50 } else { 300 };
    store.mkdir("/multi", 0o755).unwrap();
    for k in [1usize, 3, 9] {
        let (t_tx, _) = time(|| {
            for j in 0..txns {
                store
                    .transact_durable(true, |tx| {
                        for f in 0..k {
                            tx.write_file(format!("/multi/k{k}-{f}-{}", j % 16), &data4k)?;
                        }
                        Ok(())
                    })
                    .unwrap();
            }
        });
        let (t_rk, _) = time(|| {
            let mut wo = WriteOptions::default();
            wo.set_sync(true);
            for j in 0..txns {
                let mut b = rocksdb::WriteBatch::default();
                for f in 0..k {
                    b.put(format!("multi/k{k}-{f}-{}", j % 16), &data4k);
                }
                raw.write_opt(b, &wo).unwrap();
            }
        });
        // SQLite: one transaction of K inserts, its WAL synced at commit.
        let (t_sq, _) = time(|| {
            sql.exec("PRAGMA synchronous=FULL");
            for j in 0..txns {
                sql.exec("BEGIN");
                for f in 0..k {
                    sql.replace("/multi", &format!("k{k}-{f}-{}", j % 16), &data4k);
                }
                sql.exec("COMMIT");
            }
            sql.exec("PRAGMA synchronous=NORMAL");
        });
        rows.push(Row {
            name: format!("durable txn of {k} file{} (4 KiB each)", if k > 1 { "s" } else { "" }),
            unit: "txn",
            txvfs: t_tx,
            fs: None,
            rocks: Some(t_rk),
            sqlite: Some(t_sq),
            ops: txns,
        });
    }

    // --- durable 4 KiB transactions from 1, 2, 4, 8 threads (each its own file) ---
    let per_thread = if quick { 50 } else { 400 };
    for threads in [1usize, 2, 4, 8] {
        for t in 0..threads {
            let _ = store.mkdir(format!("/dur{threads}-{t}"), 0o755);
        }
        let (t_tx, _) = time(|| {
            std::thread::scope(|sc| {
                for t in 0..threads {
                    let (store, data) = (&store, &data4k);
                    sc.spawn(move || {
                        for j in 0..per_thread {
                            store
                                .transact_durable(true, |tx| {
                                    tx.write_file(format!("/dur{threads}-{t}/f{}", j % 16), data)
                                })
                                .unwrap();
                        }
                    });
                }
            })
        });
        let (t_rk, _) = time(|| {
            std::thread::scope(|sc| {
                for t in 0..threads {
                    let (raw, data) = (&raw, &data4k);
                    sc.spawn(move || {
                        let mut wo = WriteOptions::default();
                        wo.set_sync(true);
                        for j in 0..per_thread {
                            raw.put_opt(format!("dur{threads}-{t}/f{}", j % 16), data, &wo)
                                .unwrap();
                        }
                    });
                }
            })
        });
        let ops = threads * per_thread;
        rows.push(Row {
            name: format!(
                "durable 4 KiB txn, {threads} thread{}",
                if threads > 1 { "s" } else { "" }
            ),
            unit: "txn",
            txvfs: t_tx,
            fs: None,
            rocks: Some(t_rk),
            sqlite: None,
            ops,
        });
    }

    print_memory(&store);
    (rows, create_ratio)
}

/// The read cache's resident size (what it holds: the process's page cache of file blocks
/// and metadata) and the process's resident set, after a round.
fn print_memory(store: &Store) {
    let cache = store.backend().read_cache().and_then(|c| c.stats());
    let rss_kib = std::fs::read_to_string("/proc/self/status").ok().and_then(|s| {
        let line = s.lines().find(|l| l.starts_with("VmRSS:"))?.to_string();
        line.split_whitespace().nth(1)?.parse::<u64>().ok()
    });
    let mib = |b: u64| b as f64 / (1 << 20) as f64;
    match cache {
        Some(c) => println!(
            "read cache after the round: {:.1} MiB resident (limit {:.0} MiB), {} hits, {} misses; process RSS {:.0} MiB",
            mib(c.bytes),
            mib(txvfs::fs::default_cache_size()),
            c.hits,
            c.misses,
            rss_kib.map_or(0.0, |k| k as f64 / 1024.0)
        ),
        None => println!("read cache: off"),
    }
}

/// Reads a file to its end 1 MiB at a time; returns the bytes read.
fn read_to_end_in_mib_chunks(mut f: impl Read) -> u64 {
    let mut buf = vec![0u8; 1 << 20];
    let mut total = 0;
    loop {
        match f.read(&mut buf).unwrap() {
            0 => return total,
            n => total += n as u64,
        }
    }
}
