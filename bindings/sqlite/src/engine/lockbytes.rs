//! SQLite's lock levels between processes: byte-range locks on the database file at the bytes
//! os_unix.c uses (RESERVED and the SHARED range), taken through the core's per-handle range
//! locks, which on a store shared by several processes are leased lock records that every
//! process checks. The in-process table ([`super::locks`]) decides first; these bytes then
//! make the same levels exclude the handles of other processes: RESERVED excludes writers.
//!
//! Readers read snapshots, so no writer waits for a reader of another process, and a reader
//! publishes no lock record: it only checks that no connection of another process in
//! `locking_mode=EXCLUSIVE` holds EXCLUSIVE (a write lock on the SHARED range), which keeps
//! new readers out because such a connection stops updating the change counter other
//! connections check their page caches with. A reader already reading keeps its snapshot,
//! which the exclusive writer's commits do not change. A record per read transaction (one
//! commit to take it, one to release it, each read-conflicting with every other record of
//! the file) made every writer's lock commits conflict and back off under a few busy readers
//! (benches/sqlite/readers.py: the writer at 0.1x of its rate alone). The exception is a
//! reader in `locking_mode=EXCLUSIVE` (pinned: it keeps SHARED, its snapshot and its cache
//! across transactions): it holds a read lock on the PENDING byte, which every EXCLUSIVE
//! lock write-locks.
//!
//! The check costs a client of a shared store a round trip to the owner per read transaction
//! (the lock records are read there), so it is made only when the database carries a mark
//! ([`EXCLUSIVE_MARK`], read in the read transaction's snapshot, which the process's cache
//! answers): a connection in `locking_mode=EXCLUSIVE` sets it to its own identity before it
//! write-locks the SHARED range, and removes it after it unlocks, if it is still its own (a
//! connection that failed to get the lock leaves its mark: a mark without a lock, or left by
//! a process that died, only costs readers the check until the next such connection leaves).
//! Whenever the lock is held the mark is there: only its setter removes it, after its own
//! lock is gone, and a new holder sets its own first.

use super::locks::Level;
use std::sync::OnceLock;
use txvfs::{
    ErrorKind, File, InodeFileSystem, RangeLockKind, Result, Store, Transaction, XattrFlags,
};

/// The extended attribute a connection in `locking_mode=EXCLUSIVE` sets on the database while
/// it may hold the SHARED range write-locked (see the module docs).
pub const EXCLUSIVE_MARK: &str = "user.sqlite.exclusive";

/// os_unix.c's PENDING_BYTE (the first byte past 1 GiB).
pub const PENDING_BYTE: u64 = 0x4000_0000;
/// os_unix.c's RESERVED_BYTE.
pub const RESERVED_BYTE: u64 = PENDING_BYTE + 1;
/// First byte of the SHARED range.
pub const SHARED_FIRST: u64 = PENDING_BYTE + 2;
/// Length of the SHARED range.
pub const SHARED_SIZE: u64 = 510;

/// What one handle holds in the lock bytes.
#[derive(Default, Debug, Clone, Copy, PartialEq, Eq)]
pub struct LockBytes {
    shared: bool,
    /// PENDING read-locked: a pinned reader.
    pin: bool,
    reserved: bool,
    /// PENDING write-locked: EXCLUSIVE.
    pending: bool,
    /// The SHARED range write-locked (EXCLUSIVE in `locking_mode=EXCLUSIVE`).
    exclusive: bool,
}

/// Whether the core granted the lock. A refusal (`WouldBlock`: another process holds the
/// byte) and a retryable failure (the store's owner changing hands, say) are `Ok(false)`:
/// the request is busy, and SQLite's busy handler retries it. Any other failure (the owner
/// did not answer within its deadline, a broken store) is the error: retrying it would only
/// wait again.
fn granted(r: Result<()>) -> Result<bool> {
    match r {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == ErrorKind::WouldBlock || e.is_retryable() => Ok(false),
        Err(e) => Err(e),
    }
}

impl LockBytes {
    /// Skips the check a new reader makes (the database carries no [`EXCLUSIVE_MARK`] in the
    /// reader's snapshot).
    pub fn skip_shared_check(&mut self) {
        self.shared = true;
    }

