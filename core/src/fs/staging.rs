//! Transactions larger than the backend allows or than memory holds: data written ahead.
//!
//! This is the log-structured design's "stealing". Once an explicit transaction has written
//! more block data than a threshold (a quarter of the backend's transaction size limit, or
//! 64 MiB on backends without one), each further full block is written ahead as an immutable
//! chunk (`C ino idx chunk-id`), in a short backend transaction of its own, together with an
//! index entry (`U txid ...`) and the transaction's staging record (`T txid`, with a lease). The
//! transaction itself only writes the block's reference (`B` key -> `Block::Chunk`), so its
//! final commit stays small. That commit also deletes `T` and the `U` entries: from then on
//! the chunks belong to their blocks, and whoever overwrites or deletes a block deletes its
//! chunk too (`Operation::drop_chunks`).
//!
//! A transaction that never commits (rolled back, failed, crashed) leaves `T` behind; its
//! chunks are collected through `U` ([`StoreState::collect_stage`]): at once on rollback, at the
//! next open after a crash (every record, when this process has the store to itself;
//! otherwise those whose lease ran out). Collection and the final commit both read `T`, so
//! they conflict: a chunk referenced by a committed block is never collected.

use super::state::StoreState;
use super::REMOVE_BATCH;
use crate::error::{Error, ErrorKind, Result};
use crate::kv::{self, Limits};
use crate::schema::{self, Block, Meta, StageRecord, CHUNK_SEQ_BITS};
use std::time::Duration;

/// How long a staging transaction stays alive without writing ahead (then another process
/// may collect its chunks, and its commit fails with `TooOld`).
pub const STAGE_LEASE: Duration = Duration::from_secs(60);

/// On backends without a transaction size limit, write ahead after this many bytes, so a
/// transaction's data need not fit in memory.
const STAGE_AFTER_UNLIMITED: u64 = 64 << 20;

/// The write-ahead state of one explicit transaction.
pub(crate) struct Staging {
    /// The transaction's id, once it has written ahead.
    pub(crate) txid: Option<u64>,
    /// Chunks staged so far (numbers the next chunk id).
    seq: u64,
    /// Block data written so far.
    block_bytes: u64,
    threshold: u64,
}

impl Staging {
    pub(crate) fn new(limits: Limits) -> Staging {
        let threshold = limits.max_txn_bytes.map_or(STAGE_AFTER_UNLIMITED, |m| m as u64 / 4);
        Staging { txid: None, seq: 0, block_bytes: 0, threshold }
    }

    /// Counts `n` more bytes of block data; true once the transaction should write ahead.
    pub(crate) fn should_stage(&mut self, n: usize) -> bool {
        self.block_bytes += n as u64;
        self.block_bytes > self.threshold
    }
}

use crate::clock::now_ms;

impl StoreState {
    fn stage_record(&self) -> Vec<u8> {
        StageRecord { process: self.process, expires_ms: now_ms() + STAGE_LEASE.as_millis() as u64 }
            .encode()
    }

    /// Writes the full blocks `blocks` (index, data) of `ino` ahead as chunks of the
    /// transaction of `staging`, in one short backend transaction; returns their chunk ids.
    pub(crate) fn stage(
        &self,
        staging: &mut Staging,
        ino: u64,
        blocks: &[(u64, &[u8])],
    ) -> Result<Vec<u64>> {
        let txid = match staging.txid {
            Some(t) => t,
            None => {
                let t = self.new_stage()?;
                staging.txid = Some(t);
                t
            }
        };
        if staging.seq + blocks.len() as u64 >= 1 << CHUNK_SEQ_BITS {
            return Err(Error::new(
                ErrorKind::TooLarge,
                "transaction writes too many blocks ahead (16,777,216 at most)",
            ));
        }
        let ids: Vec<u64> =
            (0..blocks.len() as u64).map(|i| txid << CHUNK_SEQ_BITS | (staging.seq + i)).collect();
        let record = self.stage_record();
        // Each backend transaction carries at most `threshold` bytes (a quarter of the limit).
        let per_txn = (staging.threshold / self.block_size as u64).max(1) as usize;
        for (group, group_ids) in blocks.chunks(per_txn).zip(ids.chunks(per_txn)) {
            self.kv_transact(
                |tx| {
                    if tx.get(&schema::stage_key(txid))?.is_none() {
                        return Err(Error::new(
                            ErrorKind::TooOld,
                            "data this transaction wrote ahead was collected: it stayed idle longer than its lease",
                        ));
                    }
                    tx.set(&schema::stage_key(txid), &record)?;
                    for ((idx, data), id) in group.iter().zip(group_ids) {
                        tx.set(&schema::chunk_key(ino, *idx, *id), &Block::encode_data(data))?;
                        tx.set(&schema::staged_key(txid, ino, *idx, *id), &[])?;
                    }
                    Ok(())
                },
                false,
            )?;
        }
        staging.seq += blocks.len() as u64;
        Ok(ids)
    }

    /// Allocates a transaction id and writes its staging record.
    fn new_stage(&self) -> Result<u64> {
        let key = schema::meta_key(Meta::NextTxn);
        let record = self.stage_record();
        self.kv_transact(
            |tx| {
                let txid = kv::decode_counter(tx.get(&key)?.as_deref()).max(1);
                tx.set(&key, &(txid + 1).to_le_bytes())?;
                tx.set(&schema::stage_key(txid), &record)?;
                Ok(txid)
            },
            false,
        )
    }

    /// Deletes what transaction `txid` wrote ahead, unless it committed (its staging record is
    /// then gone) or, with `only_expired_at`, its lease still runs at that time. Bounded
    /// batches, so any amount fits the backend's limits.
    pub(crate) fn collect_stage(&self, txid: u64, only_expired_at: Option<u64>) -> Result<()> {
        loop {
            let done = self.kv_transact(
                |tx| {
                    let Some(v) = tx.get(&schema::stage_key(txid))? else { return Ok(true) };
                    // Kept while its lease runs, unless the backend knows its process died.
                    if only_expired_at.is_some_and(|now| {
                        StageRecord::decode(&v).is_ok_and(|r| {
                            r.expires_ms > now
                                && self.backend.process_alive(r.process) != Some(false)
                        })
                    }) {
                        return Ok(true);
                    }
                    let (s, e) = schema::staged_range(txid);
                    let batch = tx.get_range(&s, &e, REMOVE_BATCH, false)?;
                    for (k, _) in &batch {
                        tx.clear(&schema::staged_chunk(k)?)?;
                        tx.clear(k)?;
                    }
                    if batch.len() < REMOVE_BATCH {
                        tx.clear(&schema::stage_key(txid))?;
                        return Ok(true);
                    }
                    Ok(false)
                },
                false,
            )?;
            if done {
                return Ok(());
            }
        }
    }

    /// At open: collects the chunks of transactions that wrote ahead and never committed:
    /// all of them when this process has the store to itself, else those whose lease ran out.
    pub(crate) fn collect_dead_stages(&self) -> Result<()> {
        if self.read_only {
            return Ok(());
        }
        let (s, e) = schema::stage_range();
        let records = self.kv_transact(|tx| tx.get_range(&s, &e, 0, false), false)?;
        let only_expired_at = self.backend.role().is_shared().then(now_ms);
        for (k, _) in records {
            self.collect_stage(schema::stage_txid(&k)?, only_expired_at)?;
        }
        Ok(())
    }
}
