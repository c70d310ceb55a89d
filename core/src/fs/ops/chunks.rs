//! Blocks stored as immutable chunks, and reading chunks through the local disk cache.
//!
//! A chunk (`C ino idx id`) never changes once written: its id comes from the store's
//! transaction counter (`M t`), never reused, and is part of its key. So a copy kept on local
//! disk ([`DiskCache`]) is valid for as long as the store is the same store: the cache is keyed
//! by the store's identity (a random id kept in `M u`, with the backend's description, so a
//! copy of a store's files or a clone gets a cache of its own). Stores opened with a disk cache
//! write every block as a chunk (the block key holds a small reference), so that ordinary files
//! are cacheable too; other opens read them the same way.

use super::Operation;
use crate::error::{Error, ErrorKind, Result};
use crate::fs::disk_cache::{DiskCache, DiskCacheStats};
use crate::fs::leases::random_id;
use crate::fs::options::Options;
use crate::fs::state::StoreState;
use crate::kv::{self, Backend, KeyValue};
use crate::schema::{self, Block, Inode, Meta, CHUNK_SEQ_BITS};
use std::collections::HashMap;
use std::time::Duration;

impl Operation<'_> {
    /// The bytes of the chunks that the stored blocks `blocks` (key, value) of `ino` refer to,
    /// by block index, as [`Operation::block_bytes`] gives them, fetched together: from the
    /// disk cache (read in parallel), and the others in one range read of this transaction's
    /// snapshot instead of one read each (chunks of consecutive blocks are adjacent keys).
    pub(super) fn fetch_chunks(
        &mut self,
        ino: u64,
        blocks: &[KeyValue],
    ) -> Result<HashMap<u64, Vec<u8>>> {
        let mut refs = Vec::new();
        for (k, v) in blocks {
            if v.first() == Some(&1) {
                if let Block::Chunk { id, offset, len } = Block::decode(v)? {
                    let idx = schema::block_index(k)?;
                    refs.push((idx, schema::chunk_key(ino, idx, id), offset, len));
                }
            }
        }
        let mut out = HashMap::new();
        let cache = self.inner.disk_cache.as_ref();
        let keys: Vec<Vec<u8>> = refs.iter().map(|r| r.1.clone()).collect();
        let cached = cache.map_or_else(|| vec![None; refs.len()], |c| c.get_many(&keys));
        let mut missing = Vec::new();
        for (r, hit) in refs.into_iter().zip(cached) {
            match hit {
                Some(chunk) => {
                    out.insert(r.0, slice(&chunk, r.2, r.3)?);
                }
                None => missing.push(r),
            }
        }
        let mut found: HashMap<Vec<u8>, Vec<u8>> = HashMap::new();
        if missing.len() > 1 {
            let (first, last) = (missing[0].0, missing[missing.len() - 1].0);
            let (from, to) =
                (schema::chunk_key(ino, first, 0), schema::chunk_key(ino, last + 1, 0));
            found = self.tx.snapshot_get_range(&from, &to, 0, false)?.into_iter().collect();
        }
        for (idx, key, offset, len) in missing {
            let chunk = match found.remove(&key) {
                Some(stored) => decode_chunk(&stored)?,
                None => self.stored_chunk(&key)?,
            };
            out.insert(idx, slice(&chunk, offset, len)?);
            if let Some(c) = cache {
                c.put(&key, &chunk);
            }
        }
        Ok(out)
    }

    /// The bytes `offset..offset + len` of chunk `id` of block `idx` of `ino`: from the disk
    /// cache, else from the backend ([`Operation::stored_chunk`]).
    pub(super) fn chunk_bytes(
        &mut self,
        ino: u64,
        idx: u64,
        id: u64,
        offset: u32,
        len: u32,
    ) -> Result<Vec<u8>> {
        let key = schema::chunk_key(ino, idx, id);
        let cache = self.inner.disk_cache.as_ref();
        let chunk = match cache.and_then(|c| c.get(&key)) {
            Some(chunk) => chunk,
            None => {
                let chunk = self.stored_chunk(&key)?;
                if let Some(c) = cache {
                    c.put(&key, &chunk);
                }
                chunk
            }
        };
        slice(&chunk, offset, len)
    }

    /// The chunk `key` in the backend: from this transaction (its own writes and its snapshot),
    /// else from a fresh snapshot (a chunk written ahead by this transaction is not in its
    /// snapshot).
    fn stored_chunk(&mut self, key: &[u8]) -> Result<Vec<u8>> {
        let stored = match self.tx.snapshot_get(key)? {
            Some(v) => v,
            None => self.inner.backend.begin()?.snapshot_get(key)?.ok_or_else(|| {
                // Deleted with its block by a transaction newer than this one's snapshot.
                Error::new(
                    ErrorKind::Conflict,
                    "transaction conflict: the file's data changed while reading",
                )
            })?,
        };
        decode_chunk(&stored)
    }

    /// Deletes the chunk that block `idx` of `ino`, stored as `v`, refers to (if any), once
    /// the block has been read and before it is rewritten. (Reading it after the deletion would
    /// fail for a chunk written earlier in this same transaction.)
    pub(super) fn drop_block_chunk(&mut self, ino: u64, idx: u64, v: &[u8]) -> Result<()> {
        if v.first() == Some(&1) {
            if let Block::Chunk { id, .. } = Block::decode(v)? {
                self.clear(&schema::chunk_key(ino, idx, id))?;
            }
        }
        Ok(())
    }

    /// Writes `data` as block `idx` of `ino`: in the block's key, or, when this store keeps a
    /// disk cache, as a new chunk that the block key refers to (written in this transaction).
    /// The caller has deleted the chunk the block referred to (`drop_chunks`, `drop_block_chunk`).
    pub(super) fn set_block(
        &mut self,
        ino: u64,
        inode: &mut Inode,
        idx: u64,
        data: &[u8],
    ) -> Result<()> {
        let key = schema::block_key(ino, idx);
        if self.inner.disk_cache.is_none() {
            return self.set(&key, &Block::encode_data(data));
        }
        self.writable()?;
        let id = self.inner.alloc_chunk_id()?;
        self.set(&schema::chunk_key(ino, idx, id), &Block::encode_data(data))?;
        self.set(&key, &Block::Chunk { id, offset: 0, len: data.len() as u32 }.encode())?;
        inode.has_chunks = true;
        Ok(())
    }
}

