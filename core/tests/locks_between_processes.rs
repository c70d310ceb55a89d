//! File locks hold between processes on a shared backend (FoundationDB): each "process" here
//! is a store of its own over one memory backend that says it is shared, so locks go through
//! the leased lock records in the backend. (Lease expiry with a controlled clock is tested in
//! `core/src/fs/leases.rs`.)

use std::sync::Arc;
use std::time::Duration;
use txvfs::kv::{Backend, Limits, MemoryBackend, Role, Sharing, Txn};
use txvfs::{ErrorKind, FileSystem, FlockOp, OpenOptions, Options, RangeLockKind, Store};

/// One process's connection to the shared backend.
struct Shared(Arc<MemoryBackend>);

impl Backend for Shared {
    fn begin(&self) -> txvfs::Result<Box<dyn Txn>> {
        self.0.begin()
    }
    fn limits(&self) -> Limits {
        self.0.limits()
    }
    fn sync(&self) -> txvfs::Result<()> {
        self.0.sync()
    }
    fn describe(&self) -> String {
        "shared memory".into()
    }
    fn sharing(&self) -> Option<&dyn Sharing> {
        Some(self)
    }
}

/// Shared like FoundationDB: no primary, liveness through leases.
impl Sharing for Shared {
    fn role(&self) -> Role {
        Role::Peer
    }
}

fn two_processes() -> (Store, Store) {
    let backend = Arc::new(MemoryBackend::new(Limits::FOUNDATIONDB));
    let open = || {
        Store::with_backend(Arc::new(Shared(backend.clone())), Options::default(), None).unwrap()
    };
    (open(), open())
}

#[test]
fn flock_between_processes() {
    let (a, b) = two_processes();
    a.write_file("/f", b"data").unwrap();
    let fa = a.open("/f", &OpenOptions::new().read(true)).unwrap();
    let fb = b.open("/f", &OpenOptions::new().read(true)).unwrap();
    fa.flock(FlockOp::Exclusive, false).unwrap();
    assert_eq!(fb.flock(FlockOp::Shared, false).unwrap_err().kind(), ErrorKind::WouldBlock);
    fa.flock(FlockOp::Shared, false).unwrap();
    fb.flock(FlockOp::Shared, false).unwrap();
    assert_eq!(fa.flock(FlockOp::Exclusive, false).unwrap_err().kind(), ErrorKind::WouldBlock);
    fb.flock(FlockOp::Unlock, false).unwrap();
    fa.flock(FlockOp::Exclusive, false).unwrap();
    // Closing releases: a blocking waiter in the other process gets the lock.
    let waiter = std::thread::spawn(move || {
        fb.flock(FlockOp::Exclusive, true).unwrap();
        fb
    });
    std::thread::sleep(Duration::from_millis(100));
    assert!(!waiter.is_finished(), "the waiter must wait while the lock is held");
    fa.close().unwrap();
    let fb = waiter.join().unwrap();
    let fa = a.open("/f", &OpenOptions::new().read(true)).unwrap();
    assert_eq!(fa.flock(FlockOp::Shared, false).unwrap_err().kind(), ErrorKind::WouldBlock);
    drop(fb);
}

#[test]
fn byte_ranges_between_processes() {
    let (a, b) = two_processes();
    a.write_file("/f", &[0u8; 100]).unwrap();
    let rw = OpenOptions::new().read(true).write(true);
    let fa = a.open("/f", &rw).unwrap();
    let fb = b.open("/f", &rw).unwrap();
    fa.lock_range(RangeLockKind::Write, 10, 10, false).unwrap();
    assert_eq!(
        fb.lock_range(RangeLockKind::Read, 15, 1, false).unwrap_err().kind(),
        ErrorKind::WouldBlock
    );
    fb.lock_range(RangeLockKind::Write, 20, 0, false).unwrap(); // [20, EOF) does not overlap
    let seen = fb.test_lock(false, 0, 0).unwrap().expect("a's range is visible to b");
    assert_eq!((seen.kind, seen.start, seen.len), (RangeLockKind::Write, 10, 10));
    // Unlocking part of a range publishes the remainder.
    fa.lock_range(RangeLockKind::Unlock, 10, 5, false).unwrap();
    fb.lock_range(RangeLockKind::Read, 10, 5, false).unwrap();
    assert_eq!(
        fb.lock_range(RangeLockKind::Read, 15, 1, false).unwrap_err().kind(),
        ErrorKind::WouldBlock
    );
    // flock and byte-range locks are independent, as on Linux.
    fb.flock(FlockOp::Exclusive, false).unwrap();
    drop(fa);
    fb.lock_range(RangeLockKind::Write, 0, 20, false).unwrap();
}

#[test]
fn a_lost_lock_is_reported_to_its_holder() {
    // A lease that ran out while its holder could not renew (paused, cut off): another
    // process collected the record and took the lock. The holder's renewer finds its record
    // gone, and the holder's next call on that handle fails saying so; closing it works, and
    // its other handles are unaffected.
    let backend = Arc::new(MemoryBackend::new(Limits::FOUNDATIONDB));
    let open = || {
        Store::with_backend(Arc::new(Shared(backend.clone())), Options::default(), None).unwrap()
    };
    let (a, b) = (open(), open());
    a.write_file("/f", b"data").unwrap();
    let ino = a.stat("/f").unwrap().ino;
    let fa = a.open("/f", &OpenOptions::new().read(true)).unwrap();
    let other = a.open("/f", &OpenOptions::new().read(true)).unwrap();
    fa.flock(FlockOp::Exclusive, false).unwrap();
    let fb = b.open("/f", &OpenOptions::new().read(true)).unwrap();
    assert_eq!(fb.flock(FlockOp::Exclusive, false).unwrap_err().kind(), ErrorKind::WouldBlock);
    // The lease lapses: what another process does with a record whose lease ran out.
    let (start, end) = txvfs::schema::lock_range(ino);
    let mut t = backend.begin().unwrap();
    t.clear_range(&start, &end).unwrap();
    t.commit(false).unwrap();
    fb.flock(FlockOp::Exclusive, false).unwrap();
    // The holder's renewer (every third of the 10 s lease) finds the loss.
    let mut buf = [0u8; 4];
    let waited = std::time::Instant::now();
    let e = loop {
        match fa.read_at(&mut buf, 0) {
            Err(e) => break e,
            Ok(_) if waited.elapsed() < Duration::from_secs(30) => {
                std::thread::sleep(Duration::from_millis(50));
            }
            Ok(_) => panic!("the holder of a lost lock was never told"),
        }
    };
    // EIO, as an NFS client reports lost locks (issue 37).
    assert_eq!(e.code(), libc::EIO, "{e}");
    assert!(e.to_string().contains("were lost"), "{e}");
    assert!(fa.flock(FlockOp::Shared, false).is_err(), "every call fails until it closes");
    assert_eq!(other.read_at(&mut buf, 0).unwrap(), 4, "another handle works");
    fa.close().unwrap();
    let fa = a.open("/f", &OpenOptions::new().read(true)).unwrap();
    assert_eq!(fa.flock(FlockOp::Shared, false).unwrap_err().kind(), ErrorKind::WouldBlock);
}
