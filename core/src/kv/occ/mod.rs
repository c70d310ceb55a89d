//! Serializable optimistic transactions over a storage engine that offers snapshots and atomic
//! batches (memory, RocksDB). This is the shape of FoundationDB's resolvers: reads happen at a
//! snapshot and record the keys and ranges they covered; a commit, in a short critical
//! section (the resolver), checks that read set against the write sets of transactions
//! committed after the snapshot, takes the next version and records its own write set. Only
//! the process that owns a store runs it (other processes are clients of its resolver, see
//! `kv/shared`), so this in-memory check is complete.
//!
//! The engine write happens after the resolver, in a pipeline: commits are applied in version
//! order, several at a time by whichever committer finds the next version ready (the leader),
//! and each becomes visible (new snapshots see it) only with every earlier one. Durable
//! commits then share fsyncs (group commit, `sync_to`). A read cache (`cache.rs`) is updated
//! as each commit is applied, under the lock that publishes the new version.

mod cached;
mod pinned;
mod pipeline;
mod ranges;
mod reader;
mod resolver;
mod store;
mod txn;

pub(crate) use store::{CommitObserver, OccStore};

use crate::error::Result;

/// One write of a committed batch.
#[derive(Clone, Debug)]
pub(crate) enum Mutation {
    Set(Vec<u8>, Vec<u8>),
    Clear(Vec<u8>),
    ClearRange(Vec<u8>, Vec<u8>),
}

/// What a storage engine gives the optimistic layer.
pub(crate) trait Engine: Send + Sync + 'static {
    type Snapshot: Send + Sync;
    /// A snapshot of the latest applied state; called inside the commit critical section.
    fn snapshot(&self, version: u64) -> Self::Snapshot;
    fn get(&self, snap: &Self::Snapshot, key: &[u8]) -> Result<Option<Vec<u8>>>;
    /// [`Engine::get`] lending the value to `read` (false: absent). The default copies.
    fn get_with(
        &self,
        snap: &Self::Snapshot,
        key: &[u8],
        read: &mut dyn FnMut(&[u8]),
    ) -> Result<bool> {
        Ok(self.get(snap, key)?.map(|v| read(&v)).is_some())
    }
    /// Reads the latest applied state; called inside the commit critical section.
    fn get_latest(&self, key: &[u8]) -> Result<Option<Vec<u8>>>;
    /// Visits `start <= key < end` in order (descending when `reverse`) until `visit` is false.
    fn scan(
        &self,
        snap: &Self::Snapshot,
        start: &[u8],
        end: &[u8],
        reverse: bool,
        visit: &mut dyn FnMut(&[u8], &[u8]) -> bool,
    ) -> Result<()>;
    /// Applies a batch atomically: all of it or, on error, none of it. `oldest_snapshot` is the
    /// oldest version a live snapshot still reads (for engines that keep versions).
    fn apply(&self, batch: &[Mutation], version: u64, oldest_snapshot: u64) -> Result<()>;
    /// Makes everything applied so far durable.
    fn sync(&self) -> Result<()>;
    /// Fails when the engine cannot be used here (RocksDB: a store inherited across fork()).
    fn usable(&self) -> Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests;