/// The data of a stored chunk value.
fn decode_chunk(stored: &[u8]) -> Result<Vec<u8>> {
    match Block::decode(stored)? {
        Block::Data(chunk) => Ok(chunk),
        Block::Chunk { .. } => {
            Err(Error::new(ErrorKind::Corrupt, "corrupt store: a chunk refers to another chunk"))
        }
    }
}

/// The `offset..offset + len` part of `chunk` that a block refers to.
fn slice(chunk: &[u8], offset: u32, len: u32) -> Result<Vec<u8>> {
    chunk.get(offset as usize..offset as usize + len as usize).map(<[u8]>::to_vec).ok_or_else(
        || Error::new(ErrorKind::Corrupt, "corrupt store: chunk shorter than reference"),
    )
}

impl StoreState {
    /// A new chunk id for a block stored as a chunk in the writing transaction itself. Ids
    /// come from one transaction id (`M t`, as staging's) reserved per 2^24 chunks.
    pub(crate) fn alloc_chunk_id(&self) -> Result<u64> {
        let mut ids = self.chunk_ids.lock();
        if ids.0 >= ids.1 {
            let key = schema::meta_key(Meta::NextTxn);
            let txid = self.kv_transact(
                |tx| {
                    let txid = kv::decode_counter(tx.get(&key)?.as_deref()).max(1);
                    tx.set(&key, &(txid + 1).to_le_bytes())?;
                    Ok(txid)
                },
                false,
            )?;
            *ids = (txid << CHUNK_SEQ_BITS, (txid + 1) << CHUNK_SEQ_BITS);
        }
        ids.0 += 1;
        Ok(ids.0 - 1)
    }

    /// The disk cache's statistics (`None` when the store was opened without one).
    pub(crate) fn disk_cache_stats(&self) -> Option<DiskCacheStats> {
        match (&self.disk_cache, &self.disk_cache_off) {
            (Some(c), _) => Some(c.stats()),
            (None, Some(why)) => {
                Some(DiskCacheStats { disabled: Some(why.clone()), ..Default::default() })
            }
            (None, None) => None,
        }
    }
}

/// Opens the disk cache `options` ask for, for the store on `backend`: `Ok(None)` without
/// one; `Err(why)` when it cannot be used (the store then reads the backend without it).
pub(crate) fn open_disk_cache(
    backend: &dyn Backend,
    options: &Options,
    max_retries: u32,
) -> std::result::Result<Option<DiskCache>, String> {
    let Some(dir) = &options.disk_cache else { return Ok(None) };
    let id_key = schema::meta_key(Meta::StoreId);
    let read_only = options.read_only || backend.read_only();
    let (id, counter) = kv::run_with_retries(backend, max_retries, false, |tx| {
        let counter = kv::decode_counter(tx.get(&schema::meta_key(Meta::NextTxn))?.as_deref());
        match tx.get(&id_key)? {
            Some(id) => Ok((Some(id), counter)),
            None if read_only => Ok((None, counter)),
            None => {
                let id = [random_id().to_le_bytes(), random_id().to_le_bytes()].concat();
                tx.set(&id_key, &id)?;
                Ok((Some(id), counter))
            }
        }
    })
    .map_err(|e| format!("cannot read the store's identity: {e}"))?;
    let id = id
        .ok_or("a read-only store without an identity (open it writable once with a disk cache)")?;
    let identity = [id.as_slice(), backend.describe().as_bytes()].concat();
    let deadline = options.disk_cache_deadline.max(Duration::from_millis(1));
    // A chunk id whose transaction id the store's counter has not reached yet was handed out
    // in a history the store no longer has (its files were restored from older ones): the
    // same id may come again for other data.
    let keep = move |key: &[u8]| {
        schema::parse_chunk_key(key).is_ok_and(|(_, _, id)| id >> CHUNK_SEQ_BITS < counter)
    };
    // Opened by a thread of its own: a cache disk that does not answer must not hang the open.
    let (dir, size) = (dir.clone(), options.disk_cache_size);
    let (done, opened) = std::sync::mpsc::sync_channel(1);
    let shown = dir.display().to_string();
    std::thread::Builder::new()
        .name("txvfs-cache-open".into())
        .spawn(move || {
            let _ = done.send(DiskCache::open(&dir, size, &identity, deadline, &keep));
        })
        .map_err(|e| format!("{shown}: {e}"))?;
    match opened.recv_timeout(deadline * OPEN_WAIT_DEADLINES) {
        Ok(cache) => cache.map(Some).map_err(|e| format!("{shown}: {e}")),
        Err(_) => Err(format!(
            "{shown}: the cache directory did not answer within {:?}",
            deadline * OPEN_WAIT_DEADLINES
        )),
    }
}

/// How many read deadlines opening the disk cache may take (10 s with the default deadline).
const OPEN_WAIT_DEADLINES: u32 = 100;
