//! The writing side of the change feed: operations note their changes, the transaction's
//! commit writes them as one record at a versionstamped key (`schema/changes.rs`), and
//! retention drops the oldest records now and then.
//!
//! The feed is off by default: it costs every writing transaction one more key (and the
//! record's bytes), which stores that nobody watches should not pay. Its settings are kept in
//! the store, read when a process opens it: turn it on before the writers open the store (or
//! reopen them), or their changes are not recorded.

use super::ops::Operation;
use super::state::StoreState;
use super::store::Store;
use crate::clock::now_ms;
use crate::error::{Error, ErrorKind, Result};
use crate::kv::{self, Txn};
use crate::schema::{self, Change, ChangeKind, FeedConfig, FileType, Meta};
use parking_lot::{Condvar, Mutex};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

/// Retention runs after this many of a process's commits that wrote a record.
const TRIM_EVERY: u64 = 256;

/// Retention limits of the change feed; 0 means unlimited.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Retention {
    /// Keep at most this many records (transactions).
    pub max_records: u64,
    /// Keep records at most this many milliseconds old.
    pub max_age_ms: u64,
    /// Keep at most this many bytes of records.
    pub max_bytes: u64,
}

/// What waiting watchers sleep on: a number bumped, and the sleepers woken, after every
/// commit of this process that wrote a record and by the backend's wake-ups
/// ([`kv::Backend::wake_on_stamped`]), which hold it without the store.
#[derive(Default)]
pub(crate) struct Signal {
    pub(crate) seq: Mutex<u64>,
    pub(crate) moved: Condvar,
}

impl Signal {
    /// Bumps the number and wakes every sleeper (never blocks for long: callable from the
    /// backend's network thread).
    pub(crate) fn bump(&self) {
        *self.seq.lock() += 1;
        self.moved.notify_all();
    }
}

/// This process's view of the change feed of one store.
#[derive(Default)]
pub(crate) struct Feed {
    on: AtomicBool,
    config: Mutex<FeedConfig>,
    /// Bumped after every commit of this process that wrote a record; waiters sleep on it.
    pub(crate) signal: Arc<Signal>,
    since_trim: AtomicU64,
    /// Directory inode -> (parent, name), learned while finding the paths of inode-addressed
    /// calls; every use checks it against the store (two point reads), so it may be stale.
    names: Mutex<HashMap<u64, (u64, Vec<u8>)>>,
}

/// The name cache is emptied when it holds this many directories.
const NAMES_MAX: usize = 1 << 16;

impl Feed {
    /// Reads the feed's settings from the store.
    pub(crate) fn load(backend: &dyn kv::Backend, retries: u32) -> Result<Feed> {
        let config = kv::run_with_retries(backend, retries, false, |tx| {
            tx.snapshot_get(&schema::feed_config_key())?.map(|v| FeedConfig::decode(&v)).transpose()
        })?
        .unwrap_or_default();
        Ok(Feed { on: AtomicBool::new(config.on), config: Mutex::new(config), ..Feed::default() })
    }

    /// True when writers record their changes.
    pub(crate) fn on(&self) -> bool {
        self.on.load(Ordering::Relaxed)
    }

    /// Wakes this process's waiters after a commit that wrote a record.
    pub(crate) fn committed(&self) {
        self.signal.bump();
    }
}

