//! Snapshots: a consistent, read-only view of the whole tree at one instant (in-process, on
//! memory and RocksDB stores), and named snapshots that survive reopening (RocksDB checkpoints).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use txvfs::{ErrorKind, FileSystem, Store};

fn stores() -> Vec<(Store, Option<tempfile::TempDir>)> {
    let d = tempfile::tempdir().unwrap();
    let rocks = Store::open(d.path().join("s").to_str().unwrap()).unwrap();
    vec![(Store::open("memory:").unwrap(), None), (rocks, Some(d))]
}

#[test]
fn writes_after_the_snapshot_are_not_visible() {
    for (store, _d) in stores() {
        store.mkdir("/d", 0o755).unwrap();
        store.write_file("/d/a", b"old").unwrap();
        store.write_file("/d/big", &vec![7u8; 300_000]).unwrap();
        let snap = store.snapshot().unwrap();
        store.write_file("/d/a", b"new").unwrap();
        store.write_file("/d/b", b"added").unwrap();
        store.unlink("/d/big").unwrap();
        store.rename("/d", "/e").unwrap();
        assert_eq!(snap.read_file("/d/a").unwrap(), b"old", "{}", store.describe());
        assert_eq!(snap.read_file("/d/big").unwrap(), vec![7u8; 300_000]);
        assert!(!snap.exists("/d/b").unwrap());
        assert!(!snap.exists("/e").unwrap());
        let names: Vec<_> =
            snap.readdir("/d", None, 0).unwrap().into_iter().map(|e| e.name).collect();
        assert_eq!(names, vec![b"a".to_vec(), b"big".to_vec()]);
        // The store itself moved on.
        assert_eq!(store.read_file("/e/a").unwrap(), b"new");
    }
}

#[test]
fn a_snapshot_is_read_only_and_writes_change_nothing() {
    for (store, _d) in stores() {
        store.write_file("/f", b"x").unwrap();
        let snap = store.snapshot().unwrap();
        for r in [
            snap.write_file("/f", b"y"),
            snap.write_file("/g", b"y"),
            snap.unlink("/f"),
            snap.mkdir("/d", 0o755),
            snap.rename("/f", "/h"),
            snap.chmod("/f", 0o600),
        ] {
            assert_eq!(r.unwrap_err().kind(), ErrorKind::ReadOnly);
        }
        // Opening for writing fails at once, as on a read-only file system (SQLite's VFS then
        // opens the database read-only); opening for reading works.
        let write = txvfs::OpenOptions::new().read(true).write(true);
        assert_eq!(snap.open("/f", &write).unwrap_err().kind(), ErrorKind::ReadOnly);
        let mut buf = [0u8; 8];
        assert_eq!(
            snap.open("/f", &txvfs::OpenOptions::new().read(true)).unwrap().read(&mut buf).unwrap(),
            1
        );
        let tx = snap.begin().unwrap();
        assert_eq!(tx.write_file("/f", b"z").unwrap_err().kind(), ErrorKind::ReadOnly);
        drop(tx);
        assert_eq!(snap.read_file("/f").unwrap(), b"x");
        assert_eq!(store.read_file("/f").unwrap(), b"x");
        assert!(!store.exists("/g").unwrap());
        // A snapshot of a snapshot is the same view.
        assert_eq!(snap.snapshot().unwrap().read_file("/f").unwrap(), b"x");
    }
}

/// Snapshots taken while transactions that each rewrite every file commit: every snapshot
/// sees all files of one generation, never a mix.
#[test]
fn a_snapshot_during_a_transaction_shows_it_whole_or_not_at_all() {
    for (store, _d) in stores() {
        const FILES: usize = 20;
        for i in 0..FILES {
            store.write_file(format!("/f{i}"), b"0").unwrap();
        }
        let stop = Arc::new(AtomicBool::new(false));
        let writer = {
            let (store, stop) = (store.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut generation = 0u32;
                while !stop.load(Ordering::Relaxed) && generation < 200 {
                    generation += 1;
                    store
                        .transact(|tx| {
                            for i in 0..FILES {
                                tx.write_file(format!("/f{i}"), generation.to_string().as_bytes())?;
                            }
                            Ok(())
                        })
                        .unwrap();
                }
                generation
            })
        };
        let mut seen = std::collections::BTreeSet::new();
        for _ in 0..100 {
            let snap = store.snapshot().unwrap();
            let values: Vec<Vec<u8>> =
                (0..FILES).map(|i| snap.read_file(format!("/f{i}")).unwrap()).collect();
            assert!(
                values.iter().all(|v| *v == values[0]),
                "a snapshot mixes generations: {values:?}"
            );
            seen.insert(values[0].clone());
        }
        stop.store(true, Ordering::Relaxed);
        let generations = writer.join().unwrap();
        eprintln!(
            "{}: {} snapshots saw {} generations of {generations}",
            store.describe(),
            100,
            seen.len()
        );
    }
}

