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
//!
//! Since the pager keeps whatever mode it had, it must never have a mode weaker than the one the
//! application sets: `journal_mode=OFF` (no journal: a failed statement keeps its rows, ROLLBACK
//! cannot undo pages written) followed by `journal_mode=WAL` would leave the pager in OFF. So
//! OFF is answered here too, per connection as in SQLite: the pager keeps its rollback journal
//! (in memory on txvfs, so it costs little), and a database set to OFF behaves as one with a
//! journal, which is stronger. SQLite handles the other modes (DELETE, TRUNCATE, PERSIST,
//! MEMORY) itself, each with a journal and statement journals.

use txvfs::{ErrorKind, FileSystem, Result, Store, XattrFlags};

/// The extended attribute that records the mode.
const ATTR: &str = "user.sqlite.journal_mode";

/// SQLite's journal mode names, in SQLite's order: `PRAGMA journal_mode=X` means the first
/// mode of which X is a prefix (ignoring case), as SQLite parses it.
const MODES: [&str; 6] = ["delete", "persist", "off", "truncate", "memory", "wal"];

/// `PRAGMA journal_mode` (`value`: None) or `PRAGMA journal_mode=value` for the database at
/// `path`, whose connection has set OFF when `*off`. Returns the answer when the VFS gives it
/// (WAL and OFF, and queries while either is set), or None for SQLite's pager to handle.
pub fn journal_mode(
    store: &Store,
    path: &str,
    off: &mut bool,
    value: Option<&str>,
) -> Result<Option<&'static str>> {
    let set = value.and_then(|v| {
        MODES.into_iter().find(|m| v.len() <= m.len() && m[..v.len()].eq_ignore_ascii_case(v))
    });
    match set {
        Some("wal") => {
            set_wal(store, path, true)?;
            *off = false;
            Ok(Some("wal"))
        }
        Some(mode) => {
            set_wal(store, path, false)?;
            *off = mode == "off";
            Ok(off.then_some("off"))
        }
        None if is_wal(store, path)? => Ok(Some("wal")),
        None => Ok(off.then_some("off")),
    }
}

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
