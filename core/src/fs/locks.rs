//! File locks: `flock`-style whole-file locks and POSIX byte-range locks, both owned by a file
//! handle (like Linux open-file-description locks) and released when it closes. This table
//! decides between the handles of one process; on a backend shared by several processes, each
//! change is also published as a leased lock record ([`super::leases`]) and refused if another
//! process holds a conflicting lock.

use super::leases::LeaseTable;
use crate::error::{Error, ErrorKind, Result};
use crate::schema::LockSpec;
use parking_lot::{Condvar, Mutex, MutexGuard};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

/// A whole-file lock request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FlockOp {
    /// Shared lock (many holders).
    Shared,
    /// Exclusive lock (one holder).
    Exclusive,
    /// Release the handle's lock.
    Unlock,
}

/// A byte-range lock type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RangeLockKind {
    /// Read (shared) lock.
    Read,
    /// Write (exclusive) lock.
    Write,
    /// Release the range.
    Unlock,
}

/// A byte-range lock held by some handle, as reported by a lock test.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RangeLock {
    /// Identifier of the handle that holds it.
    pub owner: u64,
    /// `Read` or `Write`.
    pub kind: RangeLockKind,
    /// First byte.
    pub start: u64,
    /// Length; 0 means to the end of the file and beyond.
    pub len: u64,
}

#[derive(Default, Clone)]
struct FileLocks {
    shared: Vec<u64>,
    exclusive: Option<u64>,
    /// (owner, start, end exclusive, write)
    ranges: Vec<(u64, u64, u64, bool)>,
}

impl FileLocks {
    fn is_empty(&self) -> bool {
        self.shared.is_empty() && self.exclusive.is_none() && self.ranges.is_empty()
    }
    /// Drops every lock `owner` holds here; true if it held any.
    fn forget(&mut self, owner: u64) -> bool {
        let held = self.shared.contains(&owner)
            || self.exclusive == Some(owner)
            || self.ranges.iter().any(|r| r.0 == owner);
        self.shared.retain(|&o| o != owner);
        if self.exclusive == Some(owner) {
            self.exclusive = None;
        }
        self.ranges.retain(|r| r.0 != owner);
        held
    }
    fn range_conflict(&self, owner: u64, start: u64, end: u64, write: bool) -> Option<RangeLock> {
        self.ranges.iter().find(|r| r.0 != owner && r.1 < end && start < r.2 && (write || r.3)).map(
            |r| RangeLock {
                owner: r.0,
                kind: if r.3 { RangeLockKind::Write } else { RangeLockKind::Read },
                start: r.1,
                len: if r.2 == u64::MAX { 0 } else { r.2 - r.1 },
            },
        )
    }
    /// Everything `owner` holds, as published to other processes.
    fn specs_of(&self, owner: u64) -> Vec<LockSpec> {
        let mut specs = Vec::new();
        let whole = |exclusive| LockSpec { whole_file: true, exclusive, start: 0, end: u64::MAX };
        if self.exclusive == Some(owner) {
            specs.push(whole(true));
        } else if self.shared.contains(&owner) {
            specs.push(whole(false));
        }
        for r in self.ranges.iter().filter(|r| r.0 == owner) {
            specs.push(LockSpec { whole_file: false, exclusive: r.3, start: r.1, end: r.2 });
        }
        specs
    }
    /// Removes `owner`'s locks from `[start, end)`, splitting ranges that stick out.
    fn carve(&mut self, owner: u64, start: u64, end: u64) {
        let mut kept = Vec::with_capacity(self.ranges.len() + 1);
        for r in self.ranges.drain(..) {
            if r.0 != owner || r.2 <= start || end <= r.1 {
                kept.push(r);
                continue;
            }
            if r.1 < start {
                kept.push((r.0, r.1, start, r.3));
            }
            if end < r.2 {
                kept.push((r.0, end, r.2, r.3));
            }
        }
        self.ranges = kept;
    }
}

/// The lock table of one store.
#[derive(Default)]
pub(crate) struct LockTable {
    files: Mutex<HashMap<u64, FileLocks>>,
    changed: Condvar,
    /// Lock records shared with other processes, when the backend is shared.
    shared: Option<Arc<LeaseTable>>,
}

/// How often a waiter looks again for a lock held by another process (no wake-up crosses
/// processes).
const REMOTE_POLL: Duration = Duration::from_millis(20);

fn would_block() -> Error {
    Error::new(ErrorKind::WouldBlock, "file is locked by another handle")
}

fn range_end(start: u64, len: u64) -> Result<u64> {
    if len == 0 {
        return Ok(u64::MAX);
    }
    start.checked_add(len).ok_or_else(|| Error::new(ErrorKind::Invalid, "lock range overflows"))
}

