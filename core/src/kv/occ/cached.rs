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
use crate::kv::{CacheWatch, KeyValue, LentCopies, Txn};
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

/// [`CacheWatch`] on an [`OccStore`]'s cache: the versions are the visible ones, which every
/// commit of every process reaches only after updating the cache (an owner's clients commit
/// through it).
struct OccWatch<E: Engine> {
    store: Arc<OccStore<E>>,
    /// The fork generation it was made in: in a fork's child, the parent's cache is a copy
    /// that no commit updates any more.
    generation: u64,
}

// How many times this process forked (RocksDB stores refuse a fork's child).
#[cfg(feature = "rocksdb")]
use crate::kv::owner::fork_generation;
#[cfg(not(feature = "rocksdb"))]
fn fork_generation() -> u64 {
    0
}

impl<E: Engine> OccStore<E> {
    /// A [`CacheWatch`] on this store's cache.
    pub(crate) fn cache_watch(self: &Arc<Self>) -> Box<dyn CacheWatch> {
        Box::new(OccWatch { store: self.clone(), generation: fork_generation() })
    }
}

impl<E: Engine> CacheWatch for OccWatch<E> {
    fn version(&self) -> Option<u64> {
        if self.store.stopped.load(Ordering::Acquire) || fork_generation() != self.generation {
            return None;
        }
        Some(self.store.visible_now.load(Ordering::Acquire))
    }

    fn refresh(
        &self,
        at: u64,
        within: &[(&[u8], &[u8])],
        copies: &mut dyn LentCopies,
    ) -> Option<u64> {
        let mut c = self.store.cache.lock();
        let usable = self.version().is_some() && c.enabled();
        for (start, end) in within {
            if !usable || !c.written_since(at, start, end, |k, e| copies.stale(k, e)) {
                copies.stale(start, Some(end));
            }
        }
        if !usable {
            return None;
        }
        // The cache is at its last applied commit, which may not be visible yet: the copies
        // are of that version, and are used once it is.
        let now = c.version();
        copies.fill(&mut |key| c.get(key, now).flatten());
        Some(now)
    }

    fn reserve(&self, bytes: usize) -> bool {
        let limit = self.store.lend_limit.load(Ordering::Relaxed);
        self.store
            .lent
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |held| {
                held.checked_add(bytes).filter(|n| *n <= limit)
            })
            .is_ok()
    }

    fn unreserve(&self, bytes: usize) {
        self.store.lent.fetch_sub(bytes, Ordering::SeqCst);
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
