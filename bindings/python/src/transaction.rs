//! `Transaction`: an explicit transaction; calls on it (and its files) belong to it.

use crate::errors::{detached, Fail, FINISHED_TX};
use crate::filesystem::{FileSystem, Target};
use crate::store::Store;
use parking_lot::Mutex;
use pyo3::prelude::*;

/// An explicit transaction on a store: every call on it (and on files opened through it)
/// belongs to it; nobody else sees anything until `commit()`, then everything at once.
#[pyclass(frozen, subclass, extends = FileSystem, module = "txvfs._txvfs")]
pub(crate) struct Transaction {}

#[pymethods]
impl Transaction {
    /// Begins a transaction on `store`.
    #[new]
    fn new(py: Python<'_>, store: PyRef<'_, Store>) -> PyResult<PyClassInitializer<Self>> {
        let s = store.as_super().store()?;
        let tx = detached(py, move || s.begin())?;
        Ok(PyClassInitializer::from(FileSystem { target: Target::Tx(Mutex::new(Some(tx))) })
            .add_subclass(Transaction {}))
    }

    /// Commits: all changes become visible at once (and durable with `sync`), or none do.
    /// Raises `TransactionConflict` when another transaction changed what this one read.
    fn commit(self_: PyRef<'_, Self>, py: Python<'_>) -> PyResult<()> {
        let Target::Tx(m) = &self_.as_super().target else { unreachable!() };
        detached(py, || -> Result<(), Fail> {
            let tx = m.lock().take().ok_or(Fail::Closed(FINISHED_TX))?;
            Ok(tx.commit()?)
        })
    }

    /// Discards every change of the transaction. Idempotent.
    fn rollback(self_: PyRef<'_, Self>, py: Python<'_>) {
        let Target::Tx(m) = &self_.as_super().target else { unreachable!() };
        py.detach(|| {
            if let Some(tx) = m.lock().take() {
                tx.rollback()
            }
        })
    }

    /// True until the transaction is committed or rolled back.
    #[getter]
    fn active(self_: PyRef<'_, Self>) -> bool {
        let Target::Tx(m) = &self_.as_super().target else { unreachable!() };
        m.lock().is_some()
    }
}
