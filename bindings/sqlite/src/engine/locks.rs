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
}

#[derive(Default)]
struct LockState {
    shared: u32,
    reserved: bool,
    pending: bool,
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
pub struct Holder {
    lock: Arc<FileLock>,
    level: Level,
    holds_reserved: bool,
    holds_pending: bool,
}

impl Holder {
    /// A handle on `lock` that holds nothing yet.
    pub fn new(lock: Arc<FileLock>) -> Holder {
        Holder { lock, level: Level::None, holds_reserved: false, holds_pending: false }
    }

    /// The level this handle holds.
    pub fn level(&self) -> Level {
        self.level
    }

    /// xLock.
    pub fn lock(&mut self, want: Level) -> LockResult {
        if self.level >= want {
            return LockResult::Ok;
        }
        let mut st = self.lock.state.lock();
        match want {
            Level::None => LockResult::Ok,
            Level::Shared => {
                if st.pending || st.exclusive {
                    return LockResult::Busy;
                }
                st.shared += 1;
                self.level = Level::Shared;
                LockResult::Ok
            }
            Level::Reserved => {
                if st.reserved || st.pending || st.exclusive {
                    return LockResult::Busy;
                }
                st.reserved = true;
                self.holds_reserved = true;
                self.level = Level::Reserved;
                LockResult::Ok
            }
            Level::Pending | Level::Exclusive => {
                if !self.holds_pending {
                    if st.pending || st.exclusive || (st.reserved && !self.holds_reserved) {
                        return LockResult::Busy;
                    }
                    st.pending = true;
                    self.holds_pending = true;
                    self.level = Level::Pending;
                }
                if want == Level::Pending {
                    return LockResult::Ok;
                }
                if st.shared > 1 {
                    return LockResult::Busy;
                }
                st.exclusive = true;
                self.level = Level::Exclusive;
                LockResult::Ok
            }
        }
    }

    /// xUnlock to `to` (Shared or None).
    pub fn unlock(&mut self, to: Level) {
        if self.level <= to {
            return;
        }
        let mut st = self.lock.state.lock();
        if self.level == Level::Exclusive {
            st.exclusive = false;
        }
        if self.holds_pending {
            st.pending = false;
            self.holds_pending = false;
        }
        if self.holds_reserved {
            st.reserved = false;
            self.holds_reserved = false;
        }
        if to == Level::None {
            st.shared = st.shared.saturating_sub(1);
        }
        self.level = to;
    }

    /// True when this handle holds RESERVED.
    pub fn holds_reserved(&self) -> bool {
        self.holds_reserved
    }

    /// True when this handle holds PENDING (on its way to EXCLUSIVE).
    pub fn holds_pending(&self) -> bool {
        self.holds_pending
    }

    /// Undoes part of an upgrade this handle was just granted, back to `to` (another process
    /// holds a lock byte it needs): gives up what `to` does not include.
    pub fn fall_back(&mut self, to: Level) {
        if self.level <= to {
            return;
        }
        let mut st = self.lock.state.lock();
        if self.level == Level::Exclusive {
            st.exclusive = false;
        }
        if self.holds_pending && to < Level::Pending {
            st.pending = false;
            self.holds_pending = false;
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
        let st = self.lock.state.lock();
        st.reserved || st.pending || st.exclusive
    }
}

impl Drop for Holder {
    fn drop(&mut self) {
        self.unlock(Level::None);
    }
}
