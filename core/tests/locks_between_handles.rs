//! flock and byte-range locks between handles of one process; released on close.

use std::sync::Arc;
use std::time::Duration;
use txvfs::{ErrorKind, FileSystem, FlockOp, OpenOptions, RangeLockKind, Store};

#[test]
fn flock_excludes_and_is_released_on_close() {
    let store = Store::open("memory:").unwrap();
    store.write_file("/f", b"").unwrap();
    let ro = OpenOptions::new().read(true);
    let a = store.open("/f", &ro).unwrap();
    let b = store.open("/f", &ro).unwrap();
    a.flock(FlockOp::Exclusive, false).unwrap();
    assert_eq!(b.flock(FlockOp::Shared, false).unwrap_err().kind(), ErrorKind::WouldBlock);
    // A blocked waiter proceeds when the holder closes.
    let b = Arc::new(b);
    let waiter = {
        let b = b.clone();
        std::thread::spawn(move || b.flock(FlockOp::Exclusive, true))
    };
    std::thread::sleep(Duration::from_millis(50));
    assert!(!waiter.is_finished());
    a.close().unwrap();
    waiter.join().unwrap().unwrap();
}

#[test]
fn byte_range_locks_conflict_only_where_they_overlap() {
    let store = Store::open("memory:").unwrap();
    store.write_file("/f", b"0123456789").unwrap();
    let rw = OpenOptions::new().read(true).write(true);
    let a = store.open("/f", &rw).unwrap();
    let b = store.open("/f", &rw).unwrap();
    a.lock_range(RangeLockKind::Write, 0, 5, false).unwrap();
    b.lock_range(RangeLockKind::Write, 5, 5, false).unwrap();
    assert_eq!(
        b.lock_range(RangeLockKind::Read, 4, 2, false).unwrap_err().kind(),
        ErrorKind::WouldBlock
    );
    let held = b.test_lock(false, 0, 1).unwrap().unwrap();
    assert_eq!((held.owner, held.start, held.len), (a.handle_id(), 0, 5));
    a.lock_range(RangeLockKind::Unlock, 0, 5, false).unwrap();
    assert!(b.test_lock(true, 0, 5).unwrap().is_none());
    // A read-only handle cannot take a write lock.
    let r = store.open("/f", &OpenOptions::new().read(true)).unwrap();
    assert_eq!(
        r.lock_range(RangeLockKind::Write, 0, 1, false).unwrap_err().kind(),
        ErrorKind::BadHandle
    );
    drop(b);
    assert!(a.test_lock(true, 0, 0).unwrap().is_none(), "dropped handle released its locks");
}
