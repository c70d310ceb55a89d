//! Tests of the lock leases (`leases.rs`).

use super::*;
use crate::kv::{Limits, MemoryBackend};

const WHOLE_EX: LockSpec = LockSpec { whole_file: true, exclusive: true, start: 0, end: u64::MAX };
const WHOLE_SH: LockSpec = LockSpec { whole_file: true, exclusive: false, start: 0, end: u64::MAX };

fn range(start: u64, end: u64, exclusive: bool) -> LockSpec {
    LockSpec { whole_file: false, exclusive, start, end }
}

/// Two "processes" (tables) on one backend and one manual clock.
fn two_processes() -> (Arc<LeaseTable>, Arc<LeaseTable>, Arc<ManualClock>) {
    let backend: Arc<dyn Backend> = Arc::new(MemoryBackend::new(Limits::FOUNDATIONDB));
    let clock = Arc::new(ManualClock::new(1_000_000));
    let a = LeaseTable::new(backend.clone(), clock.clone(), Duration::from_secs(10));
    let b = LeaseTable::new(backend, clock.clone(), Duration::from_secs(10));
    (a, b, clock)
}

#[test]
fn conflicts_between_processes() {
    let (a, b, _) = two_processes();
    assert_eq!(a.publish(7, 1, &[WHOLE_EX]).unwrap(), None);
    let blocker = b.publish(7, 1, &[WHOLE_SH]).unwrap().expect("exclusive lock blocks");
    assert_eq!((blocker.process, blocker.owner, blocker.lock), (a.process_id(), 1, WHOLE_EX));
    // Other files, and byte ranges (which never conflict with flock), are free.
    assert_eq!(b.publish(8, 1, &[WHOLE_EX]).unwrap(), None);
    assert_eq!(b.publish(7, 2, &[range(0, 10, true)]).unwrap(), None);
    // Ranges conflict only where they overlap and one of them writes.
    assert!(a.publish(7, 3, &[range(5, 20, false)]).unwrap().is_some());
    assert_eq!(a.publish(7, 3, &[range(10, 20, true)]).unwrap(), None);
    assert_eq!(b.publish(7, 4, &[range(0, 5, false)]).unwrap(), None);
    assert!(b.test(7, &range(15, 16, false)).unwrap().is_some());
    // Releasing lets the other process in.
    assert_eq!(a.publish(7, 1, &[]).unwrap(), None);
    assert_eq!(b.publish(7, 1, &[WHOLE_SH]).unwrap(), None);
}

#[test]
fn a_crashed_holder_loses_its_locks_after_one_lease() {
    let (a, b, clock) = two_processes();
    a.publish(7, 1, &[WHOLE_EX]).unwrap();
    clock.advance(Duration::from_secs(9));
    assert!(b.publish(7, 1, &[WHOLE_EX]).unwrap().is_some(), "still within the lease");
    // `a` stops renewing (it crashed): one lease later, `b` takes the lock.
    clock.advance(Duration::from_secs(2));
    assert_eq!(b.publish(7, 1, &[WHOLE_EX]).unwrap(), None);
    // If `a` was only paused, its next renewal reports the loss, and keeps it for the
    // holder until it closes.
    assert_eq!(a.lost_lock(1), None);
    assert_eq!(a.renew().unwrap(), vec![(7, 1)]);
    assert_eq!(a.lost_lock(1), Some(7));
    assert_eq!(a.lost_lock(2), None);
    assert!(a.publish(7, 1, &[WHOLE_SH]).unwrap().is_some());
    a.forget_lost(1);
    assert_eq!(a.lost_lock(1), None);
}

#[test]
fn renewal_keeps_locks_alive() {
    let (a, b, clock) = two_processes();
    a.publish(7, 1, &[WHOLE_EX]).unwrap();
    for _ in 0..10 {
        clock.advance(Duration::from_secs(4));
        assert_eq!(a.renew().unwrap(), vec![]);
        assert!(b.publish(7, 1, &[WHOLE_SH]).unwrap().is_some(), "a renewed lease holds");
    }
}

/// A backend whose every process is alive as far as the kernel tells (a shared RocksDB
/// store with live holders), over a memory backend.
struct AllAlive(MemoryBackend);

impl Backend for AllAlive {
    fn begin(&self) -> Result<Box<dyn crate::kv::Txn>> {
        self.0.begin()
    }
    fn limits(&self) -> Limits {
        self.0.limits()
    }
    fn sync(&self) -> Result<()> {
        self.0.sync()
    }
    fn describe(&self) -> String {
        "all-alive".into()
    }
    fn sharing(&self) -> Option<&dyn crate::kv::Sharing> {
        Some(self)
    }
}

impl crate::kv::Sharing for AllAlive {
    fn role(&self) -> crate::kv::Role {
        crate::kv::Role::Secondary
    }
    fn process_alive(&self, _process: u64) -> Option<bool> {
        Some(true)
    }
}

