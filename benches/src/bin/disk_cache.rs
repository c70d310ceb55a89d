//! The local disk cache of chunks (`Options::disk_cache`) in front of a slow remote backend,
//! as ratios measured in one run. The remote is the memory backend behind
//! `txvfs::kv::FaultyBackend` with a latency per read and a bandwidth (defaults: 1 ms and
//! 100 MB/s, a 1 Gbit/s network), so every configuration reads the same data through the same
//! remote. Reads whole files of a working set:
//!
//! - uncached, blocks as a store without the option writes them (the data in the block keys):
//!   the baseline;
//! - uncached, blocks as chunks (the layout a store with the option writes);
//! - cached: the first pass (cold), later passes (warm), and a pass after closing and
//!   reopening the store (restart);
//! - scan resistance: a hot set read twice, a scan of four times the cache's size, the hot set
//!   again: its hit rate.
//!
//! - parallel fetch: a 64 MiB file read in one call (into the caller's buffer) over a remote with the latency per request
//!   and no bandwidth limit, one range read at a time against several in flight.
//!
//! ```text
//! txvfs-bench-disk-cache [--quick] [--files N] [--file-kib N] [--latency-us N]
//!                        [--bandwidth BYTES_PER_S] [--dir DIR]
//! ```

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};
use txvfs::kv::{Backend, FaultPlan, FaultyBackend, Limits, MemoryBackend};
use txvfs::{FileSystem, Options, Store};

struct Config {
    files: usize,
    file_size: usize,
    latency: Duration,
    bandwidth: u64,
    dir: PathBuf,
}

/// A new view of the remote `data`: its own wrapper, so each view is a separate store in
/// this process (and has a cache of its own, or none).
fn remote(data: &Arc<MemoryBackend>, cfg: &Config) -> (Arc<dyn Backend>, Arc<FaultPlan>) {
    let (b, plan) = FaultyBackend::new(data.clone());
    plan.set_read_latency(cfg.latency);
    plan.set_read_bandwidth(cfg.bandwidth);
    (b, plan)
}

fn options(cache: Option<(&Path, u64)>) -> Options {
    Options {
        sync: false,
        disk_cache: cache.map(|(d, _)| d.to_path_buf()),
        disk_cache_size: cache.map_or(0, |(_, n)| n),
        ..Options::default()
    }
}

/// Writes `n` files of `size` bytes under `dir` through `store`.
fn write_set(store: &Store, dir: &str, n: usize, size: usize) {
    store.mkdir_all(dir, 0o755).unwrap();
    for i in 0..n {
        let data: Vec<u8> = (0..size).map(|j| (i * 31 + j / 4096) as u8).collect();
        store.write_file(format!("{dir}/f{i}"), &data).unwrap();
    }
}

/// Reads every file of `dir` once; returns the seconds and the MB read.
fn read_set(store: &Store, dir: &str, n: usize) -> (f64, f64) {
    let t = Instant::now();
    let mut bytes = 0;
    for i in 0..n {
        bytes += std::hint::black_box(store.read_file(format!("{dir}/f{i}")).unwrap()).len();
    }
    (t.elapsed().as_secs_f64(), bytes as f64 / 1e6)
}

/// Hits and misses of the store's cache since `before`.
fn delta(store: &Store, before: &(u64, u64)) -> (u64, u64) {
    let s = store.disk_cache_stats().unwrap();
    (s.hits - before.0, s.misses - before.1)
}

fn counts(store: &Store) -> (u64, u64) {
    let s = store.disk_cache_stats().unwrap();
    (s.hits, s.misses)
}

