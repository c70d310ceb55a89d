//! Helper of `benches/packs/run.sh`: writes the seed-like tree and times random small-file
//! reads, through the txvfs API on a pack image or through the kernel on a mounted image.
//!
//! ```text
//! packs gen DIR FILES SEED            a tree of FILES files of 0..=8192 random bytes in three
//!                                     levels of directories; the paths go to DIR.list
//! packs read-pack IMAGE LIST N SEED [warm]   stat + read N random files of LIST: a cold pass,
//!                                     then a warm one (the same files again); with `warm`,
//!                                     an unmeasured pass that fills this process's caches,
//!                                     then the warm pass only
//! packs read-dir MOUNT LIST N SEED [warm]    the same through std::fs under MOUNT
//! ```
//! `read-*` print one line per measured pass: `pass files seconds files/s MB/s p50_us p99_us`,
//! and read-pack also `preads` and the index and cached directory bytes. `benches/packs/run.sh`
//! runs the `warm` form several times, alternating between the images, and keeps the fastest
//! (the machine is shared: one pass is noisy).

use rand::{rngs::SmallRng, Rng, SeedableRng};
use std::io::Write;
use std::path::Path;
use std::time::Instant;
use txvfs::{FileSystem, Options, Store};

fn main() {
    let a: Vec<String> = std::env::args().collect();
    let arg = |i: usize| {
        a.get(i).unwrap_or_else(|| panic!("usage: see benches/src/bin/packs.rs")).as_str()
    };
    match arg(1) {
        "gen" => gen(Path::new(arg(2)), arg(3).parse().unwrap(), arg(4).parse().unwrap()),
        "read-pack" => read_pack(
            arg(2),
            arg(3),
            arg(4).parse().unwrap(),
            arg(5).parse().unwrap(),
            a.get(6).is_some_and(|w| w == "warm"),
        ),
        "read-dir" => read_dir(
            arg(2),
            arg(3),
            arg(4).parse().unwrap(),
            arg(5).parse().unwrap(),
            a.get(6).is_some_and(|w| w == "warm"),
        ),
        other => panic!("unknown command {other}"),
    }
}

/// The tree: k x k x k leaf directories with about 100 files each.
fn gen(dir: &Path, files: usize, seed: u64) {
    let leaves = files.div_ceil(100).max(1);
    let k = (1..).find(|k: &usize| k * k * k >= leaves).unwrap();
    let per_leaf = files.div_ceil(k * k * k);
    let mut rng = SmallRng::seed_from_u64(seed);
    let mut list =
        std::io::BufWriter::new(std::fs::File::create(format!("{}.list", dir.display())).unwrap());
    let mut buf = vec![0u8; 8192];
    let mut n = 0;
    'all: for a in 0..k {
        for b in 0..k {
            for c in 0..k {
                let d = format!("{a:03}/{b:03}/{c:03}");
                std::fs::create_dir_all(dir.join(&d)).unwrap();
                for f in 0..per_leaf {
                    if n == files {
                        break 'all;
                    }
                    let size = rng.gen_range(0..=8192);
                    rng.fill(&mut buf[..size]);
                    let p = format!("{d}/f{f:04}");
                    std::fs::write(dir.join(&p), &buf[..size]).unwrap();
                    writeln!(list, "/{p}").unwrap();
                    n += 1;
                }
            }
        }
    }
    list.flush().unwrap();
    eprintln!("{n} files in {} leaf directories ({k}^3), {per_leaf} per leaf", k * k * k);
}

fn sample(list: &str, n: usize, seed: u64) -> Vec<String> {
    let all: Vec<String> =
        std::fs::read_to_string(list).unwrap().lines().map(str::to_string).collect();
    let mut rng = SmallRng::seed_from_u64(seed);
    (0..n).map(|_| all[rng.gen_range(0..all.len())].clone()).collect()
}

/// Times `read` over `paths`: the pass's line (see the module doc) and its files/s.
fn pass(name: &str, paths: &[String], mut read: impl FnMut(&str) -> usize) -> (String, f64) {
    let mut lat = Vec::with_capacity(paths.len());
    let mut bytes = 0;
    let t0 = Instant::now();
    for p in paths {
        let t = Instant::now();
        bytes += read(p);
        lat.push(t.elapsed().as_nanos() as u64);
    }
    let secs = t0.elapsed().as_secs_f64();
    lat.sort_unstable();
    let pct = |q: f64| lat[((lat.len() as f64 * q) as usize).min(lat.len() - 1)] as f64 / 1000.0;
    let rate = paths.len() as f64 / secs;
    let line = format!(
        "{name} {} {secs:.3} {rate:.0} {:.1} {:.1} {:.1}",
        paths.len(),
        bytes as f64 / secs / 1e6,
        pct(0.5),
        pct(0.99)
    );
    (line, rate)
}

/// The cold pass then a warm one, or (`warm_only`) an unmeasured pass then a warm one;
/// prints the measured passes.
fn passes(paths: &[String], warm_only: bool, mut read: impl FnMut(&str) -> usize) {
    let first = pass("cold", paths, &mut read).0;
    if !warm_only {
        println!("{first}");
    }
    println!("{}", pass("warm", paths, &mut read).0);
}

fn read_pack(image: &str, list: &str, n: usize, seed: u64, warm_only: bool) {
    let paths = sample(list, n, seed);
    let backend = txvfs::pack::PackBackend::open(Path::new(image)).unwrap();
    let store = Store::with_backend(backend.clone(), Options::default(), None).unwrap();
    let read = |p: &str| {
        let st = store.stat(p).unwrap();
        let d = store.read_file(p).unwrap();
        assert_eq!(d.len() as u64, st.size);
        d.len()
    };
    if warm_only {
        return passes(&paths, true, read);
    }
    let before = backend.preads();
    println!("{}", pass("cold", &paths, read).0);
    let cold_preads = backend.preads() - before;
    let before = backend.preads();
    println!("{}", pass("warm", &paths, read).0);
    println!(
        "preads cold {cold_preads} warm {} inodes {} index_bytes {} dir_cache_bytes {}",
        backend.preads() - before,
        backend.inodes(),
        backend.index_bytes(),
        backend.cached_dir_bytes()
    );
}

fn read_dir(mount: &str, list: &str, n: usize, seed: u64, warm_only: bool) {
    let paths = sample(list, n, seed);
    let read = |p: &str| {
        let full = format!("{mount}{p}");
        let st = std::fs::metadata(&full).unwrap();
        let d = std::fs::read(&full).unwrap();
        assert_eq!(d.len() as u64, st.len());
        d.len()
    };
    passes(&paths, warm_only, read);
}
