//! Rows and files in one commit: the SQLite VFS of this library's copy of txvfs, and joining
//! the file transaction of a SQLite write transaction (`PRAGMA txvfs_files`).
//!
//! The VFS and the store API must be one copy of txvfs in the process (the registry of
//! published transactions is a static of the copy), so `libtxvfs` carries the VFS
//! (`txvfs-sqlite`) and registers it with `txvfs_sqlite_vfs_register`; the separate
//! `libtxvfs_sqlite.so` is another copy, whose tokens `txvfs_tx_join` does not know.

use crate::boundary::{boundary, cstr, Fail, Out, R};
use crate::store::{store_ref, txvfs_store};
use crate::tx::txvfs_tx;
use std::ffi::{c_char, c_int};
use txvfs::Transaction;

/// SQLite's `SQLITE_ERROR`: what the VFS's registration returns when the program links no
/// SQLite.
const SQLITE_ERROR: c_int = 1;

/// A token argument as UTF-8.
///
/// # Safety
/// As [`cstr`].
unsafe fn token<'a>(p: *const c_char) -> R<&'a str> {
    std::str::from_utf8(cstr(p, "token")?).map_err(|_| Fail::invalid("token is not UTF-8"))
}

/// Registers txvfs's SQLite VFS, named "txvfs", with the SQLite linked into this program
/// (`-lsqlite3`, or a SQLite compiled into it), and makes it SQLite's default VFS when
/// `make_default` is true. Open databases in a store with `sqlite3_open_v2` and a URI such as
/// `file:/app.db?vfs=txvfs&store=/path/to/store` (the database is the file `/app.db` of the
/// store; the store is opened by its URI, so `memory:` gives the VFS a store of its own).
/// This VFS belongs to libtxvfs's copy of txvfs: inside a write transaction (after
/// `BEGIN IMMEDIATE`), `PRAGMA txvfs_files` on a connection through it returns the token that
/// `txvfs_tx_join` takes, to put file changes in the same commit as the rows.
///
/// The program's SQLite is found through weak references to its `sqlite3_*` symbols, so a
/// program that loads SQLite privately (`dlopen` with `RTLD_LOCAL`) has none here. Safe to
/// call any number of times, and again after `sqlite3_shutdown`.
/// Errors: -ENOSYS (no SQLite linked into the program: under the linker's `--as-needed`, a
/// program that calls no `sqlite3_*` function itself does not keep `-lsqlite3`), -EIO (SQLite
/// refused the VFS).
#[no_mangle]
pub extern "C" fn txvfs_sqlite_vfs_register(make_default: bool) -> c_int {
    boundary("txvfs_sqlite_vfs_register", || {
        // Not through the exported `txvfs_sqlite_register`: another copy's could be bound.
        match txvfs_sqlite::register_linked(make_default) {
            0 => Ok(()),
            SQLITE_ERROR => Err(Fail::new(
                libc::ENOSYS,
                "no SQLite in this program (txvfs finds sqlite3_vfs_register among the \
                 program's symbols): link it with -lsqlite3",
            )),
            rc => Err(Fail::new(libc::EIO, format!("SQLite refused the VFS (SQLite error {rc})"))),
        }
    })
}

/// Joins the file transaction of a SQLite write transaction: `token` is what
/// `PRAGMA txvfs_files` returned on a connection through libtxvfs's VFS (see
/// `txvfs_sqlite_vfs_register`) after `BEGIN IMMEDIATE`. Path operations and descriptors given
/// `*out` (with `store`) belong to that transaction: their changes commit in the same commit as
/// the connection's rows at its `COMMIT`, or are discarded with its `ROLLBACK` (or a failed
/// `COMMIT`); nobody, in this process or another, sees them before.
///
/// The handle cannot end the transaction: `txvfs_tx_commit` and `txvfs_tx_rollback` on it
/// fail with -EINVAL. Once the SQLite transaction ends, every call with it fails with -EINVAL.
/// Ownership: the caller owns `*out` and frees it with `txvfs_tx_free`, which neither commits
/// nor rolls back; it holds a reference to the store handle like any transaction.
/// Errors: -EINVAL (NULL argument, `token` not UTF-8), -ENOENT (no live transaction has that
/// token in this process's libtxvfs: its SQLite transaction ended, or the connection's VFS is
/// another copy of txvfs, such as libtxvfs_sqlite.so), -EXDEV (the transaction belongs to
/// another store than `store`).
#[no_mangle]
pub unsafe extern "C" fn txvfs_tx_join(
    store: *mut txvfs_store,
    token: *const c_char,
    out: *mut *mut txvfs_tx,
) -> c_int {
    boundary("txvfs_tx_join", || {
        let s = store_ref(store)?;
        let token = self::token(token)?;
        let out = Out::new(out, "out")?;
        let tx = Transaction::joined(token)?;
        if !tx.store().same_store(&s.store) {
            return Err(Fail::new(
                libc::EXDEV,
                format!(
                    "transaction {token:?} belongs to store {}, not to this one ({})",
                    tx.store().describe(),
                    s.store.describe()
                ),
            ));
        }
        out.set(Box::into_raw(Box::new(txvfs_tx::joined(s, tx))));
        Ok(())
    })
}

/// Why the `COMMIT` of the SQLite transaction whose file transaction was published as `token`
/// failed, when it did: SQLite itself reports only an I/O error. Returns the negative code of
/// that failure, its message in `txvfs_last_error()`: -TXVFS_ECONFLICT or -TXVFS_ETOOOLD mean
/// another transaction changed what the unit read, so run the whole unit again (BEGIN
/// IMMEDIATE, token, files and rows, COMMIT), after `ROLLBACK` if `sqlite3_get_autocommit`
/// says the connection is still in the transaction. Returns 0 when no failure is known for
/// the token (it committed, it rolled back, or it is one of more than 64 failures since).
/// Errors: -EINVAL (NULL `token`, not UTF-8; also a commit that failed with -EINVAL).
#[no_mangle]
pub unsafe extern "C" fn txvfs_tx_joined_commit_error(token: *const c_char) -> c_int {
    boundary("txvfs_tx_joined_commit_error", || {
        match Transaction::joined_commit_error(self::token(token)?) {
            Some(e) => Err(e.into()),
            None => Ok(()),
        }
    })
}
