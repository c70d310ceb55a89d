//! Every file-system operation, written once against one kv transaction. Auto-commit calls and
//! explicit transactions both run these; the caller decides when the transaction commits.
//!
//! This file holds the [`Operation`] type and its primitives (guarded writes, inodes, entries); the
//! operations are grouped by concern in the submodules.

mod access;
mod attrs;
mod chunks;
mod data;
mod fetch;
mod listing;
mod namespace;
mod prefetch;
mod quota;
mod reap;
mod resize;
mod resolve;

pub use attrs::{XATTR_NAME_MAX, XATTR_SIZE_MAX};
pub(crate) use chunks::open_disk_cache;
pub(crate) use data::check_block_size;
pub use data::MAX_FILE_SIZE;
pub(crate) use prefetch::EntryGuesses;
pub use quota::MAX_QUOTA_WALK;
pub(crate) use resolve::{FileRef, Resolved};

use super::staging::Staging;
use super::state::StoreState;
use super::types::Credential;
use crate::error::{Error, ErrorKind, Result};
use crate::kv::Txn;
use crate::schema::{self, Dentry, DirAttr, FileType, Inode};

pub(crate) use crate::clock::now_ns;

/// Operations over one kv transaction.
pub struct Operation<'a> {
    pub(crate) tx: &'a mut dyn Txn,
    pub(crate) inner: &'a StoreState,
    pub(crate) cred: Option<&'a Credential>,
    /// This open of the store is read-only: every write fails with EROFS.
    pub(crate) read_only: bool,
    /// Set once anything was written, so a failure after it can poison an explicit transaction.
    pub(crate) wrote: bool,
    /// Inodes this operation kept as orphans because they were open; once the transaction
    /// commits, the caller frees those whose last handle closed in the meantime.
    pub(crate) orphaned: Vec<u64>,
    /// Inodes whose data this operation deleted because no handle had them open; the commit
    /// checks that none was opened meanwhile ([`OpenFiles::commit_freeing`]).
    ///
    /// [`OpenFiles::commit_freeing`]: super::open_files::OpenFiles::commit_freeing
    pub(crate) freed: Vec<u64>,
    /// The explicit transaction's write-ahead state (`None` for auto-commit calls).
    pub(crate) staging: Option<&'a mut Staging>,
    /// Changes noted for the change feed (only while it is on).
    pub(crate) changes: Vec<crate::schema::Change>,
    /// Keys read ahead in one batch (path resolution, removal), with their values, until used
    /// or until this operation writes them (see `prefetch.rs`).
    pub(crate) prefetched: Vec<(Vec<u8>, Option<Vec<u8>>)>,
    /// Quota shards this operation read and wrote back (tree, shard, value), so that a second
    /// change of one tree in the operation (a file created, then written) reads it no more.
    pub(crate) quota_shards: smallvec::SmallVec<[(u64, u8, crate::schema::QuotaShard); 2]>,
    /// A name about to be created may be taken as absent without reading it
    /// ([`Txn::assume_absent`]): only in an auto-commit call, which reruns without guessing
    /// if an attempt that guessed fails ([`StoreState::auto_commit_as`]).
    ///
    /// [`StoreState::auto_commit_as`]: super::state::StoreState::auto_commit_as
    pub(crate) may_guess: bool,
    /// Set once a name was taken as absent.
    pub(crate) guessed: bool,
}

impl<'a> Operation<'a> {
    /// An operation on `tx` for an open of the store with credentials `cred`; `staging` is an
    /// explicit transaction's write-ahead state.
    pub(crate) fn new(
        tx: &'a mut dyn Txn,
        inner: &'a StoreState,
        cred: Option<&'a Credential>,
        read_only: bool,
        staging: Option<&'a mut Staging>,
    ) -> Self {
        Operation {
            tx,
            inner,
            cred,
            read_only,
            wrote: false,
            orphaned: Vec::new(),
            freed: Vec::new(),
            staging,
            changes: Vec::new(),
            prefetched: Vec::new(),
            quota_shards: smallvec::SmallVec::new(),
            may_guess: false,
            guessed: false,
        }
    }

    fn set(&mut self, k: &[u8], v: &[u8]) -> Result<()> {
        self.writable()?;
        self.wrote(k, None);
        self.tx.set(k, v)
    }

    fn clear(&mut self, k: &[u8]) -> Result<()> {
        self.writable()?;
        self.wrote(k, None);
        self.tx.clear(k)
    }

    fn clear_range(&mut self, (s, e): (Vec<u8>, Vec<u8>)) -> Result<()> {
        self.writable()?;
        self.wrote(&s, Some(&e));
        self.tx.clear_range(&s, &e)
    }

    fn atomic_add(&mut self, k: &[u8], d: i64) -> Result<()> {
        self.writable()?;
        self.wrote(k, None);
        self.tx.atomic_add(k, d)
    }

