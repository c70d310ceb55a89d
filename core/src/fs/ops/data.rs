//! File data: opening, reading, writing, truncating and allocating, inline or in blocks
//! (and chunks written ahead by large transactions, see `staging.rs`).

use super::access::{R_OK, W_OK, X_OK};
use super::{now_ns, Operation, Resolved};
use crate::error::{Error, ErrorKind, Result};
use crate::fs::path::show;
use crate::fs::types::{Lent, OpenOptions};
use crate::kv::KeyValue;
use crate::schema::{self, Block, FileType, Inode};

/// Largest file size (4 PiB): keeps block arithmetic far from overflow.
pub const MAX_FILE_SIZE: u64 = 1 << 52;
/// Blocks fetched per backend read in a large read (1 MiB with 64 KiB blocks).
const READ_PIECE_BLOCKS: u64 = 16;

/// Checks a file's own block size: a power of two from 512 to 65536.
pub(crate) fn check_block_size(b: u32) -> Result<()> {
    let shift = b.trailing_zeros() as u8;
    if !b.is_power_of_two() || !(schema::MIN_BLOCK_SHIFT..=schema::MAX_BLOCK_SHIFT).contains(&shift)
    {
        return Err(Error::new(
            ErrorKind::Invalid,
            format!("block size {b} is not a power of two from 512 to 65536"),
        ));
    }
    Ok(())
}

/// Copies what block data `data` (the file's bytes from `bstart`) holds of `[off, end)` into
/// `out` (the file's bytes from `off`), and records the range copied.
pub(super) fn copy_block(
    out: &mut [u8],
    covered: &mut Vec<(u64, u64)>,
    off: u64,
    end: u64,
    bstart: u64,
    data: &[u8],
) {
    let (from, to) = (off.max(bstart), end.min(bstart + data.len() as u64));
    if from < to {
        out[(from - off) as usize..(to - off) as usize]
            .copy_from_slice(&data[(from - bstart) as usize..(to - bstart) as usize]);
        covered.push((from, to));
    }
}

