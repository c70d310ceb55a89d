//! File sizes: truncating (shrinking drops data, growing reads as zeros) and allocating
//! (`fallocate(2)`'s modes).

use super::access::W_OK;
use super::data::MAX_FILE_SIZE;
use super::{now_ns, Operation};
use crate::error::{Error, ErrorKind, Result};
use crate::fs::types::FallocateMode;
use crate::schema::{self, FileType, Inode};

impl Operation<'_> {
    /// Sets the size of file `ino`: shrinking drops data, growing reads as zeros.
    /// `truncate(2)` of `ino`: needs write permission, unlike a handle's `set_len`.
    pub fn truncate_checked(&mut self, ino: u64, size: u64) -> Result<()> {
        let inode = self.inode(ino)?;
        if inode.kind == FileType::File {
            self.access(&inode, W_OK)?;
        }
        self.truncate_ino(ino, size)?;
        self.note_ino(crate::schema::ChangeKind::Written, ino, inode.kind)
    }

    /// Sets the size of file `ino` (no permission check: the caller holds a writable handle).
    pub fn truncate_ino(&mut self, ino: u64, size: u64) -> Result<()> {
        let mut inode = self.inode(ino)?;
        match inode.kind {
            FileType::Dir => return Err(Error::new(ErrorKind::IsDir, "truncate of a directory")),
            FileType::File => {}
            _ => {
                return Err(Error::new(ErrorKind::Invalid, "truncate of a symlink or special file"))
            }
        }
        if size > MAX_FILE_SIZE {
            return Err(Error::new(ErrorKind::FileTooBig, "size beyond the maximum file size"));
        }
        self.truncate_inode(ino, &mut inode, size)?;
        self.store_inode(ino, &inode)
    }

    pub(super) fn truncate_inode(&mut self, ino: u64, inode: &mut Inode, size: u64) -> Result<()> {
        let old = inode.size;
        if size != old {
            // Checked before anything is written.
            let d = super::quota::Usage { bytes: size as i64 - old as i64, inodes: 0 };
            self.count(inode.quota, d)?;
        }
        if inode.is_inline && size > self.inner.inline_limit as u64 {
            self.spill_inline(ino, inode)?;
        }
        if inode.is_inline {
            inode.inline.resize(size as usize, 0);
        } else if size < old {
            let bs = inode.block_size(self.inner.block_size);
            self.drop_chunks(ino, inode, size.div_ceil(bs), None)?;
            self.clear_range(schema::block_range(ino, size.div_ceil(bs)))?;
            if size % bs != 0 {
                let key = schema::block_key(ino, size / bs);
                if let Some(v) = self.tx.get(&key)? {
                    let mut b = self.block_bytes(ino, size / bs, &v)?;
                    if b.len() as u64 > size % bs {
                        b.truncate((size % bs) as usize);
                        self.drop_block_chunk(ino, size / bs, &v)?;
                        self.set_block(ino, inode, size / bs, &b)?;
                    }
                }
            }
            if size == 0 {
                inode.is_inline = true;
                inode.inline.clear();
            }
        }
        inode.size = size;
        let now = now_ns();
        inode.mtime = now;
        inode.ctime = now;
        Ok(())
    }

    /// `fallocate`: mode 0 extends the size; `keep_size` does not; `punch_hole` (with
    /// `keep_size`) zeroes the range.
    pub fn fallocate_ino(
        &mut self,
        ino: u64,
        mode: FallocateMode,
        off: u64,
        len: u64,
    ) -> Result<()> {
        if len == 0 {
            return Err(Error::new(ErrorKind::Invalid, "fallocate: length must be positive"));
        }
        // Like Linux: a range past the largest file size, even one that overflows, is EFBIG.
        let end = off.saturating_add(len);
        if end > MAX_FILE_SIZE {
            return Err(Error::new(
                ErrorKind::FileTooBig,
                "fallocate beyond the maximum file size",
            ));
        }
        let mut inode = self.inode(ino)?;
        if inode.kind != FileType::File {
            let kind =
                if inode.kind == FileType::Dir { ErrorKind::IsDir } else { ErrorKind::Invalid };
            return Err(Error::new(kind, "fallocate of a non-file"));
        }
        match mode {
            FallocateMode::Allocate if end > inode.size => {
                self.truncate_inode(ino, &mut inode, end)?;
                self.store_inode(ino, &inode)
            }
            FallocateMode::Allocate | FallocateMode::KeepSize => Ok(()),
            FallocateMode::PunchHole => {
                let end = end.min(inode.size);
                if off >= end {
                    return Ok(());
                }
                if inode.is_inline {
                    inode.inline[off as usize..end as usize].fill(0);
                } else {
                    let bs = inode.block_size(self.inner.block_size);
                    let (full_from, full_to) = (off.div_ceil(bs), end / bs);
                    if full_from < full_to {
                        self.drop_chunks(ino, &inode, full_from, Some(full_to))?;
                        let (s, _) = schema::block_range(ino, full_from);
                        self.clear_range((s, schema::block_key(ino, full_to)))?;
                    }
                    // Zero the partial blocks at either end.
                    let head_end = end.min(full_from * bs);
                    if off < head_end {
                        self.write_blocks(
                            ino,
                            &mut inode,
                            off,
                            &vec![0; (head_end - off) as usize],
                        )?;
                    }
                    let tail_start = off.max(full_to * bs);
                    if full_to >= full_from && tail_start < end {
                        self.write_blocks(
                            ino,
                            &mut inode,
                            tail_start,
                            &vec![0; (end - tail_start) as usize],
                        )?;
                    }
                }
                inode.mtime = now_ns();
                inode.ctime = inode.mtime;
                self.store_inode(ino, &inode)
            }
        }
    }
}