    /// Takes the bytes for `level` (`exclusive_mode`: `locking_mode=EXCLUSIVE`; `pin`: the
    /// handle is a pinned reader) of `file` in `store`. Returns the level reached: short of
    /// `level` when another process holds a conflicting byte.
    pub fn raise(
        &mut self,
        store: &Store,
        file: &File,
        level: Level,
        exclusive_mode: bool,
        pin: bool,
    ) -> Result<Level> {
        if level >= Level::Shared && !self.shared {
            // A check, not a lock: would a read lock of the SHARED range be refused?
            match file.test_lock(false, SHARED_FIRST, SHARED_SIZE) {
                Ok(None) => {}
                Ok(Some(_)) => return Ok(Level::None),
                Err(e) => {
                    granted(Err(e))?; // the error, or a refusal
                    return Ok(Level::None);
                }
            }
            self.shared = true;
        }
        if pin && !self.pin && !self.pending {
            if !granted(file.lock_range(RangeLockKind::Read, PENDING_BYTE, 1, false))? {
                return Ok(Level::None);
            }
            self.pin = true;
        }
        if level >= Level::Reserved && !self.reserved && !exclusive_mode && !pin {
            // PENDING with RESERVED, in one change of the lock records (PENDING_BYTE and
            // RESERVED_BYTE are adjacent): EXCLUSIVE then needs no change of its own. What a
            // PENDING held early keeps out is another process's pinned reader (a read lock on
            // PENDING), which then waits for the whole write transaction instead of its end.
            if granted(file.lock_range(RangeLockKind::Write, PENDING_BYTE, 2, false))? {
                self.reserved = true;
                self.pending = true;
            }
        }
        if level >= Level::Reserved && !self.reserved {
            if !granted(file.lock_range(RangeLockKind::Write, RESERVED_BYTE, 1, false))? {
                return Ok(Level::Shared);
            }
            self.reserved = true;
        }
        if level == Level::Exclusive && !self.pending {
            if !granted(file.lock_range(RangeLockKind::Write, PENDING_BYTE, 1, false))? {
                return Ok(Level::Pending);
            }
            self.pending = true;
        }
        if level == Level::Exclusive && exclusive_mode && !self.exclusive {
            let mark = mark_of(file);
            if !granted(store.setxattr_ino(
                file.ino(),
                EXCLUSIVE_MARK,
                &mark,
                XattrFlags::default(),
            ))? || !granted(file.lock_range(
                RangeLockKind::Write,
                SHARED_FIRST,
                SHARED_SIZE,
                false,
            ))? {
                return Ok(Level::Pending);
            }
            self.exclusive = true;
        }
        Ok(level)
    }

    /// True when this handle holds what an ordinary write transaction holds, RESERVED with
    /// PENDING and no other byte, which [`LockBytes::release_in`] gives back.
    pub fn holds_write_pair(&self) -> bool {
        self.reserved && self.pending && !self.pin && !self.exclusive
    }

    /// Writes the release of RESERVED and PENDING into `tx`, to take effect with its commit
    /// ([`File::unlock_range_in`]: on a client of a shared store, no round trip of its own);
    /// true when it did. Once `tx` committed, [`LockBytes::released`].
    pub fn release_in(&self, file: &File, tx: &Transaction) -> Result<bool> {
        file.unlock_range_in(tx, PENDING_BYTE, 2)
    }

    /// The commit that carried [`LockBytes::release_in`] landed.
    pub fn released(&mut self) {
        self.reserved = false;
        self.pending = false;
    }

    /// Drops to `to` (Shared or None), as os_unix.c's unlock does, in one change of the
    /// lock records where it can (each change is a commit on a shared store).
    pub fn lower(&mut self, store: &Store, file: &File, to: Level) -> Result<()> {
        if to == Level::None {
            // `shared` alone is a check that was made, not a lock held.
            if *self != (LockBytes { shared: self.shared, ..LockBytes::default() }) {
                retry(|| {
                    file.lock_range(RangeLockKind::Unlock, PENDING_BYTE, 2 + SHARED_SIZE, false)
                })?;
            }
            if self.exclusive {
                unmark(store, file);
            }
            *self = LockBytes::default();
            return Ok(());
        }
        if self.exclusive {
            retry(|| file.lock_range(RangeLockKind::Unlock, SHARED_FIRST, SHARED_SIZE, false))?;
            self.exclusive = false;
            unmark(store, file);
        }
        if self.pending && self.reserved && !self.pin {
            // PENDING and RESERVED are adjacent bytes: one release.
            retry(|| file.lock_range(RangeLockKind::Unlock, PENDING_BYTE, 2, false))?;
            self.pending = false;
            self.reserved = false;
        }
        if self.pending {
            let kind = if self.pin { RangeLockKind::Read } else { RangeLockKind::Unlock };
            retry(|| file.lock_range(kind, PENDING_BYTE, 1, false))?;
            self.pending = false;
        }
        if self.reserved {
            retry(|| file.lock_range(RangeLockKind::Unlock, RESERVED_BYTE, 1, false))?;
            self.reserved = false;
        }
        Ok(())
    }
}

