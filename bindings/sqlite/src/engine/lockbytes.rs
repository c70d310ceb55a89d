//! SQLite's lock levels between processes: byte-range locks on the database file at the bytes
//! os_unix.c uses (PENDING, RESERVED, and the SHARED range), taken through the core's
//! per-handle range locks, which on a store shared by several processes are leased lock records
//! that every process checks. The in-process table ([`super::locks`]) decides first; these
//! bytes then make the same levels exclude the handles of other processes.

use super::locks::Level;
use txvfs::{File, RangeLockKind, Result};

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
    reserved: bool,
    pending: bool,
    exclusive: bool,
}

/// The level an in-process holder should fall back to when the lock bytes stop short.
fn level_of(b: &LockBytes) -> Level {
    if b.exclusive {
        Level::Exclusive
    } else if b.pending {
        Level::Pending
    } else if b.reserved {
        Level::Reserved
    } else if b.shared {
        Level::Shared
    } else {
        Level::None
    }
}

/// True when the core granted the lock. A refusal (`WouldBlock`: another process holds the
/// byte) and any other failure (the store's owner changing hands, say) both make the request
/// busy, so SQLite's busy handler retries it.
fn granted(r: Result<()>) -> bool {
    r.is_ok()
}

impl LockBytes {
    /// Takes the bytes for `level` (with `reserved`/`pending` as the in-process holder holds
    /// them). Returns the level actually reached: short of `level` when another process holds
    /// a conflicting byte.
    pub fn raise(&mut self, file: &File, level: Level, reserved: bool, pending: bool) -> Level {
        if level >= Level::Shared && !self.shared {
            // A writer waiting for EXCLUSIVE holds PENDING: no new readers (os_unix.c takes a
            // read lock on it for the moment; a test is enough, the writer then finds our
            // SHARED byte and waits).
            let pending_held = !matches!(file.test_lock(false, PENDING_BYTE, 1), Ok(None));
            if pending_held
                || !granted(file.lock_range(RangeLockKind::Read, SHARED_FIRST, SHARED_SIZE, false))
            {
                return level_of(self);
            }
            self.shared = true;
        }
        if reserved && !self.reserved {
            if !granted(file.lock_range(RangeLockKind::Write, RESERVED_BYTE, 1, false)) {
                return level_of(self);
            }
            self.reserved = true;
        }
        if pending && !self.pending {
            if !granted(file.lock_range(RangeLockKind::Write, PENDING_BYTE, 1, false)) {
                return level_of(self);
            }
            self.pending = true;
        }
        if level == Level::Exclusive && !self.exclusive {
            if !granted(file.lock_range(RangeLockKind::Write, SHARED_FIRST, SHARED_SIZE, false)) {
                return level_of(self);
            }
            self.exclusive = true;
        }
        level_of(self)
    }

    /// Drops to `to` (Shared or None), as os_unix.c's unlock does.
    pub fn lower(&mut self, file: &File, to: Level) -> Result<()> {
        if to == Level::None {
            if *self != LockBytes::default() {
                retry(|| {
                    file.lock_range(RangeLockKind::Unlock, PENDING_BYTE, 2 + SHARED_SIZE, false)
                })?;
            }
            *self = LockBytes::default();
            return Ok(());
        }
        if self.exclusive {
            retry(|| file.lock_range(RangeLockKind::Read, SHARED_FIRST, SHARED_SIZE, false))?;
            self.exclusive = false;
        }
        if self.pending || self.reserved {
            retry(|| file.lock_range(RangeLockKind::Unlock, PENDING_BYTE, 2, false))?;
            self.pending = false;
            self.reserved = false;
        }
        Ok(())
    }
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
