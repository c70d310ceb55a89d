//! `Store`: an open store; every call on it is a transaction by itself.

use crate::errors::detached;
use crate::filesystem::{FileSystem, Target};
use crate::paths::path_of;
use parking_lot::Mutex;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use txvfs::{Credential, Options, Store as CoreStore};

/// An open store. Every call is a transaction by itself (auto-commit), like a POSIX call.
/// URIs: `memory:`, `rocksdb:/path` or a bare path (RocksDB, created if missing).
#[pyclass(frozen, subclass, extends = FileSystem, module = "txvfs._txvfs")]
pub(crate) struct Store {
    uri: String,
    /// The `max_retries` option: how often `transact` runs a conflicting transaction again.
    max_retries: u32,
}

#[pymethods]
impl Store {
    /// Opens (or creates) the store at `uri`. `sync`: make each commit durable before it
    /// returns; `block_size`/`inline_limit`: layout of a new store; `read_only`: refuse
    /// changes; `max_retries`: conflict retries; `uid`/`gid`/`groups`: check POSIX
    /// permissions as this user (default: act as the store's owner). With `snapshot_of`
    /// (what `Store.snapshot()` passes), a read-only snapshot of that open store instead,
    /// and `uri` only names it.
    #[new]
    #[pyo3(signature = (uri, *, sync = true, block_size = 65536, inline_limit = 4096, read_only = false,
                        max_retries = 100, uid = None, gid = None, groups = None, snapshot_of = None))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        uri: &Bound<'_, PyAny>,
        sync: bool,
        block_size: u32,
        inline_limit: u32,
        read_only: bool,
        max_retries: u32,
        uid: Option<u32>,
        gid: Option<u32>,
        groups: Option<Vec<u32>>,
        snapshot_of: Option<PyRef<'_, Store>>,
    ) -> PyResult<PyClassInitializer<Self>> {
        if let Some(of) = snapshot_of {
            let s = of.as_super().store()?;
            let snap = detached(py, move || s.snapshot())?;
            let uri = path_of(uri)?.bytes;
            let uri = String::from_utf8(uri)
                .map_err(|_| PyValueError::new_err("store URI must be UTF-8"))?;
            return Ok(PyClassInitializer::from(FileSystem {
                target: Target::Store(Mutex::new(Some(snap))),
            })
            .add_subclass(Store { uri, max_retries: of.max_retries }));
        }
        let uri_b = path_of(uri)?.bytes;
        let uri = String::from_utf8(uri_b)
            .map_err(|_| PyValueError::new_err("store URI must be UTF-8"))?;
        let credential = match (uid, gid) {
            (None, None) if groups.is_none() => None,
            (Some(u), Some(g)) => {
                Some(Credential { uid: u, gid: g, groups: groups.unwrap_or_default() })
            }
            _ => return Err(PyValueError::new_err("uid and gid must be given together")),
        };
        let options = Options {
            sync,
            block_size,
            inline_limit,
            read_only,
            credential,
            max_retries,
            ..Options::default()
        };
        let u = uri.clone();
        let store = detached(py, move || CoreStore::open_with(&u, options))?;
        Ok(PyClassInitializer::from(FileSystem { target: Target::Store(Mutex::new(Some(store))) })
            .add_subclass(Store { uri, max_retries }))
    }

    /// The URI the store was opened with.
    #[getter]
    fn uri(&self) -> &str {
        &self.uri
    }

    /// How often `transact` runs a conflicting transaction again (the `max_retries` option).
    #[getter]
    fn max_retries(&self) -> u32 {
        self.max_retries
    }

    /// The backend's description, such as `rocksdb:/path`.
    fn describe(self_: PyRef<'_, Self>, py: Python<'_>) -> PyResult<String> {
        let s = self_.as_super().store()?;
        Ok(py.detach(|| s.describe()))
    }

    /// The store's block size in bytes.
    #[getter]
    fn block_size(self_: PyRef<'_, Self>) -> PyResult<u32> {
        Ok(self_.as_super().store()?.block_size())
    }

    /// Makes every change committed so far durable (what `fsync` does for auto-commit writes).
    fn sync(self_: PyRef<'_, Self>, py: Python<'_>) -> PyResult<()> {
        let s = self_.as_super().store()?;
        detached(py, move || s.sync())
    }

    /// Keeps a snapshot of the whole tree as it is now under `name`, surviving reopening;
    /// returns the URI that opens it read-only (`rocksdb:/path?snapshot=NAME`). RocksDB only.
    fn create_snapshot(self_: PyRef<'_, Self>, py: Python<'_>, name: String) -> PyResult<String> {
        let s = self_.as_super().store()?;
        detached(py, move || {
            s.create_named_snapshot(&name)?;
            s.named_snapshot_uri(&name)
        })
    }

    /// The names of the store's named snapshots, sorted.
    fn snapshots(self_: PyRef<'_, Self>, py: Python<'_>) -> PyResult<Vec<String>> {
        let s = self_.as_super().store()?;
        detached(py, move || s.named_snapshots())
    }

    /// Deletes the named snapshot `name` (`FileNotFoundError` if none; refused while open).
    fn delete_snapshot(self_: PyRef<'_, Self>, py: Python<'_>, name: String) -> PyResult<()> {
        let s = self_.as_super().store()?;
        detached(py, move || s.delete_named_snapshot(&name))
    }

    /// The URI that opens the named snapshot `name` read-only.
    fn snapshot_uri(self_: PyRef<'_, Self>, py: Python<'_>, name: String) -> PyResult<String> {
        let s = self_.as_super().store()?;
        detached(py, move || s.named_snapshot_uri(&name))
    }

    /// Turns the store's change feed on or off (off by default: it costs every writing
    /// transaction one more key). Turn it on before writers open the store.
    fn set_change_feed(self_: PyRef<'_, Self>, py: Python<'_>, on: bool) -> PyResult<()> {
        let s = self_.as_super().store()?;
        detached(py, move || s.set_change_feed(on))
    }

    /// Watches the change feed: a `Watcher` reporting each committed change after `since`
    /// (a cursor string; default: from now), at or below one of the paths `prefix`, of the
    /// `kinds` given (default: all).
    #[pyo3(signature = (*, prefix = None, kinds = None, since = None))]
    fn watch_native(
        self_: PyRef<'_, Self>,
        py: Python<'_>,
        prefix: Option<Vec<Bound<'_, PyAny>>>,
        kinds: Option<Vec<String>>,
        since: Option<String>,
    ) -> PyResult<crate::watch::Watcher> {
        let s = self_.as_super().store()?;
        crate::watch::Watcher::open(py, s, prefix, kinds, since)
    }

    /// True once `close()` was called.
    #[getter]
    fn closed(self_: PyRef<'_, Self>) -> bool {
        match &self_.as_super().target {
            Target::Store(m) => m.lock().is_none(),
            Target::Tx(_) => true,
        }
    }

    /// Releases this object's reference to the store; later calls raise `ValueError`, like
    /// a closed `io` object's. Open files keep the store alive until they close. Idempotent.
    fn close(self_: PyRef<'_, Self>, py: Python<'_>) {
        if let Target::Store(m) = &self_.as_super().target {
            let s = m.lock().take();
            py.detach(move || drop(s));
        }
    }
}
