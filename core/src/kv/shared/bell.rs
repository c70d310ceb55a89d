//! The store's bell: how a process that committed a change feed record wakes the waiting
//! watchers of the other processes at once, instead of their polling.
//!
//! The bell is two 32-bit words in shared memory, mapped by every process of the store: a ring
//! count and the number of sleepers. It is a memfd the owner creates, sealed so that it can
//! never shrink or grow (a mapping of it never faults, as one of a file in the store directory
//! would, in every process, once any process of the store's user truncated it), and hands to
//! each client with its hello reply; each owner has its own, and a client that finds a new
//! owner wakes what it armed on the old one, to arm it again on the new (`mod.rs`). The bell
//! carries no data, only wake-ups: a process that scribbles on it can at worst wake waiters
//! for nothing, or leave them to their next safety look, never make them miss a record. After a commit that wrote a
//! versionstamped key, the committing process (owner or client) adds 1 to the count and, when
//! anybody sleeps, wakes them with `FUTEX_WAKE` (a futex in a shared file mapping works
//! between processes). Each process that has wake-ups armed has one thread sleeping on the
//! count (`FUTEX_WAIT`, at most [`NAP`] at a time); when the count moves it calls them all.
//!
//! A wake-up is registered before its caller's position is checked against the store (one
//! range read), so a commit after that read rings after the registration: nothing is missed.
//! A process killed between its commit and its ring leaves the waiters to their next look
//! (the watcher's safety recheck) or the next ring.

use super::area;
use crate::error::Result;
use crate::kv::{Backend, Wakeup};
use parking_lot::{Condvar, Mutex};
use std::collections::BTreeMap;
use std::os::fd::OwnedFd;
use std::os::unix::io::AsRawFd;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

/// Bytes of the bell's memory.
const SIZE: usize = 8;

/// The longest sleep of the bell thread before it checks whether it is still needed.
const NAP: Duration = Duration::from_secs(1);

type Wake = Box<dyn FnOnce() + Send>;
/// Armed wake-ups by number, each with the ring count when it was armed.
type Table = BTreeMap<u64, (Wake, u32)>;

/// One process's end of a store's bell.
pub(super) struct Bell {
    /// The two words of the shared mapping: the ring count, then the number of sleepers.
    words: *const [AtomicU32; 2],
    /// Armed wake-ups, and the next number.
    armed: Mutex<(Table, u64)>,
    /// The thread sleeps here while nothing is armed.
    idle: Condvar,
    /// Whether the thread runs.
    thread: Mutex<bool>,
}

// SAFETY: the mapping is only used through atomics, and lives as long as the Bell.
unsafe impl Send for Bell {}
// SAFETY: as above.
unsafe impl Sync for Bell {}

impl Drop for Bell {
    fn drop(&mut self) {
        // SAFETY: the mapping of `map`, unmapped once.
        unsafe { libc::munmap(self.words as *mut libc::c_void, SIZE) };
    }
}

fn futex(word: &AtomicU32, op: libc::c_int, val: u32, timeout: Option<Duration>) {
    let ts = timeout.map(|t| libc::timespec {
        tv_sec: t.as_secs() as libc::time_t,
        tv_nsec: t.subsec_nanos() as libc::c_long,
    });
    let tsp = ts.as_ref().map_or(std::ptr::null(), |t| t as *const libc::timespec);
    // SAFETY: `word` is a live, aligned u32 (in a shared mapping: no FUTEX_PRIVATE_FLAG).
    unsafe {
        libc::syscall(libc::SYS_futex, word.as_ptr(), op, val, tsp, std::ptr::null::<u32>(), 0)
    };
}

