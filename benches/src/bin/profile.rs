//! Runs one workload of the main benchmark in a loop, alone, so a profiler sees only it:
//! `perf record -g target/release/txvfs-profile delete 200000`, then `perf report`.
//! Workloads: create, stat, clientstat (stat of 1,000 files from a client process, the
//! owner idle), clientwrite (4 KiB `write_file` into those files from a client: prints round
//! trips per call and how the spins for replies and requests fared), clientcreate (the same
//! into new names), statnew (first touch: each of COUNT files in 100 directories
//! stat'ed once after creating them), read (open+read 4 KiB+close), delete, pread (random 4 KiB in a
//! 256 MiB file), pwrite (random 4 KiB writes into it), seqread (passes over a 256 MiB file in 1 MiB reads), seqwrite (COUNT
//! files of 256 MiB written in 1 MiB calls and synced, as the main benchmark's row), durable (durable 4 KiB
//! transactions), durable3 and durable9 (durable transactions of 3 or 9 files of 4 KiB, as the
//! main benchmark's rows), readdir (a directory of COUNT empty files listed, 2,000,000 entries in
//! all). Prints the time per operation.
//! CACHE_BYTES sets the read cache (`Options::cache_size`; default 64 MiB), BLOCK_BYTES the
//! store's block size (a sweep: `for b in 4096 16384 65536; do txvfs-profile pread 20000
//! 67108864 $b; done`).

use rand::{rngs::SmallRng, Rng, SeedableRng};
use std::time::Instant;
use txvfs::{FileSystem, OpenOptions, Store};

/// The client side of `clientstat` and `clientwrite`: opens the store another process owns
/// and stats its files, or writes 4 KiB into them with `write_file`.
fn client_ops(what: &str, uri: &str, n: usize) {
    let store = Store::open(uri).expect("open as a client");
    assert!(!store.backend().role().is_primary(), "the owner is the parent");
    let mut rng = SmallRng::seed_from_u64(5);
    let paths: Vec<String> = (0..n).map(|_| format!("/d/f{}", rng.gen_range(0..1000))).collect();
    let data = vec![9u8; 4096];
    let fresh = std::sync::atomic::AtomicUsize::new(0);
    let op = |p: &String| match what {
        "clientstat" => drop(store.stat(p).unwrap()),
        "clientcreate" => {
            let i = fresh.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            store.write_file(format!("/d/new{i}"), &data).unwrap()
        }
        _ => store.write_file(p, &data).unwrap(),
    };
    paths[..1000.min(n)].iter().for_each(op);
    let trips = txvfs::kv::round_trips();
    let start = Instant::now();
    paths.iter().for_each(op);
    let per = per_op(start, n);
    let trips = (txvfs::kv::round_trips() - trips) as f64 / n as f64;
    let [(hits, misses), _] = txvfs::kv::spin_counts();
    println!("{what}: {per:.2} µs per op in a client ({n} ops, {trips:.2} round trips each; spins for replies: {hits} saw them, {misses} ran out)");
}

