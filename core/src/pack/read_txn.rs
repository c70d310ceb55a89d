//! The [`Backend`] of a pack image and its transactions: reads only, every write `ReadOnly`.

use super::read::{read_only, Inner, PackBackend};
use crate::error::Result;
use crate::kv::{Backend, KeyValue, Limits, Txn};
use std::sync::Arc;

impl Backend for PackBackend {
    fn begin(&self) -> Result<Box<dyn Txn>> {
        Ok(Box::new(PackTxn { inner: self.inner.clone() }))
    }
    fn limits(&self) -> Limits {
        Limits::UNLIMITED
    }
    fn sync(&self) -> Result<()> {
        Ok(())
    }
    fn describe(&self) -> String {
        self.inner.what.clone()
    }
    /// The image's size, all of it used: `statfs` shows a full, read-only file system.
    fn disk_space(&self) -> Option<(u64, u64)> {
        Some((self.inner.len, 0))
    }
    /// Always: a pack never changes (so it can be a clone's lower layer).
    fn read_only(&self) -> bool {
        true
    }
}

/// A transaction on a pack: reads only.
struct PackTxn {
    inner: Arc<Inner>,
}

impl Txn for PackTxn {
    fn get(&mut self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.inner.get(key)
    }
    fn snapshot_get(&mut self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.inner.get(key)
    }
    fn get_range(
        &mut self,
        start: &[u8],
        end: &[u8],
        limit: usize,
        reverse: bool,
    ) -> Result<Vec<KeyValue>> {
        self.inner.get_range(start, end, limit, reverse)
    }
    fn snapshot_get_range(
        &mut self,
        start: &[u8],
        end: &[u8],
        limit: usize,
        reverse: bool,
    ) -> Result<Vec<KeyValue>> {
        self.inner.get_range(start, end, limit, reverse)
    }
    fn set(&mut self, _: &[u8], _: &[u8]) -> Result<()> {
        Err(read_only(&self.inner.what))
    }
    fn clear(&mut self, _: &[u8]) -> Result<()> {
        Err(read_only(&self.inner.what))
    }
    fn clear_range(&mut self, _: &[u8], _: &[u8]) -> Result<()> {
        Err(read_only(&self.inner.what))
    }
    fn atomic_add(&mut self, _: &[u8], _: i64) -> Result<()> {
        Err(read_only(&self.inner.what))
    }
    fn atomic_max(&mut self, _: &[u8], _: u64) -> Result<()> {
        Err(read_only(&self.inner.what))
    }
    fn commit(self: Box<Self>, _durable: bool) -> Result<()> {
        // Nothing can have been written.
        Ok(())
    }
}
