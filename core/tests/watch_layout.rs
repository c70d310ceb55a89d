//! Where a RocksDB store keeps the change feed's records: a column family of their own
//! (`feed`); a store written before it had them in the default family, and opening it moves
//! them over, with nothing lost and the feed going on after them.

use txvfs::{FileSystem, Store, WatchOptions};

const FEED_CF: &str = "feed";

fn raw_open(dir: &std::path::Path) -> rocksdb::DB {
    let opts = txvfs::kv::RocksBackend::db_options();
    let families = rocksdb::DB::list_cf(&opts, dir).unwrap();
    let families = families.iter().map(|n| rocksdb::ColumnFamilyDescriptor::new(n, opts.clone()));
    rocksdb::DB::open_cf_descriptors(&opts, dir, families).unwrap()
}

/// The keys of the feed's scope (`W`) in the default family of the store in `dir`.
fn records_in_default(db: &rocksdb::DB) -> usize {
    db.iterator(rocksdb::IteratorMode::Start).filter(|kv| kv.as_ref().unwrap().0[0] == b'W').count()
}

fn paths(batches: &[txvfs::Batch]) -> Vec<String> {
    batches
        .iter()
        .flat_map(|b| &b.changes)
        .map(|c| String::from_utf8_lossy(&c.path).into_owned())
        .collect()
}

#[test]
fn the_records_are_kept_in_their_own_column_family() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path().join("s");
    {
        let store = Store::open(dir.to_str().unwrap()).unwrap();
        store.set_change_feed(true).unwrap();
        store.write_file("/a", b"1").unwrap();
    }
    let db = raw_open(&dir);
    assert_eq!(records_in_default(&db), 0);
    let cf = db.cf_handle(FEED_CF).expect("the feed's family");
    // The record of turning the feed on and that of the write.
    assert_eq!(db.iterator_cf(cf, rocksdb::IteratorMode::Start).count(), 2);
}

#[test]
fn a_store_written_before_the_feed_had_its_family_opens_with_its_records_moved() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path().join("s");
    let since;
    {
        let store = Store::open(dir.to_str().unwrap()).unwrap();
        store.set_change_feed(true).unwrap();
        since = store.watch(WatchOptions::default()).unwrap().cursor();
        for i in 0..3 {
            store.write_file(format!("/f{i}"), b"x").unwrap();
        }
    }
    // The layout of a store written before the family: every record in the default family.
    {
        let mut db = raw_open(&dir);
        let cf = db.cf_handle(FEED_CF).unwrap();
        let records: Vec<_> =
            db.iterator_cf(cf, rocksdb::IteratorMode::Start).map(|kv| kv.unwrap()).collect();
        assert_eq!(records.len(), 4);
        for (k, v) in &records {
            db.put(k, v).unwrap();
        }
        db.drop_cf(FEED_CF).unwrap();
        assert_eq!(records_in_default(&db), 4);
    }
    assert_eq!(rocksdb::DB::list_cf(&rocksdb::Options::default(), &dir).unwrap(), ["default"]);

    let store = Store::open(dir.to_str().unwrap()).unwrap();
    let mut w =
        store.watch(WatchOptions { since: Some(since), ..WatchOptions::default() }).unwrap();
    assert_eq!(paths(&w.poll().unwrap()), ["/f0", "/f1", "/f2"]);
    store.write_file("/after", b"y").unwrap();
    assert_eq!(paths(&w.poll().unwrap()), ["/after"]);
    drop(w);
    drop(store);

    let db = raw_open(&dir);
    assert_eq!(records_in_default(&db), 0);
    let cf = db.cf_handle(FEED_CF).unwrap();
    assert_eq!(db.iterator_cf(cf, rocksdb::IteratorMode::Start).count(), 5);
}

#[test]
fn a_build_from_before_the_family_cannot_open_the_store_and_says_why() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path().join("s");
    drop(Store::open(dir.to_str().unwrap()).unwrap());
    // How a build from before the family opened a store: the default family alone.
    let e = rocksdb::DB::open(&txvfs::kv::RocksBackend::db_options(), &dir).err().unwrap();
    assert!(e.to_string().contains("Column families not opened: feed"), "{e}");
}
