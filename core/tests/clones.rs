//! Writable clones over a read-only lower layer (a named snapshot): whiteouts, renames across
//! the layers, the lower layer never modified, O(1) creation, reopening, and `kill -9` during
//! clone writes; and `LayeredBackend` against a plain backend holding the same data (random
//! sets, clears, overlapping clear_ranges, atomic adds and reads, forward and reverse, with
//! limits, over a lower layer full of keys: fixed seeds, printed; `TXVFS_SEED=N` runs one).

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use txvfs::kv::{self, Backend, LayeredBackend, Limits, MemoryBackend, Snapshots, Txn};
use txvfs::{ErrorKind, FileSystem, Options, Store};

/// Every key and value of a backend.
fn dump(b: &dyn Backend) -> BTreeMap<Vec<u8>, Vec<u8>> {
    b.begin().unwrap().get_range(b"", &[0xff; 4], 0, false).unwrap().into_iter().collect()
}

/// A store at `dir/base` holding `files` small files in /data plus a few special ones, with
/// the named snapshot `base`; returns the snapshot's URI.
fn base_store(dir: &Path, files: usize) -> String {
    let store = Store::open(dir.join("base").to_str().unwrap()).unwrap();
    store.mkdir_all("/data/sub", 0o755).unwrap();
    store
        .transact(|tx| {
            for i in 0..files {
                tx.write_file(format!("/data/f{i}"), format!("file {i}").as_bytes())?;
            }
            Ok(())
        })
        .unwrap();
    store.write_file("/data/sub/inner", b"inner").unwrap();
    store.write_file("/big", &vec![9u8; 700_000]).unwrap();
    store.symlink("/data/f0", "/link").unwrap();
    store.create_named_snapshot("base").unwrap();
    // Changes after the snapshot are not part of it.
    store.write_file("/after", b"later").unwrap();
    store.named_snapshot_uri("base").unwrap()
}

fn check_clean(uri: &str) {
    let report = txvfs::fsck::check_uri(uri, false, &mut |_| {}).unwrap();
    assert!(report.is_clean(), "{uri}: {report}");
}

#[test]
fn clone_reads_lower_writes_upper_and_never_modifies_the_lower() {
    let d = tempfile::tempdir().unwrap();
    let lower_uri = base_store(d.path(), 50);
    let lower_before = dump(&*kv::open(&lower_uri).unwrap());
    let upper = d.path().join("clone");
    let upper_uri = upper.to_str().unwrap();
    {
        let clone = Store::create_clone(&lower_uri, upper_uri, Options::default()).unwrap();
        // Reads fall through.
        assert_eq!(clone.read_file("/data/f7").unwrap(), b"file 7");
        assert_eq!(clone.read_file("/big").unwrap(), vec![9u8; 700_000]);
        assert_eq!(clone.readlink("/link").unwrap(), b"/data/f0");
        assert!(!clone.exists("/after").unwrap());
        // Writes, deletes and renames of lower files.
        clone.write_file("/data/f1", b"changed").unwrap();
        clone.unlink("/data/f2").unwrap();
        clone.unlink("/big").unwrap();
        clone.rename("/data/f3", "/moved").unwrap();
        clone.rename("/data/sub", "/sub2").unwrap();
        clone.write_file("/new", b"new").unwrap();
        clone.rename("/new", "/data/new").unwrap();
        clone.truncate("/data/f4", 2).unwrap();
        clone.setxattr("/data/f5", "user.a", b"1", Default::default()).unwrap();
        clone.mkdir("/data/dir", 0o700).unwrap();
        clone.rmdir("/data/dir").unwrap();
        clone.unlink("/link").unwrap();
        assert_eq!(clone.read_file("/data/f1").unwrap(), b"changed");
        assert!(!clone.exists("/data/f2").unwrap());
        assert!(!clone.exists("/big").unwrap());
        assert!(!clone.exists("/data/f3").unwrap());
        assert_eq!(clone.read_file("/moved").unwrap(), b"file 3");
        assert_eq!(clone.read_file("/sub2/inner").unwrap(), b"inner");
        assert!(!clone.exists("/data/sub").unwrap());
        assert_eq!(clone.read_file("/data/new").unwrap(), b"new");
        assert_eq!(clone.read_file("/data/f4").unwrap(), b"fi");
        assert_eq!(clone.getxattr("/data/f5", "user.a").unwrap(), b"1");
        let names = clone.readdir("/data", None, 0).unwrap().len();
        assert_eq!(names, 50 - 2 + 1); // f2 and f3 gone, sub gone, new added
                                       // A deleted name can come back, with new contents.
        clone.write_file("/data/f2", b"again").unwrap();
        assert_eq!(clone.read_file("/data/f2").unwrap(), b"again");
        // statfs counts the clone's view.
        assert!(clone.statfs().unwrap().files > 0);
    }
    // The clone persists: reopening the upper opens the clone.
    let clone = Store::open(upper_uri).unwrap();
    assert_eq!(clone.read_file("/data/f1").unwrap(), b"changed");
    assert!(!clone.exists("/big").unwrap());
    assert_eq!(clone.read_file("/data/f9").unwrap(), b"file 9");
    drop(clone);
    check_clean(upper_uri);
    // The lower layer is exactly as it was, and so is the store it was taken from.
    assert_eq!(dump(&*kv::open(&lower_uri).unwrap()), lower_before);
    let base = Store::open(d.path().join("base").to_str().unwrap()).unwrap();
    assert_eq!(base.read_file("/data/f1").unwrap(), b"file 1");
    assert_eq!(base.read_file("/big").unwrap().len(), 700_000);
    check_clean(&lower_uri);
}

