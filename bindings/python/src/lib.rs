//! Python bindings for txvfs: the native module `txvfs._txvfs`.
//!
//! This crate only translates: Python arguments to core calls, core results to Python
//! objects, core errors to Python exceptions. Every call into the core runs with the GIL
//! released ([`Python::detach`]) and inside a panic boundary, so a store is usable from many
//! threads and no Rust panic reaches Python as anything but a `txvfs.TxvfsError`.
//!
//! The Python package (`bindings/python/python/txvfs`) builds the friendly API on top:
//! `io` objects, `walk`, `scandir`, `transaction()`, `transact()`, fsspec.
//!
//! One file per object: `errors` (exceptions, the call boundary), `paths` (path arguments),
//! `stat` (`StatResult`, `StatVfsResult`), `filesystem` (the calls shared by `Store` and
//! `Transaction`), `store`, `transaction`, `handle` (open files), `buffer` (Python buffers borrowed for reads and writes), `fsck` (the integrity
//! check); this file is the module.
#![warn(missing_docs)]

mod buffer;
mod errors;
mod filesystem;
mod fsck;
mod handle;
mod paths;
mod stat;
mod store;
mod transaction;
mod watch;

use errors::{TransactionConflict, TransactionTooLarge, TxvfsError};
use filesystem::FileSystem;
use handle::Handle;
use pyo3::prelude::*;
use stat::{StatResult, StatVfsResult};
use store::Store;
use transaction::Transaction;
use txvfs::ErrorKind;

/// The errno-or-code and message of an error kind's description, for tests and tools.
#[pyfunction]
fn strerror(code: i32) -> String {
    ErrorKind::from_code(code)
        .map(|k| k.description().to_string())
        .unwrap_or_else(|| format!("unknown error {code}"))
}

/// Sleeps before retry `attempt` of a conflicting transaction, with the core's backoff
/// (exponential from 1 ms to 100 ms, with jitter), without holding the GIL.
#[pyfunction]
fn backoff(py: Python<'_>, attempt: u32) {
    py.detach(|| txvfs::backoff(attempt));
}

/// Makes the new, empty store at `upper` a writable clone of the read-only store at `lower`
/// (a named snapshot's URI); open it with `txvfs.open(upper)` (what `txvfs.clone` does).
#[pyfunction]
fn create_clone(py: Python<'_>, lower: String, upper: String) -> PyResult<()> {
    errors::detached(py, move || txvfs::Store::prepare_clone(&lower, &upper))
}

/// The error with which the commit of the SQLite transaction whose file transaction was
/// published as `token` failed (SQLite reports only an I/O error), as `(errno, message,
/// retryable)`, or None. See `txvfs.sqlite`.
#[pyfunction]
fn joined_commit_error(token: &str) -> Option<(i32, String, bool)> {
    txvfs::Transaction::joined_commit_error(token)
        .map(|e| (e.code(), e.message().to_string(), e.is_retryable()))
}

/// Registers txvfs's SQLite VFS (`txvfs`, this copy of txvfs) with the SQLite that the loaded
/// shared object `library` (Python's `_sqlite3` module) links to. See `txvfs.sqlite`.
#[pyfunction]
fn register_sqlite(library: std::path::PathBuf) -> PyResult<()> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(library.as_os_str().as_bytes())
        .map_err(|_| pyo3::exceptions::PyValueError::new_err("library path holds a NUL byte"))?;
    txvfs_sqlite::register_with_library(&c).map_err(pyo3::exceptions::PyRuntimeError::new_err)
}

/// The native module `txvfs._txvfs`.
#[pymodule]
fn _txvfs(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add_class::<FileSystem>()?;
    m.add_class::<Store>()?;
    m.add_class::<Transaction>()?;
    m.add_class::<Handle>()?;
    m.add_class::<StatResult>()?;
    m.add_class::<StatVfsResult>()?;
    m.add_class::<stat::Quota>()?;
    m.add("TxvfsError", py.get_type::<TxvfsError>())?;
    m.add("TransactionConflict", py.get_type::<TransactionConflict>())?;
    m.add("TransactionTooLarge", py.get_type::<TransactionTooLarge>())?;
    m.add_function(wrap_pyfunction!(strerror, m)?)?;
    m.add_function(wrap_pyfunction!(fsck::fsck, m)?)?;
    m.add_function(wrap_pyfunction!(backoff, m)?)?;
    m.add_function(wrap_pyfunction!(joined_commit_error, m)?)?;
    m.add_function(wrap_pyfunction!(register_sqlite, m)?)?;
    m.add_function(wrap_pyfunction!(create_clone, m)?)?;
    m.add_class::<fsck::FsckReport>()?;
    m.add_class::<watch::Watcher>()?;
    m.add_class::<watch::Change>()?;
    m.add("CONFLICT", txvfs::error::code::CONFLICT)?;
    m.add("TOO_LARGE", txvfs::error::code::TOO_LARGE)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