impl Bell {
    /// A new bell (the owner's), and its descriptor to hand to clients.
    pub(super) fn create() -> std::io::Result<(Arc<Bell>, OwnedFd)> {
        let fd = area::sealed_memfd(c"txvfs-bell", SIZE)?;
        // SAFETY: a system call on a descriptor owned here.
        if unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_ADD_SEALS, libc::F_SEAL_SEAL) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok((Bell::map(&fd)?, fd))
    }

    /// Maps a bell the owner handed over: only a memfd of its size that cannot shrink.
    pub(super) fn adopt(fd: &OwnedFd) -> std::io::Result<Arc<Bell>> {
        area::check_sealed(fd, SIZE, libc::F_SEAL_GROW)?;
        Bell::map(fd)
    }

    fn map(fd: &OwnedFd) -> std::io::Result<Arc<Bell>> {
        let p = area::map_shared(fd, SIZE, true)?;
        Ok(Arc::new(Bell {
            words: p as *const [AtomicU32; 2],
            armed: Mutex::new((BTreeMap::new(), 1)),
            idle: Condvar::new(),
            thread: Mutex::new(false),
        }))
    }

    /// Runs every wake-up armed here now (this bell is no longer the store's: their waiters
    /// look, and arm again on the new owner's bell).
    pub(super) fn wake_all(&self) {
        let due: Vec<Wake> =
            std::mem::take(&mut self.armed.lock().0).into_values().map(|(w, _)| w).collect();
        due.into_iter().for_each(|wake| wake());
    }

    fn words(&self) -> &[AtomicU32; 2] {
        // SAFETY: mapped for as long as `self` lives.
        unsafe { &*self.words }
    }

    /// Rings: wakes the sleepers of every process (a commit wrote a record).
    pub(super) fn ring(&self) {
        let [count, sleepers] = self.words();
        count.fetch_add(1, Ordering::SeqCst);
        if sleepers.load(Ordering::SeqCst) > 0 {
            futex(count, libc::FUTEX_WAKE, i32::MAX as u32, None);
        }
    }

    /// [`Backend::wake_on_stamped`] for a shared RocksDB store: registers `wake`, then runs it
    /// at once if `backend` already has a key under `prefix` after `after`.
    pub(super) fn arm(
        self: &Arc<Bell>,
        backend: &dyn Backend,
        prefix: &[u8],
        after: &[u8],
        wake: Wake,
    ) -> Result<Option<Wakeup>> {
        let id = {
            let mut armed = self.armed.lock();
            let id = armed.1;
            armed.1 += 1;
            // Any ring from now on concerns a commit the check below may not have seen.
            armed.0.insert(id, (wake, self.words()[0].load(Ordering::SeqCst)));
            id
        };
        self.start();
        let armed = Armed { bell: self.clone(), id };
        let start = [prefix, after, &[0]].concat();
        let end = [prefix, &[0xff; 11]].concat();
        if !backend.begin()?.snapshot_get_range(&start, &end, 1, false)?.is_empty() {
            let wake = self.armed.lock().0.remove(&id);
            if let Some((wake, _)) = wake {
                wake();
            }
        }
        Ok(Some(Box::new(armed)))
    }

    /// Starts this process's bell thread if it is not running.
    fn start(self: &Arc<Bell>) {
        let mut running = self.thread.lock();
        if *running {
            self.idle.notify_all();
            return;
        }
        let weak = Arc::downgrade(self);
        let spawned =
            std::thread::Builder::new().name("txvfs-bell".into()).spawn(move || listen(weak));
        *running = spawned.is_ok();
    }
}

/// The bell thread: calls the armed wake-ups whose ring count has moved since they were
/// armed, and sleeps on the count while others wait; ends when the bell is gone.
fn listen(weak: Weak<Bell>) {
    loop {
        let Some(bell) = weak.upgrade() else { return };
        let [count, sleepers] = bell.words();
        let now = count.load(Ordering::SeqCst);
        let due: Vec<Wake> = {
            let mut armed = bell.armed.lock();
            if armed.0.is_empty() {
                bell.idle.wait_for(&mut armed, NAP);
                continue;
            }
            let ids: Vec<u64> =
                armed.0.iter().filter(|(_, (_, at))| *at != now).map(|(id, _)| *id).collect();
            ids.iter().filter_map(|id| armed.0.remove(id)).map(|(wake, _)| wake).collect()
        };
        if !due.is_empty() {
            due.into_iter().for_each(|wake| wake());
            continue;
        }
        sleepers.fetch_add(1, Ordering::SeqCst);
        if count.load(Ordering::SeqCst) == now {
            futex(count, libc::FUTEX_WAIT, now, Some(NAP));
        }
        sleepers.fetch_sub(1, Ordering::SeqCst);
    }
}

/// An armed wake-up: dropping it forgets it.
struct Armed {
    bell: Arc<Bell>,
    id: u64,
}

impl Drop for Armed {
    fn drop(&mut self) {
        self.bell.armed.lock().0.remove(&self.id);
    }
}
