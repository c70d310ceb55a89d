//! `Watcher`: a consumer of a store's change feed (`Store.watch`), and the `Change` records it
//! returns. The `asyncio` iterator is built on `wait` in the Python package.

use crate::errors::{detached, to_py};
use crate::paths::{kind_name, name_obj, path_of};
use parking_lot::Mutex;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyList;
use std::time::Duration;
use txvfs::{Batch, ChangeKind, Cursor, Error, ErrorKind, Store as CoreStore, WatchOptions};

/// One change of a committed transaction: `kind` (`"created"`, `"written"`, `"removed"`,
/// `"renamed"`, `"attrs"`, `"xattrs"`, `"linked"`), `path`, `to` (a rename's new path, else
/// None), `ino`, `type` (`"file"`, `"dir"`, ...), and `cursor`: the position after its
/// transaction (save it and pass it as `since=` to resume).
#[pyclass(frozen, get_all, module = "txvfs._txvfs")]
pub(crate) struct Change {
    kind: &'static str,
    path: Py<PyAny>,
    to: Option<Py<PyAny>>,
    ino: u64,
    r#type: &'static str,
    cursor: String,
    time_ms: u64,
}

#[pymethods]
impl Change {
    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        let to = match &self.to {
            Some(t) => format!(", to={}", t.bind(py).repr()?),
            None => String::new(),
        };
        Ok(format!("Change({}, {}{to})", self.kind, self.path.bind(py).repr()?))
    }
}

/// A consumer of a store's change feed; see `Store.watch`.
#[pyclass(frozen, module = "txvfs._txvfs")]
pub(crate) struct Watcher {
    inner: Mutex<Option<txvfs::Watcher>>,
}

fn changes_of(py: Python<'_>, batches: Vec<Batch>) -> PyResult<Bound<'_, PyList>> {
    let out = PyList::empty(py);
    for b in batches {
        let cursor = b.cursor.to_string();
        for c in b.changes {
            let to =
                c.to.as_deref().map(|t| name_obj(py, t, false).map(Bound::unbind)).transpose()?;
            out.append(Change {
                kind: c.kind.name(),
                path: name_obj(py, &c.path, false)?.unbind(),
                to,
                ino: c.ino,
                r#type: kind_name(c.file_type),
                cursor: cursor.clone(),
                time_ms: b.time_ms,
            })?;
        }
    }
    Ok(out)
}

impl Watcher {
    pub(crate) fn open(
        py: Python<'_>,
        store: CoreStore,
        prefix: Option<Vec<Bound<'_, PyAny>>>,
        kinds: Option<Vec<String>>,
        since: Option<String>,
    ) -> PyResult<Watcher> {
        let prefixes = prefix
            .unwrap_or_default()
            .iter()
            .map(|p| path_of(p).map(|p| p.bytes))
            .collect::<PyResult<Vec<_>>>()?;
        let kinds = kinds
            .unwrap_or_default()
            .iter()
            .map(|k| {
                ChangeKind::from_name(k).ok_or_else(|| {
                    PyValueError::new_err(format!(
                        "unknown change kind {k:?} (created, written, removed, renamed, attrs, xattrs, linked)"
                    ))
                })
            })
            .collect::<PyResult<Vec<_>>>()?;
        let since = since.map(|s| Cursor::parse(&s)).transpose().map_err(to_py)?;
        let options = WatchOptions { prefixes, kinds, since };
        let w = detached(py, move || store.watch(options))?;
        Ok(Watcher { inner: Mutex::new(Some(w)) })
    }

    fn run<T: Send>(
        &self,
        py: Python<'_>,
        f: impl FnOnce(&mut txvfs::Watcher) -> txvfs::Result<T> + Send,
    ) -> PyResult<T> {
        let mut guard = self.inner.lock();
        let w = guard.as_mut().ok_or_else(|| PyValueError::new_err("watcher is closed"))?;
        detached(py, move || f(w))
    }
}

#[pymethods]
impl Watcher {
    /// The changes committed since the last call that are there now (a list, maybe empty),
    /// without blocking.
    fn poll<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let batches = self.run(py, |w| w.poll())?;
        changes_of(py, batches)
    }

    /// Like `poll`, waiting up to `timeout` seconds for at least one change; an empty list
    /// when none came.
    fn wait<'py>(&self, py: Python<'py>, timeout: f64) -> PyResult<Bound<'py, PyList>> {
        if !(timeout >= 0.0 && timeout.is_finite()) {
            return Err(to_py(Error::new(
                ErrorKind::Invalid,
                "timeout must be a finite number >= 0",
            )));
        }
        let batches = self.run(py, move |w| w.wait(Duration::from_secs_f64(timeout)))?;
        changes_of(py, batches)
    }

    /// The position after everything returned so far (a string; `since=` resumes from it).
    #[getter]
    fn cursor(&self) -> PyResult<String> {
        let guard = self.inner.lock();
        let w = guard.as_ref().ok_or_else(|| PyValueError::new_err("watcher is closed"))?;
        Ok(w.cursor().to_string())
    }

    /// Stops watching; later calls raise `ValueError`. Idempotent.
    fn close(&self) {
        self.inner.lock().take();
    }
}
