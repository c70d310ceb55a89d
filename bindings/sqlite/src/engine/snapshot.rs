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

use txvfs::{File, FileSystem, OpenOptions, Result, Store, Transaction};

/// A read-only view of one database file at one version of the store.
pub struct Snapshot {
    // Declared first: closed before its transaction (dropped: rolled back, nothing written).
    file: File,
    _tx: Transaction,
}

/// What says whether a file's data changed: (modification time, size).
type Version = (i64, u64);

fn version_of(f: &File) -> Result<Version> {
    let s = f.stat()?;
    Ok((s.mtime_ns, s.size))
}

impl Snapshot {
    /// Takes a snapshot of `path` in `store` as committed now.
    pub fn take(store: &Store, path: &str) -> Result<Snapshot> {
        let tx = store.begin()?;
        let file = tx.open(path, &OpenOptions::new().read(true))?;
        Ok(Snapshot { file, _tx: tx })
    }

    /// The file as the snapshot sees it.
    pub fn file(&self) -> &File {
        &self.file
    }

    /// True when `live` (a handle on the committed file) shows the version this snapshot
    /// holds: nobody committed a change to the file since the snapshot was taken.
    pub fn is_current(&self, live: &File) -> Result<bool> {
        Ok(version_of(&self.file)? == version_of(live)?)
    }
}