impl Operation<'_> {
    /// Notes a change of this operation for the change feed (nothing while it is off).
    pub(crate) fn note(&mut self, kind: ChangeKind, ino: u64, file_type: FileType, path: &[u8]) {
        if !self.inner.feed.on() {
            return;
        }
        // A write after a create or truncate of the same file in one operation says nothing new.
        let same = |c: &Change| c.ino == ino && c.path == path && c.to.is_none();
        if kind == ChangeKind::Written
            && self.changes.last().is_some_and(|c| same(c) && c.kind != ChangeKind::Removed)
        {
            return;
        }
        self.changes.push(Change { kind, ino, file_type, path: path.to_vec(), to: None });
    }

    /// The path of entry `name` of directory `dir`, for noting a change made by an
    /// inode-addressed call (the FUSE mount's); empty when the feed is off or the directory's
    /// path cannot be found (see [`Operation::dir_path`]).
    pub(crate) fn path_at(&mut self, dir: u64, name: &[u8]) -> Result<Vec<u8>> {
        if !self.inner.feed.on() {
            return Ok(Vec::new());
        }
        let Some(mut p) = self.dir_path(dir)? else { return Ok(Vec::new()) };
        if p != b"/" {
            p.push(b'/');
        }
        p.extend_from_slice(name);
        Ok(p)
    }

    /// The best-known path of inode `ino` of type `kind`: a directory's path, or empty for
    /// anything else (the store keeps no way from a file to its names).
    pub(crate) fn path_of(&mut self, ino: u64, kind: FileType) -> Result<Vec<u8>> {
        if !self.inner.feed.on() || kind != FileType::Dir {
            return Ok(Vec::new());
        }
        Ok(self.dir_path(ino)?.unwrap_or_default())
    }

    /// The path of directory `dir` as this transaction sees it: up its parent keys to the
    /// root, finding each name in the parent's entries. Reads are snapshot reads, so finding
    /// a path never makes the operation conflict; `None` for a detached directory or one made
    /// before parent keys existed.
    pub(crate) fn dir_path(&mut self, dir: u64) -> Result<Option<Vec<u8>>> {
        let mut names: Vec<Vec<u8>> = Vec::new();
        let mut cur = dir;
        for _ in 0..=crate::fs::PATH_MAX / 2 {
            if cur == schema::ROOT_INO {
                let mut p = Vec::new();
                for n in names.iter().rev() {
                    p.push(b'/');
                    p.extend_from_slice(n);
                }
                if p.is_empty() {
                    p.push(b'/');
                }
                return Ok(Some(p));
            }
            let key = schema::dir_attr_key(cur, schema::DirAttr::Parent);
            let Some(v) = self.tx.snapshot_get(&key)? else { return Ok(None) };
            let parent = kv::decode_counter(Some(&v));
            let Some(name) = self.name_in(parent, cur)? else { return Ok(None) };
            names.push(name);
            cur = parent;
        }
        Ok(None)
    }

    /// The name of directory `dir` in directory `parent`: the cached one if the store still
    /// has it, else found by listing `parent`.
    fn name_in(&mut self, parent: u64, dir: u64) -> Result<Option<Vec<u8>>> {
        let cached = self.inner.feed.names.lock().get(&dir).cloned();
        if let Some((p, name)) = cached.filter(|(p, _)| *p == parent) {
            if let Some(v) = self.tx.snapshot_get(&schema::dentry_key(p, &name))? {
                if schema::Dentry::decode(&v)?.ino == dir {
                    return Ok(Some(name));
                }
            }
        }
        let (mut start, end) = schema::dentry_range(parent);
        loop {
            let page = self.tx.snapshot_get_range(&start, &end, 1024, false)?;
            for (k, v) in &page {
                if schema::Dentry::decode(v)?.ino == dir {
                    let name = schema::dentry_name(k).to_vec();
                    let mut names = self.inner.feed.names.lock();
                    if names.len() >= NAMES_MAX {
                        names.clear();
                    }
                    names.insert(dir, (parent, name.clone()));
                    return Ok(Some(name));
                }
            }
            match page.last() {
                Some((k, _)) if page.len() == 1024 => {
                    start = k.clone();
                    start.push(0);
                }
                _ => return Ok(None),
            }
        }
    }

    /// Notes a rename of `from` to `to` for the change feed.
    pub(crate) fn note_rename(&mut self, ino: u64, file_type: FileType, from: &[u8], to: &[u8]) {
        if self.inner.feed.on() {
            self.changes.push(Change {
                kind: ChangeKind::Renamed,
                ino,
                file_type,
                path: from.to_vec(),
                to: Some(to.to_vec()),
            });
        }
    }
}

/// Writes the record of a transaction's `changes` into it, just before its commit.
pub(crate) fn write_record(tx: &mut dyn Txn, changes: &[Change]) -> Result<()> {
    if changes.is_empty() {
        return Ok(());
    }
    let record = schema::encode_record(now_ms(), changes);
    tx.set_versionstamped_key_vec(&[schema::scope::FEED], record)
}

impl StoreState {
    /// After a commit that wrote a record: wakes waiters, and now and then applies retention.
    pub(crate) fn feed_committed(&self) {
        self.feed.committed();
        self.backend.announce_stamped(&[schema::scope::FEED]);
        let n = self.feed.since_trim.fetch_add(1, Ordering::Relaxed) + 1;
        if n % TRIM_EVERY == 0 {
            // Retention is housekeeping: a failure (a conflict, a read-only open) waits for
            // the next turn.
            let _ = self.trim_feed();
        }
    }