fn per_op(start: Instant, n: usize) -> f64 {
    start.elapsed().as_secs_f64() * 1e6 / n as f64
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("--client") {
        return client_ops(&args[2], &args[3], args[4].parse().expect("COUNT"));
    }
    let (Some(what), Some(n)) = (args.get(1), args.get(2).and_then(|n| n.parse::<usize>().ok()))
    else {
        eprintln!("usage: txvfs-profile create|writefile|stat|clientstat|clientwrite|clientcreate|statnew|read|delete|pread|pwrite|seqread|seqwrite|durable|durable3|durable9|readdir COUNT [CACHE_BYTES [BLOCK_BYTES]]");
        std::process::exit(2);
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let mut options = txvfs::Options::default();
    if let Some(c) = args.get(3) {
        options.cache_size = c.parse().expect("CACHE_BYTES");
    }
    if let Some(b) = args.get(4) {
        options.block_size = b.parse().expect("BLOCK_BYTES");
    }
    let store =
        Store::open_with(&format!("rocksdb:{}", dir.path().join("store").display()), options)
            .expect("open");
    let data = vec![7u8; 4096];
    store.mkdir("/d", 0o755).unwrap();
    let files = n.min(if what == "delete" { 100_000 } else { 5_000 });
    let make_files = |store: &Store| {
        for i in 0..files {
            store.write_file(format!("/d/f{i}"), &data).unwrap();
        }
    };
    let start;
    match what.as_str() {
        "create" => {
            start = Instant::now();
            for i in 0..n {
                let f = store.create(format!("/d/f{i}")).unwrap();
                f.write(&data).unwrap();
                f.close().unwrap();
            }
        }
        "writefile" => {
            // write_file of new names, one call and one commit each.
            start = Instant::now();
            for i in 0..n {
                store.write_file(format!("/d/f{i}"), &data).unwrap();
            }
        }
        "stat" | "read" => {
            make_files(&store);
            start = Instant::now();
            for i in 0..n {
                let p = format!("/d/f{}", i % files);
                if what == "stat" {
                    store.stat(&p).unwrap();
                } else {
                    let f = store.open(&p, &OpenOptions::new().read(true)).unwrap();
                    let mut buf = [0u8; 4096];
                    f.read_at(&mut buf, 0).unwrap();
                    f.close().unwrap();
                }
            }
        }
        "clientstat" | "clientwrite" | "clientcreate" => {
            // This process owns the store with 1,000 files; a child opens it as a client and
            // stats them (or writes them whole) COUNT times at random (`perf record` follows
            // the child).
            for i in 0..1000 {
                store.write_file(format!("/d/f{i}"), &data).unwrap();
            }
            let uri = format!("rocksdb:{}", dir.path().join("store").display());
            let exe = std::env::current_exe().unwrap();
            let st = std::process::Command::new(exe)
                .args(["--client", what, &uri, &n.to_string()])
                .status()
                .unwrap();
            assert!(st.success());
            let [_, (hits, misses)] = txvfs::kv::spin_counts();
            println!("the owner's spins for requests: {hits} saw them, {misses} ran out");
            return;
        }
        "statnew" => {
            // First touch: COUNT files in 100 directories (/w1/d042/f001234), each stat'ed
            // once right after all were created, in directory order (as find walks a tree).
            store.mkdir("/w1", 0o755).unwrap();
            for d in 0..100 {
                store.mkdir(format!("/w1/d{d:03}"), 0o755).unwrap();
            }
            let paths: Vec<String> = (0..100)
                .flat_map(|d| (d..n).step_by(100).map(move |i| format!("/w1/d{d:03}/f{i:06}")))
                .collect();
            for p in &paths {
                store.write_file(p, &data[..100]).unwrap();
            }
            let before = store.backend().read_cache().and_then(|c| c.stats());
            start = Instant::now();
            for p in &paths {
                store.stat(p).unwrap();
            }
            let after = store.backend().read_cache().and_then(|c| c.stats());
            if let (Some(b), Some(a)) = (before, after) {
                println!(
                    "read cache per stat: {:.2} hits, {:.2} misses",
                    (a.hits - b.hits) as f64 / n as f64,
                    (a.misses - b.misses) as f64 / n as f64
                );
            }
        }
        "delete" => {
            make_files(&store);
            start = Instant::now();
            for i in 0..files {
                store.unlink(format!("/d/f{i}")).unwrap();
            }
        }
        "pread" | "pwrite" => {
            // 256 MiB of incompressible data, then COUNT random 4 KiB reads or writes.
            let f = store
                .open("/big", &OpenOptions::new().read(true).write(true).create(true))
                .unwrap();
            let mut rng = SmallRng::seed_from_u64(1);
            let mut mb = vec![0u8; 1 << 20];
            for i in 0..256u64 {
                rng.fill(&mut mb[..]);
                f.write_at(&mb, i << 20).unwrap();
            }
            let mut buf = [0u8; 4096];
            rng.fill(&mut buf[..]);
            start = Instant::now();
            for _ in 0..n {
                let off = rng.gen_range(0..(256u64 << 20) / 4096) * 4096;
                if what == "pread" {
                    f.read_at(&mut buf, off).unwrap();
                } else {
                    f.write_at(&buf, off).unwrap();
                }
            }
        }
        "seqread" => {
            // 256 MiB of incompressible data, then COUNT sequential passes in 1 MiB reads.
            let f = store
                .open("/big", &OpenOptions::new().read(true).write(true).create(true))
                .unwrap();
            let mut rng = SmallRng::seed_from_u64(2);
            let mut mb = vec![0u8; 1 << 20];
            let written = Instant::now();
            for i in 0..256u64 {
                rng.fill(&mut mb[..]);
                f.write_at(&mb, i << 20).unwrap();
            }
            println!(
                "seqwrite: {:.0} MiB/s (256 MiB in 1 MiB writes)",
                256.0 / written.elapsed().as_secs_f64()
            );
            start = Instant::now();
            for _ in 0..n {
                f.seek(std::io::SeekFrom::Start(0)).unwrap();
                while f.read(&mut mb).unwrap() > 0 {}
            }
            let secs = start.elapsed().as_secs_f64();
            println!("seqread: {:.0} MiB/s ({n} passes of 256 MiB)", 256.0 * n as f64 / secs);
            return;
        }
        "durable" | "durable3" | "durable9" => {
            let k: usize = what[7..].parse().unwrap_or(1);
            start = Instant::now();
            for i in 0..n {
                store
                    .transact_durable(true, |tx| {
                        for f in 0..k {
                            tx.write_file(format!("/d/k{k}-{f}-{}", i % 16), &data)?;
                        }
                        Ok(())
                    })
                    .unwrap();
            }
        }
        "seqwrite" => {
            // COUNT files of 256 MiB, each created, written in 1 MiB calls and synced.
            let mut rng = SmallRng::seed_from_u64(3);
            let mut mb = vec![0u8; 1 << 20];
            rng.fill(&mut mb[..]);
            start = Instant::now();
            for i in 0..n {
                let f = store.create(format!("/big{i}")).unwrap();
                for _ in 0..256 {
                    f.write(&mb).unwrap();
                }
                f.sync().unwrap();
            }
            let secs = start.elapsed().as_secs_f64();
            println!("seqwrite: {:.0} MiB/s ({n} files of 256 MiB)", 256.0 * n as f64 / secs);
            return;
        }
        "readdir" => {
            // A directory of COUNT empty files (made 1,000 per transaction), then listed until
            // 2,000,000 entries were returned.
            for chunk in (0..n).collect::<Vec<_>>().chunks(1000) {
                store
                    .transact(|tx| {
                        for i in chunk {
                            tx.write_file(format!("/d/entry-{i:07}"), b"")?;
                        }
                        Ok(())
                    })
                    .unwrap();
            }
            let reps = (2_000_000 / n).max(1);
            start = Instant::now();
            for _ in 0..reps {
                assert_eq!(store.readdir("/d", None, 0).unwrap().len(), n);
            }
            let secs = start.elapsed().as_secs_f64();
            println!(
                "readdir: {:.1} µs per listing of {n} ({reps} listings)",
                secs * 1e6 / reps as f64
            );
            return;
        }
        other => panic!("unknown workload {other}"),
    }
    let ops = if what == "delete" { files } else { n };
    println!(
        "{what}: {:.2} µs per op ({ops} ops)",
        start.elapsed().as_secs_f64() * 1e6 / ops as f64
    );
}
