//! SQLite's five lock levels between the handles of one process. A lock belongs to a file's
//! identity in the store (store identity, inode number), never to a spelling of its path: every
//! name of a database (`/x.db`, `/./x.db`, a symlink, a hard link) shares one lock state.

use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::{Arc, OnceLock, Weak};

/// SQLite's lock levels.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    /// No lock.
    None = 0,
    /// Reading.
    Shared = 1,
    /// Intends to write; readers may still come and go.
    Reserved = 2,
    /// Waits for readers to leave; no new readers.
    Pending = 3,
    /// Writing.
    Exclusive = 4,
}

impl Level {
    /// From SQLite's integer.
    pub fn from_int(n: i32) -> Level {
        match n {
            0 => Level::None,
            1 => Level::Shared,
            2 => Level::Reserved,
            3 => Level::Pending,
            _ => Level::Exclusive,
        }
    }
}

/// Outcome of a lock request.
#[derive(Debug, PartialEq, Eq)]
pub enum LockResult {
    /// Granted.
    Ok,
    /// Held by another handle: SQLite's busy handler retries.
    Busy,
    /// A write lock refused to a reader whose snapshot is older than the last commit: its
    /// transaction must end (and start again) before it may write (`SQLITE_BUSY_SNAPSHOT`).
    BusySnapshot,
    /// Not a refusal but a failure (the store's owner did not answer within its deadline):
    /// `SQLITE_IOERR_LOCK`, which ends the statement instead of running the busy handler.
    Failed(txvfs::Error),
}

#[derive(Default)]
struct LockState {
    shared: u32,
    /// A writer holds RESERVED or more: writers exclude each other.
    reserved: bool,
    /// A writer in `locking_mode=EXCLUSIVE` holds PENDING or EXCLUSIVE: it keeps its lock
    /// (and its cache) across transactions, as on the unix VFS, so no new reader may start.
    blocking: bool,
    /// Handles in `locking_mode=EXCLUSIVE` holding SHARED or more ("pinned" readers): they
    /// keep their snapshot and cache across transactions, so no other writer may commit.
    pinned: u32,
    /// A handle holds EXCLUSIVE (a pinned reader waits).
    exclusive: bool,
}

/// The lock state of one file, shared by every handle on it in this process.
#[derive(Default)]
pub struct FileLock {
    state: Mutex<LockState>,
}

type FileKey = (String, u64);

fn file_locks() -> &'static Mutex<HashMap<FileKey, Weak<FileLock>>> {
    static S: OnceLock<Mutex<HashMap<FileKey, Weak<FileLock>>>> = OnceLock::new();
    S.get_or_init(Default::default)
}

/// The lock state of inode `ino` of store `store_id`.
pub fn file_lock(store_id: &str, ino: u64) -> Arc<FileLock> {
    let mut map = file_locks().lock();
    map.retain(|_, w| w.strong_count() > 0);
    let key = (store_id.to_string(), ino);
    if let Some(l) = map.get(&key).and_then(Weak::upgrade) {
        return l;
    }
    let l = Arc::new(FileLock::default());
    map.insert(key, Arc::downgrade(&l));
    l
}

/// One handle's hold on a [`FileLock`].
///
/// Readers hold snapshots (see [`super::snapshot`]), so SHARED excludes nothing and nothing
/// excludes SHARED: a writer takes PENDING and EXCLUSIVE while readers read, and new readers
/// start while it commits. Writers exclude each other (RESERVED). The one exception is a
/// handle in `locking_mode=EXCLUSIVE` ([`Holder::set_exclusive_mode`]): SQLite then keeps its
/// lock and cache across transactions and stops updating the change counter readers check,
/// so its EXCLUSIVE waits for this process's readers and keeps new ones out (readers of other
/// processes only check for it: see [`super::lockbytes`]), and its SHARED keeps other writers
/// from EXCLUSIVE (it never takes a new snapshot while it keeps SHARED), as on the unix VFS.
pub struct Holder {
    lock: Arc<FileLock>,
    level: Level,
    holds_reserved: bool,
    holds_blocking: bool,
    holds_pin: bool,
    exclusive_mode: bool,
}