fn row(name: &str, secs: f64, mb: f64, base: f64, hits: Option<(u64, u64)>, reads: u64) {
    let rate = hits.map_or("-".to_string(), |(h, m)| {
        format!("{:.0}%", 100.0 * h as f64 / (h + m).max(1) as f64)
    });
    println!("| {name} | {:.0} | {rate} | {reads} | {:.2}x |", mb / secs, base / secs);
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let arg =
        |name: &str| args.iter().position(|a| a == name).and_then(|i| args.get(i + 1)).cloned();
    let quick = args.iter().any(|a| a == "--quick");
    let tmp = tempfile::tempdir().unwrap();
    let cfg = Config {
        files: arg("--files")
            .map_or(if quick { 16 } else { 64 }, |s| s.parse().expect("--files N")),
        file_size: arg("--file-kib").map_or(512, |s| s.parse::<usize>().expect("--file-kib N"))
            << 10,
        latency: Duration::from_micros(
            arg("--latency-us").map_or(1000, |s| s.parse().expect("--latency-us N")),
        ),
        bandwidth: arg("--bandwidth")
            .map_or(100_000_000, |s| s.parse().expect("--bandwidth BYTES_PER_S")),
        dir: arg("--dir").map_or_else(|| tmp.path().to_path_buf(), PathBuf::from),
    };
    let set_mb = (cfg.files * cfg.file_size) as f64 / 1e6;
    println!(
        "remote: memory backend, {} us per read, {} MB/s; working set {} files of {} KiB ({set_mb:.0} MB); cache in {}",
        cfg.latency.as_micros(),
        cfg.bandwidth / 1_000_000,
        cfg.files,
        cfg.file_size >> 10,
        cfg.dir.display()
    );
    let data = Arc::new(MemoryBackend::new(Limits::UNLIMITED));
    let cache_dir = cfg.dir.join("cache");
    let _ = std::fs::remove_dir_all(&cache_dir);
    let big_cache = 4 * (cfg.files * cfg.file_size) as u64;
    // The same working set in both layouts: /plain written without the option, /chunked with.
    {
        let (b, _) = remote(&data, &cfg);
        write_set(
            &Store::with_backend(b, options(None), None).unwrap(),
            "/plain",
            cfg.files,
            cfg.file_size,
        );
        let (b, _) = remote(&data, &cfg);
        let dir = cfg.dir.join("writer-cache");
        let _ = std::fs::remove_dir_all(&dir);
        write_set(
            &Store::with_backend(b, options(Some((&dir, 1 << 20))), None).unwrap(),
            "/chunked",
            cfg.files,
            cfg.file_size,
        );
    }
    println!("\n| reads of the working set | MB/s | cache hits | backend reads | vs baseline |");
    println!("| --- | ---: | ---: | ---: | ---: |");
    let (b, plan) = remote(&data, &cfg);
    let plain = Store::with_backend(b, options(None), None).unwrap();
    let r0 = plan.reads();
    let (base, mb) = read_set(&plain, "/plain", cfg.files);
    row("uncached, data in block keys (baseline)", base, mb, base, None, plan.reads() - r0);
    let r0 = plan.reads();
    let (t, mb) = read_set(&plain, "/chunked", cfg.files);
    row("uncached, blocks as chunks", t, mb, base, None, plan.reads() - r0);
    drop(plain);

    let (b, plan) = remote(&data, &cfg);
    let cached = Store::with_backend(b, options(Some((&cache_dir, big_cache))), None).unwrap();
    let (c0, r0) = (counts(&cached), plan.reads());
    let (t, mb) = read_set(&cached, "/chunked", cfg.files);
    row("cached, first pass (cold)", t, mb, base, Some(delta(&cached, &c0)), plan.reads() - r0);
    cached.disk_cache_flush();
    let (c0, r0) = (counts(&cached), plan.reads());
    let (mut best, mut mb) = (f64::MAX, 0.0);
    for _ in 0..3 {
        let (t, m) = read_set(&cached, "/chunked", cfg.files);
        (best, mb) = (best.min(t), m);
    }
    let (h, m) = delta(&cached, &c0);
    row("cached, warm (best of 3 passes)", best, mb, base, Some((h, m)), (plan.reads() - r0) / 3);
    drop(cached);
    let (b, plan) = remote(&data, &cfg);
    let cached = Store::with_backend(b, options(Some((&cache_dir, big_cache))), None).unwrap();
    let (c0, r0) = (counts(&cached), plan.reads());
    let (t, mb) = read_set(&cached, "/chunked", cfg.files);
    row("cached, after a restart", t, mb, base, Some(delta(&cached, &c0)), plan.reads() - r0);
    drop(cached);

    // Scan resistance: the cache holds a quarter of the working set; the hot set is an eighth.
    let small = (cfg.files * cfg.file_size / 4) as u64;
    let hot = cfg.files / 8;
    let scan_dir = cfg.dir.join("scan-cache");
    let _ = std::fs::remove_dir_all(&scan_dir);
    let (b, plan) = remote(&data, &cfg);
    let store = Store::with_backend(b, options(Some((&scan_dir, small))), None).unwrap();
    for _ in 0..2 {
        read_set(&store, "/chunked", hot);
        store.disk_cache_flush();
    }
    let scan_t = Instant::now();
    for i in hot..cfg.files {
        store.read_file(format!("/chunked/f{i}")).unwrap();
    }
    store.disk_cache_flush();
    let scan_t = scan_t.elapsed();
    let (c0, r0) = (counts(&store), plan.reads());
    let (t, mb) = read_set(&store, "/chunked", hot);
    let (h, m) = delta(&store, &c0);
    let (b2, plan2) = remote(&data, &cfg);
    let plain = Store::with_backend(b2, options(None), None).unwrap();
    let base_reads = plan2.reads();
    let (hot_base, _) = read_set(&plain, "/plain", hot);
    let base_reads = plan2.reads() - base_reads;
    println!(
        "\nScan resistance: cache of {} MB; hot set of {hot} files read twice, then a scan of {} files ({:.1} s), then the hot set again:",
        small / 1_000_000,
        cfg.files - hot,
        scan_t.as_secs_f64()
    );
    println!("\n| reads of the hot set after the scan | MB/s | cache hits | backend reads | vs baseline |");
    println!("| --- | ---: | ---: | ---: | ---: |");
    row("uncached, data in block keys (baseline)", hot_base, mb, hot_base, None, base_reads);
    row("cached", t, mb, hot_base, Some((h, m)), plan.reads() - r0);
    let s = store.disk_cache_stats().unwrap();
    println!("\ncache after the scan: {} entries, {} bytes (limit {small}), {} evictions, {} dropped writes", s.entries, s.bytes, s.evictions, s.dropped);
    parallel_read(cfg.latency, if quick { 16 } else { 64 });
}