#[test]
fn a_failover_longer_than_a_lease_keeps_locks() {
    // Where the backend tells liveness (a shared RocksDB store), a live holder that could
    // not renew for longer than a lease (a failover waiting for RocksDB's recovery) keeps
    // its locks: nobody else gets them, and its renewal reports nothing lost.
    let backend: Arc<dyn Backend> = Arc::new(AllAlive(MemoryBackend::new(Limits::UNLIMITED)));
    let clock = Arc::new(ManualClock::new(1_000_000));
    let a = LeaseTable::new(backend.clone(), clock.clone(), Duration::from_secs(10));
    let b = LeaseTable::new(backend, clock.clone(), Duration::from_secs(10));
    a.publish(7, 1, &[WHOLE_EX]).unwrap();
    clock.advance(Duration::from_secs(30));
    assert!(b.publish(7, 1, &[WHOLE_EX]).unwrap().is_some(), "a live holder's lock lapsed");
    assert_eq!(a.renew().unwrap(), vec![], "a live holder was told it lost its lock");
    assert!(b.publish(7, 1, &[WHOLE_SH]).unwrap().is_some());
}

#[test]
fn lock_records_round_trip() {
    let r = LockRecord { expires_ms: 42, locks: vec![WHOLE_EX, range(3, u64::MAX, false)] };
    assert_eq!(LockRecord::decode(&r.encode()).unwrap(), r);
}

#[test]
fn a_renewal_racing_an_unlock_reports_nothing_lost() {
    // The renewer copied the held locks, then the holder released one (its record deleted)
    // before the renewer's transaction read that record: the renewal must not take the
    // missing record for a lost lock (seen in SQLite's mptest under I/O load: "this handle's
    // locks on inode 2 were lost"), nor forget a lock the holder took again meanwhile.
    let backend: Arc<dyn Backend> = Arc::new(AllAlive(MemoryBackend::new(Limits::UNLIMITED)));
    let clock = Arc::new(ManualClock::new(1_000_000));
    let a = LeaseTable::new(backend, clock, Duration::from_secs(10));
    let stop = Arc::new(AtomicBool::new(false));
    let renewer = {
        let (a, stop) = (a.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut renewals = 0u64;
            while !stop.load(Ordering::SeqCst) {
                assert_eq!(a.renew().unwrap(), vec![], "a released lock reported lost");
                renewals += 1;
            }
            renewals
        })
    };
    let start = std::time::Instant::now();
    let mut cycles = 0u64;
    while start.elapsed() < Duration::from_secs(2) {
        for owner in 1..=4 {
            assert_eq!(a.publish(7, owner, &[WHOLE_EX]).unwrap(), None);
        }
        for owner in 1..=4 {
            assert_eq!(a.lost_lock(owner), None, "a held lock was forgotten");
            assert_eq!(a.publish(7, owner, &[]).unwrap(), None);
        }
        cycles += 1;
    }
    stop.store(true, Ordering::SeqCst);
    let renewals = renewer.join().expect("the renewer found a lock lost");
    eprintln!("{cycles} lock cycles against {renewals} renewals");
    assert!(renewals > 100 && cycles > 100, "the race was not exercised");
}

#[test]
fn a_release_committed_while_a_renewal_runs_is_not_taken_for_a_lost_lock() {
    // The renewal reads which holders a data commit rewrites (`in_commit`) when it begins.
    // A release written into a commit and committed after that, while the renewal was still
    // on its way through the holders, made it find the record gone and call the lock lost:
    // the handle's every later call failed ("disk I/O error" in SQLite's mptest, whose
    // client then died, and the test waited for it).
    let (a, b, _) = two_processes();
    assert_eq!(a.publish(7, 1, &[WHOLE_EX]).unwrap(), None);
    let (paused, is_paused) = std::sync::mpsc::channel();
    let (go, wait_go) = std::sync::mpsc::channel::<()>();
    *a.renew_pause.lock() = Some(Box::new(move || {
        paused.send(()).unwrap();
        let _ = wait_go.recv();
    }));
    let renewer = {
        let a = a.clone();
        std::thread::spawn(move || a.renew())
    };
    is_paused.recv().unwrap();
    // The renewal has begun. A data transaction carries the release and commits.
    let (done, is_done) = std::sync::mpsc::channel();
    let committer = {
        let a = a.clone();
        std::thread::spawn(move || loop {
            let mut tx = a.backend.begin().unwrap();
            assert!(a.write_in(&mut *tx, 7, 1, &[]).unwrap(), "written in the commit");
            let r = tx.commit(false);
            if r.is_ok() {
                done.send(()).unwrap();
            }
            a.written_in_commit(7, 1, &[], r.is_ok());
            match r {
                Ok(()) => break,
                Err(e) if e.is_retryable() => continue,
                Err(e) => panic!("{e}"),
            }
        })
    };
    // Unfixed, the commit lands here, under the renewal's feet (in microseconds); fixed, it
    // waits for the renewal to end before it writes the release. Either way the renewal goes on after this bounded wait.
    let landed = is_done.recv_timeout(Duration::from_millis(500)).is_ok();
    go.send(()).unwrap();
    let lost = renewer.join().unwrap().unwrap();
    committer.join().unwrap();
    assert_eq!(lost, vec![], "the released lock was taken for lost (commit landed: {landed})");
    assert_eq!(a.lost_lock(1), None);
    assert_eq!(b.publish(7, 2, &[WHOLE_EX]).unwrap(), None, "released with the commit");
    assert_eq!(a.renew().unwrap(), vec![]);
}
