//! `Transaction`: an explicit transaction; calls on it (and its files) belong to it.

use crate::errors::{detached, Fail, FINISHED_TX};
use crate::filesystem::{FileSystem, Target};
use crate::store::Store;
use parking_lot::Mutex;
use pyo3::prelude::*;
use txvfs::{Error, ErrorKind, Transaction as CoreTransaction};

/// An explicit transaction on a store: every call on it (and on files opened through it)
/// belongs to it; nobody else sees anything until `commit()`, then everything at once.
#[pyclass(frozen, subclass, extends = FileSystem, module = "txvfs._txvfs")]
pub(crate) struct Transaction {}

#[pymethods]
impl Transaction {
    /// Begins a transaction on `store`; with `joined`, joins instead the transaction
    /// published under that token (`PRAGMA txvfs_files` on a SQLite connection through this
    /// module's VFS: see `txvfs.sqlite`), which must belong to `store`'s store.
    #[new]
    #[pyo3(signature = (store, joined = None))]
    fn new(
        py: Python<'_>,
        store: PyRef<'_, Store>,
        joined: Option<String>,
    ) -> PyResult<PyClassInitializer<Self>> {
        let s = store.as_super().store()?;
        let tx = detached(py, move || match joined {
            None => s.begin(),
            Some(token) => {
                let tx = CoreTransaction::joined(&token)?;
                if !tx.store().same_store(&s) {
                    return Err(Error::new(
                        ErrorKind::Invalid,
                        format!(
                            "transaction {token:?} belongs to store {}, not {}",
                            tx.store().describe(),
                            s.describe()
                        ),
                    ));
                }
                Ok(tx)
            }
        })?;
        Ok(PyClassInitializer::from(FileSystem { target: Target::Tx(Mutex::new(Some(tx))) })
            .add_subclass(Transaction {}))
    }

    /// Commits: all changes become visible at once (and durable with `sync`), or none do.
    /// Raises `TransactionConflict` when another transaction changed what this one read.
    fn commit(self_: PyRef<'_, Self>, py: Python<'_>) -> PyResult<()> {
        let Target::Tx(m) = &self_.as_super().target else { unreachable!() };
        detached(py, || -> Result<(), Fail> {
            let mut held = m.lock();
            // A joined transaction's commit fails, and the handle stays usable.
            if let Some(tx) = held.as_ref().filter(|t| t.is_joined()) {
                return Ok(tx.commit()?);
            }
            let tx = held.take().ok_or(Fail::Closed(FINISHED_TX))?;
            drop(held);
            Ok(tx.commit()?)
        })
    }

    /// Discards every change of the transaction. Idempotent. A joined transaction (see
    /// `joined`) raises `ValueError`: it ends with its SQLite transaction.
    fn rollback(self_: PyRef<'_, Self>, py: Python<'_>) -> PyResult<()> {
        let Target::Tx(m) = &self_.as_super().target else { unreachable!() };
        detached(py, || -> Result<(), Fail> {
            let mut held = m.lock();
            if held.as_ref().is_some_and(|t| t.is_joined()) {
                return Err(Error::new(
                    ErrorKind::Invalid,
                    "cannot roll back a joined transaction: it ends with its SQLite \
                     transaction (ROLLBACK on the connection)",
                )
                .into());
            }
            if let Some(tx) = held.take() {
                tx.rollback()
            }
            Ok(())
        })
    }

    /// True for a transaction joined by token (`Transaction(store, joined=token)`).
    #[getter]
    fn joined(self_: PyRef<'_, Self>) -> bool {
        let Target::Tx(m) = &self_.as_super().target else { unreachable!() };
        m.lock().as_ref().is_some_and(|t| t.is_joined())
    }

    /// True until the transaction is committed or rolled back.
    #[getter]
    fn active(self_: PyRef<'_, Self>) -> bool {
        let Target::Tx(m) = &self_.as_super().target else { unreachable!() };
        m.lock().is_some()
    }
}
