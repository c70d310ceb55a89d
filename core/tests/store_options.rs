//! Store-level behaviour: read-only stores, shared instances, bad options, statfs counters.

use txvfs::kv::CacheStats;
use txvfs::{ErrorKind, FileSystem, Options, Store};

#[test]
fn read_only_store_refuses_changes_and_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let uri = dir.path().to_str().unwrap().to_string();
    {
        let s = Store::open(&uri).unwrap();
        s.write_file("/f", b"x").unwrap();
    }
    let ro = Store::open_with(&uri, Options { read_only: true, ..Options::default() }).unwrap();
    assert_eq!(ro.read_file("/f").unwrap(), b"x");
    for e in [ro.write_file("/g", b""), ro.mkdir("/d", 0o755), ro.unlink("/f"), ro.chmod("/f", 0)] {
        assert_eq!(e.unwrap_err().kind(), ErrorKind::ReadOnly);
    }
    assert_eq!(ro.read_file("/f").unwrap(), b"x");
}

#[test]
fn opening_twice_in_one_process_shares_the_store() {
    let dir = tempfile::tempdir().unwrap();
    let a = Store::open(dir.path().to_str().unwrap()).unwrap();
    let b = Store::open(&format!("rocksdb:{}", dir.path().display())).unwrap();
    let f = a.create("/open").unwrap();
    b.unlink("/open").unwrap();
    // The second handle knows the file is open through the first, so it is kept as an orphan.
    f.write(b"alive").unwrap();
    assert_eq!(f.stat().unwrap().size, 5);
}

#[test]
fn bad_options_and_uris_are_clear_errors() {
    let e = Store::open_with("memory:", Options { block_size: 1000, ..Options::default() })
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Invalid);
    assert!(e.message().contains("block size"));
    assert_eq!(Store::open("memory:?nope").unwrap_err().kind(), ErrorKind::Invalid);
}

#[test]
fn statfs_counts_files_and_bytes() {
    let s = Store::open("memory:").unwrap();
    let base = s.statfs().unwrap();
    s.mkdir("/d", 0o755).unwrap();
    s.write_file("/d/a", &vec![0; 100_000]).unwrap();
    s.write_file("/d/b", b"1234").unwrap();
    let fs = s.statfs().unwrap();
    assert_eq!(fs.files, base.files + 3);
    assert!(fs.blocks - fs.blocks_free >= 100_004 / fs.block_size);
    s.unlink("/d/a").unwrap();
    assert_eq!(s.statfs().unwrap().files, base.files + 2);
    assert_eq!(fs.name_max, 255);
}

#[test]
fn directory_attributes_follow_creates_and_deletes() {
    let s = Store::open("memory:").unwrap();
    s.mkdir("/d", 0o755).unwrap();
    let t0 = s.stat("/d").unwrap();
    assert_eq!(t0.nlink, 2);
    std::thread::sleep(std::time::Duration::from_millis(2));
    s.mkdir("/d/sub", 0o755).unwrap();
    s.write_file("/d/f", b"").unwrap();
    let t1 = s.stat("/d").unwrap();
    assert_eq!(t1.nlink, 3);
    assert!(t1.mtime_ns > t0.mtime_ns);
    s.rmdir("/d/sub").unwrap();
    assert_eq!(s.stat("/d").unwrap().nlink, 2);
    s.utimens("/d", txvfs::SetTime::At(1_000_000_000), txvfs::SetTime::At(2_000_000_000)).unwrap();
    assert_eq!(s.stat("/d").unwrap().mtime_ns, 2_000_000_000);
}

#[test]
fn open_existing_finds_a_store_and_creates_none() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("none");
    let uri = missing.to_str().unwrap().to_string();
    let e = Store::open_existing(&uri, Options::default()).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::NotFound);
    assert!(e.message().contains("no store there"), "{e}");
    assert!(!missing.exists(), "open_existing created {}", missing.display());
    let e = Store::open_existing(&format!("rocksdb:{uri}"), Options::default()).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::NotFound);
    assert_eq!(
        Store::open_existing("memory:", Options::default()).unwrap_err().kind(),
        ErrorKind::NotFound
    );
    {
        Store::open(&uri).unwrap().write_file("/f", b"x").unwrap();
    }
    let s = Store::open_existing(&uri, Options::default()).unwrap();
    assert_eq!(s.read_file("/f").unwrap(), b"x");
}

#[test]
fn rocksdb_reports_its_disk_and_memory_reports_none() {
    let dir = tempfile::tempdir().unwrap();
    let rocks = txvfs::kv::open(dir.path().to_str().unwrap()).unwrap();
    let (total, free) = rocks.disk_space().expect("a RocksDB directory has a disk");
    assert!(total > 0 && free <= total, "{total} {free}");
    assert_eq!(txvfs::kv::open("memory:").unwrap().disk_space(), None);
    let s = Store::open(dir.path().to_str().unwrap()).unwrap();
    assert_eq!(s.statfs().unwrap().blocks, total / s.statfs().unwrap().block_size);
}

#[test]
fn a_rocksdb_store_has_its_read_cache_in_every_mode() {
    for mode in ["", "?mode=shared", "?mode=exclusive"] {
        let dir = tempfile::tempdir().unwrap();
        let s = Store::open(&format!("rocksdb:{}{mode}", dir.path().display())).unwrap();
        s.write_file("/f", b"x").unwrap();
        for _ in 0..3 {
            assert_eq!(s.read_file("/f").unwrap(), b"x");
        }
        let stats = s.backend().read_cache().and_then(|c| c.stats());
        let CacheStats { hits, bytes, .. } =
            stats.unwrap_or_else(|| panic!("no read cache with {mode:?}"));
        assert!(hits > 0 && bytes > 0, "{mode:?}: hits {hits}, bytes {bytes}");
        drop(s);
        let off = Store::open_with(
            &format!("rocksdb:{}{mode}", dir.path().display()),
            Options { cache_size: 0, ..Options::default() },
        )
        .unwrap();
        assert_eq!(
            off.backend().read_cache().and_then(|c| c.stats()),
            None,
            "{mode:?}: cache_size 0 turns it off"
        );
    }
}
