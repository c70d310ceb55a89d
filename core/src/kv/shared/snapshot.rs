//! In-process snapshots of a shared store.
//!
//! A snapshot is taken on the owner's engine (a client cannot pin the owner's RocksDB from
//! another process). It keeps the whole [`SharedBackend`] alive, not only the engine: when the
//! owner drops its `Store` and keeps a snapshot, this process goes on serving the other
//! processes for as long as the snapshot lives, instead of holding RocksDB and the owner lock
//! without serving (which locked every other process out). Dropping the last snapshot then
//! closes the store as dropping the `Store` would have: the server stops (in-flight commits
//! drained) and another process takes over.

use super::SharedBackend;
use crate::error::Result;
use crate::kv::{Backend, Snapshots};
use std::sync::Arc;

impl Snapshots for SharedBackend {
    fn snapshot(&self) -> Result<Arc<dyn Backend>> {
        let local = self.owned("an in-process snapshot")?;
        let keep = self.me.upgrade().map(|b| b as Arc<dyn Backend>);
        local.snapshot_keeping(keep)
    }
}
