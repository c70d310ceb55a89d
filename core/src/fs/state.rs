//! The state shared by every handle of one store in this process: the backend, the store's
//! fixed parameters, the inode allocator, open-file counts, the lock table.

use super::disk_cache::DiskCache;
use super::locks::LockTable;
use super::open_files::OpenFiles;
use crate::error::{Error, Result};
use crate::kv::{self, Backend, Txn};
use crate::schema::{self, Meta, ROOT_INO};
use parking_lot::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Inode numbers reserved per allocator round trip.
const INO_BATCH: u64 = 1024;

/// State shared by every handle of one store in this process.
pub(crate) struct StoreState {
    pub(crate) backend: Arc<dyn Backend>,
    pub(crate) block_size: u32,
    pub(crate) inline_limit: u32,
    pub(crate) read_only: bool,
    pub(crate) sync: bool,
    pub(crate) max_retries: u32,
    /// Owner of new files when no credential is given: the process's uid and gid.
    pub(crate) owner: (u32, u32),
    /// (total, free) bytes of the backend's disk, when it has one.
    pub(crate) space: Option<(u64, u64)>,
    pub(crate) ino_range: Mutex<(u64, u64)>,
    /// Open handles of this process, and the lock every commit that frees a file takes.
    pub(crate) open_files: OpenFiles,
    pub(crate) locks: LockTable,
    pub(crate) next_handle: AtomicU64,
    /// The first write-back failure of a dropped handle, reported by the next sync.
    pub(crate) lost_write: Mutex<Option<Error>>,
    /// This process's id in staging records (random per open).
    pub(crate) process: u64,
    /// The local disk cache of chunks (`Options::disk_cache`), when it is open.
    pub(crate) disk_cache: Option<DiskCache>,
    /// Why the disk cache asked for could not be opened.
    pub(crate) disk_cache_off: Option<String>,
    /// Chunk ids reserved for blocks written as chunks: next, end.
    pub(crate) chunk_ids: Mutex<(u64, u64)>,
    /// The change feed as this process sees it.
    pub(crate) feed: super::feed::Feed,
    /// Directory entries seen by path resolutions: guesses of what to read in one batch on a
    /// backend with a round trip per read (`fs/ops/prefetch.rs`).
    pub(crate) guesses: super::ops::EntryGuesses,
}

impl StoreState {
    pub(crate) fn alloc_ino(&self) -> Result<u64> {
        let mut r = self.ino_range.lock();
        if r.0 >= r.1 {
            // Reserve a range in a transaction of its own: the counter is touched once per
            // INO_BATCH creates, and never by the caller's transaction.
            let key = schema::meta_key(Meta::NextIno);
            *r = self.kv_transact(
                |tx| {
                    let next = kv::decode_counter(tx.get(&key)?.as_deref()).max(ROOT_INO + 1);
                    tx.set(&key, &(next + INO_BATCH).to_le_bytes())?;
                    Ok((next, next + INO_BATCH))
                },
                false,
            )?;
        }
        r.0 += 1;
        Ok(r.0 - 1)
    }

    pub(crate) fn is_open(&self, ino: u64) -> bool {
        self.open_files.is_open(ino)
    }

    /// Counts a handle of `ino`; true when it is this process's first.
    pub(crate) fn opened(&self, ino: u64) -> bool {
        self.open_files.opened(ino)
    }

    /// Returns true when this was the last handle of `ino`.
    pub(crate) fn closed(&self, ino: u64) -> bool {
        self.open_files.closed(ino)
    }

    /// Keeps a dropped handle's write-back failure for the next sync (the first one wins).
    pub(crate) fn note_lost_write(&self, e: Error) {
        self.lost_write.lock().get_or_insert(e);
    }

    pub(crate) fn new_handle_id(&self) -> u64 {
        self.next_handle.fetch_add(1, Ordering::Relaxed)
    }

    /// Runs `f` in a fresh kv transaction and commits it, retrying conflicts with backoff.
    pub(crate) fn kv_transact<R>(
        &self,
        f: impl FnMut(&mut dyn Txn) -> Result<R>,
        durable: bool,
    ) -> Result<R> {
        kv::run_with_retries(&*self.backend, self.max_retries, durable, f)
    }
}