impl Operation<'_> {
    /// Opens (and maybe creates or truncates) a file; returns its inode number and type.
    pub fn open(&mut self, p: &[u8], o: &OpenOptions) -> Result<(u64, FileType)> {
        Self::check_open_options(o, p)?;
        let r = self.resolve_with(p, !(o.create_new || o.no_follow), o.create || o.create_new)?;
        let existed = r.entry.is_some();
        let (ino, kind) = self.open_resolved(r, o, p)?;
        if !existed {
            self.note(crate::schema::ChangeKind::Created, ino, kind, p);
        } else if o.truncate {
            self.note(crate::schema::ChangeKind::Written, ino, kind, p);
        }
        Ok((ino, kind))
    }

    pub(super) fn check_open_options(o: &OpenOptions, p: &[u8]) -> Result<()> {
        if o.truncate && !o.write {
            return Err(Error::new(
                ErrorKind::Invalid,
                format!("{}: truncate needs write access", show(p)),
            ));
        }
        if !o.read && !o.write {
            return Err(Error::new(
                ErrorKind::Invalid,
                format!("{}: open for neither reading nor writing", show(p)),
            ));
        }
        if let Some(b) = o.block_size {
            check_block_size(b)
                .map_err(|e| Error::new(e.kind(), format!("{}: {}", show(p), e.message())))?;
        }
        Ok(())
    }

    /// Opens (and maybe creates, see [`OpenOptions`]) the entry `name` of directory `dir`.
    pub fn open_at(&mut self, dir: u64, name: &[u8], o: &OpenOptions) -> Result<(u64, FileType)> {
        Self::check_open_options(o, name)?;
        let r = self.resolved_at(dir, name)?;
        let existed = r.entry.is_some();
        let (ino, kind) = self.open_resolved(r, o, name)?;
        if self.inner.feed.on() && (!existed || o.truncate) {
            let p = self.path_at(dir, name)?;
            let change = if existed {
                crate::schema::ChangeKind::Written
            } else {
                crate::schema::ChangeKind::Created
            };
            self.note(change, ino, kind, &p);
        }
        Ok((ino, kind))
    }

    /// Opens the existing inode `ino`, checking the caller's permission for `o`.
    pub fn open_ino(&mut self, ino: u64, o: &OpenOptions) -> Result<(u64, FileType)> {
        Self::check_open_options(o, b"")?;
        self.open_existing(ino, o, b"")
    }

    pub(super) fn open_resolved(
        &mut self,
        r: Resolved,
        o: &OpenOptions,
        p: &[u8],
    ) -> Result<(u64, FileType)> {
        let e = match (r.entry, o.create || o.create_new) {
            (Some(_), _) if o.create_new => return Err(Error::at(ErrorKind::Exists, p)),
            (Some(e), _) => e,
            (None, false) => return Err(Error::at(ErrorKind::NotFound, p)),
            (None, true) => {
                if p.ends_with(b"/") {
                    return Err(Error::at(ErrorKind::IsDir, p));
                }
                let name = r.name.expect("a missing entry has a name");
                self.access_ino(r.parent, W_OK | X_OK, p)?;
                let parent = (r.parent, r.parent_quota);
                let ino = self.create_node(parent, &name, FileType::File, o.mode, &[], 0)?;
                self.apply_block_size(ino, o)?;
                return Ok((ino, FileType::File));
            }
        };
        let opened = self.open_existing(e.ino, o, p)?;
        self.apply_block_size(e.ino, o)?;
        Ok(opened)
    }

    /// Gives the file opened for writing with [`OpenOptions::block_size`] that block size,
    /// while it has no blocks (inline data is not in blocks, so nothing moves).
    fn apply_block_size(&mut self, ino: u64, o: &OpenOptions) -> Result<()> {
        let Some(bytes) = o.block_size.filter(|_| o.write) else { return Ok(()) };
        match self.set_block_size_ino(ino, bytes) {
            Err(e) if e.kind() == ErrorKind::Busy => Ok(()), // it has blocks: it keeps its size
            r => r,
        }
    }

    /// Gives file `ino` its own block size `bytes` (checked by the caller or
    /// [`Operation::check_open_options`]); [`ErrorKind::Busy`] once the file has blocks.
    pub fn set_block_size_ino(&mut self, ino: u64, bytes: u32) -> Result<()> {
        let shift = bytes.trailing_zeros() as u8;
        let mut inode = self.inode(ino)?;
        if inode.kind != FileType::File {
            return Err(Error::new(ErrorKind::Invalid, "block size of a non-file"));
        }
        if inode.block_size(self.inner.block_size) == bytes as u64 {
            return Ok(());
        }
        if !inode.is_inline {
            return Err(Error::new(
                ErrorKind::Busy,
                "the file has blocks already; its block size stays",
            ));
        }
        inode.block_shift = if bytes == self.inner.block_size { 0 } else { shift };
        self.store_inode(ino, &inode)
    }

    /// Opens the existing inode `ino` (found as `p`) for `o`: checks its type and the
    /// caller's access, and truncates if asked.
    pub(super) fn open_existing(
        &mut self,
        ino: u64,
        o: &OpenOptions,
        p: &[u8],
    ) -> Result<(u64, FileType)> {
        // Only a truncate changes the inode here; the rest needs its attributes alone.
        let mut inode = if o.truncate { self.inode(ino)? } else { self.inode_meta(ino)? };
        match inode.kind {
            FileType::Symlink => return Err(Error::at(ErrorKind::Loop, p)),
            FileType::Dir if o.write => return Err(Error::at(ErrorKind::IsDir, p)),
            kind if kind.is_special() => {
                return Err(Error::new(
                    ErrorKind::Invalid,
                    format!("{}: a {kind:?} has no data to open in a store", show(p)),
                ))
            }
            _ => {}
        }
        if o.write {
            // As open(2) on a read-only file system: EROFS at once, not at the first write.
            self.writable()
                .map_err(|e| Error::new(e.kind(), format!("{}: {}", show(p), e.message())))?;
        }
        let mask = if o.read { R_OK } else { 0 } | if o.write { W_OK } else { 0 };
        self.access(&inode, mask).map_err(|_| Error::at(ErrorKind::Access, p))?;
        if o.truncate && inode.size > 0 {
            self.truncate_inode(ino, &mut inode, 0)?;
            self.store_inode(ino, &inode)?;
        }
        Ok((ino, inode.kind))
    }

    /// Reads up to `len` bytes at `off` of file `ino`.
    pub fn read_ino(&mut self, ino: u64, off: u64, len: usize) -> Result<Vec<u8>> {
        let inode = self.file_inode(ino)?;
        let n = inode.size.saturating_sub(off).min(len as u64) as usize;
        let mut buf = vec![0u8; n];
        self.read_data(ino, &inode, off, &mut buf)?;
        Ok(buf)
    }

    /// Reads into `buf` at `off` of file `ino`; returns the number of bytes (0 at the end).
    pub fn read_into(&mut self, ino: u64, off: u64, buf: &mut [u8]) -> Result<usize> {
        // An inline file is copied straight from the inode's value: no decoded copy of it.
        let mut meta = None;
        let mut copied = 0;
        self.tx.get_with(&schema::inode_key(ino), &mut |v| {
            meta = Some(Inode::decode_meta(v).map(|(inode, data)| {
                if inode.kind == FileType::File && inode.is_inline && off < data.len() as u64 {
                    let from = &data[off as usize..];
                    copied = from.len().min(buf.len());
                    buf[..copied].copy_from_slice(&from[..copied]);
                }
                inode
            }));
        })?;
        let inode = meta.transpose()?.ok_or_else(|| {
            Error::new(ErrorKind::NotFound, format!("inode {ino} no longer exists"))
        })?;
        if inode.kind == FileType::Dir {
            return Err(Error::new(ErrorKind::IsDir, "read of a directory"));
        }
        if inode.is_inline {
            return Ok(copied);
        }
        self.read_data(ino, &inode, off, buf)
    }

    pub(super) fn file_inode(&mut self, ino: u64) -> Result<Inode> {
        let inode = self.inode(ino)?;
        if inode.kind == FileType::Dir {
            return Err(Error::new(ErrorKind::IsDir, "read of a directory"));
        }
        Ok(inode)
    }

    /// Copies file data straight from the block values into `buf` (holes read as zeros).
    pub(super) fn read_data(
        &mut self,
        ino: u64,
        inode: &Inode,
        off: u64,
        buf: &mut [u8],
    ) -> Result<usize> {
        if off >= inode.size || buf.is_empty() {
            return Ok(0);
        }
        let end = inode.size.min(off.saturating_add(buf.len() as u64));
        let out = &mut buf[..(end - off) as usize];
        if inode.is_inline {
            out.copy_from_slice(&inode.inline[off as usize..end as usize]);
            return Ok(out.len());
        }
        let bs = inode.block_size(self.inner.block_size);
        let (first, last) = (off / bs, (end - 1) / bs);
        // What blocks covered; the rest (holes, short blocks) is zeroed at the end, rather than
        // zeroing everything first (a second pass over every byte read).
        let mut covered = Vec::new();
        if self.copy_blocks_parallel(ino, bs, first, last, off, end, out, &mut covered)? {
            piece_done(&mut covered, off, end, out);
            return Ok(out.len());
        }
        // Large reads go in pieces of READ_PIECE_BLOCKS blocks: the values of one piece are
        // freed before the next is fetched, so the allocator reuses their memory instead of
        // faulting in fresh pages for the whole read (a 256 MiB read ran 5x slower at once).
        let mut piece = first;
        while piece <= last {
            let piece_last = last.min(piece + READ_PIECE_BLOCKS - 1);
            self.copy_blocks(ino, bs, piece, piece_last, off, end, out, &mut covered)?;
            piece = piece_last + 1;
        }
        piece_done(&mut covered, off, end, out);
        Ok(out.len())
    }

    /// Lends `[off, off + len)` of `ino` from the read cache (see [`Txn::lend`]) where that
    /// is exactly what [`Operation::read_into`] would copy: inside the file's size and inside
    /// one stored block of data (not inline, not a hole, not a chunk reference, long enough).
    /// `None` otherwise.
    ///
    /// [`Txn::lend`]: crate::kv::Txn::lend
    pub(crate) fn lend(&mut self, ino: u64, off: u64, len: usize) -> Result<Option<Lent>> {
        let inode = self.file_inode(ino)?;
        let end = off.saturating_add(len as u64);
        if len == 0 || inode.is_inline || end > inode.size {
            return Ok(None);
        }
        let bs = inode.block_size(self.inner.block_size);
        let idx = off / bs;
        if (end - 1) / bs != idx {
            return Ok(None);
        }
        let Some(block) = self.tx.lend(&schema::block_key(ino, idx))? else { return Ok(None) };
        // Block data is stored after a tag byte 0 (`schema::Block`).
        let start = 1 + (off - idx * bs) as usize;
        if block.first() != Some(&0) || block.len() < start + len {
            return Ok(None);
        }
        Ok(Some(Lent { block, start, len }))
    }

    /// Copies the stored blocks `first..=last` of `ino` (blocks of `bs` bytes) into `out`,
    /// which holds the file's bytes `[off, end)`, and adds the file ranges it wrote to
    /// `covered` (missing blocks and bytes past a short block's end are left for the caller).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn copy_blocks(
        &mut self,
        ino: u64,
        bs: u64,
        first: u64,
        last: u64,
        off: u64,
        end: u64,
        out: &mut [u8],
        covered: &mut Vec<(u64, u64)>,
    ) -> Result<()> {
        let blocks = if first == last {
            // One block: a point read is much cheaper than a range iterator, and a block of
            // data is copied straight from the backend's value (only the bytes asked for).
            let k = schema::block_key(ino, first);
            let bstart = first * bs;
            let mut other = None;
            self.tx.get_with(&k, &mut |v| match v.split_first() {
                Some((0, data)) => copy_block(out, covered, off, end, bstart, data),
                _ => other = Some(v.to_vec()),
            })?;
            other.map(|v| (k, v)).into_iter().collect()
        } else if self.tx.local_reads() {
            // A local engine: block by block through the read cache (the process's page
            // cache), so a hot read copies each byte once, from the cache; a block it misses
            // is read from the engine and offered to it.
            let mut others = Vec::new();
            for idx in first..=last {
                let k = schema::block_key(ino, idx);
                let mut other = None;
                self.tx.get_with(&k, &mut |v| match v.split_first() {
                    Some((0, data)) => copy_block(out, covered, off, end, idx * bs, data),
                    _ => other = Some(v.to_vec()),
                })?;
                if let Some(v) = other {
                    others.push((k, v));
                }
            }
            others
        } else {
            // A remote owner (a client of a shared store): the blocks this process's cache
            // holds are copied from it, from the first it lacks on they are read as a range.
            let mut from = first;
            let mut others = Vec::new();
            while from <= last {
                let k = schema::block_key(ino, from);
                let mut other = None;
                let hit = self.tx.cached_get_with(&k, &mut |v| match v.split_first() {
                    Some((0, data)) => copy_block(out, covered, off, end, from * bs, data),
                    _ => other = Some(v.to_vec()),
                })?;
                if hit.is_none() {
                    break;
                }
                if let Some(v) = other {
                    others.push((k, v));
                }
                from += 1;
            }
            if from > last {
                return self.copy_stored_blocks(ino, bs, others, off, end, out, covered);
            }
            // Blocks of data are copied straight from the backend's values; chunk references
            // (rare: large transactions) are collected and resolved below.
            let (s, _) = schema::block_range(ino, from);
            let mut bad = None;
            self.tx.visit_range(&s, &schema::block_key(ino, last + 1), &mut |k, v| match (
                v.split_first(),
                schema::block_index(k),
            ) {
                (Some((0, data)), Ok(idx)) => copy_block(out, covered, off, end, idx * bs, data),
                (_, Err(e)) => bad = Some(e),
                _ => others.push((k.to_vec(), v.to_vec())),
            })?;
            if let Some(e) = bad {
                return Err(e);
            }
            others
        };
        self.copy_stored_blocks(ino, bs, blocks, off, end, out, covered)
    }

    /// Copies the stored blocks `blocks` (key, value: chunk references or data) of `ino` into
    /// `out` as [`Operation::copy_blocks`] does.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn copy_stored_blocks(
        &mut self,
        ino: u64,
        bs: u64,
        blocks: Vec<KeyValue>,
        off: u64,
        end: u64,
        out: &mut [u8],
        covered: &mut Vec<(u64, u64)>,
    ) -> Result<()> {
        if blocks.is_empty() {
            return Ok(());
        }
        let mut chunks = self.fetch_chunks(ino, &blocks)?;
        for (k, v) in blocks {
            let idx = schema::block_index(&k)?;
            let bstart = idx * bs;
            let chunk;
            let data: &[u8] = match v.first() {
                Some(0) => &v[1..],
                _ => {
                    chunk = match chunks.remove(&idx) {
                        Some(c) => c,
                        None => self.block_bytes(ino, idx, &v)?,
                    };
                    &chunk
                }
            };
            copy_block(out, covered, off, end, bstart, data);
        }
        Ok(())
    }

    /// The bytes of block `idx` of `ino` stored as `v`: inline data, or a chunk (chunks.rs).
    pub(super) fn block_bytes(&mut self, ino: u64, idx: u64, v: &[u8]) -> Result<Vec<u8>> {
        match Block::decode(v)? {
            Block::Data(d) => Ok(d),
            Block::Chunk { id, offset, len } => self.chunk_bytes(ino, idx, id, offset, len),
        }
    }

    /// Before blocks `first..end` (`None`: to the end) of `ino` are overwritten or deleted:
    /// deletes the chunks they refer to. Only files that ever had a chunk pay for this.
    pub(super) fn drop_chunks(
        &mut self,
        ino: u64,
        inode: &Inode,
        first: u64,
        end: Option<u64>,
    ) -> Result<()> {
        if !inode.has_chunks {
            return Ok(());
        }
        let (s, to_end) = schema::block_range(ino, first);
        let e = end.map_or(to_end, |end| schema::block_key(ino, end));
        for (k, v) in self.tx.get_range(&s, &e, 0, false)? {
            if v.first() == Some(&1) {
                if let Block::Chunk { id, .. } = Block::decode(&v)? {
                    self.clear(&schema::chunk_key(ino, schema::block_index(&k)?, id))?;
                }
            }
        }
        Ok(())
    }

    /// Writes `data` at `off` (at the end of the file when `append`); returns the offset
    /// written at.
    pub fn write_ino(&mut self, ino: u64, off: u64, data: &[u8], append: bool) -> Result<u64> {
        let mut inode = self.inode(ino)?;
        let off = if append { inode.size } else { off };
        if data.is_empty() {
            return Ok(off);
        }
        let end = off.checked_add(data.len() as u64).filter(|&e| e <= MAX_FILE_SIZE).ok_or_else(
            || Error::new(ErrorKind::FileTooBig, "write beyond the maximum file size"),
        )?;
        let old_size = inode.size;
        if end > old_size {
            // Checked before anything is written.
            let grow = super::quota::Usage { bytes: (end - old_size) as i64, inodes: 0 };
            self.count(inode.quota, grow)?;
        }
        if inode.is_inline && end > self.inner.inline_limit as u64 {
            self.spill_inline(ino, &mut inode)?;
        }
        if inode.is_inline {
            if inode.inline.len() < end as usize {
                inode.inline.resize(end as usize, 0);
            }
            inode.inline[off as usize..end as usize].copy_from_slice(data);
        } else {
            self.write_blocks(ino, &mut inode, off, data)?;
        }
        inode.size = old_size.max(end);
        inode.is_inline = inode.is_inline && inode.inline.len() as u64 == inode.size;
        let now = now_ns();
        inode.mtime = now;
        inode.ctime = now;
        self.store_inode(ino, &inode)?;
        Ok(off)
    }

    /// Moves an inline file's data into blocks.
    pub(super) fn spill_inline(&mut self, ino: u64, inode: &mut Inode) -> Result<()> {
        let data = std::mem::take(&mut inode.inline);
        inode.is_inline = false;
        self.write_blocks(ino, inode, 0, &data)
    }

    /// Writes `data` at `off` into the blocks of `ino`. In a transaction that has written
    /// enough, full blocks are written ahead as chunks and only referenced here (staging.rs).
    pub(super) fn write_blocks(
        &mut self,
        ino: u64,
        inode: &mut Inode,
        off: u64,
        data: &[u8],
    ) -> Result<()> {
        if data.is_empty() {
            return Ok(());
        }
        let bs = inode.block_size(self.inner.block_size);
        let end = off + data.len() as u64;
        // The chunks of the full blocks written; a partial block's goes once it has been read.
        if off.div_ceil(bs) < end / bs {
            self.drop_chunks(ino, inode, off.div_ceil(bs), Some(end / bs))?;
        }
        let stage = self.staging.as_mut().is_some_and(|s| s.should_stage(data.len()));
        let mut ahead: Vec<(u64, &[u8])> = Vec::new();
        let mut pos = off;
        while pos < end {
            let idx = pos / bs;
            let bstart = idx * bs;
            let to = end.min(bstart + bs);
            let src = &data[(pos - off) as usize..(to - off) as usize];
            let key = schema::block_key(ino, idx);
            if pos == bstart && to == bstart + bs {
                if stage {
                    ahead.push((idx, src));
                } else {
                    self.set_block(ino, inode, idx, src)?;
                }
            } else {
                let mut block = match self.tx.get(&key)? {
                    Some(v) => {
                        let old = self.block_bytes(ino, idx, &v)?;
                        self.drop_block_chunk(ino, idx, &v)?;
                        old
                    }
                    None => Vec::new(),
                };
                let (a, b) = ((pos - bstart) as usize, (to - bstart) as usize);
                if block.len() < b {
                    block.resize(b, 0);
                }
                block[a..b].copy_from_slice(src);
                self.set_block(ino, inode, idx, &block)?;
            }
            pos = to;
        }
        if let (false, Some(staging)) = (ahead.is_empty(), self.staging.as_deref_mut()) {
            let ids = self.inner.stage(staging, ino, &ahead)?;
            inode.has_chunks = true;
            for ((idx, src), id) in ahead.iter().zip(ids) {
                let block = Block::Chunk { id, offset: 0, len: src.len() as u32 };
                self.set(&schema::block_key(ino, *idx), &block.encode())?;
            }
        }
        Ok(())
    }
}

/// Zeroes what no block covered of `out` (the file's bytes `[off, end)`): holes and the
/// bytes past a short block's end.
fn piece_done(covered: &mut [(u64, u64)], off: u64, end: u64, out: &mut [u8]) {
    covered.sort_unstable();
    let mut at = off;
    for &(from, to) in covered.iter().chain([(end, end)].iter()) {
        if from > at {
            out[(at - off) as usize..(from - off) as usize].fill(0);
        }
        at = at.max(to);
    }
}
