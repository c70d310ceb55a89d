//! Read-only backends over data that never changes: an in-process snapshot of a live backend
//! (pinned at one version) or a named snapshot opened from disk. Their transactions read,
//! never conflict, and refuse every write with [`ErrorKind::ReadOnly`].

use super::{Backend, KeyValue, Limits, Snapshots, Txn};
use crate::error::{Error, ErrorKind, Result};
use std::sync::Arc;

/// Reads of one unchanging view of a key space.
pub(crate) trait FrozenRead: Send + Sync + 'static {
    /// Fails when the view cannot be used here (a RocksDB snapshot inherited across fork()).
    fn usable(&self) -> Result<()> {
        Ok(())
    }
    /// The value of `key`.
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>>;
    /// Visits `start <= key < end` in order (descending when `reverse`) until `visit` is false.
    fn scan(
        &self,
        start: &[u8],
        end: &[u8],
        reverse: bool,
        visit: &mut dyn FnMut(&[u8], &[u8]) -> bool,
    ) -> Result<()>;
}

/// A read-only backend over a [`FrozenRead`].
pub(crate) struct FrozenBackend {
    view: Arc<dyn FrozenRead>,
    limits: Limits,
    describe: String,
    disk_space: Option<(u64, u64)>,
    /// The backend the view was taken from, kept open while the view lives (so that
    /// reopening its store in this process finds it open, rather than busy).
    source: Option<Arc<dyn Backend>>,
}

impl FrozenBackend {
    /// A read-only backend reading `view`; `describe` names it in messages.
    pub(crate) fn new(
        view: Arc<dyn FrozenRead>,
        limits: Limits,
        describe: String,
        disk_space: Option<(u64, u64)>,
    ) -> FrozenBackend {
        FrozenBackend { view, limits, describe, disk_space, source: None }
    }

    /// The same, keeping `source` open while it lives.
    pub(crate) fn keeping(mut self, source: Option<Arc<dyn Backend>>) -> FrozenBackend {
        self.source = source;
        self
    }
}

/// The error of every write to a read-only backend.
pub(crate) fn read_only_error(what: &str) -> Error {
    Error::new(ErrorKind::ReadOnly, format!("{what}: read-only snapshot"))
}

impl Backend for FrozenBackend {
    fn begin(&self) -> Result<Box<dyn Txn>> {
        self.view.usable()?;
        Ok(Box::new(FrozenTxn { view: self.view.clone(), describe: self.describe.clone() }))
    }
    fn limits(&self) -> Limits {
        // No transaction of a frozen view can grow old: it reads data that never changes.
        Limits { max_txn_duration: None, ..self.limits }
    }
    fn sync(&self) -> Result<()> {
        Ok(())
    }
    fn describe(&self) -> String {
        self.describe.clone()
    }
    fn disk_space(&self) -> Option<(u64, u64)> {
        self.disk_space
    }
    fn read_only(&self) -> bool {
        true
    }
    fn snapshots(&self) -> Option<&dyn Snapshots> {
        Some(self)
    }
}

impl Snapshots for FrozenBackend {
    fn snapshot(&self) -> Result<Arc<dyn Backend>> {
        let copy = FrozenBackend::new(
            self.view.clone(),
            self.limits,
            self.describe.clone(),
            self.disk_space,
        );
        Ok(Arc::new(copy.keeping(self.source.clone())))
    }
}

struct FrozenTxn {
    view: Arc<dyn FrozenRead>,
    describe: String,
}

impl FrozenTxn {
    fn range(
        &self,
        start: &[u8],
        end: &[u8],
        limit: usize,
        reverse: bool,
    ) -> Result<Vec<KeyValue>> {
        let mut out = Vec::new();
        if start >= end {
            return Ok(out);
        }
        let limit = if limit == 0 { usize::MAX } else { limit };
        self.view.scan(start, end, reverse, &mut |k, v| {
            out.push((k.to_vec(), v.to_vec()));
            out.len() < limit
        })?;
        Ok(out)
    }
}

impl Txn for FrozenTxn {
    fn get(&mut self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.view.get(key)
    }
    fn snapshot_get(&mut self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.view.get(key)
    }
    fn get_range(&mut self, s: &[u8], e: &[u8], limit: usize, rev: bool) -> Result<Vec<KeyValue>> {
        self.range(s, e, limit, rev)
    }
    fn snapshot_get_range(
        &mut self,
        s: &[u8],
        e: &[u8],
        limit: usize,
        rev: bool,
    ) -> Result<Vec<KeyValue>> {
        self.range(s, e, limit, rev)
    }
    fn set(&mut self, _key: &[u8], _value: &[u8]) -> Result<()> {
        Err(read_only_error(&self.describe))
    }
    fn clear(&mut self, _key: &[u8]) -> Result<()> {
        Err(read_only_error(&self.describe))
    }
    fn clear_range(&mut self, _start: &[u8], _end: &[u8]) -> Result<()> {
        Err(read_only_error(&self.describe))
    }
    fn atomic_add(&mut self, _key: &[u8], _delta: i64) -> Result<()> {
        Err(read_only_error(&self.describe))
    }
    fn atomic_max(&mut self, _key: &[u8], _value: u64) -> Result<()> {
        Err(read_only_error(&self.describe))
    }
    fn commit(self: Box<Self>, _durable: bool) -> Result<()> {
        // Nothing was written: serializable at the frozen view.
        Ok(())
    }
}
