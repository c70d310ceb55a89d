//! Large reads from a backend with a round trip per request: several range reads of blocks in
//! flight at once, from the transaction's snapshot ([`Txn::parallel_reader`]).
//!
//! [`Txn::parallel_reader`]: crate::kv::Txn::parallel_reader

use super::Operation;
use crate::error::{panic_error, Result};
use crate::kv::KeyValue;
use crate::schema;

/// Blocks fetched by one request of a parallel read: 16 blocks of the default 64 KiB, 1 MiB.
pub(super) const PIECE_BLOCKS: u64 = 16;

impl Operation<'_> {
    /// Copies the stored blocks `first..=last` of `ino` (blocks of `bs` bytes) into `out`,
    /// which holds the file's bytes `[off, end)`, like [`Operation::copy_blocks`], with up to
    /// the backend's number of range reads of [`PIECE_BLOCKS`] blocks in flight at once.
    /// Returns false, having read nothing, where the backend gains nothing from it (a local
    /// engine) or cannot (the transaction wrote into these blocks): the caller reads them one
    /// piece at a time.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn copy_blocks_parallel(
        &mut self,
        ino: u64,
        bs: u64,
        first: u64,
        last: u64,
        off: u64,
        end: u64,
        out: &mut [u8],
        covered: &mut Vec<(u64, u64)>,
    ) -> Result<bool> {
        if last - first < PIECE_BLOCKS {
            return Ok(false);
        }
        let (from, to) = (schema::block_key(ino, first), schema::block_key(ino, last + 1));
        let Some(reader) = self.tx.parallel_reader(&from, &to)? else { return Ok(false) };
        let depth = reader.in_flight();
        if depth <= 1 {
            return Ok(false);
        }
        let pieces: Vec<(u64, u64)> = (first..=last)
            .step_by(PIECE_BLOCKS as usize)
            .map(|a| (a, last.min(a + PIECE_BLOCKS - 1)))
            .collect();
        // A window of `depth` requests at a time: each piece's values are copied out and
        // freed before the next window is fetched, so memory stays at `depth` pieces.
        for window in pieces.chunks(depth) {
            let fetched: Vec<Result<Vec<KeyValue>>> = std::thread::scope(|sc| {
                let handles: Vec<_> = window
                    .iter()
                    .map(|&(a, b)| {
                        let reader = &reader;
                        sc.spawn(move || {
                            reader.get_range(
                                &schema::block_key(ino, a),
                                &schema::block_key(ino, b + 1),
                            )
                        })
                    })
                    .collect();
                handles
                    .into_iter()
                    .map(|h| h.join().unwrap_or_else(|p| Err(panic_error(p.as_ref()))))
                    .collect()
            });
            for piece in fetched {
                let mut others = Vec::new();
                for (k, v) in piece? {
                    let idx = schema::block_index(&k)?;
                    match v.split_first() {
                        Some((0, data)) => {
                            super::data::copy_block(out, covered, off, end, idx * bs, data)
                        }
                        _ => others.push((k, v)),
                    }
                }
                // Chunk references (large transactions, stores with a disk cache): resolved
                // through the transaction as a sequential read does.
                self.copy_stored_blocks(ino, bs, others, off, end, out, covered)?;
            }
        }
        Ok(true)
    }
}
