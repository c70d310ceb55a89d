//! A file handle's table of its file's blocks: the process's page cache as one handle sees it.
//!
//! A hot `pread` through the read cache costs two hash lookups under the cache's lock (the
//! inode, then the block), each a miss of the CPU's caches on a large file. The table keeps
//! what they gave: the inode's size and block size, and the blocks themselves as the cache
//! lends them (`Arc`s of the cache's own buffers), in an array indexed by block number, all of
//! one version. A read at that version (still the one cached reads are answered at: one atomic
//! load, [`CacheWatch::version`]) is an index and one copy into the caller's buffer, with no
//! heap allocation and no mutex (the table's lock is taken shared).
//!
//! Exactness is the read cache's: a read uses the table only while no commit landed since its
//! version, exactly where a cached transaction would read the same values. When one did
//! (this handle's own write, another handle's, another thread's or another process's commit
//! through this process's store), [`CacheWatch::refresh`] drops what the commits since then
//! wrote, from the write sets the cache keeps to validate its own fills, and lends the values
//! of the new version. Only handles outside a transaction have a table (a transaction reads
//! its own writes and its snapshot), and only where the backend offers a watch (not a client
//! of a shared store, whose cache learns of commits when a transaction begins).

use crate::kv::{CacheWatch, Lend, LentCopies};
use crate::schema::{self, FileType, Inode};
use parking_lot::RwLock;
use std::sync::Arc;

/// Blocks a table indexes at most (8 GiB of file at 64 KiB blocks; its array is then 2 MiB):
/// reads beyond go through the read cache.
const MAX_BLOCKS: u64 = 1 << 17;
/// Blocks one refresh lends at most: it holds the cache's lock meanwhile, and a larger read is
/// as well served block by block through the cache.
const FILL_BLOCKS: u64 = 64;

/// See the module documentation.
pub(crate) struct BlockTable {
    watch: Box<dyn CacheWatch>,
    ino: u64,
    /// The store's block size, for files without one of their own.
    default_bs: u32,
    state: RwLock<State>,
}

/// What a read through the table found.
pub(crate) enum Lookup {
    /// The bytes read.
    Read(usize),
    /// The table is not at the visible version, or lacks a block: worth a refresh.
    Stale,
    /// The table cannot answer (inline data, blocks stored as chunks, no cache): read through
    /// the read cache.
    No,
}

#[derive(Default)]
struct State {
    /// The version the table's copies are of.
    version: u64,
    /// The inode's size and block size, if known; `blocks` false for a file whose data is not
    /// in blocks (inline).
    meta: Option<Meta>,
    /// Stored blocks (a tag byte 0, then the data) by index.
    blocks: Vec<Option<Arc<[u8]>>>,
    /// Bytes of `blocks` counted against the watch's budget.
    held: usize,
}

#[derive(Clone, Copy)]
struct Meta {
    size: u64,
    bs: u64,
    blocks: bool,
}

impl BlockTable {
    /// An empty table of file `ino` of a store whose block size is `default_bs`.
    pub(crate) fn new(watch: Box<dyn CacheWatch>, ino: u64, default_bs: u32) -> BlockTable {
        BlockTable { watch, ino, default_bs, state: RwLock::new(State::default()) }
    }

    /// Reads into `buf` at `off` what the file holds at the visible version, if the table
    /// has all of it.
    pub(crate) fn read(&self, off: u64, buf: &mut [u8]) -> Lookup {
        let Some(now) = self.watch.version() else { return Lookup::No };
        let s = self.state.read();
        let Some(m) = s.meta.filter(|_| s.version == now) else { return Lookup::Stale };
        if !m.blocks {
            return Lookup::No;
        }
        if off >= m.size || buf.is_empty() {
            return Lookup::Read(0);
        }
        let end = m.size.min(off.saturating_add(buf.len() as u64));
        let mut at = off;
        while at < end {
            let idx = at / m.bs;
            let bstart = idx * m.bs;
            let to = end.min(bstart + m.bs);
            let Some(Some(block)) = s.blocks.get(idx as usize) else { return Lookup::Stale };
            // A short block (its end a hole) is read through the cache, which zeroes the rest.
            let Some(src) = block.get(1 + (at - bstart) as usize..1 + (to - bstart) as usize)
            else {
                return Lookup::No;
            };
            buf[(at - off) as usize..(to - off) as usize].copy_from_slice(src);
            at = to;
        }
        Lookup::Read((end - off) as usize)
    }