impl LockTable {
    /// A table that also publishes locks through `shared` (for backends shared by processes).
    pub(crate) fn new(shared: Option<Arc<LeaseTable>>) -> LockTable {
        LockTable { shared, ..LockTable::default() }
    }

    /// The error for every call of handle `owner` after its locks were lost (their lease ran
    /// out before this process could renew it: another process may hold them now), until it
    /// closes. The first such call also drops what this table still holds for it.
    pub(crate) fn lost(&self, owner: u64) -> Option<Error> {
        let ino = self.shared.as_ref()?.lost_lock(owner)?;
        self.forget(ino, owner);
        Some(Error::new(
            ErrorKind::Io,
            format!(
                "this handle's locks on inode {ino} were lost: this process could not renew \
                 them before their lease ran out, and another process may hold them now; \
                 close the handle"
            ),
        ))
    }

    /// Forgets that handle `owner` lost its locks (it closed).
    pub(crate) fn forget_lost(&self, owner: u64) {
        if let Some(shared) = &self.shared {
            shared.forget_lost(owner);
        }
    }

    /// The table of lock records shared with other processes, if any.
    pub(crate) fn lease_table(&self) -> Option<&Arc<LeaseTable>> {
        self.shared.as_ref()
    }

    /// Publishes `owner`'s locks on `ino` as they stand in `f`; false if another process holds
    /// a conflicting lock (then nothing was published).
    fn publish(&self, ino: u64, owner: u64, f: &FileLocks) -> Result<bool> {
        match &self.shared {
            Some(shared) => Ok(shared.publish(ino, owner, &f.specs_of(owner))?.is_none()),
            None => Ok(true),
        }
    }

    fn wait(&self, files: &mut MutexGuard<'_, HashMap<u64, FileLocks>>) {
        if self.shared.is_some() {
            self.changed.wait_for(files, REMOTE_POLL);
        } else {
            self.changed.wait(files);
        }
    }

    pub(crate) fn flock(&self, ino: u64, owner: u64, op: FlockOp, wait: bool) -> Result<()> {
        let mut files = self.files.lock();
        loop {
            let f = files.entry(ino).or_default();
            f.shared.retain(|&o| o != owner);
            if f.exclusive == Some(owner) {
                f.exclusive = None;
            }
            let free = match op {
                FlockOp::Unlock => true,
                FlockOp::Shared => f.exclusive.is_none(),
                FlockOp::Exclusive => f.exclusive.is_none() && f.shared.is_empty(),
            };
            if free {
                let mut next = f.clone();
                match op {
                    FlockOp::Shared => next.shared.push(owner),
                    FlockOp::Exclusive => next.exclusive = Some(owner),
                    FlockOp::Unlock => {}
                }
                if self.publish(ino, owner, &next)? {
                    *f = next;
                    if f.is_empty() {
                        files.remove(&ino);
                    }
                    self.changed.notify_all();
                    return Ok(());
                }
            }
            // Converting drops the old lock first, as flock(2) does; others may now proceed.
            self.publish(ino, owner, f)?;
            self.changed.notify_all();
            if !wait {
                return Err(would_block());
            }
            self.wait(&mut files);
        }
    }

    pub(crate) fn lock_range(
        &self,
        ino: u64,
        owner: u64,
        kind: RangeLockKind,
        start: u64,
        len: u64,
        wait: bool,
    ) -> Result<()> {
        let end = range_end(start, len)?;
        let mut files = self.files.lock();
        loop {
            let f = files.entry(ino).or_default();
            let write = kind == RangeLockKind::Write;
            let mut next = f.clone();
            next.carve(owner, start, end);
            if kind != RangeLockKind::Unlock {
                next.ranges.push((owner, start, end, write));
            }
            let free = kind == RangeLockKind::Unlock
                || f.range_conflict(owner, start, end, write).is_none();
            if free && self.publish(ino, owner, &next)? {
                *f = next;
            } else if !wait {
                return Err(would_block());
            } else {
                self.wait(&mut files);
                continue;
            }
            if f.is_empty() {
                files.remove(&ino);
            }
            self.changed.notify_all();
            return Ok(());
        }
    }

    /// Writes the release of `owner`'s locks on `[start, start + len)` of `ino` into `kv`, a
    /// data transaction that commits it ([`super::File::unlock_range_in`]): the locks `owner`
    /// keeps, to give [`LockTable::unlocked_in`] once the commit ended; None (nothing written)
    /// where no other process sees this table's locks.
    pub(crate) fn unlock_in(
        &self,
        kv: &mut dyn crate::kv::Txn,
        ino: u64,
        owner: u64,
        start: u64,
        len: u64,
    ) -> Result<Option<Vec<LockSpec>>> {
        let end = range_end(start, len)?;
        let Some(shared) = &self.shared else { return Ok(None) };
        let kept = {
            let files = self.files.lock();
            let mut next = files.get(&ino).cloned().unwrap_or_default();
            next.carve(owner, start, end);
            next.specs_of(owner)
        };
        Ok(shared.write_in(kv, ino, owner, &kept)?.then_some(kept))
    }

