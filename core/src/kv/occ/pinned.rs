//! Snapshots pinned at one version ([`OccStore::pin`]): they keep the engine's old versions.

use super::{Engine, OccStore};
use crate::error::Result;
use std::sync::Arc;

/// A snapshot pinned at one version (see [`OccStore::pin`]).
pub(crate) struct Pinned<E: Engine> {
    // Declared before `store` so the snapshot is released before the engine can go away.
    snap: Option<E::Snapshot>,
    store: Arc<OccStore<E>>,
    version: u64,
}

impl<E: Engine> Drop for Pinned<E> {
    fn drop(&mut self) {
        self.snap = None;
        let mut pinned = self.store.pinned.lock();
        if let Some(n) = pinned.get_mut(&self.version) {
            *n -= 1;
            if *n == 0 {
                pinned.remove(&self.version);
            }
        }
    }
}

impl<E: Engine> crate::kv::frozen::FrozenRead for Pinned<E> {
    fn usable(&self) -> Result<()> {
        self.store.engine.usable()
    }
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.store.engine.get(self.snap.as_ref().expect("snapshot lives until drop"), key)
    }
    fn scan(
        &self,
        start: &[u8],
        end: &[u8],
        reverse: bool,
        visit: &mut dyn FnMut(&[u8], &[u8]) -> bool,
    ) -> Result<()> {
        self.store.engine.scan(
            self.snap.as_ref().expect("snapshot lives until drop"),
            start,
            end,
            reverse,
            visit,
        )
    }
}

impl<E: Engine> OccStore<E> {
    /// A read-only view of the latest committed state, kept until the view is dropped. Taken
    /// under `visible`'s read lock, so every commit is in it whole or not at all.
    pub(crate) fn pin(self: &Arc<Self>) -> Result<Pinned<E>> {
        self.check_healthy()?;
        let vis = self.visible.read();
        let version = *vis;
        *self.pinned.lock().entry(version).or_insert(0) += 1;
        Ok(Pinned { snap: Some(self.engine.snapshot(version)), store: self.clone(), version })
    }
}
