//! Transactions beyond the backend's limits: a single transaction writes 1 GiB across 100
//! files on a backend that enforces FoundationDB's limits (10 MB and 5 s per transaction) and
//! commits atomically; one that outlives the time limit still detects conflicts; a rolled-back
//! or SIGKILLed transaction leaves neither data nor garbage (staged chunks) behind.

use std::io::{BufRead, Write};
use std::os::unix::process::ExitStatusExt;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Duration;
use txvfs::kv::{self, Backend, Limits, MemoryBackend};
use txvfs::{ErrorKind, FileSystem, Options, Store};

/// Keys of the write-ahead machinery: chunks (`C`), staging records (`T`), their index (`U`).
/// Counted a page per transaction: one read of 1 GiB of chunks outlives the 5 s limit on a
/// loaded machine.
fn staging_keys(b: &dyn Backend) -> [usize; 3] {
    [b'C', b'T', b'U'].map(|scope| {
        let (mut start, mut n) = (vec![scope], 0);
        loop {
            let page = b.begin().unwrap().get_range(&start, &[scope + 1], 256, false).unwrap();
            n += page.len();
            match page.last() {
                Some((k, _)) if page.len() == 256 => start = [k.as_slice(), &[0]].concat(),
                _ => return n,
            }
        }
    })
}

/// 1 MiB of data that differs for every file and every MiB.
fn mib(file: usize, i: usize) -> Vec<u8> {
    let seed = (file * 1_000 + i) as u64;
    (0..1u64 << 20).map(|j| (j.wrapping_mul(31).wrapping_add(seed * 7919) >> 3) as u8).collect()
}

const FILES: usize = 100;
/// 10.25 MiB per file: 1,025 MiB in all.
const MIB_PER_FILE: usize = 10;
const TAIL: usize = 256 << 10;

#[test]
fn one_gib_across_100_files_commits_atomically_under_foundationdb_limits() {
    let backend: Arc<dyn Backend> = Arc::new(MemoryBackend::new(Limits::FOUNDATIONDB));
    let store = Store::with_backend(backend.clone(), Options::default(), None).unwrap();
    store.mkdir("/big", 0o755).unwrap();

    let tx = store.begin().unwrap();
    for f in 0..FILES {
        let file = tx.create(format!("/big/f{f:03}")).unwrap();
        for i in 0..MIB_PER_FILE {
            file.write(&mib(f, i)).unwrap();
        }
        file.write(&mib(f, MIB_PER_FILE)[..TAIL]).unwrap();
        file.close().unwrap();
        if f == FILES / 2 {
            // Others see nothing of it yet, though half of it is written ahead.
            assert!(!store.exists("/big/f000").unwrap());
            assert!(staging_keys(&*backend)[0] > 0, "data must be written ahead as chunks");
            // However fast the machine, the transaction outlives the 5 s limit.
            std::thread::sleep(Duration::from_millis(5_100));
        }
    }
    // The transaction reads its own data, chunks included.
    assert_eq!(tx.read_file("/big/f007").unwrap()[..1 << 20], mib(7, 0)[..]);
    tx.commit().unwrap();

    let size = (MIB_PER_FILE << 20) + TAIL;
    for f in 0..FILES {
        assert_eq!(store.stat(format!("/big/f{f:03}")).unwrap().size, size as u64);
    }
    for f in [0, 42, FILES - 1] {
        let data = store.read_file(format!("/big/f{f:03}")).unwrap();
        for i in 0..MIB_PER_FILE {
            assert!(data[i << 20..(i + 1) << 20] == mib(f, i)[..], "file {f}, MiB {i}");
        }
        assert!(data[MIB_PER_FILE << 20..] == mib(f, MIB_PER_FILE)[..TAIL]);
    }
    let [chunks, records, index] = staging_keys(&*backend);
    assert!(chunks > 0);
    assert_eq!((records, index), (0, 0), "the commit hands the chunks to their blocks");

    // Chunks go with their blocks: overwrite, truncate and delete free them all.
    let f = store.open("/big/f000", &txvfs::OpenOptions::new().write(true)).unwrap();
    f.write_at(&[1; 70_000], 100).unwrap();
    f.set_len(5 << 20).unwrap();
    drop(f);
    let mut expected = mib(0, 0);
    expected[100..70_100].fill(1);
    assert!(store.read_file("/big/f000").unwrap()[..1 << 20] == expected[..]);
    store.remove_all("/big").unwrap();
    assert_eq!(staging_keys(&*backend), [0, 0, 0]);
}

