//! `txvfs-bench-watch`: the cost of the change feed on the harness's create, write and delete
//! rows (4 KiB files on RocksDB, no fsync), feed off vs on, in alternating rounds; prints the
//! best wall time and the best CPU time of the process (every thread) of each, and the ratios
//! on/off. On a machine loaded by other work, the CPU time is the steadier of the two.
//!
//!   txvfs-bench-watch [FILES] [ROUNDS] [off|on|poll]
//!
//! `poll`: the feed on, and a watcher in another thread polling it every millisecond while
//! the rows run; prints its polls, those that returned records, and the batches. The feed
//! hands out only durable commits, so (the writers do not sync) each poll that returns
//! records costs one fsync: count them with `strace -c -f -e fsync,fdatasync`.
//!
//! (built by `cargo build --release --workspace`). With `off` or `on`, only that setting runs,
//! for counting its instructions and CPU time (`perf stat -e instructions:u,task-clock`),
//! which a machine loaded by other work disturbs less than the wall time.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use txvfs::{FileSystem, Options, Store, WatchOptions};

/// A watcher polling every millisecond until `stop`: (polls, polls with records, batches).
fn poller(store: &Store, stop: Arc<AtomicBool>) -> std::thread::JoinHandle<[u64; 3]> {
    let mut w = store.watch(WatchOptions::default()).unwrap();
    std::thread::spawn(move || {
        let mut n = [0u64; 3];
        loop {
            let last = stop.load(Ordering::SeqCst);
            let b = w.poll().unwrap();
            n[0] += 1;
            n[1] += u64::from(!b.is_empty());
            n[2] += b.len() as u64;
            if last {
                return n;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    })
}

/// A clock: the wall time and the CPU time of the whole process.
#[derive(Clone, Copy)]
struct Clock(Instant, Duration);

impl Clock {
    fn now() -> Clock {
        let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
        // SAFETY: a valid clock id and a valid timespec to fill.
        unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut ts) };
        Clock(Instant::now(), Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32))
    }
    /// (wall, CPU) since `self`.
    fn elapsed(self) -> [Duration; 2] {
        let now = Clock::now();
        [now.0 - self.0, now.1.saturating_sub(self.1)]
    }
}

fn round(files: usize, feed: bool, poll: bool) -> [[Duration; 2]; 3] {
    let d = tempfile::tempdir().unwrap();
    let uri = d.path().join("s");
    let store =
        Store::open_with(uri.to_str().unwrap(), Options { sync: false, ..Options::default() })
            .unwrap();
    store.set_change_feed(feed).unwrap();
    store.mkdir("/small", 0o755).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let polling = poll.then(|| poller(&store, stop.clone()));
    let data = vec![7u8; 4096];
    let t = Clock::now();
    for i in 0..files {
        let f = store.create(format!("/small/f{i}")).unwrap();
        f.write(&data).unwrap();
        f.close().unwrap();
    }
    let create = t.elapsed();
    let t = Clock::now();
    for i in 0..files {
        store.write_file(format!("/small/f{i}"), &data).unwrap();
    }
    let write = t.elapsed();
    let t = Clock::now();
    for i in 0..files {
        store.unlink(format!("/small/f{i}")).unwrap();
    }
    let delete = t.elapsed();
    if let Some(p) = polling {
        stop.store(true, Ordering::SeqCst);
        let [polls, with, batches] = p.join().unwrap();
        println!("watcher: {polls} polls, {with} returned records, {batches} batches");
    }
    [create, write, delete]
}

fn main() {
    let mut args = std::env::args().skip(1);
    let files: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(5000);
    let rounds: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(5);
    let only = args.next();
    if only.as_deref().is_some_and(|o| !["off", "on", "poll"].contains(&o)) {
        eprintln!("usage: txvfs-bench-watch [FILES] [ROUNDS] [off|on|poll]");
        std::process::exit(2);
    }
    let poll = only.as_deref() == Some("poll");
    let only = if poll { Some("on".to_string()) } else { only };
    // [off, on][row][wall, cpu]
    let mut best = [[[Duration::MAX; 2]; 3]; 2];
    for _ in 0..rounds {
        for (i, feed) in [false, true].into_iter().enumerate() {
            if only.as_deref().is_some_and(|o| o != ["off", "on"][i]) {
                continue;
            }
            let r = round(files, feed, poll);
            for row in 0..3 {
                for clock in 0..2 {
                    best[i][row][clock] = best[i][row][clock].min(r[row][clock]);
                }
            }
        }
    }
    println!("{files} files, best of {rounds} rounds (µs per file: wall, CPU of the process)");
    let per = |d: Duration| d.as_secs_f64() * 1e6 / files as f64;
    let names = ["create+write 4 KiB+close", "write_file 4 KiB", "delete 4 KiB file"];
    if let Some(only) = only {
        // One setting ran: its own times (the other's are not there to compare).
        let i = usize::from(only == "on");
        println!("{:<26} {:>9} {:>9}", format!("row (feed {only})"), "wall", "CPU");
        for (row, name) in names.into_iter().enumerate() {
            let [wall, cpu] = best[i][row].map(per);
            println!("{name:<26} {wall:>9.2} {cpu:>9.2}");
        }
        return;
    }
    println!(
        "{:<26} {:>9} {:>9} {:>7} {:>9} {:>9} {:>7}",
        "row", "wall off", "wall on", "on/off", "CPU off", "CPU on", "on/off"
    );
    for (row, name) in names.into_iter().enumerate() {
        let mut line = format!("{name:<26}");
        for (off, on) in best[0][row].iter().zip(&best[1][row]) {
            let (off, on) = (per(*off), per(*on));
            line += &format!(" {off:>9.2} {on:>9.2} {:>6.2}x", on / off);
        }
        println!("{line}");
    }
}
