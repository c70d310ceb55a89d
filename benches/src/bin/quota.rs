//! Create throughput in a quota tree against the same without a quota, as a ratio measured in
//! one run (docs/quotas.md; the goal is >= 0.9x). `--threads` writers (default 4) each create
//! `--files` small files (100 bytes, `write_file`) in their own directory under `/q`, on a fresh
//! RocksDB store (commits not synced) per measurement; with the quota, `/q` is a quota tree
//! whose limits (1 TiB, 2^30 inodes) are far away, so this measures the accounting's cost when
//! writers are far from their limit: the read of one usage shard per create and the parent's
//! inode. Rounds alternate the order of the two; the medians are compared.
//!
//! ```text
//! txvfs-bench-quota [--quick] [--threads N] [--files N] [--rounds N] [--memory] [--only quota|plain]
//! ```

use std::time::Instant;
use txvfs::{FileSystem, Options, QuotaLimits, Store};

struct Config {
    threads: usize,
    files: usize,
    rounds: usize,
    memory: bool,
    /// `--only quota` or `--only plain`: one side alone (for `perf record`).
    only: Option<bool>,
}

fn arg<T: std::str::FromStr>(args: &[String], name: &str) -> Option<T> {
    let i = args.iter().position(|a| a == name)?;
    Some(args.get(i + 1)?.parse().ok().unwrap_or_else(|| panic!("{name} N")))
}

/// Creates per second: `threads` writers creating `files` files each, in `/q`, a quota tree
/// when `quota`.
fn measure(cfg: &Config, quota: bool) -> f64 {
    let dir = tempfile::tempdir().unwrap();
    let options = Options { sync: false, ..Options::default() };
    let uri = if cfg.memory { "memory:".to_string() } else { dir.path().to_str().unwrap().into() };
    let store = Store::open_with(&uri, options).unwrap();
    store.mkdir("/q", 0o755).unwrap();
    if quota {
        let far = QuotaLimits { bytes: Some(1 << 40), inodes: Some(1 << 30) };
        store.set_quota("/q", far).unwrap();
    }
    for t in 0..cfg.threads {
        store.mkdir(format!("/q/t{t}"), 0o755).unwrap();
    }
    let data = [7u8; 100];
    let retries = txvfs::kv::retries();
    let start = Instant::now();
    std::thread::scope(|s| {
        for t in 0..cfg.threads {
            let store = &store;
            s.spawn(move || {
                for i in 0..cfg.files {
                    store.write_file(format!("/q/t{t}/f{i}"), &data).unwrap();
                }
            });
        }
    });
    let secs = start.elapsed().as_secs_f64();
    let retries = txvfs::kv::retries() - retries;
    if std::env::var_os("TXVFS_BENCH_VERBOSE").is_some() {
        eprintln!("quota {quota}: {retries} conflicts retried");
    }
    if quota {
        let q = store.quota("/q").unwrap().unwrap();
        assert_eq!(q.inodes_used, 1 + (cfg.threads * (cfg.files + 1)) as u64);
    }
    (cfg.threads * cfg.files) as f64 / secs
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let quick = args.iter().any(|a| a == "--quick");
    let cfg = Config {
        threads: arg(&args, "--threads").unwrap_or(4),
        files: arg(&args, "--files").unwrap_or(if quick { 300 } else { 5000 }),
        rounds: arg(&args, "--rounds").unwrap_or(if quick { 1 } else { 5 }),
        memory: args.iter().any(|a| a == "--memory"),
        only: arg::<String>(&args, "--only").map(|s| s == "quota"),
    };
    let (mut plain, mut quota) = (Vec::new(), Vec::new());
    for round in 0..cfg.rounds {
        // Alternate which goes first, so that drift over the run falls on both.
        for with_quota in [round % 2 == 0, round % 2 != 0] {
            if cfg.only.is_some_and(|q| q != with_quota) {
                continue;
            }
            let r = measure(&cfg, with_quota);
            if with_quota {
                quota.push(r);
            } else {
                plain.push(r);
            }
        }
    }
    if cfg.only.is_some() {
        let (side, v) = if quota.is_empty() { ("no quota", plain) } else { ("quota", quota) };
        println!("{side}: {:.0} creates/s", median(v));
        return;
    }
    let (p, q) = (median(plain), median(quota));
    let backend = if cfg.memory { "memory" } else { "rocksdb (sync off)" };
    println!(
        "quota create throughput: {} writers x {} files, {} rounds, {backend}",
        cfg.threads, cfg.files, cfg.rounds
    );
    println!("| writers | no quota (creates/s) | in a quota tree (creates/s) | ratio |");
    println!("| --- | --- | --- | --- |");
    println!("| {} | {p:.0} | {q:.0} | {:.2}x |", cfg.threads, q / p);
}