impl Holder {
    /// A handle on `lock` that holds nothing yet.
    pub fn new(lock: Arc<FileLock>) -> Holder {
        Holder {
            lock,
            level: Level::None,
            holds_reserved: false,
            holds_blocking: false,
            holds_pin: false,
            exclusive_mode: false,
        }
    }

    /// The level this handle holds.
    pub fn level(&self) -> Level {
        self.level
    }

    /// `PRAGMA locking_mode=EXCLUSIVE` (true) or `NORMAL` (false) on this handle's connection.
    pub fn set_exclusive_mode(&mut self, on: bool) {
        self.exclusive_mode = on;
    }

    /// True in `locking_mode=EXCLUSIVE`.
    pub fn exclusive_mode(&self) -> bool {
        self.exclusive_mode
    }

    /// xLock.
    pub fn lock(&mut self, want: Level) -> LockResult {
        if self.level >= want {
            return LockResult::Ok;
        }
        let mut st = self.lock.state.lock();
        if self.level == Level::None && want >= Level::Shared {
            if st.blocking || (self.exclusive_mode && st.exclusive) {
                return LockResult::Busy;
            }
            if self.exclusive_mode {
                st.pinned += 1;
                self.holds_pin = true;
            }
            st.shared += 1;
            self.level = Level::Shared;
        }
        if want >= Level::Reserved && !self.holds_reserved {
            if st.reserved {
                return LockResult::Busy;
            }
            st.reserved = true;
            self.holds_reserved = true;
            self.level = Level::Reserved;
        }
        if want >= Level::Pending && self.level < Level::Pending {
            if self.exclusive_mode {
                st.blocking = true;
                self.holds_blocking = true;
            }
            self.level = Level::Pending;
        }
        if want == Level::Exclusive {
            let pinned_by_others = st.pinned - self.holds_pin as u32;
            if pinned_by_others > 0 || (self.exclusive_mode && st.shared > 1) {
                return LockResult::Busy;
            }
            st.exclusive = true;
            self.level = Level::Exclusive;
        }
        LockResult::Ok
    }

    /// xUnlock to `to` (Shared or None).
    pub fn unlock(&mut self, to: Level) {
        self.fall_back(to)
    }

    /// True when this handle holds RESERVED.
    pub fn holds_reserved(&self) -> bool {
        self.holds_reserved
    }

    /// True when this handle is a pinned reader (SHARED in `locking_mode=EXCLUSIVE`).
    pub fn holds_pin(&self) -> bool {
        self.holds_pin
    }

    /// Gives up what level `to` does not include (xUnlock, or part of an upgrade this handle
    /// was just granted when another process holds a lock byte it needs).
    pub fn fall_back(&mut self, to: Level) {
        if self.level <= to {
            return;
        }
        let mut st = self.lock.state.lock();
        if self.level == Level::Exclusive {
            st.exclusive = false;
        }
        if self.holds_pin && to == Level::None {
            st.pinned -= 1;
            self.holds_pin = false;
        }
        if self.holds_blocking && to < Level::Pending {
            st.blocking = false;
            self.holds_blocking = false;
        }
        if self.holds_reserved && to < Level::Reserved {
            st.reserved = false;
            self.holds_reserved = false;
        }
        if to == Level::None {
            st.shared = st.shared.saturating_sub(1);
        }
        self.level = to;
    }

    /// xCheckReservedLock: does any handle hold RESERVED or more?
    pub fn reserved_by_anyone(&self) -> bool {
        self.lock.state.lock().reserved
    }
}

impl Drop for Holder {
    fn drop(&mut self) {
        self.unlock(Level::None);
    }
}