    fn atomic_max(&mut self, k: &[u8], v: i64) -> Result<()> {
        self.writable()?;
        self.wrote(k, None);
        self.tx.atomic_max(k, v.max(0) as u64)
    }

    /// Notes a write of `key` (of `key <= k < end` with an `end`): an explicit transaction is
    /// then poisoned by a failure, and what was read ahead of those keys is stale.
    fn wrote(&mut self, key: &[u8], end: Option<&[u8]>) {
        self.wrote = true;
        if !self.prefetched.is_empty() {
            self.prefetched.retain(|(k, _)| match end {
                None => k != key,
                Some(end) => k.as_slice() < key || k.as_slice() >= end,
            });
        }
    }

    pub(super) fn writable(&self) -> Result<()> {
        if self.read_only {
            return Err(Error::new(ErrorKind::ReadOnly, "store is opened read-only"));
        }
        Ok(())
    }

    /// The value of `key` if path resolution read it ahead (`prefetch.rs`).
    fn read_ahead(&mut self, key: impl FnOnce() -> Vec<u8>) -> Result<Option<Option<Vec<u8>>>> {
        if self.prefetched.is_empty() {
            return Ok(None);
        }
        self.take_prefetched(&key())
    }

    pub(crate) fn load_inode(&mut self, ino: u64) -> Result<Option<Inode>> {
        if let Some(v) = self.read_ahead(|| schema::inode_key(ino))? {
            return v.map(|v| Inode::decode(&v)).transpose();
        }
        let mut inode = None;
        self.tx.get_with(&schema::inode_key(ino), &mut |v| inode = Some(Inode::decode(v)))?;
        inode.transpose()
    }

    /// [`Operation::inode`] without a regular file's inline data (see [`Inode::decode_meta`]):
    /// for stat and access checks, which would otherwise copy up to 4 KiB of data each.
    pub(crate) fn inode_meta(&mut self, ino: u64) -> Result<Inode> {
        let mut inode = None;
        let decode = |v: &[u8]| Inode::decode_meta(v).map(|(i, _)| i);
        match self.read_ahead(|| schema::inode_key(ino))? {
            Some(v) => inode = v.map(|v| decode(&v)),
            None => {
                self.tx.get_with(&schema::inode_key(ino), &mut |v| inode = Some(decode(v)))?;
            }
        }
        inode
            .transpose()?
            .ok_or_else(|| Error::new(ErrorKind::NotFound, format!("inode {ino} no longer exists")))
    }

    /// Loads an inode that a directory entry or handle refers to; missing means corruption
    /// (for entries) or a file deleted under a handle.
    pub(crate) fn inode(&mut self, ino: u64) -> Result<Inode> {
        self.load_inode(ino)?
            .ok_or_else(|| Error::new(ErrorKind::NotFound, format!("inode {ino} no longer exists")))
    }

    fn store_inode(&mut self, ino: u64, inode: &Inode) -> Result<()> {
        self.set(&schema::inode_key(ino), &inode.encode())
    }

    pub(crate) fn lookup(&mut self, dir: u64, name: &[u8]) -> Result<Option<Dentry>> {
        if let Some(v) = self.read_ahead(|| schema::dentry_key(dir, name))? {
            return v.map(|v| Dentry::decode(&v)).transpose();
        }
        // Decoded from the lent value: no copy of it.
        let mut entry = None;
        self.tx
            .get_with(&schema::dentry_key(dir, name), &mut |v| entry = Some(Dentry::decode(v)))?;
        entry.transpose()
    }

    /// The entry `name` of directory `dir`, about to be created if absent: taken as absent
    /// without a read where the transaction checks that at commit (a client's round trip
    /// saved), else looked up.
    pub(crate) fn lookup_to_create(&mut self, dir: u64, name: &[u8]) -> Result<Option<Dentry>> {
        if self.may_guess && self.tx.assume_absent(&schema::dentry_key(dir, name))? {
            self.guessed = true;
            return Ok(None);
        }
        self.lookup(dir, name)
    }

    /// Records a change in directory `dir`: bumps its mtime and ctime without a read conflict.
    fn touch_dir(&mut self, dir: u64, now: i64) -> Result<()> {
        self.atomic_max(&schema::dir_attr_key(dir, DirAttr::Mtime), now)?;
        self.atomic_max(&schema::dir_attr_key(dir, DirAttr::Ctime), now)
    }

    fn touch_ctime(&mut self, ino: u64, now: i64) -> Result<()> {
        let mut inode = self.inode(ino)?;
        if inode.kind == FileType::Dir {
            return self.atomic_max(&schema::dir_attr_key(ino, DirAttr::Ctime), now);
        }
        inode.ctime = now;
        self.store_inode(ino, &inode)
    }
}
