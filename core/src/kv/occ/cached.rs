//! A read-only transaction answered by the read cache alone, at the visible version: what a
//! hot `stat` or `pread` runs on. It takes no engine snapshot, registers no live version and
//! keeps no read set (a read-only transaction at the visible version can never conflict), so
//! it costs one cache lookup per key. Every read checks, under the cache's lock, that the cache
//! is still exactly at the version the transaction began at (commits update the cache under
//! that lock before they become visible), so all its reads belong to one snapshot. The first
//! read the cache cannot answer, a write, or a range read marks it missed: its commit then
//! fails, and the caller runs the call again as an ordinary transaction (`Backend::begin`).

use super::{Engine, OccStore};
use crate::error::{Error, ErrorKind, Result};
use crate::kv::{KeyValue, Txn};
use std::sync::atomic::Ordering;
use std::sync::Arc;

pub(super) struct CachedTxn<E: Engine> {
    store: Arc<OccStore<E>>,
    version: u64,
    missed: bool,
}

fn miss() -> Error {
    Error::new(ErrorKind::Conflict, "not in the read cache: read through a transaction")
}

impl<E: Engine> OccStore<E> {
    /// A [`CachedTxn`] at the visible version, or None when the cache is off or the store
    /// stopped (the ordinary path then says why).
    pub(crate) fn begin_cached(self: &Arc<Self>) -> Option<Box<dyn Txn>> {
        if self.stopped.load(Ordering::Acquire) {
            return None;
        }
        let version = self.visible_now.load(Ordering::Acquire);
        Some(Box::new(CachedTxn { store: self.clone(), version, missed: false }))
    }
}

impl<E: Engine> CachedTxn<E> {
    /// Lends the cached value of `key` at this transaction's version (`None`: absent).
    fn lookup<R>(&mut self, key: &[u8], read: impl FnOnce(Option<&[u8]>) -> R) -> Result<R> {
        if !self.missed {
            let mut c = self.store.cache.lock();
            if c.enabled() && c.version() == self.version {
                if let Some(v) = c.get(key, self.version) {
                    drop(c);
                    return Ok(read(v.as_deref()));
                }
            }
        }
        self.missed = true;
        Err(miss())
    }

    fn refuse<T>(&mut self) -> Result<T> {
        self.missed = true;
        Err(miss())
    }
}

impl<E: Engine> Txn for CachedTxn<E> {
    fn get(&mut self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.lookup(key, |v| v.map(<[u8]>::to_vec))
    }
    fn snapshot_get(&mut self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.get(key)
    }
    fn get_with(&mut self, key: &[u8], read: &mut dyn FnMut(&[u8])) -> Result<bool> {
        self.lookup(key, |v| v.map(read).is_some())
    }
    fn lend(&mut self, key: &[u8]) -> Result<Option<Arc<[u8]>>> {
        // What the cache holds at this version, or no answer (not a miss: reading is the
        // caller's fallback, and it may be answered from the cache as well).
        let mut c = self.store.cache.lock();
        if self.missed || !c.enabled() || c.version() != self.version {
            return Ok(None);
        }
        Ok(c.get(key, self.version).flatten())
    }
    fn local_reads(&self) -> bool {
        true
    }
    fn note_read(&mut self, _key: &[u8], _value: Option<&[u8]>) -> Result<()> {
        // What `snapshot_get_many` lent came from this version: it stays what this reads.
        Ok(())
    }
    fn get_range(&mut self, _: &[u8], _: &[u8], _: usize, _: bool) -> Result<Vec<KeyValue>> {
        self.refuse()
    }
    fn add_read_conflict_range(&mut self, _: &[u8], _: &[u8]) -> Result<()> {
        Ok(()) // a read-only transaction at the visible version conflicts with nothing
    }
    fn visit_range(
        &mut self,
        start: &[u8],
        end: &[u8],
        visit: &mut dyn FnMut(&[u8], &[u8]),
    ) -> Result<()> {
        if !self.missed {
            let mut c = self.store.cache.lock();
            if c.enabled() && c.version() == self.version {
                if let Some(pairs) = c.get_range(start, end, self.version) {
                    drop(c);
                    for (k, v) in pairs.iter() {
                        visit(k, v);
                    }
                    return Ok(());
                }
            }
        }
        self.refuse()
    }
    fn snapshot_get_range(
        &mut self,
        _: &[u8],
        _: &[u8],
        _: usize,
        _: bool,
    ) -> Result<Vec<KeyValue>> {
        self.refuse()
    }
    fn set(&mut self, _: &[u8], _: &[u8]) -> Result<()> {
        self.refuse()
    }
    fn clear(&mut self, _: &[u8]) -> Result<()> {
        self.refuse()
    }
    fn clear_range(&mut self, _: &[u8], _: &[u8]) -> Result<()> {
        self.refuse()
    }
    fn atomic_add(&mut self, _: &[u8], _: i64) -> Result<()> {
        self.refuse()
    }
    fn atomic_max(&mut self, _: &[u8], _: u64) -> Result<()> {
        self.refuse()
    }
    fn set_versionstamped_key(&mut self, _: &[u8], _: &[u8]) -> Result<()> {
        self.refuse()
    }
    fn read_version(&self) -> Option<u64> {
        Some(self.version)
    }
    fn commit(self: Box<Self>, _durable: bool) -> Result<()> {
        if self.missed {
            return Err(miss());
        }
        Ok(())
    }
}