#[test]
fn rollback_and_failed_commits_free_staged_chunks() {
    let backend: Arc<dyn Backend> = Arc::new(MemoryBackend::new(Limits::FOUNDATIONDB));
    let store = Store::with_backend(backend.clone(), Options::default(), None).unwrap();
    store.write_file("/a", b"start").unwrap();
    for ending in ["rollback", "drop", "conflict"] {
        let tx = store.begin().unwrap();
        assert_eq!(tx.read_file("/a").unwrap(), b"start");
        let f = tx.create("/big").unwrap();
        for i in 0..8 {
            f.write(&mib(1, i)).unwrap();
        }
        assert!(staging_keys(&*backend)[0] > 0, "{ending}: data must be written ahead");
        match ending {
            "rollback" => tx.rollback(),
            "drop" => drop(tx),
            _ => {
                store.write_file("/a", b"changed").unwrap();
                tx.write_file("/a", b"mine").unwrap();
                assert_eq!(tx.commit().unwrap_err().kind(), ErrorKind::Conflict);
                store.write_file("/a", b"start").unwrap();
            }
        }
        assert!(!store.exists("/big").unwrap(), "{ending}");
        assert_eq!(staging_keys(&*backend), [0, 0, 0], "{ending}: staged chunks must be freed");
    }
}

#[test]
fn a_transaction_outlives_the_time_limit_and_still_detects_conflicts() {
    let store = Store::open("memory:?limits=foundationdb").unwrap();
    store.write_file("/a", b"1").unwrap();
    store.write_file("/b", b"1").unwrap();

    // Longer than FoundationDB's 5 s, with work before and after: commits.
    let tx = store.begin().unwrap();
    assert_eq!(tx.read_file("/a").unwrap(), b"1");
    tx.write_file("/c", b"early").unwrap();
    std::thread::sleep(Duration::from_millis(5_500));
    tx.write_file("/d", b"late").unwrap();
    tx.commit().unwrap();
    assert_eq!(store.read_file("/c").unwrap(), b"early");
    assert_eq!(store.read_file("/d").unwrap(), b"late");

    // Something it read changes while it waits: it must not commit.
    let tx = store.begin().unwrap();
    assert_eq!(tx.read_file("/a").unwrap(), b"1");
    store.write_file("/a", b"2").unwrap();
    std::thread::sleep(Duration::from_millis(3_000));
    let r = tx.write_file("/b", b"from a stale read").and_then(|()| tx.commit());
    assert_eq!(r.unwrap_err().kind(), ErrorKind::Conflict);
    assert_eq!(store.read_file("/b").unwrap(), b"1");
}

const CHILD_ENV: &str = "TXVFS_LARGE_TX_CHILD";
const CHILD_TEST: &str = "sigkill_in_a_large_transaction_leaves_no_data_and_no_garbage";

/// The child: writes 160 MiB in one transaction on RocksDB (write-ahead starts at 64 MiB),
/// says when chunks are on disk, and keeps writing slowly until killed.
fn child(dir: &str) -> ! {
    let store = Store::open(dir).unwrap();
    let tx = store.begin().unwrap();
    let f = tx.create("/huge").unwrap();
    for i in 0.. {
        f.write(&mib(9, i % 16)).unwrap();
        if i == 160 {
            println!("staged");
            std::io::stdout().flush().unwrap();
        }
        if i > 160 {
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    unreachable!()
}

#[test]
fn sigkill_in_a_large_transaction_leaves_no_data_and_no_garbage() {
    if let Ok(dir) = std::env::var(CHILD_ENV) {
        child(&dir);
    }
    let d = tempfile::tempdir().unwrap();
    let dir = d.path().join("store");
    let dir = dir.to_str().unwrap();
    Store::open(dir).unwrap().write_file("/keep", b"kept").unwrap();

    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", CHILD_TEST, "--nocapture", "--test-threads=1"])
        .env(CHILD_ENV, dir)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let lines = std::io::BufReader::new(child.stdout.take().unwrap()).lines();
    let mut staged = false;
    for line in lines {
        if line.unwrap().ends_with("staged") {
            staged = true;
            break;
        }
    }
    child.kill().unwrap();
    let status = child.wait().unwrap();
    assert!(staged, "the child never reported staged data; status {status:?}");
    assert_eq!(status.signal(), Some(9));

    // Before recovery, the killed transaction's chunks are on disk...
    let raw = kv::open(dir).unwrap();
    let [chunks, records, _] = staging_keys(&*raw);
    assert!(chunks > 0 && records == 1, "chunks {chunks}, staging records {records}");
    drop(raw);
    // ...and opening the store collects them: no data visible, nothing left behind.
    let store = Store::open(dir).unwrap();
    assert!(!store.exists("/huge").unwrap());
    assert_eq!(store.read_file("/keep").unwrap(), b"kept");
    let raw = kv::open(dir).unwrap();
    assert_eq!(staging_keys(&*raw), [0, 0, 0]);
}