    /// The commit that carried [`LockTable::unlock_in`]'s release ended: when `committed`,
    /// the locks are gone here too (until then this process's other handles still waited).
    pub(crate) fn unlocked_in(
        &self,
        ino: u64,
        owner: u64,
        start: u64,
        len: u64,
        kept: &[LockSpec],
        committed: bool,
    ) {
        if committed {
            let end = range_end(start, len).unwrap_or(u64::MAX);
            let mut files = self.files.lock();
            if let Some(f) = files.get_mut(&ino) {
                f.carve(owner, start, end);
                if f.is_empty() {
                    files.remove(&ino);
                }
            }
            self.changed.notify_all();
        }
        if let Some(shared) = &self.shared {
            shared.written_in_commit(ino, owner, kept, committed);
        }
    }

    pub(crate) fn test_range(
        &self,
        ino: u64,
        owner: u64,
        write: bool,
        start: u64,
        len: u64,
    ) -> Result<Option<RangeLock>> {
        let end = range_end(start, len)?;
        if let Some(local) =
            self.files.lock().get(&ino).and_then(|f| f.range_conflict(owner, start, end, write))
        {
            return Ok(Some(local));
        }
        let Some(shared) = &self.shared else { return Ok(None) };
        let wanted = LockSpec { whole_file: false, exclusive: write, start, end };
        Ok(shared.test(ino, &wanted)?.map(|b| RangeLock {
            owner: b.owner,
            kind: if b.lock.exclusive { RangeLockKind::Write } else { RangeLockKind::Read },
            start: b.lock.start,
            len: if b.lock.end == u64::MAX { 0 } else { b.lock.end - b.lock.start },
        }))
    }

    pub(crate) fn release_all(&self, ino: u64, owner: u64) {
        // A handle that held nothing has no record to clear (on a shared backend each
        // publication is a transaction that conflicts with other holders' changes).
        if !self.forget(ino, owner) {
            return;
        }
        if let Some(shared) = &self.shared {
            // A failure leaves the record to lapse with its lease.
            let _ = shared.publish(ino, owner, &[]);
        }
    }

