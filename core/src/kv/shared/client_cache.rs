//! A client's read cache: values this process read from the owner, kept exact by the owner's
//! change ring (`ring.rs`), so a transaction whose reads all hit it never crosses the socket.
//!
//! A transaction begins at the ring's latest version V: the cache first drops every entry a
//! commit up to V wrote, so what it holds is the store's state at V. Reads that hit are
//! answered here; the first request that must reach the owner (a miss, a range read, a write)
//! starts the owner's transaction with `BEGIN_AT`, which carries V and the keys read here.
//! The owner begins at its latest version V' >= V, checks in its ring that no commit in
//! (V, V'] wrote those keys (else the transaction conflicts and is retried), and adds them to
//! the transaction's read set, so the commit's conflict check covers them from V' on: every
//! read of the transaction is then as if made at V', and a commit stays serializable.
//!
//! Versions restart with each owner; entries are tied to the ring's epoch, and a new epoch
//! (a failover) empties the cache.

use super::ring::{Changes, RingReader, Written};
use crate::error::Result;
use crate::kv::cache::ReadCache;
use crate::kv::range_cache::Pairs;
use crate::kv::CacheStats;
use std::os::fd::OwnedFd;
use std::sync::Arc;

/// See the module documentation. Not synchronised: the client keeps it under a mutex.
pub(crate) struct ClientCache {
    ring: RingReader,
    epoch: u64,
    cache: ReadCache,
}

/// Where a transaction reads the cache: the ring's epoch and version when it began.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct At {
    pub(crate) epoch: u64,
    pub(crate) version: u64,
}

impl ClientCache {
    /// Maps the ring the owner handed over (`ring.rs`); the cache keeps nothing until given
    /// a capacity.
    pub(crate) fn adopt(ring: &OwnedFd) -> Result<ClientCache> {
        Ok(ClientCache { ring: RingReader::adopt(ring)?, epoch: 0, cache: ReadCache::new(0, 0) })
    }

    /// Changes the capacity in bytes (0: keep nothing).
    pub(crate) fn set_capacity(&mut self, bytes: usize) {
        self.cache.set_capacity(bytes);
    }

    /// True if the cache keeps anything.
    pub(crate) fn enabled(&self) -> bool {
        self.cache.enabled()
    }

    /// Applies what the owner committed since the last call; returns where a transaction
    /// beginning now reads.
    pub(crate) fn catch_up(&mut self) -> At {
        match self.ring.changes() {
            Changes::Reset { epoch, version } => {
                self.epoch = epoch;
                self.cache.reset(version);
            }
            Changes::Since { version, writes } => {
                // One entry per commit, so a fill at a version between two of them (a
                // client's own commit, `fill_own`) is checked against the later ones only.
                let mut it = writes.into_iter().peekable();
                while let Some((v, first)) = it.next() {
                    let (mut points, mut ranges) = (Vec::new(), Vec::new());
                    let mut w = Some(first);
                    loop {
                        match w.take() {
                            Some(Written::Key(k)) => points.push(k),
                            Some(Written::Range(s, e)) => ranges.push((s, e)),
                            None => {}
                        }
                        match it.peek() {
                            Some((next, _)) if *next == v => w = it.next().map(|(_, w)| w),
                            _ => break,
                        }
                    }
                    self.cache.invalidated(v, points, ranges);
                }
                if version != self.cache.version() {
                    self.cache.invalidated(version, Vec::new(), Vec::new());
                }
            }
        }
        At { epoch: self.epoch, version: self.cache.version() }
    }

    /// The value of `key` at `at`, if known: `Some(None)` means absent.
    pub(crate) fn get(&mut self, at: At, key: &[u8]) -> Option<Option<Arc<[u8]>>> {
        if at.epoch != self.epoch {
            return None;
        }
        self.cache.get(key, at.version)
    }

    /// Every pair of `[start, end)` at `at`, if the cache holds that whole range.
    pub(crate) fn get_range(&mut self, at: At, start: &[u8], end: &[u8]) -> Option<Pairs> {
        if at.epoch != self.epoch {
            return None;
        }
        self.cache.get_range(start, end, at.version)
    }

    /// Keeps `pairs`, all of `[start, end)` as the owner read them at `version` of `epoch`.
    pub(crate) fn fill_range(
        &mut self,
        epoch: u64,
        version: u64,
        start: &[u8],
        end: &[u8],
        pairs: Pairs,
    ) {
        if epoch == self.epoch {
            self.cache.fill_range(start, end, version, pairs);
        }
    }

    /// Keeps `value`, read from the owner at version `version` of `epoch`.
    pub(crate) fn fill(&mut self, epoch: u64, version: u64, key: &[u8], value: Option<&[u8]>) {
        if epoch == self.epoch {
            self.cache.fill(key, version, value);
        }
    }

    /// After this process's own commit at `version` of `epoch`: keeps the values it wrote
    /// (`None`: cleared), unless a later commit wrote them too, so that the next transaction
    /// reads them here (a file written again and again is not a miss each time).
    pub(crate) fn fill_own(
        &mut self,
        epoch: u64,
        version: u64,
        writes: &[(Vec<u8>, Option<Vec<u8>>)],
    ) {
        // The ring holds the commit (it is published before it is acknowledged): catching up
        // first drops the old values and brings the later commits' writes into view.
        self.catch_up();
        for (k, v) in writes {
            self.fill(epoch, version, k, v.as_deref());
        }
    }

    /// Hits, misses and bytes held.
    pub(crate) fn stats(&self) -> Option<CacheStats> {
        let c = &self.cache;
        c.enabled().then(|| CacheStats { hits: c.hits, misses: c.misses, bytes: c.used() as u64 })
    }
}