#[test]
fn making_a_clone_writes_one_key_whatever_the_tree_size() {
    let mut written = Vec::new();
    for files in [10, 3000] {
        let d = tempfile::tempdir().unwrap();
        let lower_uri = base_store(d.path(), files);
        let upper = d.path().join("clone");
        let clone =
            Store::create_clone(&lower_uri, upper.to_str().unwrap(), Options::default()).unwrap();
        assert_eq!(clone.readdir("/data", None, 0).unwrap().len(), files + 1);
        drop(clone);
        // The upper layer's raw keys, opened without the clone on top.
        let raw = kv::open_raw(upper.to_str().unwrap()).unwrap();
        let keys = dump(&*raw);
        written.push(keys.len());
        assert_eq!(keys.keys().collect::<Vec<_>>(), vec![&kv::CLONE_KEY.to_vec()]);
    }
    assert_eq!(written, vec![1, 1]);
}

/// Deleting or truncating a large lower file writes a few keys to the clone (one range
/// whiteout for its blocks), not one per block.
#[test]
fn deleting_a_large_lower_file_writes_a_few_keys() {
    let d = tempfile::tempdir().unwrap();
    let base = Store::open(d.path().join("base").to_str().unwrap()).unwrap();
    base.write_file("/huge", &vec![5u8; 200 << 16]).unwrap(); // 200 blocks of 64 KiB
    base.write_file("/long", &vec![6u8; 100 << 16]).unwrap();
    base.create_named_snapshot("s").unwrap();
    let lower_uri = base.named_snapshot_uri("s").unwrap();
    let upper = d.path().join("clone");
    let clone =
        Store::create_clone(&lower_uri, upper.to_str().unwrap(), Options::default()).unwrap();
    clone.unlink("/huge").unwrap();
    clone.truncate("/long", 10 << 16).unwrap();
    assert!(!clone.exists("/huge").unwrap());
    assert_eq!(clone.read_file("/long").unwrap(), vec![6u8; 10 << 16]);
    clone.truncate("/long", 20 << 16).unwrap(); // the cut blocks read back as zeros
    let mut want = vec![6u8; 10 << 16];
    want.resize(20 << 16, 0);
    assert_eq!(clone.read_file("/long").unwrap(), want);
    drop(clone);
    check_clean(upper.to_str().unwrap());
    let keys = dump(&*kv::open_raw(upper.to_str().unwrap()).unwrap()).len();
    assert!(keys < 30, "the clone holds {keys} keys after deleting 290 lower blocks");
}

#[test]
fn bad_clones_are_refused_and_change_nothing() {
    let d = tempfile::tempdir().unwrap();
    let lower_uri = base_store(d.path(), 3);
    let base = d.path().join("base");
    // The lower layer must be read-only: a live store could change under the clone.
    let e = Store::create_clone(
        base.to_str().unwrap(),
        d.path().join("c1").to_str().unwrap(),
        Options::default(),
    )
    .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Invalid, "{e}");
    // The upper must be empty.
    let e =
        Store::create_clone(&lower_uri, base.to_str().unwrap(), Options::default()).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Exists, "{e}");
    assert_eq!(
        Store::open(base.to_str().unwrap()).unwrap().read_file("/data/f0").unwrap(),
        b"file 0"
    );
    // A lower layer that does not exist.
    let missing = format!("rocksdb:{}?snapshot=nope", base.display());
    assert_eq!(
        Store::create_clone(&missing, d.path().join("c2").to_str().unwrap(), Options::default())
            .unwrap_err()
            .kind(),
        ErrorKind::NotFound
    );
}