/// A snapshot may outlive the `Store` it was taken from: reopening the store then works.
#[test]
fn a_snapshot_outlives_its_store() {
    let d = tempfile::tempdir().unwrap();
    let uri = d.path().join("s").to_str().unwrap().to_string();
    let store = Store::open(&uri).unwrap();
    store.write_file("/f", b"1").unwrap();
    let snap = store.snapshot().unwrap();
    drop(store);
    let store = Store::open(&uri).unwrap();
    store.write_file("/f", b"2").unwrap();
    assert_eq!(snap.read_file("/f").unwrap(), b"1");
    drop(store);
    drop(snap);
    // Everything is closed now: the store opens afresh with the last write.
    assert_eq!(Store::open(&uri).unwrap().read_file("/f").unwrap(), b"2");
}

#[test]
fn named_snapshots_survive_reopening_and_can_be_deleted() {
    let d = tempfile::tempdir().unwrap();
    let path = d.path().join("s");
    let uri = path.to_str().unwrap();
    let snap_uri = {
        let store = Store::open(uri).unwrap();
        store.mkdir("/d", 0o755).unwrap();
        store.write_file("/d/a", b"v1").unwrap();
        store.write_file("/d/large", &vec![3u8; 200_000]).unwrap();
        store.create_named_snapshot("v1").unwrap();
        assert_eq!(store.create_named_snapshot("v1").unwrap_err().kind(), ErrorKind::Exists);
        for bad in ["", ".hidden", "a/b", "x y", &"n".repeat(101)] {
            assert_eq!(
                store.create_named_snapshot(bad).unwrap_err().kind(),
                ErrorKind::Invalid,
                "{bad:?}"
            );
        }
        store.write_file("/d/a", b"v2").unwrap();
        store.create_named_snapshot("v2").unwrap();
        store.unlink("/d/large").unwrap();
        assert_eq!(store.named_snapshots().unwrap(), vec!["v1".to_string(), "v2".to_string()]);
        store.named_snapshot_uri("v1").unwrap()
    };
    assert_eq!(snap_uri, format!("rocksdb:{}?snapshot=v1", path.canonicalize().unwrap().display()));
    // After reopening: still there, with their own contents, and read-only.
    let store = Store::open(uri).unwrap();
    assert_eq!(store.named_snapshots().unwrap(), vec!["v1".to_string(), "v2".to_string()]);
    {
        let v1 = Store::open(&snap_uri).unwrap();
        assert_eq!(v1.read_file("/d/a").unwrap(), b"v1");
        assert_eq!(v1.read_file("/d/large").unwrap(), vec![3u8; 200_000]);
        assert_eq!(v1.write_file("/d/a", b"x").unwrap_err().kind(), ErrorKind::ReadOnly);
        let by_path = Store::open(path.join("snapshots/v2").to_str().unwrap()).unwrap();
        assert_eq!(by_path.read_file("/d/a").unwrap(), b"v2");
        assert!(by_path.exists("/d/large").unwrap());
        assert_eq!(by_path.unlink("/d/a").unwrap_err().kind(), ErrorKind::ReadOnly);
        // Open snapshots cannot be deleted.
        assert_eq!(store.delete_named_snapshot("v1").unwrap_err().kind(), ErrorKind::Busy);
    }
    store.delete_named_snapshot("v1").unwrap();
    assert_eq!(store.delete_named_snapshot("v1").unwrap_err().kind(), ErrorKind::NotFound);
    assert_eq!(store.named_snapshots().unwrap(), vec!["v2".to_string()]);
    assert_eq!(Store::open(&snap_uri).unwrap_err().kind(), ErrorKind::NotFound);
    // The store is untouched by all this.
    assert_eq!(store.read_file("/d/a").unwrap(), b"v2");
    assert!(!store.exists("/d/large").unwrap());
}

#[test]
fn memory_stores_have_no_named_snapshots() {
    let store = Store::open("memory:").unwrap();
    assert_eq!(store.create_named_snapshot("x").unwrap_err().kind(), ErrorKind::Invalid);
}

/// Snapshots and clones, the calls of the book's example (docs/snapshots.md, run by
/// tests/docs/run): a snapshot, a named snapshot, a clone over it.
#[test]
fn snapshot_named_snapshot_and_clone() -> txvfs::Result<()> {
    use txvfs::Options;
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().to_str().unwrap();
    let store = Store::open(&format!("{dir}/data"))?;
    store.write_file("/config", b"v1")?;
    let snap = store.snapshot()?; // read-only, this instant, nothing copied
    store.write_file("/config", b"v2")?;
    assert_eq!(snap.read_file("/config")?, b"v1");

    store.create_named_snapshot("release-1")?; // kept on disk, survives reopening
    let uri = store.named_snapshot_uri("release-1")?; // rocksdb:DIR/data?snapshot=release-1
    assert_eq!(Store::open(&uri)?.read_file("/config")?, b"v2"); // any binding opens the URI

    let branch = Store::create_clone(&uri, &format!("{dir}/branch"), Options::default())?;
    branch.write_file("/config", b"v3")?; // writes stay in the clone
    branch.rename("/config", "/config.old")?; // renames and deletes of lower files work
    assert_eq!(Store::open(&uri)?.read_file("/config")?, b"v2"); // the snapshot is unchanged
    drop((store, snap, branch));
    Ok(())
}
