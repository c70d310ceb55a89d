//! The snapshot an SQLite read transaction reads: from the SHARED lock to its release, a
//! database handle reads its pages from one txvfs transaction that never commits (a
//! multi-version read at one version), so another connection or process may commit meanwhile
//! without waiting for it: readers never block writers, writers never block readers.
//!
//! A handle that then asks for a write lock must not write over pages it read from an old
//! snapshot: [`Snapshot::is_current`] compares the snapshot's view of the file with the
//! committed one (modification time and size) once the handle holds the writers'
//! lock, and the VFS answers `SQLITE_BUSY_SNAPSHOT` when another writer committed since, as
//! SQLite's WAL mode does. Every commit that changes a file's data sets its modification
//! time; its change time is left out (an attribute change, such as the journal-mode
//! attribute of [`super::wal`], changes no page).
//!
//! A snapshot's transaction can be lost while SQLite still reads it: in a process that shares
//! a store as a client, the transaction lives in the process that serves the store, and dies
//! with it (or is dropped after 30 s without a request). [`Snapshot::renew`] takes it again
//! when the file is still at the same version (the same pages); otherwise the read
//! transaction is over and its next read fails with `SQLITE_BUSY_SNAPSHOT`.

use super::lockbytes::EXCLUSIVE_MARK;
use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::OnceLock;
use txvfs::{
    Error, ErrorKind, File, FileSystem, InodeFileSystem, Lent, OpenOptions, Result, Store,
    Transaction,
};

/// A read-only view of one database file at one version of the store.
pub struct Snapshot {
    // Declared first: closed before its transaction (dropped: rolled back, nothing written).
    file: File,
    _tx: Transaction,
    /// The file's version as the snapshot sees it, known from its first `stat` (SQLite asks
    /// the size at the start of every read transaction): it cannot change within a snapshot.
    version: OnceLock<Version>,
    /// The file carried the mark of a connection in `locking_mode=EXCLUSIVE` (see
    /// [`super::lockbytes`]) at the snapshot's version.
    marked: bool,
    /// Pages lent from the snapshot ([`Snapshot::lend`]), by offset.
    lent: Mutex<HashMap<u64, Lent>>,
}

/// How many times taking a snapshot is tried again after a retryable error (with the core's
/// backoff, at most 100 ms apart).
const TAKE_RETRIES: u32 = 100;

/// What says whether a file's data changed: (modification time, size).
pub type Version = (i64, u64);

fn version_of(f: &File) -> Result<Version> {
    let s = f.stat()?;
    Ok((s.mtime_ns, s.size))
}

impl Snapshot {
    /// Takes a snapshot of `path` in `store` as committed now. A retryable error (the
    /// process serving a shared store died as the snapshot began) takes it again: nothing
    /// was read from it yet.
    pub fn take(store: &Store, path: &str) -> Result<Snapshot> {
        txvfs::retry(TAKE_RETRIES, || Snapshot::of(store.begin()?, path))
    }

    /// The snapshot `tx` reads.
    fn of(tx: Transaction, path: &str) -> Result<Snapshot> {
        let file = tx.open(path, &OpenOptions::new().read(true))?;
        let marked = match tx.getxattr_ino(file.ino(), EXCLUSIVE_MARK) {
            Ok(_) => true,
            Err(e) if matches!(e.kind(), ErrorKind::NoData) => false,
            Err(e) => return Err(e),
        };
        let lent = Mutex::default();
        Ok(Snapshot { file, _tx: tx, version: OnceLock::new(), marked, lent })
    }

    /// The snapshot a handle reads after a commit that released its write locks with it
    /// ([`super::commit::commit_releasing`]): the transaction pinned at the commit's version
    /// where the store gave one, else (or when the pinned one was lost with the store's
    /// owner before it read what it needs) one taken now. Either must show the file at the
    /// commit's `version`; one taken now does not when another writer committed since
    /// (nothing kept other writers out any more), and then there is no snapshot of the
    /// commit's state: a retryable conflict.
    pub fn after_commit(
        store: &Store,
        path: &str,
        pinned: Option<Transaction>,
        version: Version,
    ) -> Result<Snapshot> {
        let at = |s: Snapshot| {
            if version_of(&s.file)? != version {
                return Err(Error::new(
                    ErrorKind::Conflict,
                    format!(
                        "{path}: the snapshot of this connection's commit could not be had (the \
                         store's owner changed, and another writer committed since): end the \
                         read transaction and run it again"
                    ),
                ));
            }
            let _ = s.version.set(version);
            Ok(s)
        };
        match pinned.map(|tx| Snapshot::of(tx, path).and_then(at)) {
            Some(Err(e)) if !e.is_retryable() => Err(e),
            Some(Ok(s)) => Ok(s),
            _ => at(Snapshot::take(store, path)?),
        }
    }

    /// True when the file carried the mark of a connection in `locking_mode=EXCLUSIVE` at
    /// the snapshot's version: whether it holds its lock must then be asked of the lock
    /// records. Read from the snapshot, so a connection that set its mark later took its lock
    /// later too, and its commits are not in the snapshot.
    pub fn exclusive_marked(&self) -> bool {
        self.marked
    }

    /// The file as the snapshot sees it.
    pub fn file(&self) -> &File {
        &self.file
    }

    /// `len` bytes at `off` lent as the snapshot holds them ([`File::lend`]), kept for the
    /// snapshot's life: its pages never change, and SQLite fetches a page again each time it
    /// touches it (with mmap it does not look in its own cache first), so a page lent once is
    /// found here, not asked of the store again. None where the store cannot lend it.
    pub fn lend(&self, off: u64, len: usize) -> Option<Lent> {
        let mut pages = self.lent.lock();
        if let Some(l) = pages.get(&off).filter(|l| l.len() == len) {
            return Some(l.clone());
        }
        let l = self.file.lend(off, len).ok().flatten()?;
        pages.insert(off, l.clone());
        Some(l)
    }

    fn version(&self) -> Result<Version> {
        if let Some(v) = self.version.get() {
            return Ok(*v);
        }
        let v = version_of(&self.file)?;
        Ok(*self.version.get_or_init(|| v))
    }

    /// The file's size in the snapshot.
    pub fn size(&self) -> Result<u64> {
        Ok(self.version()?.1)
    }

    /// True when `live` (a handle on the committed file) shows the version this snapshot
    /// holds: nobody committed a change to the file since the snapshot was taken.
    pub fn is_current(&self, live: &File) -> Result<bool> {
        Ok(self.version()? == version_of(live)?)
    }

    /// The same snapshot in a new transaction, for one whose transaction was lost (the
    /// process serving a shared store died, or dropped the transaction after a long silence):
    /// `None` when the file changed since, or when the snapshot's version was never known,
    /// since then the pages it gave can no longer be read again.
    pub fn renew(&self, store: &Store, path: &str) -> Result<Option<Snapshot>> {
        let Some(old) = self.version.get() else {
            return Ok(None);
        };
        let new = Snapshot::take(store, path)?;
        Ok((new.version()? == *old).then_some(new))
    }
}