#[test]
fn snapshots_of_a_clone() {
    let d = tempfile::tempdir().unwrap();
    let lower_uri = base_store(d.path(), 5);
    let upper = d.path().join("clone");
    let clone =
        Store::create_clone(&lower_uri, upper.to_str().unwrap(), Options::default()).unwrap();
    clone.write_file("/data/f0", b"v1").unwrap();
    let snap = clone.snapshot().unwrap();
    clone.create_named_snapshot("c1").unwrap();
    clone.write_file("/data/f0", b"v2").unwrap();
    clone.unlink("/data/f1").unwrap();
    assert_eq!(snap.read_file("/data/f0").unwrap(), b"v1");
    assert!(snap.exists("/data/f1").unwrap());
    assert_eq!(snap.write_file("/x", b"").unwrap_err().kind(), ErrorKind::ReadOnly);
    let named = Store::open(&clone.named_snapshot_uri("c1").unwrap()).unwrap();
    assert_eq!(named.read_file("/data/f0").unwrap(), b"v1");
    assert_eq!(named.read_file("/data/f2").unwrap(), b"file 2");
    assert_eq!(named.unlink("/data/f2").unwrap_err().kind(), ErrorKind::ReadOnly);
    // A clone of the clone's snapshot: layers stack.
    let c2 = Store::create_clone(
        &clone.named_snapshot_uri("c1").unwrap(),
        d.path().join("c2").to_str().unwrap(),
        Options::default(),
    )
    .unwrap();
    c2.unlink("/data/f0").unwrap();
    assert_eq!(c2.read_file("/data/f3").unwrap(), b"file 3");
    assert!(!c2.exists("/data/f0").unwrap());
    assert_eq!(named.read_file("/data/f0").unwrap(), b"v1");
}