/// The identity of `file`'s handle in [`EXCLUSIVE_MARK`]: a random number per process (process
/// ids repeat across the machines of a FoundationDB store), the process id and the handle id.
fn mark_of(file: &File) -> Vec<u8> {
    static PROCESS: OnceLock<u64> = OnceLock::new();
    let nonce = PROCESS.get_or_init(|| {
        use std::hash::{BuildHasher, Hasher};
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u32(std::process::id());
        h.finish()
    });
    format!("{nonce:016x}:{}:{}", std::process::id(), file.handle_id()).into_bytes()
}

/// Removes [`EXCLUSIVE_MARK`] if it is still `file`'s handle's own (after its lock is gone).
/// A failure leaves the mark, which only costs readers their check.
fn unmark(store: &Store, file: &File) {
    let mark = mark_of(file);
    let _ = store.transact(|tx| match tx.getxattr_ino(file.ino(), EXCLUSIVE_MARK) {
        Ok(v) if v == mark => tx.removexattr_ino(file.ino(), EXCLUSIVE_MARK),
        Ok(_) => Ok(()),
        Err(e) if e.kind() == ErrorKind::NoData => Ok(()),
        Err(e) => Err(e),
    });
}

/// Runs a release until the store takes it: a release that failed would leave the lock held
/// (and renewed) while SQLite believes it gone. The store's owner changing hands fails a call
/// for a moment; a few tries cover it.
fn retry(f: impl Fn() -> Result<()>) -> Result<()> {
    let mut last = Ok(());
    for i in 0..50 {
        last = f();
        if last.is_ok() {
            return last;
        }
        std::thread::sleep(std::time::Duration::from_millis(20 * (i + 1).min(10)));
    }
    last
}

#[cfg(test)]
mod tests {
    use super::*;
    use txvfs::{FileSystem, OpenOptions};

    fn marked(store: &Store, file: &File) -> bool {
        store.getxattr_ino(file.ino(), EXCLUSIVE_MARK).is_ok()
    }

    #[test]
    fn the_exclusive_mark_is_there_while_the_shared_range_is_write_locked() {
        // Two handles stand for two processes: the core's range locks exclude handles.
        let store = super::super::open_store(Some("memory:")).unwrap().store.clone();
        let o = OpenOptions::new().read(true).write(true).create(true);
        let (fa, fb) = (store.open("/m.db", &o).unwrap(), store.open("/m.db", &o).unwrap());
        let (mut a, mut b) = (LockBytes::default(), LockBytes::default());
        assert!(!marked(&store, &fa), "no mark before any exclusive connection");
        assert_eq!(a.raise(&store, &fa, Level::Exclusive, true, false).unwrap(), Level::Exclusive);
        assert!(marked(&store, &fa), "a reader must check the lock records");
        assert_eq!(b.raise(&store, &fb, Level::Shared, false, false).unwrap(), Level::None);
        a.lower(&store, &fa, Level::Shared).unwrap();
        assert!(!marked(&store, &fa), "gone with the lock: readers skip the check");
        assert_eq!(b.raise(&store, &fb, Level::Shared, false, false).unwrap(), Level::Shared);
        b.lower(&store, &fb, Level::None).unwrap();
        // A mark that is not a's own (left by a process that died, say) is left alone.
        assert_eq!(a.raise(&store, &fa, Level::Exclusive, true, false).unwrap(), Level::Exclusive);
        store.setxattr_ino(fa.ino(), EXCLUSIVE_MARK, b"another", XattrFlags::default()).unwrap();
        a.lower(&store, &fa, Level::None).unwrap();
        assert!(marked(&store, &fa));
        assert_eq!(a.raise(&store, &fa, Level::Exclusive, true, false).unwrap(), Level::Exclusive);
        a.lower(&store, &fa, Level::None).unwrap();
        assert!(!marked(&store, &fa), "the next holder to leave takes it away");
    }
}
