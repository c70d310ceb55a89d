//! [`Txn::parallel_reader`] of an optimistic transaction (`txn.rs`): its snapshot, shared by
//! the threads of a parallel read.
//!
//! [`Txn::parallel_reader`]: crate::kv::Txn::parallel_reader

use super::{Engine, OccStore};
use crate::error::Result;
use crate::kv::SnapshotReader;
use std::sync::Arc;

/// [`Txn::parallel_reader`] of an optimistic transaction: its snapshot, shared.
pub(super) struct Reader<E: Engine> {
    // Declared before `store` so the snapshot is released before the engine can go away.
    pub(super) snap: Arc<E::Snapshot>,
    pub(super) store: Arc<OccStore<E>>,
    pub(super) range: (Vec<u8>, Vec<u8>),
}

impl<E: Engine> SnapshotReader for Reader<E> {
    fn visit_range(
        &self,
        start: &[u8],
        end: &[u8],
        visit: &mut dyn FnMut(&[u8], &[u8]),
    ) -> Result<()> {
        let start = start.max(self.range.0.as_slice());
        let end = end.min(self.range.1.as_slice());
        if start < end {
            self.store.engine.scan(&self.snap, start, end, false, &mut |k, v| {
                visit(k, v);
                true
            })?;
        }
        Ok(())
    }
    fn in_flight(&self) -> usize {
        1
    }
}
