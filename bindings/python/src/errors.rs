//! Errors: txvfs's Python exceptions, core errors to Python exceptions, and the boundary
//! every core call crosses (GIL released, panics caught).

use pyo3::exceptions::{PyOSError, PyValueError};
use pyo3::prelude::*;
use std::panic::{catch_unwind, AssertUnwindSafe};
use txvfs::{Error, ErrorKind};

pyo3::create_exception!(
    _txvfs,
    TxvfsError,
    PyOSError,
    "Base class of txvfs's own errors (codes above 10000); POSIX errors raise the builtin OSError subclasses."
);
pyo3::create_exception!(
    _txvfs,
    TransactionConflict,
    TxvfsError,
    "A transaction conflicted with another one (or ran too long); running it again can succeed."
);
pyo3::create_exception!(
    _txvfs,
    TransactionTooLarge,
    TxvfsError,
    "A transaction is larger than the backend can commit."
);

/// Converts a core error into the matching Python exception: `OSError(errno, message)`
/// (which Python turns into FileNotFoundError, FileExistsError, ... by errno) or one of
/// txvfs's own exceptions, whose `errno` is the txvfs code.
pub(crate) fn to_py(e: Error) -> PyErr {
    let args = (e.code(), e.message().to_string());
    match e.kind() {
        ErrorKind::Conflict | ErrorKind::TooOld => TransactionConflict::new_err(args),
        ErrorKind::TooLarge => TransactionTooLarge::new_err(args),
        ErrorKind::Corrupt | ErrorKind::Backend | ErrorKind::CommitUnknown => {
            TxvfsError::new_err(args)
        }
        _ => PyOSError::new_err(args),
    }
}

/// True for txvfs's own errors (codes above 10000, raised as `TxvfsError`), false for POSIX ones.
pub(crate) fn is_txvfs_own(e: &Error) -> bool {
    e.code() > 10000
}

/// Why a call failed: the core said no, or the object was closed (or its transaction ended)
/// before the call, which raises `ValueError` like a closed `io` object.
pub(crate) enum Fail {
    Core(Error),
    Closed(&'static str),
}

impl From<Error> for Fail {
    fn from(e: Error) -> Self {
        Fail::Core(e)
    }
}

pub(crate) const CLOSED_STORE: &str = "I/O operation on a closed store";
pub(crate) const FINISHED_TX: &str = "transaction already committed or rolled back";
pub(crate) const CLOSED_FILE: &str = "I/O operation on closed file";

fn fail_to_py(f: Fail) -> PyErr {
    match f {
        Fail::Core(e) => to_py(e),
        Fail::Closed(msg) => PyValueError::new_err(msg),
    }
}

/// Runs `f` without the GIL and inside a panic boundary.
pub(crate) fn detached<T: Send, E: Into<Fail>>(
    py: Python<'_>,
    f: impl FnOnce() -> Result<T, E> + Send,
) -> PyResult<T> {
    py.detach(|| match catch_unwind(AssertUnwindSafe(f)) {
        Ok(r) => r.map_err(Into::into),
        Err(p) => Err(Fail::Core(txvfs::error::panic_error(&*p))),
    })
    .map_err(fail_to_py)
}
