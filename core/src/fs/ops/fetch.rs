//! Large reads from a backend with a round trip per request: several range reads of blocks in
//! flight at once, from the transaction's snapshot ([`Txn::parallel_reader`]), each copying
//! its blocks straight into its own part of the caller's buffer.
//!
//! [`Txn::parallel_reader`]: crate::kv::Txn::parallel_reader

use super::data::copy_block;
use super::Operation;
use crate::error::{panic_error, Result};
use crate::kv::{KeyValue, SnapshotReader};
use crate::schema;
use parking_lot::Mutex;

/// Blocks fetched by one request of a parallel read: 16 blocks of the default 64 KiB, 1 MiB.
pub(super) const PIECE_BLOCKS: u64 = 16;

/// What requests of a parallel read did: the file ranges they copied, and the stored blocks
/// that are chunk references (resolved afterwards through the transaction).
type Fetched = (Vec<(u64, u64)>, Vec<KeyValue>);

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
        // Every piece gets its own part of `out`; `depth` workers take the pieces in order,
        // so `depth` requests stay in flight until the last ones.
        let mut jobs = std::collections::VecDeque::with_capacity(pieces.len());
        let (mut rest, mut at): (&mut [u8], u64) = (&mut *out, off);
        for &(a, b) in &pieces {
            let hi = ((b + 1) * bs).min(end);
            let (mine, tail) = std::mem::take(&mut rest).split_at_mut((hi - at) as usize);
            jobs.push_back((a, b, at, hi, mine));
            (rest, at) = (tail, hi);
        }
        let jobs = Mutex::new(jobs);
        let fetched: Vec<Result<Fetched>> = std::thread::scope(|sc| {
            let (reader, jobs) = (&*reader, &jobs);
            let workers: Vec<_> = (0..depth.min(pieces.len()))
                .map(|_| {
                    sc.spawn(move || {
                        let (mut covered, mut others) = (Vec::new(), Vec::new());
                        loop {
                            let Some((a, b, lo, hi, buf)) = jobs.lock().pop_front() else {
                                return Ok((covered, others));
                            };
                            let (c, o) = fetch_piece(reader, ino, bs, (a, b), (lo, hi), buf)?;
                            covered.extend(c);
                            others.extend(o);
                        }
                    })
                })
                .collect();
            workers
                .into_iter()
                .map(|h| h.join().unwrap_or_else(|p| Err(panic_error(p.as_ref()))))
                .collect()
        });
        let mut others = Vec::new();
        for piece in fetched {
            let (c, o) = piece?;
            covered.extend(c);
            others.extend(o);
        }
        // Chunk references (large transactions, stores with a disk cache): resolved through
        // the transaction as a sequential read does.
        self.copy_stored_blocks(ino, bs, others, off, end, out, covered)?;
        Ok(true)
    }
}

/// One request of a parallel read: blocks `a..=b` of `ino` into `buf`, which holds the file's
/// bytes `[lo, hi)`.
fn fetch_piece(
    reader: &dyn SnapshotReader,
    ino: u64,
    bs: u64,
    (a, b): (u64, u64),
    (lo, hi): (u64, u64),
    buf: &mut [u8],
) -> Result<Fetched> {
    let (mut covered, mut others, mut bad) = (Vec::new(), Vec::new(), None);
    let (from, to) = (schema::block_key(ino, a), schema::block_key(ino, b + 1));
    reader.visit_range(
        &from,
        &to,
        &mut |k, v| match (v.split_first(), schema::block_index(k)) {
            (Some((0, data)), Ok(idx)) => copy_block(buf, &mut covered, lo, hi, idx * bs, data),
            (_, Err(e)) => bad = Some(e),
            _ => others.push((k.to_vec(), v.to_vec())),
        },
    )?;
    match bad {
        Some(e) => Err(e),
        None => Ok((covered, others)),
    }
}