/// Concurrent writers in one clone: conflicts come from the upper layer, so none is lost,
/// including the first change of counters that live in the lower layer.
#[test]
fn concurrent_creates_in_a_clone_lose_nothing() {
    let d = tempfile::tempdir().unwrap();
    let lower_uri = base_store(d.path(), 5);
    let clone = Store::create_clone(
        &lower_uri,
        d.path().join("clone").to_str().unwrap(),
        Options::default(),
    )
    .unwrap();
    let threads: Vec<_> = (0..4)
        .map(|t| {
            let clone = clone.clone();
            std::thread::spawn(move || {
                for i in 0..25 {
                    clone.write_file(format!("/data/t{t}-{i}"), b"x").unwrap();
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    assert_eq!(clone.readdir("/data", None, 0).unwrap().len(), 6 + 100);
    drop(clone);
    check_clean(d.path().join("clone").to_str().unwrap());
}

/// The memory engine as an upper layer works too (what the kv conformance suite uses).
#[test]
fn layered_backend_over_a_memory_snapshot() {
    let base = Store::open("memory:").unwrap();
    base.write_file("/a", b"lower").unwrap();
    let lower = base.snapshot().unwrap();
    drop(lower);
    let backend = kv::open("memory:").unwrap();
    let mem_snapshot = {
        let store = Store::with_backend(backend.clone(), Options::default(), None).unwrap();
        store.write_file("/a", b"lower").unwrap();
        backend.snapshots().unwrap().snapshot().unwrap()
    };
    let upper: Arc<dyn Backend> = Arc::new(kv::MemoryBackend::new(kv::Limits::UNLIMITED));
    let layered = kv::LayeredBackend::new(upper, mem_snapshot).unwrap();
    let clone = Store::with_backend(layered, Options::default(), None).unwrap();
    assert_eq!(clone.read_file("/a").unwrap(), b"lower");
    clone.write_file("/a", b"upper").unwrap();
    assert_eq!(clone.read_file("/a").unwrap(), b"upper");
    assert_eq!(
        Store::with_backend(backend, Options::default(), None).unwrap().read_file("/a").unwrap(),
        b"lower"
    );
}

const KILL_TEST: &str = "sigkill_during_clone_writes_leaves_the_clone_consistent";
const KILL_CHILD_ENV: &str = "TXVFS_CLONE_CRASH_CHILD";
const KILL_FILES: usize = 8;
/// Files in the lower layer of the kill test (/data/f0 ...).
const LOWER_FILES: usize = 300;

/// The child: rewrites every file of /data (lower files at first) with generation N in one
/// transaction, renames /data/r{N-1} to /data/r{N}, and deletes a lower file, until killed;
/// prints N after each commit returns.
fn clone_writer(upper: &str) -> ! {
    use std::io::Write;
    let clone = Store::open(upper).unwrap();
    let mut n: u64 = clone
        .read_file("/gen")
        .map(|v| String::from_utf8(v).unwrap().parse().unwrap())
        .unwrap_or(0);
    loop {
        n += 1;
        clone
            .transact(|tx| {
                for i in 0..KILL_FILES {
                    tx.write_file(
                        format!("/data/f{i}"),
                        &vec![n as u8; 1000 + 20_000 * (n as usize % 4)],
                    )?;
                }
                tx.rename(format!("/data/r{}", n - 1), format!("/data/r{n}"))?;
                let victim = format!("/data/f{}", KILL_FILES as u64 + n);
                if tx.exists(&victim)? {
                    tx.unlink(&victim)?;
                }
                tx.write_file("/gen", n.to_string().as_bytes())
            })
            .unwrap();
        println!("{n}");
        std::io::stdout().flush().unwrap();
    }
}

/// `kill -9` at random moments while a child process writes to a clone: each reopening shows
/// every transaction whole or not at all, none that the child reported lost, and the lower
/// layer unchanged. Seeded (printed); 12 kills.
#[test]
fn sigkill_during_clone_writes_leaves_the_clone_consistent() {
    use std::io::BufRead;
    use std::process::{Command, Stdio};
    if let Ok(upper) = std::env::var(KILL_CHILD_ENV) {
        clone_writer(&upper);
    }
    let seed = 17;
    eprintln!("{KILL_TEST}: seed {seed}");
    let mut rng = SmallRng::seed_from_u64(seed);
    let d = tempfile::tempdir().unwrap();
    let lower_uri = base_store(d.path(), LOWER_FILES);
    {
        let base = Store::open(d.path().join("base").to_str().unwrap()).unwrap();
        base.write_file("/data/r0", b"r").unwrap();
        base.delete_named_snapshot("base").unwrap();
        base.create_named_snapshot("base").unwrap();
    }
    let lower_before = dump(&*kv::open(&lower_uri).unwrap());
    let upper = d.path().join("clone");
    let upper_uri = upper.to_str().unwrap().to_string();
    drop(Store::create_clone(&lower_uri, &upper_uri, Options::default()).unwrap());
    let mut reported = 0u64;
    for _ in 0..12 {
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args(["--exact", KILL_TEST, "--nocapture", "--test-threads=1"])
            .env(KILL_CHILD_ENV, &upper_uri)
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        // Kept open until the kill: the child must die writing, not of a closed pipe.
        let mut lines = std::io::BufReader::new(child.stdout.take().unwrap()).lines();
        let wait_for = rng.gen_range(1..30);
        let mut seen = 0;
        for line in lines.by_ref() {
            let line = line.unwrap();
            if let Ok(n) = line.trim().parse::<u64>() {
                reported = reported.max(n);
                seen += 1;
                if seen >= wait_for {
                    break;
                }
            }
        }
        std::thread::sleep(std::time::Duration::from_micros(rng.gen_range(0..3000)));
        child.kill().unwrap();
        child.wait().unwrap();
        drop(lines);
        let clone = Store::open(&upper_uri).unwrap();
        let n: u64 = String::from_utf8(clone.read_file("/gen").unwrap()).unwrap().parse().unwrap();
        assert!(n >= reported, "generation {n} committed, but the child reported {reported}");
        for i in 0..KILL_FILES {
            let data = clone.read_file(format!("/data/f{i}")).unwrap();
            assert_eq!(
                data,
                vec![n as u8; 1000 + 20_000 * (n as usize % 4)],
                "/data/f{i} torn at generation {n}"
            );
        }
        assert!(
            clone.exists(format!("/data/r{n}")).unwrap()
                && !clone.exists(format!("/data/r{}", n - 1)).unwrap()
        );
        for k in 1..=n {
            assert!(!clone.exists(format!("/data/f{}", KILL_FILES as u64 + k)).unwrap());
        }
        // The next victim is still there, if the lower layer has one that far (a fast child
        // can get through all 300 lower files between two kills).
        let next = KILL_FILES as u64 + n + 1;
        if next < LOWER_FILES as u64 {
            assert!(
                clone.exists(format!("/data/f{next}")).unwrap(),
                "/data/f{next} vanished at generation {n}"
            );
        }
        drop(clone);
        check_clean(&upper_uri);
    }
    eprintln!("{KILL_TEST}: 12 kills, {reported} transactions reported");
    assert_eq!(dump(&*kv::open(&lower_uri).unwrap()), lower_before);
}

// ---- LayeredBackend against a plain backend ----

fn random_key(rng: &mut SmallRng) -> Vec<u8> {
    // A small space of short keys, so ranges, whiteouts and lower keys collide often.
    let len = rng.gen_range(1..=3);
    (0..len).map(|_| b"abcdef"[rng.gen_range(0..6)]).collect()
}

fn run_layered_model(seed: u64) {
    eprintln!("layered_model: seed {seed}");
    let mut rng = SmallRng::seed_from_u64(seed);
    let lower = MemoryBackend::new(Limits::UNLIMITED);
    let plain: Arc<dyn Backend> = Arc::new(MemoryBackend::new(Limits::UNLIMITED));
    {
        let (mut a, mut b) = (lower.begin().unwrap(), plain.begin().unwrap());
        for _ in 0..120 {
            let (k, v) = (random_key(&mut rng), vec![rng.gen::<u8>(); 8]);
            a.set(&k, &v).unwrap();
            b.set(&k, &v).unwrap();
        }
        a.commit(false).unwrap();
        b.commit(false).unwrap();
    }
    let upper: Arc<dyn Backend> = Arc::new(MemoryBackend::new(Limits::UNLIMITED));
    let layered = LayeredBackend::new(upper, lower.snapshot().unwrap()).unwrap();
    for step in 0..400 {
        let (mut a, mut b): (Box<dyn Txn>, Box<dyn Txn>) =
            (layered.begin().unwrap(), plain.begin().unwrap());
        for op in 0..rng.gen_range(1..6) {
            let ctx = format!("seed {seed} step {step} op {op}");
            match rng.gen_range(0..8) {
                0 => {
                    let (k, v) = (random_key(&mut rng), vec![rng.gen::<u8>(); 3]);
                    a.set(&k, &v).unwrap();
                    b.set(&k, &v).unwrap();
                }
                1 => {
                    let k = random_key(&mut rng);
                    a.clear(&k).unwrap();
                    b.clear(&k).unwrap();
                }
                2 => {
                    let (s, e) = (random_key(&mut rng), random_key(&mut rng));
                    a.clear_range(&s, &e).unwrap();
                    b.clear_range(&s, &e).unwrap();
                }
                3 => {
                    let (k, d) = (random_key(&mut rng), rng.gen_range(-5..5));
                    a.atomic_add(&k, d).unwrap();
                    b.atomic_add(&k, d).unwrap();
                }
                4 | 5 => {
                    let k = random_key(&mut rng);
                    assert_eq!(a.get(&k).unwrap(), b.get(&k).unwrap(), "{ctx}: get {k:?}");
                }
                _ => {
                    let (s, e) = (random_key(&mut rng), random_key(&mut rng));
                    let (limit, rev) = (rng.gen_range(0..6), rng.gen_bool(0.5));
                    assert_eq!(
                        a.get_range(&s, &e, limit, rev).unwrap(),
                        b.get_range(&s, &e, limit, rev).unwrap(),
                        "{ctx}: get_range {s:?}..{e:?} limit {limit} reverse {rev}"
                    );
                }
            }
        }
        if rng.gen_bool(0.8) {
            a.commit(false).unwrap();
            b.commit(false).unwrap();
        }
    }
    // The whole key space agrees at the end.
    let all = |b: &dyn Backend| b.begin().unwrap().get_range(b"", &[0xff], 0, false).unwrap();
    assert_eq!(all(&*layered), all(&*plain), "seed {seed}: final contents");
}

#[test]
fn layered_backend_matches_a_plain_backend() {
    let seeds: Vec<u64> = match std::env::var("TXVFS_SEED") {
        Ok(s) => vec![s.parse().expect("TXVFS_SEED must be a number")],
        Err(_) => (1..=20).collect(),
    };
    for seed in seeds {
        run_layered_model(seed);
    }
}
