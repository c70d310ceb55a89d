//! `txvfs-bench-watch`: the cost of the change feed on the harness's create, write and delete
//! rows (4 KiB files on RocksDB, no fsync), feed off vs on, in alternating rounds; prints the
//! best time of each and the ratio on/off.
//!
//!   cargo run --release -p txvfs-bench --bin txvfs-bench-watch [FILES] [ROUNDS]

use std::time::{Duration, Instant};
use txvfs::{FileSystem, Options, Store};

fn round(files: usize, feed: bool) -> [Duration; 3] {
    let d = tempfile::tempdir().unwrap();
    let uri = d.path().join("s");
    let store =
        Store::open_with(uri.to_str().unwrap(), Options { sync: false, ..Options::default() })
            .unwrap();
    store.set_change_feed(feed).unwrap();
    store.mkdir("/small", 0o755).unwrap();
    let data = vec![7u8; 4096];
    let t = Instant::now();
    for i in 0..files {
        let f = store.create(format!("/small/f{i}")).unwrap();
        f.write(&data).unwrap();
        f.close().unwrap();
    }
    let create = t.elapsed();
    let t = Instant::now();
    for i in 0..files {
        store.write_file(format!("/small/f{i}"), &data).unwrap();
    }
    let write = t.elapsed();
    let t = Instant::now();
    for i in 0..files {
        store.unlink(format!("/small/f{i}")).unwrap();
    }
    [create, write, t.elapsed()]
}

fn main() {
    let mut args = std::env::args().skip(1);
    let files: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(5000);
    let rounds: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(5);
    let mut best = [[Duration::MAX; 3]; 2];
    for _ in 0..rounds {
        for (i, feed) in [false, true].into_iter().enumerate() {
            let r = round(files, feed);
            for row in 0..3 {
                best[i][row] = best[i][row].min(r[row]);
            }
        }
    }
    println!("{files} files, best of {rounds} rounds (µs per file)");
    println!("{:<28} {:>10} {:>10} {:>8}", "row", "feed off", "feed on", "on/off");
    for (row, name) in ["create+write 4 KiB+close", "write_file 4 KiB", "delete 4 KiB file"]
        .into_iter()
        .enumerate()
    {
        let per = |d: Duration| d.as_secs_f64() * 1e6 / files as f64;
        let (off, on) = (per(best[0][row]), per(best[1][row]));
        println!("{name:<28} {off:>10.2} {on:>10.2} {:>7.2}x", on / off);
    }
}