    /// Drops every lock `owner` holds on `ino` from this table and wakes the waiters; true if
    /// it held any.
    fn forget(&self, ino: u64, owner: u64) -> bool {
        let mut files = self.files.lock();
        let Some(f) = files.get_mut(&ino) else { return false };
        let held = f.forget(owner);
        if f.is_empty() {
            files.remove(&ino);
        }
        if held {
            self.changed.notify_all();
        }
        held
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lost_lock_fails_its_holders_next_call_until_it_closes() {
        use super::super::leases::ManualClock;
        use crate::kv::{Backend, Limits, MemoryBackend};
        // Two processes on a backend that cannot tell live processes from dead (leases).
        let backend: Arc<dyn Backend> = Arc::new(MemoryBackend::new(Limits::FOUNDATIONDB));
        let clock = Arc::new(ManualClock::new(1_000_000));
        let lease = Duration::from_secs(10);
        let a = LeaseTable::new(backend.clone(), clock.clone(), lease);
        let b = LeaseTable::new(backend, clock.clone(), lease);
        let t = LockTable::new(Some(a.clone()));
        t.flock(7, 1, FlockOp::Exclusive, false).unwrap();
        t.lock_range(8, 2, RangeLockKind::Write, 0, 10, false).unwrap();
        // This process is paused past the lease; the other one takes the lock meanwhile.
        clock.advance(Duration::from_secs(11));
        let whole = LockSpec { whole_file: true, exclusive: true, start: 0, end: u64::MAX };
        assert!(b.publish(7, 9, &[whole]).unwrap().is_none(), "the lapsed lock is taken");
        assert!(t.lost(1).is_none(), "not known before the renewal");
        let mut lost = a.renew().unwrap();
        lost.sort();
        assert_eq!(lost, vec![(7, 1), (8, 2)]);
        // The holder is told, on every call, until it closes.
        for _ in 0..2 {
            let e = t.lost(1).expect("the holder of a lost lock is told");
            assert_eq!(e.code(), libc::EIO, "{e}");
            assert!(e.to_string().contains("locks on inode 7 were lost"), "{e}");
        }
        assert!(t.lost(3).is_none(), "other handles are not affected");
        // Its lock is no longer held in this process either.
        assert!(t.files.lock().get(&7).is_none());
        t.release_all(7, 1);
        t.forget_lost(1);
        assert!(t.lost(1).is_none());
        assert!(t.lost(2).is_some(), "the other holder still has to close");
    }

    #[test]
    fn a_release_written_into_a_commit_takes_effect_with_it_and_only_then() {
        use super::super::leases::SystemClock;
        use crate::kv::{Backend, Limits, MemoryBackend};
        // Two processes on one backend: a's handle 1 holds bytes 0..2 of inode 7.
        let backend: Arc<dyn Backend> = Arc::new(MemoryBackend::new(Limits::FOUNDATIONDB));
        let lease = Duration::from_secs(10);
        let a = LeaseTable::new(backend.clone(), Arc::new(SystemClock), lease);
        let b =
            LockTable::new(Some(LeaseTable::new(backend.clone(), Arc::new(SystemClock), lease)));
        let t = LockTable::new(Some(a.clone()));
        t.lock_range(7, 1, RangeLockKind::Write, 0, 2, false).unwrap();
        let blocked =
            |b: &LockTable| b.lock_range(7, 9, RangeLockKind::Write, 1, 1, false).is_err();
        for committed in [false, true] {
            let mut tx = backend.begin().unwrap();
            let kept = t.unlock_in(&mut *tx, 7, 1, 0, 2).unwrap().expect("written in the commit");
            assert!(kept.is_empty());
            assert!(blocked(&b), "held until the commit lands");
            assert!(t.files.lock().contains_key(&7), "and in this process too");
            if committed {
                tx.commit(false).unwrap();
            } else {
                drop(tx); // rolled back
            }
            // The record is gone (or kept) before this process hears of the outcome: a renewal
            // then must neither write it back nor call the lock lost.
            assert!(a.renew().unwrap().is_empty(), "a renewal meanwhile leaves it alone");
            t.unlocked_in(7, 1, 0, 2, &kept, committed);
            assert_eq!(blocked(&b), !committed, "released exactly when committed");
            assert_eq!(t.files.lock().contains_key(&7), !committed);
            assert!(a.renew().unwrap().is_empty(), "nothing lost either way");
        }
    }

    #[test]
    fn flock_shared_and_exclusive() {
        let t = LockTable::default();
        t.flock(1, 10, FlockOp::Shared, false).unwrap();
        t.flock(1, 11, FlockOp::Shared, false).unwrap();
        assert_eq!(
            t.flock(1, 12, FlockOp::Exclusive, false).unwrap_err().kind(),
            ErrorKind::WouldBlock
        );
        t.release_all(1, 10);
        t.flock(1, 11, FlockOp::Unlock, false).unwrap();
        t.flock(1, 12, FlockOp::Exclusive, false).unwrap();
        assert!(t.flock(1, 10, FlockOp::Shared, false).is_err());
    }

    #[test]
    fn closing_a_handle_that_held_no_lock_writes_no_record() {
        // On a shared backend every change of a handle's locks is a transaction on the lock
        // records; a handle that held nothing (an SQLite snapshot's, say) has nothing to clear.
        use crate::kv::{FaultyBackend, Limits, MemoryBackend};
        let (backend, plan) =
            FaultyBackend::new(Arc::new(MemoryBackend::new(Limits::FOUNDATIONDB)));
        let clock = Arc::new(super::super::leases::SystemClock);
        let leases = LeaseTable::new(backend, clock, Duration::from_secs(10));
        let t = LockTable::new(Some(leases));
        t.lock_range(1, 1, RangeLockKind::Write, 0, 10, false).unwrap();
        let reads = plan.reads();
        t.release_all(1, 2);
        assert_eq!(plan.reads(), reads, "handle 2 held no lock: nothing to publish");
        t.release_all(1, 1);
        assert!(plan.reads() > reads, "handle 1's record is cleared");
    }

    #[test]
    fn ranges_split_and_conflict() {
        let t = LockTable::default();
        t.lock_range(1, 1, RangeLockKind::Write, 0, 100, false).unwrap();
        t.lock_range(1, 1, RangeLockKind::Unlock, 40, 20, false).unwrap();
        assert!(t.test_range(1, 2, true, 45, 10).unwrap().is_none());
        let held = t.test_range(1, 2, false, 30, 20).unwrap().unwrap();
        assert_eq!((held.owner, held.start, held.len), (1, 0, 40));
        t.lock_range(1, 2, RangeLockKind::Read, 40, 20, false).unwrap();
        t.lock_range(1, 3, RangeLockKind::Read, 40, 20, false).unwrap();
        assert!(t.lock_range(1, 3, RangeLockKind::Write, 50, 0, false).is_err());
    }
}