    /// Brings the table to the cache's version, then takes from the cache the inode and the
    /// blocks of `[off, off + len)` it lacks.
    pub(crate) fn refresh(&self, off: u64, len: usize) {
        let mut s = self.state.write();
        // The inode's key, and the key right after it (the key with a 0 appended).
        let inode: [u8; 10] = key(schema::scope::INODE, self.ino, &[0]);
        let (inode, inode_end) = (&inode[..9], &inode[..]);
        let first = block_key(self.ino, 0);
        let end: [u8; 9] = key(schema::scope::BLOCK, self.ino + 1, &[]);
        let at = s.version;
        let mut copies = Copies { table: self, state: &mut s, inode, off, len };
        let within: [(&[u8], &[u8]); 2] = [(inode, inode_end), (&first, &end)];
        if let Some(now) = self.watch.refresh(at, &within, &mut copies) {
            s.version = now;
        }
    }
}

/// A key of `scope` for `ino` followed by `rest` (as `schema` lays them out), on the stack.
fn key<const N: usize>(scope: u8, ino: u64, rest: &[u8]) -> [u8; N] {
    let mut k = [0u8; N];
    k[0] = scope;
    k[1..9].copy_from_slice(&ino.to_be_bytes());
    k[9..].copy_from_slice(rest);
    k
}

/// `schema::block_key`, on the stack.
fn block_key(ino: u64, idx: u64) -> [u8; 17] {
    key(schema::scope::BLOCK, ino, &idx.to_be_bytes())
}

impl Drop for BlockTable {
    fn drop(&mut self) {
        self.watch.unreserve(self.state.get_mut().held);
    }
}

/// A table's state during a refresh, with the read that asked for it.
struct Copies<'a> {
    table: &'a BlockTable,
    state: &'a mut State,
    inode: &'a [u8],
    off: u64,
    len: usize,
}

impl Copies<'_> {
    fn drop_block(&mut self, idx: usize) {
        if let Some(b) = self.state.blocks.get_mut(idx).and_then(Option::take) {
            self.state.held -= b.len();
            self.table.watch.unreserve(b.len());
        }
    }
}

impl LentCopies for Copies<'_> {
    fn stale(&mut self, key: &[u8], end: Option<&[u8]>) {
        let hit = |k: &[u8]| match end {
            None => k == key,
            Some(end) => key <= k && k < end,
        };
        if hit(self.inode) {
            self.state.meta = None;
        }
        for idx in 0..self.state.blocks.len() {
            if self.state.blocks[idx].is_some() && hit(&block_key(self.table.ino, idx as u64)) {
                self.drop_block(idx);
            }
        }
    }

    fn fill(&mut self, lend: &mut Lend<'_>) {
        if self.state.meta.is_none() {
            self.state.meta = lend(self.inode).and_then(|v| {
                let (inode, _) = Inode::decode_meta(&v).ok()?;
                let blocks = inode.kind == FileType::File && !inode.is_inline;
                let bs = inode.block_size(self.table.default_bs);
                Some(Meta { size: inode.size, bs, blocks })
            });
        }
        let Some(m) = self.state.meta.filter(|m| m.blocks) else { return };
        let end = m.size.min(self.off.saturating_add(self.len as u64));
        if self.off >= end {
            return;
        }
        let (first, last) = (self.off / m.bs, (end - 1) / m.bs);
        for idx in first..=last.min(first + FILL_BLOCKS - 1).min(MAX_BLOCKS - 1) {
            let i = idx as usize;
            if self.state.blocks.get(i).is_some_and(Option::is_some) {
                continue;
            }
            // Only blocks of data (tag 0) are read from the table; others are the cache's.
            let Some(b) = lend(&block_key(self.table.ino, idx)).filter(|b| b.first() == Some(&0))
            else {
                continue;
            };
            if !self.table.watch.reserve(b.len()) {
                return;
            }
            if self.state.blocks.len() <= i {
                self.state.blocks.resize(i + 1, None);
            }
            self.state.held += b.len();
            self.state.blocks[i] = Some(b);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_on_the_stack_are_the_schema_s() {
        let ino = 0x0102_0304_0506_0708;
        assert_eq!(block_key(ino, 77).as_slice(), schema::block_key(ino, 77));
        let inode: [u8; 9] = key(schema::scope::INODE, ino, &[]);
        assert_eq!(inode.as_slice(), schema::inode_key(ino));
        let end: [u8; 9] = key(schema::scope::BLOCK, ino + 1, &[]);
        assert_eq!((block_key(ino, 0).to_vec(), end.to_vec()), schema::block_range(ino, 0));
    }
}
