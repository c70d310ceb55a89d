//! `PRAGMA journal_mode=WAL` on txvfs: accepted, answered `wal`, and remembered with the
//! database (an extended attribute on its file in the store, so every connection and process
//! sees it), while SQLite keeps its rollback journal underneath, in memory.
//!
//! What applications turn WAL on for, readers that do not block writers and writers that do
//! not block readers, every journal mode already has on txvfs: a read transaction reads a
//! snapshot ([`super::snapshot`]) and a write transaction commits as one atomic txvfs
//! transaction. SQLite's own WAL (a `-wal` file and a wal-index in memory shared between the
//! processes of one machine) would add a second log on top of the store's, a checkpoint
//! copying every page twice, and shared memory that a store reached from several machines
//! (FoundationDB) does not have. So nothing changes below SQLite's pager:
//! `PRAGMA wal_checkpoint` has nothing to copy (SQLite answers `0|-1|-1`, as for any database
//! not in its own WAL mode), `journal_size_limit` truncates a rollback journal SQLite keeps
//! after a commit (PERSIST, `locking_mode=EXCLUSIVE`; in memory here), and switching back to
//! another mode (`PRAGMA journal_mode=DELETE`) forgets the setting; the data is the same in
//! every mode.

use txvfs::{ErrorKind, FileSystem, Result, Store, XattrFlags};

/// The extended attribute that records the mode.
const ATTR: &str = "user.sqlite.journal_mode";

/// True when the database at `path` was set to WAL.
pub fn is_wal(store: &Store, path: &str) -> Result<bool> {
    match store.getxattr(path, ATTR) {
        Ok(v) => Ok(v == b"wal"),
        Err(e) if matches!(e.kind(), ErrorKind::NoData | ErrorKind::NotFound) => Ok(false),
        Err(e) => Err(e),
    }
}

/// Records (`on`) or forgets the WAL setting of the database at `path`. A read-only store
/// keeps what it has (the answer is still `wal` for this connection's request, as SQLite
/// answers for a read-only database already in WAL mode).
pub fn set_wal(store: &Store, path: &str, on: bool) -> Result<()> {
    if is_wal(store, path)? == on {
        return Ok(());
    }
    let r = if on {
        store.setxattr(path, ATTR, b"wal", XattrFlags::default())
    } else {
        store.removexattr(path, ATTR)
    };
    match r {
        Err(e) if matches!(e.kind(), ErrorKind::ReadOnly | ErrorKind::NoData) => Ok(()),
        r => r,
    }
}
