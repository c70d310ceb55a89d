//! An open main database file: reads through its uncommitted writes, SQLite's locks, and the
//! rule that decides what reaches the store. Inside an SQLite write transaction (RESERVED or
//! more) writes commit only at SQLite's commit point; whatever SQLite did not commit (a
//! rollback, a failed rollback, an error) is dropped when the lock is released. Writes made
//! without a lock (a shim, a tool, `nolock=1`) commit at xSync, and at the latest at xClose.
//!
//! Under SHARED (a read transaction) the handle reads a [`Snapshot`]; under a write lock it
//! reads the committed file (the same bytes: no other writer can have committed since, see
//! [`Db::lock`]). After its own commit it reads a snapshot of exactly that commit's state:
//! on a client of a shared store the commit releases the write locks itself and hands back a
//! transaction pinned at its version ([`commit::commit_releasing`]: one round trip for both);
//! elsewhere the handle takes the snapshot before it lets other writers in.

use super::commit::{self, Group, Member, MemberRef};
use super::lends::Lends;
use super::lockbytes::{LockBytes, RESERVED_BYTE};
use super::locks::{file_lock, Holder, Level, LockResult};
use super::overlay::Overlay;
use super::snapshot::Snapshot;
use super::stats;
use super::stores::{remember_name, StoreRef};
use parking_lot::Mutex;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use txvfs::{Error, ErrorKind, File, FileSystem, OpenOptions, Result};

/// An open main database file.
pub struct Db {
    store: StoreRef,
    path: String,
    /// Handle on the store: reads of committed data.
    file: File,
    locks: Holder,
    /// The same levels between processes (bytes locked in the store).
    bytes: LockBytes,
    member: MemberRef,
    /// Overlay as it was at SQLITE_FCNTL_BEGIN_ATOMIC_WRITE, while a batch is open.
    batch: Option<Overlay>,
    /// What a read transaction reads (under SHARED).
    snap: Option<Snapshot>,
    /// Set by a commit that released the write locks with it, until SQLite unlocks: `snap`
    /// holds the commit's state, read from then on.
    released: bool,
    /// Why there is no snapshot of this handle's last commit (it released the write locks,
    /// and the store's owner changed and another writer committed before one was had): its
    /// read transaction is over, every read fails with it (`SQLITE_BUSY_SNAPSHOT`), as for a
    /// snapshot lost with the owner (`with_snapshot_renewal`), until SQLite unlocks.
    lost: Option<Error>,
    /// This connection set `journal_mode=OFF` (answered by the VFS: [`super::wal`]).
    journal_off: bool,
    /// Pages lent to SQLite (xFetch) and not given back yet, and SQLite's mmap limit.
    lends: Lends,
}

impl Db {
    /// Opens the database `path` (canonical) in `store` (creating it, and its parent
    /// directories, when `create`), joining commit group `group` if given.
    pub fn open(
        store: StoreRef,
        path: &str,
        create: bool,
        read_only: bool,
        group: Option<&str>,
    ) -> Result<Db> {
        if create && !read_only {
            if let Some(i) = path.rfind('/') {
                if i > 0 {
                    store.store.mkdir_all(&path[..i], 0o755)?;
                }
            }
        }
        let opts = OpenOptions::new().read(true).write(!read_only).create(create && !read_only);
        let file = store.store.open(path, &opts)?;
        let ino = file.stat()?.ino;
        let locks = Holder::new(file_lock(&store.id, ino));
        remember_name(path, &store);
        let member = Arc::new(Mutex::new(Member::new(store.clone(), path)));
        let mut db = Db {
            store,
            path: path.to_string(),
            file,
            locks,
            bytes: LockBytes::default(),
            member,
            batch: None,
            snap: None,
            released: false,
            lost: None,
            journal_off: false,
            lends: Lends::default(),
        };
        if let Some(g) = group {
            db.join_group(g)?;
        }
        Ok(db)
    }

    /// The canonical store path.
    pub fn path(&self) -> &str {
        &self.path
    }

    /// The store the database is in.
    pub fn store(&self) -> &StoreRef {
        &self.store
    }

