//! Deleting inodes, detached trees and orphans (files unlinked while open), in bounded steps.

use super::access::{W_OK, X_OK};
use super::{now_ns, Operation};
use crate::error::Result;
use crate::fs::state::StoreState;
use crate::fs::REMOVE_BATCH;
use crate::schema::{self, Dentry, DirAttr, FileType, Inode};
use std::sync::Arc;

impl Operation<'_> {
    /// Deletes an inode and everything it owns.
    ///
    /// Keys are deleted one by one where they are known: RocksDB keeps a range deletion as a
    /// tombstone that every later read of its range steps over, which made deleting small
    /// files slow (about 3 ms each). Only a file with data blocks deletes them as a range.
    pub(crate) fn delete_inode(&mut self, ino: u64, inode: &Inode) -> Result<()> {
        self.uncharge_deleted(ino, inode)?;
        self.drop_chunks(ino, inode, 0, None)?;
        self.clear(&schema::inode_key(ino))?;
        if inode.kind == FileType::Dir {
            for attr in DirAttr::ALL {
                self.clear(&schema::dir_attr_key(ino, attr))?;
            }
        }
        if !inode.is_inline {
            self.clear_range(schema::block_range(ino, 0))?;
        }
        let (s, e) = schema::xattr_range(ino);
        if inode.no_xattrs {
            // Never had one: nothing to look for.
        } else if self.tx.batches_reads() {
            // A remote backend: one range clear, where reading the keys first would cost a
            // round trip per inode (RocksDB's range tombstones, the reason for the loop below,
            // are not FoundationDB's).
            self.clear_range((s, e))?;
        } else {
            for (k, _) in self.tx.get_range(&s, &e, 0, false)? {
                self.clear(&k)?;
            }
        }
        self.clear(&schema::orphan_key(ino))
    }

    /// Detaches `p` for [`Store::remove_all`](crate::Store::remove_all): removes its name and,
    /// for a directory, records it as an orphan whose contents are then deleted in bounded
    /// batches ([`Operation::reap_batch`]). Returns the detached directory, or `None` when `p` was a
    /// file or symlink (then simply unlinked).
    pub fn detach_tree(&mut self, p: &[u8]) -> Result<Option<u64>> {
        let (parent, name, e) = self.removable_entry(p)?;
        if e.kind != FileType::Dir {
            self.unlink(p)?;
            return Ok(None);
        }
        self.may_delete(parent, e.ino, p)?;
        self.clear(&schema::dentry_key(parent, &name))?;
        self.atomic_add(&schema::dir_attr_key(parent, DirAttr::Nlink), -1)?;
        self.touch_dir(parent, now_ns())?;
        self.set(&schema::orphan_key(e.ino), &[])?;
        self.note(crate::schema::ChangeKind::Removed, e.ino, FileType::Dir, p);
        Ok(Some(e.ino))
    }

    /// One bounded step of deleting the orphan `ino`: a file orphan is freed if no link is
    /// left; a detached directory loses up to `batch` entries (files unlinked, subdirectories
    /// turned into orphans of their own, returned so the caller reaps them too) and is freed
    /// once empty. Returns the new orphan directories, the number of entries removed, and
    /// whether `ino` is gone. Each step is one transaction, so an interrupted removal resumes
    /// from the orphan records.
    pub(crate) fn reap_batch(&mut self, ino: u64, batch: usize) -> Result<(Vec<u64>, usize, bool)> {
        if self.tx.get(&schema::orphan_key(ino))?.is_none() {
            return Ok((Vec::new(), 0, true));
        }
        let inode = match self.load_inode(ino)? {
            Some(inode) if inode.kind == FileType::Dir => inode,
            _ => return self.reap_orphan(ino).map(|_| (Vec::new(), 0, true)),
        };
        let (s, e) = schema::dentry_range(ino);
        let entries = self.tx.get_range(&s, &e, batch, false)?;
        // On a remote backend, the files' inodes (which drop_link reads) in one batch.
        let files = entries.iter().filter_map(|(_, v)| Dentry::decode(v).ok());
        self.prefetch_inodes(files.filter(|d| d.kind != FileType::Dir).map(|d| d.ino))?;
        let mut subdirs = Vec::new();
        for (k, v) in &entries {
            let d = Dentry::decode(v)?;
            self.clear(k)?;
            if d.kind == FileType::Dir {
                self.set(&schema::orphan_key(d.ino), &[])?;
                subdirs.push(d.ino);
            } else {
                self.drop_link(d.ino)?;
            }
        }
        let done = entries.len() < batch;
        if done {
            self.delete_inode(ino, &inode)?;
        }
        Ok((subdirs, entries.len(), done))
    }

    /// Checks, without changing anything, that the caller may delete every entry of `dir`
    /// from `after` on (write and search permission on `dir`); returns the page's
    /// subdirectories and the cursor for the next page (`None` at the end).
    pub(crate) fn check_removable(
        &mut self,
        dir: u64,
        after: Option<&[u8]>,
        batch: usize,
    ) -> Result<(Vec<u64>, Option<Vec<u8>>)> {
        self.access_ino(dir, W_OK | X_OK, b"directory in the tree")?;
        let (mut start, end) = schema::dentry_range(dir);
        if let Some(a) = after {
            start = schema::dentry_key(dir, a);
            start.push(0);
        }
        let page = self.tx.snapshot_get_range(&start, &end, batch, false)?;
        let mut subdirs = Vec::new();
        for (_, v) in &page {
            let d = Dentry::decode(v)?;
            if d.kind == FileType::Dir {
                subdirs.push(d.ino);
            }
        }
        let next = (page.len() == batch).then(|| schema::dentry_name(&page[batch - 1].0).to_vec());
        Ok((subdirs, next))
    }

    /// True when `ino` has an orphan record (unlinked while open, or a detached tree).
    pub(crate) fn is_orphan(&mut self, ino: u64) -> Result<bool> {
        Ok(self.tx.get(&schema::orphan_key(ino))?.is_some())
    }

    /// Deletes an orphan (unlinked while open) if it is still one.
    /// Returns whether it freed the inode.
    pub(crate) fn reap_orphan(&mut self, ino: u64) -> Result<bool> {
        if self.tx.get(&schema::orphan_key(ino))?.is_none() {
            return Ok(false);
        }
        match self.load_inode(ino)? {
            // Open in another process (or maybe, seen from a secondary): kept, reaped later.
            Some(inode)
                if inode.nlink == 0
                    && inode.kind != crate::FileType::Dir
                    && self.open_elsewhere(ino)? =>
            {
                Ok(false)
            }
            Some(inode) if inode.nlink == 0 => self.delete_inode(ino, &inode).map(|()| true),
            Some(_) | None => self.clear(&schema::orphan_key(ino)).map(|()| false),
        }
    }
}

