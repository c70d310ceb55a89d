//! A RocksDB store overwrites a flushed memtable's log instead of appending to a new file
//! (`recycle_log_file_num`), so that a durable commit's fdatasync writes no inode: RocksDB's
//! info log (`LOG`) says it reused logs, and what was committed through recycled logs comes
//! back after a reopen. `TXVFS_ROCKSDB_MEMTABLE` (one test function: the environment is
//! the process's) makes memtables small enough to flush every few commits, and a bad value is
//! refused before anything is created.

use txvfs::{ErrorKind, FileSystem, Store};

#[test]
fn logs_are_recycled_and_what_they_held_survives_a_reopen() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("store");
    let uri = format!("rocksdb:{}", dir.display());

    std::env::set_var("TXVFS_ROCKSDB_MEMTABLE", "12");
    let Err(err) = Store::open(&uri) else { panic!("a memtable of 12 bytes was accepted") };
    assert_eq!(err.kind(), ErrorKind::Invalid, "{err}");
    assert!(err.to_string().contains("TXVFS_ROCKSDB_MEMTABLE"), "{err}");
    assert!(!dir.exists(), "a refused open created the store's directory");

    std::env::set_var("TXVFS_ROCKSDB_MEMTABLE", "65536");
    let store = Store::open(&uri).unwrap();
    let data = |i: usize| vec![(i % 251) as u8; 4096 + i % 7];
    for i in 0..400 {
        store.transact_durable(true, |tx| tx.write_file(format!("/f{i}"), &data(i))).unwrap();
    }
    let info = std::fs::read_to_string(dir.join("LOG")).unwrap();
    let reused = info.matches("from recycle list").count();
    assert!(
        reused >= 2,
        "RocksDB reused {reused} logs (memtables flushed: {})",
        info.matches("Flushing memtable").count()
    );
    drop(store);

    let store = Store::open(&uri).unwrap();
    for i in 0..400 {
        assert_eq!(store.read_file(format!("/f{i}")).unwrap(), data(i), "/f{i} after reopen");
    }
    std::env::remove_var("TXVFS_ROCKSDB_MEMTABLE");
}