    /// Puts this database in commit group `name` (an empty name leaves its group).
    pub fn join_group(&mut self, name: &str) -> Result<()> {
        let old = self.member.lock().group.take();
        if let Some(g) = old {
            g.leave(&self.member);
        }
        if !name.is_empty() {
            let g = Group::join(&self.store.id, name, &self.member);
            self.member.lock().group = Some(g);
        }
        Ok(())
    }

    /// The commit group's name, if any.
    pub fn group_name(&self) -> Option<String> {
        self.member.lock().group.as_ref().map(|g| g.name.clone())
    }

    /// True when the file commits a batch (SQLITE_FCNTL_BEGIN/COMMIT_ATOMIC_WRITE) atomically
    /// on its own: not in a commit group, whose members commit together at phase two.
    pub fn batch_capable(&self) -> bool {
        self.member.lock().group.is_none()
    }

    /// `PRAGMA journal_mode[=value]`: the answer when the VFS gives it, None when SQLite's pager
    /// handles it ([`super::wal::journal_mode`]).
    pub fn journal_mode(&mut self, value: Option<&str>) -> Result<Option<&'static str>> {
        super::wal::journal_mode(&self.store.store, &self.path, &mut self.journal_off, value)
    }

    /// `PRAGMA synchronous=OFF` (true) or another level (false).
    pub fn set_sync_off(&self, off: bool) {
        self.member.lock().sync_off = off;
    }

    /// The file reads come from: the snapshot under SHARED (or once a commit released the
    /// write locks), else the committed file.
    fn source(&self) -> &File {
        match &self.snap {
            Some(s) if self.reading_snapshot() => s.file(),
            _ => &self.file,
        }
    }

    /// True while reads come from the snapshot.
    fn reading_snapshot(&self) -> bool {
        self.snap.is_some() && (self.locks.level() == Level::Shared || self.released)
    }

    /// Runs `f` (a read); when it fails because the snapshot's transaction was lost (a
    /// retryable error: the process serving a shared store died), takes the snapshot again
    /// if the file has not changed since and runs `f` once more. A snapshot that cannot be
    /// had again ends the read transaction: the error is a retryable conflict, which the VFS
    /// answers with `SQLITE_BUSY_SNAPSHOT`, and every later read of the transaction fails
    /// the same way.
    fn with_snapshot_renewal<R>(&mut self, mut f: impl FnMut(&Self) -> Result<R>) -> Result<R> {
        if let Some(e) = &self.lost {
            return Err(e.clone());
        }
        match f(self) {
            Err(e) if e.is_retryable() && self.reading_snapshot() => {
                let renewed = match &self.snap {
                    Some(s) => s.renew(&self.store.store, &self.path)?,
                    None => None,
                };
                let Some(s) = renewed else {
                    return Err(Error::new(
                        ErrorKind::Conflict,
                        format!(
                            "{}: the read transaction's snapshot was lost ({e}) and the database \
                             changed since: end the transaction and run it again",
                            self.path
                        ),
                    ));
                };
                self.snap = Some(s);
                f(self)
            }
            r => r,
        }
    }

    /// Reads at `off` into `buf`; returns the bytes before end of file (the rest is zeros).
    pub fn read(&mut self, off: u64, buf: &mut [u8]) -> Result<usize> {
        self.with_snapshot_renewal(|db| db.read_once(off, buf))
    }

    fn read_once(&self, off: u64, buf: &mut [u8]) -> Result<usize> {
        let m = self.member.lock();
        let src = self.source();
        m.overlay.read(off, buf, |b| {
            let mut done = 0;
            while done < b.len() {
                let n = src.read_at(&mut b[done..], off + done as u64)?;
                if n == 0 {
                    break;
                }
                done += n;
            }
            b[done..].fill(0);
            Ok(())
        })
    }

    /// xFetch: the address of `len` bytes at `off` lent from the store's read cache, exactly
    /// what [`Db::read`] would read now and unchanged until [`Db::unfetch`] (or close), or
    /// None (SQLite then reads with xRead): past the mmap limit, bytes the uncommitted overlay
    /// covers or cuts short, and whatever the store cannot lend ([`txvfs::File::lend`]: across
    /// blocks, past the end, not cached, a client of a shared store...). An error is a None too:
    /// xRead reports it, or renews a lost snapshot.
    pub fn fetch(&mut self, off: u64, len: usize) -> Option<*const u8> {
        if !self.lends.allows(off, len) || self.lost.is_some() {
            return None;
        }
        let lent = {
            let m = self.member.lock();
            if !m.overlay.passes_through(off, off + len as u64) {
                return None;
            }
            match &self.snap {
                Some(s) if self.reading_snapshot() => s.lend(off, len)?,
                _ => self.file.lend(off, len).ok().flatten()?,
            }
        };
        Some(self.lends.keep(lent))
    }

    /// xUnfetch of an address [`Db::fetch`] gave: the page is no longer SQLite's. False when
    /// the address was not lent by this handle.
    pub fn unfetch(&mut self, p: *const u8) -> bool {
        self.lends.give_back(p)
    }

    /// SQLITE_FCNTL_MMAP_SIZE: sets the limit of what is lent when `bytes` is given and no
    /// lend is outstanding (as the unix VFS remaps only then); returns the limit before.
    pub fn mmap_limit(&mut self, bytes: Option<u64>) -> u64 {
        let old = self.lends.limit();
        if let (Some(b), 0) = (bytes, self.lends.outstanding()) {
            self.lends.set_limit(b);
        }
        old
    }

    /// How many pages this handle lent that SQLite has not given back.
    pub fn lent_out(&self) -> usize {
        self.lends.outstanding()
    }

    fn committed_size(&self) -> Result<u64> {
        Ok(self.file.stat()?.size)
    }

    /// Writes into the uncommitted overlay.
    pub fn write(&self, off: u64, data: &[u8]) -> Result<()> {
        let mut m = self.member.lock();
        m.overlay.write(off, data, || self.committed_size())
    }

    /// Truncates the overlay's view of the file.
    pub fn truncate(&self, size: u64) -> Result<()> {
        self.member.lock().overlay.truncate(size);
        Ok(())
    }

    /// The file's size as this handle sees it.
    pub fn size(&mut self) -> Result<u64> {
        if let Some(s) = self.member.lock().overlay.size() {
            return Ok(s);
        }
        self.with_snapshot_renewal(|db| match &db.snap {
            Some(s) if db.reading_snapshot() => s.size(),
            _ => Ok(db.file.stat()?.size),
        })
    }

    fn in_write_transaction(&self) -> bool {
        self.locks.level() >= Level::Reserved
    }

    /// xSync. In an SQLite write transaction: the commit will be durable. Without a write
    /// lock (nobody's transaction protocol covers these writes): commits them now, durably.
    pub fn sync(&self) -> Result<()> {
        if self.in_write_transaction() {
            self.member.lock().synced = true;
            return Ok(());
        }
        let dirty = !self.member.lock().overlay.is_empty();
        if dirty {
            commit::commit_members(std::slice::from_ref(&self.member), true)
        } else {
            self.store.store.sync()
        }
    }

    /// SQLITE_FCNTL_SYNC: phase one of SQLite's commit is complete for this database; with a
    /// super-journal, the database commits with the others that name it.
    pub fn phase_one_done(&self, super_journal: Option<&str>) {
        self.member.lock().ready = true;
        if let Some(name) = super_journal {
            commit::join_super(name, &self.member);
        }
    }

    /// SQLITE_FCNTL_BEGIN_ATOMIC_WRITE.
    pub fn begin_batch(&mut self) {
        self.batch = Some(self.member.lock().overlay.clone());
    }

    /// SQLITE_FCNTL_COMMIT_ATOMIC_WRITE: commits the batch now.
    pub fn commit_batch(&mut self) -> Result<()> {
        self.batch = None;
        let durable = !self.member.lock().sync_off;
        let r = commit::commit_members(std::slice::from_ref(&self.member), durable);
        if r.is_ok() {
            stats().batch.fetch_add(1, Ordering::Relaxed);
        }
        r
    }

    /// SQLITE_FCNTL_ROLLBACK_ATOMIC_WRITE: forgets the batch's writes.
    pub fn rollback_batch(&mut self) {
        if let Some(o) = self.batch.take() {
            self.member.lock().overlay = o;
        }
    }

    /// SQLITE_FCNTL_COMMIT_PHASETWO (SQLite's transaction is committed): commits this
    /// database's overlay, with those of its commit group's members that finished phase one,
    /// as one txvfs transaction. After a super-journal commit there is nothing left to do.
    /// A lone database's commit releases RESERVED and PENDING with it where the store can
    /// pin the commit's state for the handle to read until SQLite unlocks (right after this:
    /// the pager unlocks to SHARED after phase two unless it keeps its lock,
    /// `locking_mode=EXCLUSIVE`, which keeps its locks here too).
    pub fn commit(&mut self) -> Result<()> {
        let members = commit::with_groups(std::slice::from_ref(&self.member));
        if members.len() == 1 && self.bytes.holds_write_pair() && !self.locks.exclusive_mode() {
            let (simple, durable) = {
                let m = self.member.lock();
                (!m.overlay.is_empty() && m.files.is_none(), !m.sync_off && m.synced)
            };
            if simple {
                let (file, bytes) = (&self.file, &self.bytes);
                let r = commit::commit_releasing(&self.member, durable, |tx| {
                    bytes.release_in(file, tx)
                })?;
                if let Some(r) = r {
                    self.bytes.released();
                    self.released = true;
                    let (store, path) = (&self.store.store, &self.path);
                    match Snapshot::after_commit(store, path, r.pinned, r.version) {
                        Ok(s) => self.snap = Some(s),
                        Err(e) => {
                            // Committed all the same: only a read would fail.
                            self.snap = None;
                            self.lost = Some(e);
                        }
                    }
                }
                return Ok(());
            }
        }
        // One member lock at a time (other threads commit group members too).
        let sync_off = self.member.lock().sync_off;
        // A file transaction is durable as SQLite's commits are, even when SQLite changed no
        // page (then it never calls xSync).
        let durable = !sync_off
            && members.iter().any(|m| {
                let m = m.lock();
                m.synced || m.files.is_some()
            });
        commit::commit_members(&members, durable)
    }

    /// `PRAGMA txvfs_files`: the token of this write transaction's file transaction (begun
    /// on first use), which the store's API joins ([`txvfs::Transaction::joined`]): what the
    /// application does through it commits with this transaction's pages at SQLite's commit
    /// point, or not at all. Only inside a write transaction (`BEGIN IMMEDIATE`): a read
    /// transaction could not commit it.
    pub fn files_token(&mut self) -> Result<String> {
        if !self.in_write_transaction() {
            return Err(Error::new(
                ErrorKind::Invalid,
                "PRAGMA txvfs_files needs a write transaction on this database: run it after \
                 BEGIN IMMEDIATE (or after a write in the transaction)",
            ));
        }
        let mut m = self.member.lock();
        if m.files.is_none() {
            m.files = Some(commit::Files::begin(&self.store.store)?);
        }
        Ok(m.files.as_ref().map(|f| f.token().to_string()).unwrap_or_default())
    }

    /// The level this handle holds.
    pub fn level(&self) -> Level {
        self.locks.level()
    }

    /// `PRAGMA locking_mode=EXCLUSIVE` (true) or `NORMAL` (false): see [`super::locks::Holder`].
    pub fn set_exclusive_mode(&mut self, on: bool) {
        self.locks.set_exclusive_mode(on);
    }

    /// xLock: granted in this process first, then among processes by the lock bytes; what
    /// the bytes refuse is given back in this process too. SHARED takes a snapshot; a write
    /// lock is refused with [`LockResult::BusySnapshot`] when another writer committed since
    /// the snapshot was taken (the handle's pages are stale).
    pub fn lock(&mut self, want: Level) -> LockResult {
        let before = self.locks.level();
        let result = self.locks.lock(want);
        let level = self.locks.level();
        if before == Level::None && level >= Level::Shared {
            // The snapshot first: whether a reader must check the lock bytes is read in it.
            match Snapshot::take(&self.store.store, &self.path) {
                Ok(s) => {
                    if !s.exclusive_marked() {
                        self.bytes.skip_shared_check();
                    }
                    self.snap = Some(s);
                }
                Err(e) => {
                    self.give_back(Level::None);
                    return if e.is_retryable() { LockResult::Busy } else { LockResult::Failed(e) };
                }
            }
        }
        let pin = self.locks.holds_pin();
        let store = &self.store.store;
        let reached =
            match self.bytes.raise(store, &self.file, level, self.locks.exclusive_mode(), pin) {
                Ok(reached) => reached,
                Err(e) => {
                    // As a refusal at the level held before, then the error.
                    self.locks.fall_back(before);
                    if before == Level::None {
                        let _ = self.bytes.lower(store, &self.file, Level::None);
                        self.snap = None;
                    }
                    return LockResult::Failed(e);
                }
            };
        if reached < level {
            self.locks.fall_back(reached);
            if reached == Level::None {
                let _ = self.bytes.lower(store, &self.file, Level::None);
                self.snap = None;
            }
            return LockResult::Busy;
        }
        if before <= Level::Shared && level > Level::Shared {
            // Now that no other writer can commit: is the snapshot still the committed state?
            let current = match &self.snap {
                Some(s) => s.is_current(&self.file),
                None => Ok(self.lost.is_none()),
            };
            match current {
                Ok(true) => {}
                Ok(false) => {
                    self.give_back(Level::Shared);
                    return LockResult::BusySnapshot;
                }
                // A snapshot lost before its version was known: its pages may be stale.
                Err(e) if e.is_retryable() => {
                    self.give_back(Level::Shared);
                    return LockResult::BusySnapshot;
                }
                Err(e) => {
                    self.give_back(Level::Shared);
                    return LockResult::Failed(e);
                }
            }
        }
        result
    }

    fn give_back(&mut self, to: Level) {
        self.locks.fall_back(to);
        let _ = self.bytes.lower(&self.store.store, &self.file, to);
        if to == Level::None {
            self.snap = None;
            self.lost = None;
        }
    }

    /// xUnlock to `to` (Shared or None). Leaving a write transaction drops what SQLite did not
    /// commit at its commit point: the store still holds the last committed state, which is
    /// exactly what a rollback restores (and a failed rollback must never make durable).
    /// Staying at SHARED, the handle first takes a snapshot of what it committed, while other
    /// writers are still kept out.
    pub fn unlock(&mut self, to: Level) -> Result<()> {
        let writing = self.in_write_transaction();
        if writing && to <= Level::Shared {
            self.abandon();
        }
        let released = std::mem::take(&mut self.released);
        let mut result = Ok(());
        if to == Level::None {
            self.snap = None;
            self.lost = None;
        } else if writing && released {
            // The commit released the write locks and left the snapshot of its state (or
            // why there is none, in `lost`).
        } else if writing && to == Level::Shared {
            match Snapshot::take(&self.store.store, &self.path) {
                Ok(s) => self.snap = Some(s),
                Err(e) => {
                    // No snapshot, no read transaction: SQLite sees the error and unlocks.
                    self.snap = None;
                    result = Err(e);
                }
            }
        }
        self.locks.unlock(to);
        result.and(self.bytes.lower(&self.store.store, &self.file, to))
    }

    fn abandon(&mut self) {
        let name = {
            let mut m = self.member.lock();
            let name = m.super_journal.take();
            m.reset();
            name
        };
        if let Some(n) = name {
            commit::leave_super(&n, &self.member);
        }
        self.batch = None;
    }

    /// xCheckReservedLock: does any handle hold RESERVED or more?
    pub fn reserved_by_anyone(&self) -> bool {
        self.locks.reserved_by_anyone()
            || !matches!(self.file.test_lock(true, RESERVED_BYTE, 1), Ok(None))
    }

    /// Closes the handle, releasing its locks. Writes made without a write lock and not yet
    /// synced are committed (not waiting for durability), as a file system keeps written
    /// data at close.
    pub fn close(mut self) -> Result<()> {
        let result = if self.in_write_transaction() {
            self.unlock(Level::None)
        } else {
            let dirty = !self.member.lock().overlay.is_empty();
            let r = if dirty {
                commit::commit_members(std::slice::from_ref(&self.member), false)
            } else {
                Ok(())
            };
            self.locks.unlock(Level::None);
            r.and(self.bytes.lower(&self.store.store, &self.file, Level::None))
        };
        let group = self.member.lock().group.take();
        if let Some(g) = group {
            g.leave(&self.member);
        }
        result
    }
}