impl StoreState {
    /// Deletes orphans: files unlinked while open that no handle holds any more (in this
    /// process or, on a shared backend, in a live process: fs/handle_marks.rs), and detached
    /// directory trees ([`Store::remove_all`](crate::Store::remove_all)) left unfinished.
    /// Runs at open and, on a shared backend, periodically in a process that may free data.
    pub(crate) fn reap_orphans(self: &Arc<Self>) -> Result<()> {
        if self.read_only || !self.may_free() {
            return Ok(());
        }
        let (mut start, end) = schema::orphan_range();
        loop {
            let batch = self.kv_transact(|tx| tx.get_range(&start, &end, 100, false), false)?;
            let Some((last, _)) = batch.last() else { return Ok(()) };
            start = last.clone();
            start.push(0);
            for (k, _) in &batch {
                let ino = schema::orphan_ino(k)?;
                let is_dir = self.auto_commit(None, |op| {
                    Ok(op.load_inode(ino)?.is_some_and(|i| i.kind == crate::FileType::Dir))
                })?;
                if is_dir {
                    self.reap_tree(ino, &mut |_| {})?;
                } else {
                    self.open_files.reap_unless_open(ino, || {
                        self.auto_commit(None, |op| op.reap_orphan(ino))
                    })?;
                }
            }
        }
    }

    /// Deletes the orphan `ino` and, for a detached directory, everything below it, one
    /// bounded transaction ([`REMOVE_BATCH`] entries) at a time. After each committed batch,
    /// calls `progress` with the entries removed so far, `ino` itself counting once it is gone.
    pub(crate) fn reap_tree(&self, ino: u64, progress: &mut dyn FnMut(u64)) -> Result<()> {
        let mut pending = vec![ino];
        let mut removed = 0;
        while let Some(&dir) = pending.last() {
            let (subdirs, entries, done) =
                self.auto_commit(None, |op| op.reap_batch(dir, REMOVE_BATCH))?;
            removed += entries as u64 + u64::from(done && dir == ino);
            progress(removed);
            if done {
                pending.pop();
            }
            pending.extend(subdirs);
        }
        Ok(())
    }

    /// After a commit that kept `inos` as orphans: frees those whose last handle closed while
    /// the transaction ran. That close found no orphan record yet, so it could not free them.
    /// A failure here leaves the record for the next open to reap.
    pub(crate) fn reap_closed(&self, inos: &[u64]) {
        for &ino in inos {
            let _ = self
                .open_files
                .reap_unless_open(ino, || self.auto_commit(None, |op| op.reap_orphan(ino)));
        }
    }
}
