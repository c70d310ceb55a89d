//! Path resolution on a backend with a round trip per read (FoundationDB, where
//! [`Txn::batches_reads`]): the directory entries and inodes that resolving a path will read
//! are guessed from the entries this process saw last, and read together in one batch
//! ([`Txn::snapshot_get_many`]); resolution then runs as always, taking each read it makes
//! from the batch when that key was read there. A `stat` of a path seen before thus costs one
//! read version and one round trip, however deep the path.
//!
//! The guesses never decide anything: every value used was read in the transaction, at its
//! snapshot, and enters its read conflict set when used ([`Txn::note_read`]), exactly as the
//! sequential resolution would have read it. The batch reads add no conflict of their own, so
//! a wrong guess (an entry renamed or replaced, by this process or another) or a key the
//! operation does not need costs only its read, and the rest of the path is read one key at a
//! time, as before. A value read ahead is dropped when the operation writes its key, so a value
//! read before a write is never used after it. Removing a tree reads the inodes of each batch
//! of entries together the same way ([`Operation::prefetch_inodes`]).

use super::Operation;
use crate::error::Result;
use crate::schema::{self, Dentry, FileType, ROOT_INO};
use parking_lot::Mutex;
use std::collections::HashMap;

/// Entries kept at most; the table is emptied when full (a guess missing costs nothing but
/// the batching).
const MAX_GUESSES: usize = 16_384;

/// Directory entries seen by this process's path resolutions, by their key: guesses only.
#[derive(Default)]
pub(crate) struct EntryGuesses {
    map: Mutex<HashMap<Vec<u8>, Dentry>>,
}

impl EntryGuesses {
    /// Notes that the entry of key `dentry_key` was found to be `entry` (`None`: absent).
    fn learn(&self, dentry_key: Vec<u8>, entry: Option<Dentry>) {
        let mut map = self.map.lock();
        match entry {
            Some(e) => {
                if map.len() >= MAX_GUESSES && !map.contains_key(&dentry_key) {
                    map.clear();
                }
                map.insert(dentry_key, e);
            }
            None => {
                map.remove(&dentry_key);
            }
        }
    }
}

impl Operation<'_> {
    /// Reads together, in one batch, the keys that resolving `comps` (a path's components,
    /// from the root) will read, as far as the guesses reach: each directory's entry for the
    /// next component, the inode the last guessed entry names, the inode of the directory
    /// holding the last component (a create reads its quota tree) and, for a caller other
    /// than root, each directory's inode (its search permission). Nothing where the backend does
    /// not batch reads, or where fewer than two keys are known.
    pub(super) fn prefetch_path(&mut self, comps: &[&[u8]]) -> Result<()> {
        if comps.is_empty() || !self.tx.batches_reads() {
            return Ok(());
        }
        let checks = self.cred.is_some_and(|c| c.uid != 0);
        let mut keys = Vec::new();
        {
            let guesses = self.inner.guesses.map.lock();
            let mut dir = ROOT_INO;
            for (i, name) in comps.iter().enumerate() {
                if *name == b"." || *name == b".." {
                    break;
                }
                // The last directory's inode also for a create: the new inode joins its quota
                // tree (`Inode::quota`).
                if checks || i + 1 == comps.len() {
                    keys.push(schema::inode_key(dir));
                }
                let key = schema::dentry_key(dir, name);
                let guess = guesses.get(&key).copied();
                keys.push(key);
                let Some(entry) = guess else { break };
                if i + 1 == comps.len() || entry.kind != FileType::Dir {
                    // The last entry's inode (what stat or open reads next), or a symbolic
                    // link's (its target) or a file's in the middle of the path (ENOTDIR).
                    keys.push(schema::inode_key(entry.ino));
                    break;
                }
                dir = entry.ino;
            }
        }
        self.fetch_together(keys)
    }

    /// Reads the inodes `inos` in one batch, for the calls of this operation that read them
    /// next (only where the backend batches reads).
    pub(super) fn prefetch_inodes(&mut self, inos: impl Iterator<Item = u64>) -> Result<()> {
        if !self.tx.batches_reads() {
            return Ok(());
        }
        let keys: Vec<Vec<u8>> = inos.map(schema::inode_key).collect();
        self.fetch_together(keys)
    }

    /// Reads `keys` in one batch (snapshot reads: each becomes a read of the transaction
    /// only when taken) and keeps what it found; fewer than two keys are not worth a batch.
    fn fetch_together(&mut self, keys: Vec<Vec<u8>>) -> Result<()> {
        if keys.len() < 2 {
            return Ok(());
        }
        let refs: Vec<&[u8]> = keys.iter().map(Vec::as_slice).collect();
        let mut values = vec![None; keys.len()];
        self.tx.snapshot_get_many(&refs, &mut |i, v| values[i] = v.map(<[u8]>::to_vec))?;
        self.prefetched.extend(keys.into_iter().zip(values));
        Ok(())
    }

    /// The value of `key` if the batch read it (`Some(None)`: absent), taken out of it and
    /// made a read of the transaction.
    pub(super) fn take_prefetched(&mut self, key: &[u8]) -> Result<Option<Option<Vec<u8>>>> {
        let Some(i) = self.prefetched.iter().position(|(k, _)| k == key) else { return Ok(None) };
        let (key, value) = self.prefetched.swap_remove(i);
        self.tx.note_read(&key, value.as_deref())?;
        Ok(Some(value))
    }

    /// Notes what resolution found in directory `dir` under `name`, for later guesses (only
    /// where reads are batched).
    pub(super) fn learn_entry(&mut self, dir: u64, name: &[u8], entry: Option<Dentry>) {
        if self.tx.batches_reads() {
            self.inner.guesses.learn(schema::dentry_key(dir, name), entry);
        }
    }
}