/// A file of `mib` MiB read in one call (`read_at` into the caller's buffer) over a remote with `latency` per request (no
/// bandwidth limit), with 1, 4, 8 (the default) and 16 range reads in flight; best of 3
/// alternating passes each.
fn parallel_read(latency: Duration, mib: usize) {
    let (b, plan) = FaultyBackend::new(Arc::new(MemoryBackend::new(Limits::UNLIMITED)));
    plan.set_read_latency(latency);
    let store = Store::with_backend(b, options(None), None).unwrap();
    let bytes: Vec<u8> = (0..mib << 20).map(|i| ((i >> 12) ^ i) as u8).collect();
    store.write_file("/big", &bytes).unwrap();
    let depths = [1u64, 4, 8, 16];
    let mut best = [(f64::MAX, 0u64); 4];
    // Into one buffer, touched before: the time is the read's, not the page faults' of a
    // fresh 64 MiB allocation.
    let mut got = vec![1u8; bytes.len()];
    for _ in 0..3 {
        for (i, &depth) in depths.iter().enumerate() {
            plan.set_parallel_reads(depth);
            let f = store.open("/big", &txvfs::OpenOptions::new().read(true)).unwrap();
            let (r0, t) = (plan.reads(), Instant::now());
            assert_eq!(f.read_at(&mut got, 0).unwrap(), bytes.len());
            let secs = t.elapsed().as_secs_f64();
            assert!(got == bytes);
            got.fill(1);
            if secs < best[i].0 {
                best[i] = (secs, plan.reads() - r0);
            }
        }
    }
    println!(
        "\nParallel fetch: a {mib} MiB file read in one call, {} us per request, no bandwidth limit (best of 3):\n",
        latency.as_micros()
    );
    println!("| range reads in flight | MB/s | backend reads | vs one at a time |");
    println!("| --- | ---: | ---: | ---: |");
    for (&depth, &(secs, reads)) in depths.iter().zip(&best) {
        let mb = (mib << 20) as f64 / 1e6;
        println!("| {depth} | {:.0} | {reads} | {:.2}x |", mb / secs, best[0].0 / secs);
    }
}