    /// Drops the records retention no longer keeps (never the newest one, which tells
    /// consumers where the feed stands). Returns how many were dropped.
    pub(crate) fn trim_feed(&self) -> Result<u64> {
        let c = *self.feed.config.lock();
        if c.max_records == 0 && c.max_age_ms == 0 && c.max_bytes == 0 {
            return Ok(0);
        }
        let (start, end) = schema::feed_range();
        self.kv_transact(
            |tx| {
                // Newest first: (key, bytes, time).
                let mut records = Vec::new();
                for (k, v) in tx.snapshot_get_range(&start, &end, 0, true)? {
                    let (time, _) = schema::decode_record(&v).unwrap_or((0, Vec::new()));
                    records.push((k.len() + v.len(), time, k));
                }
                let now = now_ms();
                let (mut bytes, mut keep) = (0u64, 0usize);
                for (i, (len, time, _)) in records.iter().enumerate() {
                    bytes += *len as u64;
                    let over = (c.max_records > 0 && i as u64 >= c.max_records)
                        || (c.max_age_ms > 0 && now.saturating_sub(*time) > c.max_age_ms)
                        || (c.max_bytes > 0 && bytes > c.max_bytes);
                    if over && i > 0 {
                        break;
                    }
                    keep = i + 1;
                }
                let Some((_, _, newest_dropped)) = records.get(keep) else { return Ok(0) };
                let stamp = schema::feed_stamp(newest_dropped)?;
                let counter = u64::from_be_bytes(stamp[..8].try_into().unwrap());
                let mut cut = newest_dropped.clone();
                cut.push(0);
                tx.clear_range(&start, &cut)?;
                tx.atomic_max(&schema::meta_key(Meta::FeedDropped), counter)?;
                Ok((records.len() - keep) as u64)
            },
            false,
        )
    }
}

impl Store {
    /// Turns the change feed on or off for the whole store (see [`Store::watch`]). Off by
    /// default: recording costs each writing transaction one more key. The setting is kept in
    /// the store and read by each process when it opens the store, so turn it on before the
    /// writers open it (or reopen them). Fails on backends without versionstamped keys
    /// (clones).
    pub fn set_change_feed(&self, on: bool) -> Result<()> {
        self.update_feed(|c| c.on = on)
    }

    /// Sets the change feed's retention (0: unlimited, the default). Records beyond it are
    /// dropped every few hundred commits (and by [`Store::trim_change_feed`]); a consumer whose
    /// cursor is older than the dropped records gets an error telling it to rescan.
    pub fn set_change_feed_retention(&self, r: Retention) -> Result<()> {
        self.update_feed(|c| {
            c.max_records = r.max_records;
            c.max_age_ms = r.max_age_ms;
            c.max_bytes = r.max_bytes;
        })
    }

    /// Applies the change feed's retention now; returns how many records it dropped.
    pub fn trim_change_feed(&self) -> Result<u64> {
        self.inner.trim_feed()
    }

    /// True when the change feed is on (as this process read it).
    pub fn change_feed(&self) -> bool {
        self.inner.feed.on()
    }

    fn update_feed(&self, f: impl Fn(&mut FeedConfig)) -> Result<()> {
        if self.per_open.read_only {
            return Err(Error::new(ErrorKind::ReadOnly, "store is opened read-only"));
        }
        let config = self.inner.kv_transact(
            |tx| {
                let key = schema::feed_config_key();
                let mut c = match tx.get(&key)? {
                    Some(v) => FeedConfig::decode(&v)?,
                    None => FeedConfig::default(),
                };
                f(&mut c);
                if c.on {
                    // Fails here, not at the first write, where the backend cannot stamp keys.
                    tx.set_versionstamped_key(
                        &schema::feed_prefix(),
                        &schema::encode_record(now_ms(), &[]),
                    )?;
                    let id_key = schema::meta_key(Meta::StoreId);
                    if tx.get(&id_key)?.is_none() {
                        let id = [super::leases::random_id(), super::leases::random_id()];
                        tx.set(&id_key, &[id[0].to_le_bytes(), id[1].to_le_bytes()].concat())?;
                    }
                }
                tx.set(&key, &c.encode())?;
                Ok(c)
            },
            true,
        )?;
        self.inner.feed.on.store(config.on, Ordering::Relaxed);
        *self.inner.feed.config.lock() = config;
        self.inner.feed.committed();
        Ok(())
    }
}
