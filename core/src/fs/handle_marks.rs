//! Open handles of other processes, on a backend that several processes share.
//!
//! POSIX keeps an unlinked file readable through every handle open on it. Within one process
//! the open-file table (`open_files.rs`) knows the handles; across processes the store must:
//! a process records that it has a file open with a mark `H ino process`, written in the same
//! transaction as the open (so an unlink in another process, which reads the file's marks in
//! its own transaction, either sees the mark or conflicts with the open). The mark outlives
//! the last close by one or two rounds of the liveness thread ([`LEASE`] / 3 each), so that
//! opening the file again within that time writes (and commits) nothing: a read-only open
//! and close cost no commit then. The liveness thread clears idle marks; the last close of a
//! file that is an orphan clears its mark at once. Only handles opened outside an explicit
//! transaction use marks: a transaction's handles read at its snapshot, and its commit (or a
//! renewal of a long transaction) fails with a conflict if the file changed meanwhile, so
//! they never read freed data. A mark counts only while its process is alive: each process keeps a liveness
//! record `P process` with an expiry that a thread renews every third of [`LEASE`]; a process
//! that dies stops renewing, and its marks lapse.
//!
//! Who writes marks and who may free an orphan's data depends on the backend's
//! [`primary`](crate::kv::Backend::primary):
//! - a store used by one process alone, or this process is the shared store's primary: no
//!   marks of its own (its handles are in its open-file table); frees data when neither its
//!   own handles nor live marks of others hold the file;
//! - a secondary of a primary elsewhere: writes marks, and never frees an unlinked file's data
//!   itself (it cannot see the primary's handles); it leaves an orphan record, which the
//!   primary reaps within one renewal period once nobody has the file open;
//! - no primary at all (FoundationDB): every process writes marks; any may free.

use super::ops::Operation;
use super::state::StoreState;
use crate::error::Result;
use crate::kv::Role;
use crate::schema;
use std::sync::{Arc, Weak};
use std::time::Duration;

/// How long a process's marks outlive its last renewal.
pub const LEASE: Duration = Duration::from_secs(10);

use crate::clock::now_ms;

impl StoreState {
    /// True when this process must mark the files it opens (a secondary, or no primary).
    pub(crate) fn marks_handles(&self) -> bool {
        !self.backend.role().is_primary()
    }

    /// True when this process may free an unlinked file's data (not a secondary).
    pub(crate) fn may_free(&self) -> bool {
        self.backend.role() != Role::Secondary
    }

    /// Writes or renews this process's liveness record (on shared backends that cannot tell
    /// liveness themselves). A record found lapsed (this process stopped for longer than the
    /// lease) may have had its marks deleted by others meanwhile: they are written again.
    pub(crate) fn renew_liveness(&self) -> Result<()> {
        if !self.backend.role().is_shared() || self.backend.process_alive(self.process).is_some() {
            return Ok(());
        }
        let key = schema::process_key(self.process);
        let now = now_ms();
        let until = (now + LEASE.as_millis() as u64).to_le_bytes();
        self.kv_transact(
            |tx| {
                if crate::kv::decode_counter(tx.get(&key)?.as_deref()) <= now {
                    for ino in self.open_files.marked() {
                        tx.set(&schema::handle_key(ino, self.process), &[])?;
                    }
                }
                tx.set(&key, &until)
            },
            false,
        )
    }

    /// Clears this process's open marks that no handle has used for a round or more (see
    /// [`OpenFiles::clear_idle_marks`](super::open_files::OpenFiles::clear_idle_marks)).
    pub(crate) fn clear_idle_marks(&self) -> Result<()> {
        self.open_files.clear_idle_marks(|inos| {
            self.kv_transact(
                |tx| {
                    for &ino in inos {
                        tx.clear(&schema::handle_key(ino, self.process))?;
                    }
                    Ok(())
                },
                false,
            )
        })
    }

    /// Starts the thread that renews this process's liveness and, where this process may
    /// free data, reaps orphans that no handle holds any more (closed in other processes, or
    /// held by processes that died). It stops when the store is closed.
    pub(crate) fn start_liveness(self: &Arc<Self>) {
        if !self.backend.role().is_shared() {
            return;
        }
        let weak: Weak<StoreState> = Arc::downgrade(self);
        let _ = std::thread::Builder::new().name("txvfs-liveness".into()).spawn(move || loop {
            std::thread::sleep(LEASE / 3);
            let Some(state) = weak.upgrade() else { return };
            let _ = state.renew_liveness();
            let _ = state.clear_idle_marks();
            if state.may_free() && !state.read_only {
                let _ = state.reap_orphans();
                let _ = state.clear_dead_processes();
                let _ = state.collect_dead_stages();
            }
        });
    }

    /// Deletes the liveness records that have expired (their processes died).
    fn clear_dead_processes(&self) -> Result<()> {
        let (s, e) = schema::process_range();
        let now = now_ms();
        self.kv_transact(
            |tx| {
                for (k, v) in tx.get_range(&s, &e, 1000, false)? {
                    if crate::kv::decode_counter(Some(&v)) <= now {
                        tx.clear(&k)?;
                    }
                }
                Ok(())
            },
            false,
        )
    }
}

impl Operation<'_> {
    /// Marks `ino` as open in this process (see the module docs), inside the open's
    /// transaction. Bookkeeping, not a change of the file: allowed on read-only opens.
    pub(crate) fn mark_open(&mut self, ino: u64) -> Result<()> {
        self.tx.set(&schema::handle_key(ino, self.inner.process), &[])
    }

    /// Clears this process's mark of `ino`.
    pub(crate) fn unmark_open(&mut self, ino: u64) -> Result<()> {
        self.tx.clear(&schema::handle_key(ino, self.inner.process))
    }

    /// True when a live process other than this one has `ino` open, or may have it open
    /// without a mark (this process is a secondary: the primary's handles are invisible here).
    /// Reads the marks with a conflict range, so an open committing meanwhile conflicts.
    /// Marks of dead processes are deleted on the way.
    pub(crate) fn open_elsewhere(&mut self, ino: u64) -> Result<bool> {
        if !self.inner.backend.role().is_shared() {
            return Ok(false);
        }
        if !self.inner.may_free() {
            return Ok(true);
        }
        let (s, e) = schema::handle_range(ino);
        if self.inner.backend.alone() {
            // No other process uses the store, so no live process has a mark to read (this
            // saves a range read per unlink). The range still enters the read-conflict set: a
            // process that connects and opens the file before this commits makes it conflict.
            return self.tx.add_read_conflict_range(&s, &e).map(|_| false);
        }
        let now = now_ms();
        let mut open = false;
        for (k, _) in self.tx.get_range(&s, &e, 0, false)? {
            let process = schema::handle_process(&k)?;
            if process == self.inner.process {
                continue;
            }
            let alive = match self.inner.backend.process_alive(process) {
                Some(known) => known,
                None => {
                    crate::kv::decode_counter(
                        self.tx.get(&schema::process_key(process))?.as_deref(),
                    ) > now
                }
            };
            if alive {
                open = true;
            } else if !self.read_only {
                self.tx.clear(&k)?;
            }
        }
        Ok(open)
    }
}
