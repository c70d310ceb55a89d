//! How soon a waiting watcher of a shared RocksDB store sees a commit made by another process:
//! the test process (the store's owner) waits while a child process (a client) commits one
//! file at a time and reports when each commit returned. Prints the latencies; the median
//! must be well under the 20 ms of polling (the committing process rings the store's bell,
//! `kv/shared/bell.rs`).
#![cfg(feature = "rocksdb")]

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use txvfs::{FileSystem, Store, WatchOptions};

const ROLE: &str = "TXVFS_WATCH_PUSH_WRITER";
const COMMITS: usize = 30;

fn now_us() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_micros() as u64
}

/// The child: commits `/f{i}` every 30 ms, printing `i time` once each commit returned.
fn writer(uri: &str) -> ! {
    let store = Store::open(uri).unwrap();
    for i in 0..COMMITS {
        std::thread::sleep(Duration::from_millis(30));
        store.write_file(format!("/f{i}"), b"x").unwrap();
        println!("{i} {}", now_us());
    }
    std::process::exit(0)
}

#[test]
fn a_commit_of_another_process_wakes_a_waiting_watcher_promptly() {
    if let Ok(uri) = std::env::var(ROLE) {
        writer(&uri);
    }
    let d = tempfile::tempdir().unwrap();
    let uri = d.path().join("s").to_str().unwrap().to_string();
    let store = Store::open(&uri).unwrap(); // the owner
    store.set_change_feed(true).unwrap();
    let mut w = store.watch(WatchOptions::default()).unwrap();
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "a_commit_of_another_process_wakes_a_waiting_watcher_promptly"])
        .args(["--nocapture", "--test-threads=1", "-q"])
        .env(ROLE, &uri)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let out = BufReader::new(child.stdout.take().unwrap());
    let reader = std::thread::spawn(move || {
        let mut committed = vec![0u64; COMMITS];
        for line in out.lines() {
            let line = line.unwrap();
            let mut f = line.split(' ');
            let (Some(i), Some(t)) = (f.next(), f.next()) else { continue };
            if let (Ok(i), Ok(t)) = (i.parse::<usize>(), t.parse()) {
                committed[i] = t;
            }
        }
        committed
    });
    let mut seen = vec![0u64; COMMITS];
    let mut n = 0;
    while n < COMMITS {
        let batches = w.wait(Duration::from_secs(30)).unwrap();
        let t = now_us();
        assert!(!batches.is_empty(), "nothing within 30 s after {n} commits");
        for b in batches {
            for c in b.changes {
                let name = String::from_utf8(c.path).unwrap();
                seen[name.trim_start_matches("/f").parse::<usize>().unwrap()] = t;
                n += 1;
            }
        }
    }
    assert!(child.wait().unwrap().success());
    let committed = reader.join().unwrap();
    let mut lat: Vec<i64> =
        seen.iter().zip(&committed).map(|(s, c)| *s as i64 - *c as i64).collect();
    lat.sort_unstable();
    let ms = |us: i64| us as f64 / 1000.0;
    println!(
        "watch_push: woken after another process's commit returned: median {:.2} ms, \
         90th percentile {:.2} ms, max {:.2} ms ({COMMITS} commits)",
        ms(lat[COMMITS / 2]),
        ms(lat[COMMITS * 9 / 10]),
        ms(lat[COMMITS - 1])
    );
    assert!(ms(lat[COMMITS / 2]) < 5.0, "median {} ms: the watcher polls", ms(lat[COMMITS / 2]));
}
