//! The file system: a store of files, directories and symlinks over a kv backend, where every
//! call is a transaction and an explicit [`Transaction`] groups any number of calls on any
//! number of files into one atomic, isolated, durable change.

mod file;
mod inodes;
pub mod leases;
mod locks;
mod staging;
mod ops;
pub(crate) mod path;
mod types;

pub use file::File;
pub use inodes::{InodeFileSystem, SetAttr};
use leases::{LeaseTable, SystemClock, DEFAULT_LEASE};
pub use locks::{FlockOp, RangeLock, RangeLockKind};
use ops::{Ops, Target};
pub use ops::{MAX_FILE_SIZE, XATTR_NAME_MAX, XATTR_SIZE_MAX};
pub use path::{check_name, NAME_MAX, PATH_MAX, SYMLINK_MAX};
pub use types::*;

use crate::error::{Error, ErrorKind, Result};
use crate::kv::{self, Backend, JournalTxn, Txn};
use crate::schema::{self, Inode, Meta, Superblock, FORMAT_VERSION, ROOT_INO};
use locks::LockTable;
use staging::Staging;
use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock, Weak};

/// Options for opening a store.
#[derive(Clone, Debug)]
pub struct Options {
    /// Make each explicit commit durable before it returns (one fsync, shared by concurrent
    /// commits). Auto-commit calls are durable at the next `fsync`/`sync`. Default true.
    pub sync: bool,
    /// Block size for a new store (fixed at creation). Default 64 KiB.
    pub block_size: u32,
    /// Files up to this size keep their data in the inode (fixed at creation). Default 4 KiB.
    pub inline_limit: u32,
    /// Refuse every change with EROFS.
    pub read_only: bool,
    /// Check permissions as this user; `None` acts as the store's owner.
    pub credential: Option<Credential>,
    /// How often `transact` and auto-commit calls retry a conflict before giving up.
    pub max_retries: u32,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            sync: true,
            block_size: 64 << 10,
            inline_limit: 4 << 10,
            read_only: false,
            credential: None,
            max_retries: 100,
        }
    }
}

/// Inode numbers reserved per allocator round trip.
const INO_BATCH: u64 = 1024;

/// State shared by every handle of one store in this process.
pub(crate) struct Inner {
    backend: Arc<dyn Backend>,
    pub(crate) block_size: u32,
    pub(crate) inline_limit: u32,
    pub(crate) read_only: bool,
    sync: bool,
    max_retries: u32,
    /// Owner of new files when no credential is given: the process's uid and gid.
    pub(crate) owner: (u32, u32),
    /// (total, free) bytes of the backend's disk, when it has one.
    pub(crate) space: Option<(u64, u64)>,
    ino_range: Mutex<(u64, u64)>,
    open_files: Mutex<HashMap<u64, usize>>,
    pub(crate) locks: LockTable,
    next_handle: AtomicU64,
    /// This process's id in staging records (random per open).
    process: u64,
}

impl Inner {
    pub(crate) fn alloc_ino(&self) -> Result<u64> {
        let mut r = self.ino_range.lock();
        if r.0 >= r.1 {
            // Reserve a range in a transaction of its own: the counter is touched once per
            // INO_BATCH creates, and never by the caller's transaction.
            let key = schema::meta_key(Meta::NextIno);
            *r = self.retry(|tx| {
                let next = kv::decode_counter(tx.get(&key)?.as_deref()).max(ROOT_INO + 1);
                tx.set(&key, &(next + INO_BATCH).to_le_bytes())?;
                Ok((next, next + INO_BATCH))
            }, false)?;
        }
        r.0 += 1;
        Ok(r.0 - 1)
    }

    pub(crate) fn is_open(&self, ino: u64) -> bool {
        self.open_files.lock().contains_key(&ino)
    }

    pub(crate) fn opened(&self, ino: u64) {
        *self.open_files.lock().entry(ino).or_insert(0) += 1;
    }

    /// Returns true when this was the last handle of `ino`.
    pub(crate) fn closed(&self, ino: u64) -> bool {
        let mut files = self.open_files.lock();
        match files.get_mut(&ino) {
            Some(n) if *n > 1 => {
                *n -= 1;
                false
            }
            _ => {
                files.remove(&ino);
                true
            }
        }
    }

    pub(crate) fn new_handle_id(&self) -> u64 {
        self.next_handle.fetch_add(1, Ordering::Relaxed)
    }

    /// Runs `f` in a fresh kv transaction and commits it, retrying conflicts with backoff.
    fn retry<R>(&self, f: impl FnMut(&mut dyn Txn) -> Result<R>, durable: bool) -> Result<R> {
        kv::run_with_retries(&*self.backend, self.max_retries, durable, f)
    }

    /// Deletes inodes left unlinked-but-open by a previous run (none can be open now).
    /// On a backend shared by several processes, unlinked files may still be open in another
    /// process, so only detached directory trees ([`Store::remove_all`]) are finished here.
    fn reap_orphans(self: &Arc<Self>) -> Result<()> {
        if self.read_only {
            return Ok(());
        }
        let (mut start, end) = schema::orphan_range();
        loop {
            let batch = self.retry(|tx| tx.get_range(&start, &end, 100, false), false)?;
            let Some((last, _)) = batch.last() else { return Ok(()) };
            start = last.clone();
            start.push(0);
            for (k, _) in &batch {
                let ino = schema::orphan_ino(k)?;
                if self.backend.shared() {
                    let is_dir = self.run(None, |ops| Ok(ops.load_inode(ino)?.is_some_and(|i| i.kind == crate::FileType::Dir)))?;
                    if !is_dir {
                        continue;
                    }
                }
                self.reap_tree(ino, &mut |_| {})?;
            }
        }
    }

    /// Deletes the orphan `ino` and, for a detached directory, everything below it, one
    /// bounded transaction ([`REMOVE_BATCH`] entries) at a time. After each committed batch,
    /// calls `progress` with the entries removed so far, `ino` itself counting once it is gone.
    fn reap_tree(&self, ino: u64, progress: &mut dyn FnMut(u64)) -> Result<()> {
        let mut pending = vec![ino];
        let mut removed = 0;
        while let Some(&dir) = pending.last() {
            let (subdirs, entries, done) = self.run(None, |ops| ops.reap_batch(dir, REMOVE_BATCH))?;
            removed += entries as u64 + u64::from(done && dir == ino);
            progress(removed);
            if done {
                pending.pop();
            }
            pending.extend(subdirs);
        }
        Ok(())
    }

    /// Runs one auto-commit operation.
    pub(crate) fn run<R>(&self, cred: Option<&Credential>, mut f: impl FnMut(&mut Ops<'_>) -> Result<R>) -> Result<R> {
        let mut orphaned = Vec::new();
        let r = self.retry(
            |tx| {
                let mut ops = Ops { tx, inner: self, cred, wrote: false, orphaned: Vec::new(), staging: None };
                let r = f(&mut ops);
                orphaned = ops.orphaned;
                r
            },
            false,
        )?;
        self.reap_closed(&orphaned);
        Ok(r)
    }

    /// After a commit that kept `inos` as orphans: frees those whose last handle closed while
    /// the transaction ran. That close found no orphan record yet, so it could not free them.
    /// A failure here leaves the record for the next open to reap.
    fn reap_closed(&self, inos: &[u64]) {
        for &ino in inos {
            if !self.is_open(ino) {
                let _ = self.run(None, |ops| ops.reap_orphan(ino));
            }
        }
    }
}

/// Entries deleted per transaction by [`Store::remove_all`] and the orphan reaper: about
/// 200 bytes of writes each, so a batch stays far below FoundationDB's 10 MB and 5 s.
pub const REMOVE_BATCH: usize = 1000;

fn shared_stores() -> &'static Mutex<HashMap<usize, Weak<Inner>>> {
    static STORES: OnceLock<Mutex<HashMap<usize, Weak<Inner>>>> = OnceLock::new();
    STORES.get_or_init(Default::default)
}

/// An open store. Cloning is cheap and shares everything; all methods are thread-safe.
/// File-system calls come from the [`FileSystem`] trait: on a `Store` each call is its own
/// transaction (auto-commit).
#[derive(Clone)]
pub struct Store {
    inner: Arc<Inner>,
    cred: Option<Arc<Credential>>,
}

impl Store {
    /// Opens the store at `uri` with default options: `rocksdb:/path` or a bare path
    /// (RocksDB, created if missing), `memory:` or `memory:?limits=foundationdb`.
    pub fn open(uri: &str) -> Result<Store> {
        Store::open_with(uri, Options::default())
    }

    /// Opens the store at `uri` with `options`.
    pub fn open_with(uri: &str, options: Options) -> Result<Store> {
        let backend = kv::open(uri)?;
        Store::with_backend(backend, options, None)
    }

    /// Opens the existing store at `uri` with `options`; where there is none, fails with
    /// [`ErrorKind::NotFound`] ("no store there") and creates nothing (not even a RocksDB
    /// directory). For tools that must not create a store by mistake.
    pub fn open_existing(uri: &str, options: Options) -> Result<Store> {
        let backend = kv::open_existing(uri)?;
        Store::open_backend(backend, options, None, false)
    }

    /// Opens a store on an existing backend (for custom or wrapped backends). Opening the same
    /// backend again in this process shares handles, locks and open-file state; the options of
    /// the first open stay in force, except the credential. `space` is the (total, free) bytes
    /// that `statfs` reports; `None` asks the backend ([`Backend::disk_space`]).
    pub fn with_backend(backend: Arc<dyn Backend>, options: Options, space: Option<(u64, u64)>) -> Result<Store> {
        Store::open_backend(backend, options, space, true)
    }

    /// [`Store::with_backend`]; without `create`, a backend without a store gives NotFound.
    fn open_backend(backend: Arc<dyn Backend>, options: Options, space: Option<(u64, u64)>, create: bool) -> Result<Store> {
        let space = space.or_else(|| backend.disk_space());
        let cred = options.credential.clone().map(Arc::new);
        let key = Arc::as_ptr(&backend) as *const () as usize;
        let mut stores = shared_stores().lock();
        if let Some(inner) = stores.get(&key).and_then(Weak::upgrade) {
            return Ok(Store { inner, cred });
        }
        if options.block_size < 512 || options.block_size > 65536 || !options.block_size.is_power_of_two() {
            return Err(Error::new(ErrorKind::Invalid, "block size must be a power of two from 512 to 65536"));
        }
        if options.inline_limit > 65536 {
            return Err(Error::new(ErrorKind::Invalid, "inline limit must be at most 65536"));
        }
        let sb = format_or_read(&*backend, &options, create)?;
        // SAFETY: getuid/getgid cannot fail.
        let owner = unsafe { (libc::getuid(), libc::getgid()) };
        let shared_locks = backend.shared().then(|| {
            let table = LeaseTable::new(backend.clone(), Arc::new(SystemClock), DEFAULT_LEASE);
            table.start_renewer();
            table
        });
        let inner = Arc::new(Inner {
            backend,
            block_size: sb.block_size,
            inline_limit: sb.inline_limit,
            read_only: options.read_only,
            sync: options.sync,
            max_retries: options.max_retries,
            owner,
            space,
            ino_range: Mutex::new((0, 0)),
            open_files: Mutex::new(HashMap::new()),
            locks: LockTable::new(shared_locks),
            next_handle: AtomicU64::new(1),
            process: leases::random_id(),
        });
        inner.reap_orphans()?;
        inner.collect_dead_stages()?;
        stores.retain(|_, w| w.strong_count() > 0);
        stores.insert(key, Arc::downgrade(&inner));
        Ok(Store { inner, cred })
    }

    /// The same store, checking permissions as `cred` (or as the owner with `None`).
    pub fn with_credential(&self, cred: Option<Credential>) -> Store {
        Store { inner: self.inner.clone(), cred: cred.map(Arc::new) }
    }

    /// Starts an explicit transaction. Nothing it does is visible to others until
    /// [`Transaction::commit`]; dropping it rolls back.
    pub fn begin(&self) -> Result<Transaction> {
        let backend = &self.inner.backend;
        let limits = backend.limits();
        // On a backend with a time limit, the transaction renews its backend transaction
        // before it runs out (kv::JournalTxn), so it may last as long as it needs.
        let kv: Box<dyn Txn> = match limits.max_txn_duration {
            Some(limit) => Box::new(JournalTxn::begin(backend.clone(), limit / 2)?),
            None => backend.begin()?,
        };
        Ok(Transaction {
            shared: Arc::new(TxShared {
                store: self.clone(),
                state: Mutex::new(TxState::Active(kv, Staging::new(limits))),
                orphaned: Mutex::new(Vec::new()),
            }),
        })
    }

    /// Runs `f` in a transaction and commits it; retries with backoff when the transaction
    /// conflicts with another one (so `f` may run several times and must not have side
    /// effects outside the transaction). Every other error is returned at once.
    pub fn transact<R>(&self, mut f: impl FnMut(&Transaction) -> Result<R>) -> Result<R> {
        kv::retry_loop(self.inner.max_retries, || self.begin(), |tx| f(&tx).and_then(|v| tx.commit().map(|()| v)))
    }

    /// Removes `path` and everything below it, like `rm -r`, for trees of any size.
    ///
    /// The first transaction detaches the tree: its name disappears atomically, so no one
    /// sees a half-deleted tree. The contents are then deleted in bounded transactions of
    /// [`REMOVE_BATCH`] entries each, so the removal fits FoundationDB's limits whatever the
    /// size of the tree. If the process stops midway, the rest is deleted the next time the
    /// store is opened (the detached directories are recorded as orphans). A file or symlink
    /// is simply unlinked. With a non-root credential, every directory in the tree must be
    /// writable and searchable (checked before anything changes; the sticky bit is only
    /// checked at the top).
    ///
    /// Errors: `NotFound`, `Busy` for the root, `Access`/`NotPermitted`, and backend errors;
    /// an error after the detach leaves the rest for the next open (or the next call to
    /// [`Store::remove_all`] on another path, which does not resume it).
    ///
    /// [`Store::remove_all_with`] does the same and reports its progress.
    pub fn remove_all(&self, path: impl AsRef<[u8]>) -> Result<()> {
        self.remove_all_with(path, &mut |_| {})
    }

    /// [`Store::remove_all`], calling `progress` after each committed batch with the number
    /// of entries removed so far, for a progress display. The count grows to the number of
    /// names in the tree, the top included: each file, symlink and directory name counts
    /// once (for a tree without hard links, the number of inodes freed). Removing a file or
    /// symlink reports 1. The total is not known in advance; the first call comes after the
    /// detach and the first batch. On an error, the last count reported is what was
    /// deleted for good.
    pub fn remove_all_with(&self, path: impl AsRef<[u8]>, progress: &mut dyn FnMut(u64)) -> Result<()> {
        let p = path.as_ref();
        let cred = self.cred.as_deref();
        if cred.is_some_and(|c| c.uid != 0) {
            self.check_tree_removable(p)?;
        }
        match self.inner.run(cred, |ops| ops.detach_tree(p))? {
            Some(ino) => self.inner.reap_tree(ino, progress),
            None => {
                progress(1);
                Ok(())
            }
        }
    }

    /// Walks the tree at `p` in read-only pages, checking that every directory may be emptied.
    fn check_tree_removable(&self, p: &[u8]) -> Result<()> {
        let cred = self.cred.as_deref();
        let root = self.inner.run(cred, |ops| {
            let r = ops.resolve(p, false)?;
            Ok(r.entry.filter(|e| e.kind == crate::FileType::Dir).map(|e| e.ino))
        })?;
        let mut pending: Vec<u64> = root.into_iter().collect();
        while let Some(dir) = pending.pop() {
            let mut after: Option<Vec<u8>> = None;
            loop {
                let (subdirs, next) = self.inner.run(cred, |ops| ops.check_removable(dir, after.as_deref(), REMOVE_BATCH))
                    .map_err(|e| Error::new(e.kind(), format!("{}: {}", String::from_utf8_lossy(p), e)))?;
                pending.extend(subdirs);
                match next {
                    Some(n) => after = Some(n),
                    None => break,
                }
            }
        }
        Ok(())
    }


    /// Makes every change committed so far durable (what `fsync` does for auto-commit writes).
    pub fn sync(&self) -> Result<()> {
        self.inner.backend.sync()
    }

    /// The store's block size.
    pub fn block_size(&self) -> u32 {
        self.inner.block_size
    }

    /// The store's inline limit.
    pub fn inline_limit(&self) -> u32 {
        self.inner.inline_limit
    }

    /// The backend's description, such as `rocksdb:/path`.
    pub fn describe(&self) -> String {
        self.inner.backend.describe()
    }
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Store({})", self.describe())
    }
}

/// Creates the superblock and root directory of a new store, or reads an existing one.
/// Without `create`, a backend without a store gives NotFound.
fn format_or_read(backend: &dyn Backend, o: &Options, create: bool) -> Result<Superblock> {
    // Durable: a new store exists once its open returns.
    kv::run_with_retries(backend, o.max_retries, true, |tx| {
        if let Some(v) = tx.get(&schema::super_key())? {
            return Superblock::decode(&v);
        }
        if !create {
            return Err(Error::new(ErrorKind::NotFound, format!("{}: no store there", backend.describe())));
        }
        if o.read_only {
            return Err(Error::new(ErrorKind::ReadOnly, "cannot create a new store read-only"));
        }
        let now = ops::now_ns();
        let sb = Superblock { version: FORMAT_VERSION, block_size: o.block_size, inline_limit: o.inline_limit, created_ns: now };
        tx.set(&schema::super_key(), &sb.encode())?;
        // SAFETY: getuid/getgid cannot fail.
        let (uid, gid) = unsafe { (libc::getuid(), libc::getgid()) };
        let root = Inode {
            kind: schema::FileType::Dir, perm: 0o755, uid, gid, nlink: 2, size: 0,
            atime: now, mtime: now, ctime: now, is_inline: true, has_chunks: false, inline: Vec::new(),
        };
        tx.set(&schema::inode_key(ROOT_INO), &root.encode())?;
        tx.atomic_add(&schema::meta_key(Meta::Inodes), 1)?;
        Ok(sb)
    })
}

enum TxState {
    Active(Box<dyn Txn>, Staging),
    /// An operation failed after writing part of its changes; only rollback is possible.
    Failed(Error),
    Done,
}

#[doc(hidden)]
pub struct TxShared {
    store: Store,
    state: Mutex<TxState>,
    /// Inodes the transaction kept as orphans; see [`Inner::reap_closed`].
    orphaned: Mutex<Vec<u64>>,
}

/// An explicit transaction: every call on it (and on files opened through it) belongs to it.
/// Its reads see its own writes; nobody else sees anything until [`Transaction::commit`],
/// then everything at once. Dropping it rolls back.
pub struct Transaction {
    shared: Arc<TxShared>,
}

impl Transaction {
    /// Commits: all changes become visible at once (and durable, with the `sync` option), or
    /// none do. A [`ErrorKind::Conflict`] error means another transaction changed something
    /// this one read; run it again (see [`Store::transact`]). Takes `&self`, so a transaction
    /// shared between threads or held by a binding can be committed without being moved out;
    /// once committed or rolled back, every further call (a second commit too) fails with
    /// [`ErrorKind::Invalid`] ("already committed or rolled back").
    pub fn commit(&self) -> Result<()> {
        let durable = self.shared.store.inner.sync;
        self.commit_durable(durable)
    }

    /// Commits like [`Transaction::commit`], choosing durability for this commit alone,
    /// whatever the store's `sync` option says: `true` returns once the commit survives power
    /// loss; `false` makes it atomic and visible at once and durable at the next
    /// [`Store::sync`] or durable commit (like an auto-commit call). The SQLite VFS maps
    /// `PRAGMA synchronous=OFF` to `false`.
    pub fn commit_durable(&self, durable: bool) -> Result<()> {
        let state = std::mem::replace(&mut *self.shared.state.lock(), TxState::Done);
        match state {
            TxState::Active(mut kv, staging) => {
                let inner = &self.shared.store.inner;
                let committed = match staging.txid {
                    None => kv.commit(durable),
                    Some(txid) => finish_stage(kv.as_mut(), txid, inner.backend.shared()).and_then(|()| kv.commit(durable)).inspect_err(|_| {
                        // Not committed (the staging record is still there): free the chunks.
                        let _ = inner.collect_stage(txid, None);
                    }),
                };
                committed?;
                let orphaned = std::mem::take(&mut *self.shared.orphaned.lock());
                inner.reap_closed(&orphaned);
                Ok(())
            }
            TxState::Failed(e) => Err(Error::new(
                e.kind(),
                format!("transaction cannot commit: an earlier operation failed part-way: {}", e.message()),
            )),
            TxState::Done => Err(finished()),
        }
    }

    /// Discards every change of the transaction (nothing happens if it already ended).
    pub fn rollback(&self) {
        self.end();
    }

    /// Ends the transaction without committing; frees what it wrote ahead (a failure leaves
    /// that to the next open).
    fn end(&self) {
        let state = std::mem::replace(&mut *self.shared.state.lock(), TxState::Done);
        if let TxState::Active(_, Staging { txid: Some(txid), .. }) = state {
            let _ = self.shared.store.inner.collect_stage(txid, None);
        }
    }
}

/// In the final commit of a transaction that wrote ahead: hands its chunks to their blocks by
/// deleting its staging record and index, after checking that they were not collected.
fn finish_stage(kv: &mut dyn Txn, txid: u64, shared: bool) -> Result<()> {
    // Only on a shared backend can another process collect a live transaction's chunks (when
    // its lease ran out); there the transaction reads its staging record at a fresh snapshot
    // (later than its own staging writes), so a collector that deletes it conflicts.
    if shared {
        kv.refresh()?;
        if kv.get(&schema::stage_key(txid))?.is_none() {
            return Err(Error::new(
                ErrorKind::TooOld,
                "data this transaction wrote ahead was collected: it stayed idle longer than its lease",
            ));
        }
    }
    kv.clear(&schema::stage_key(txid))?;
    let (s, e) = schema::staged_range(txid);
    kv.clear_range(&s, &e)
}

impl Drop for Transaction {
    fn drop(&mut self) {
        self.end();
    }
}

fn finished() -> Error {
    Error::new(ErrorKind::Invalid, "transaction already committed or rolled back")
}

/// Where a file-system call runs: auto-commit on a store, or inside a transaction.
#[doc(hidden)]
#[derive(Clone)]
pub enum Ctx {
    Auto(Store),
    Tx(Arc<TxShared>),
}

impl Ctx {
    pub(crate) fn store(&self) -> &Store {
        match self {
            Ctx::Auto(s) => s,
            Ctx::Tx(t) => &t.store,
        }
    }

    pub(crate) fn is_finished(&self) -> bool {
        match self {
            Ctx::Auto(_) => false,
            Ctx::Tx(t) => !matches!(*t.state.lock(), TxState::Active(..)),
        }
    }

    pub(crate) fn run<R>(&self, mut f: impl FnMut(&mut Ops<'_>) -> Result<R>) -> Result<R> {
        match self {
            Ctx::Auto(s) => s.inner.run(s.cred.as_deref(), f),
            Ctx::Tx(t) => {
                let mut state = t.state.lock();
                let (kv, staging) = match &mut *state {
                    TxState::Active(kv, staging) => (kv, staging),
                    TxState::Failed(e) => {
                        return Err(Error::new(e.kind(), format!("transaction failed earlier: {}", e.message())))
                    }
                    TxState::Done => return Err(finished()),
                };
                let store = &t.store;
                let mut ops = Ops {
                    tx: &mut **kv,
                    inner: &store.inner,
                    cred: store.cred.as_deref(),
                    wrote: false,
                    orphaned: Vec::new(),
                    staging: Some(staging),
                };
                let r = f(&mut ops);
                t.orphaned.lock().append(&mut ops.orphaned);
                let wrote = ops.wrote;
                if let (Err(e), true) = (&r, wrote) {
                    // Only a rollback is possible now: free what the transaction wrote ahead.
                    if let TxState::Active(_, Staging { txid: Some(txid), .. }) = std::mem::replace(&mut *state, TxState::Failed(e.clone())) {
                        let _ = store.inner.collect_stage(txid, None);
                    }
                }
                r
            }
        }
    }
}

mod sealed {
    pub trait Sealed {}
    impl Sealed for super::Store {}
    impl Sealed for super::Transaction {}
}

fn b(p: &(impl AsRef<[u8]> + ?Sized)) -> &[u8] {
    p.as_ref()
}

/// The file-system calls, on a [`Store`] (each call auto-commits) and on a [`Transaction`]
/// (calls belong to it). Paths are absolute byte strings (`&str`, `&[u8]`, `String`, ...),
/// `/`-separated, without NUL, names up to 255 bytes, paths up to 4096; `..` never leaves the
/// root. Errors carry a POSIX errno (see [`Error::code`]).
pub trait FileSystem: sealed::Sealed {
    #[doc(hidden)]
    fn ctx(&self) -> Ctx;

    /// Opens a file; see [`OpenOptions`].
    fn open(&self, path: impl AsRef<[u8]>, options: &OpenOptions) -> Result<File> {
        File::open(self.ctx(), b(&path), options)
    }
    /// Creates (or truncates) a file for writing, like `std::fs::File::create`.
    fn create(&self, path: impl AsRef<[u8]>) -> Result<File> {
        self.open(path, &OpenOptions::new().write(true).create(true).truncate(true))
    }
    /// Reads a whole file.
    fn read_file(&self, path: impl AsRef<[u8]>) -> Result<Vec<u8>> {
        let p = b(&path);
        self.ctx().run(|ops| {
            let (ino, _) = ops.open(p, &OpenOptions::new().read(true))?;
            ops.read_ino(ino, 0, usize::MAX)
        })
    }
    /// Creates or replaces a file's contents in one atomic step.
    fn write_file(&self, path: impl AsRef<[u8]>, data: &[u8]) -> Result<()> {
        let p = b(&path);
        self.ctx().run(|ops| {
            let (ino, _) = ops.open(p, &OpenOptions::new().write(true).create(true).truncate(true))?;
            ops.write_ino(ino, 0, data, false).map(|_| ())
        })
    }
    /// `stat`: attributes, following a final symlink.
    fn stat(&self, path: impl AsRef<[u8]>) -> Result<Stat> {
        self.ctx().run(|ops| ops.stat(b(&path), true))
    }
    /// `lstat`: attributes of a symlink itself.
    fn lstat(&self, path: impl AsRef<[u8]>) -> Result<Stat> {
        self.ctx().run(|ops| ops.stat(b(&path), false))
    }
    /// True if `path` exists (following symlinks); errors other than ENOENT/ENOTDIR surface.
    fn exists(&self, path: impl AsRef<[u8]>) -> Result<bool> {
        match self.stat(path) {
            Ok(_) => Ok(true),
            Err(e) if matches!(e.kind(), ErrorKind::NotFound | ErrorKind::NotDir) => Ok(false),
            Err(e) => Err(e),
        }
    }
    /// Creates a directory with permission bits `mode`.
    fn mkdir(&self, path: impl AsRef<[u8]>, mode: u32) -> Result<()> {
        self.ctx().run(|ops| ops.mkdir(b(&path), mode))
    }
    /// Creates a directory and any missing parents; existing directories are fine.
    fn mkdir_all(&self, path: impl AsRef<[u8]>, mode: u32) -> Result<()> {
        let p = b(&path);
        self.ctx().run(|ops| {
            let (comps, _) = path::split(p)?;
            let mut cur = Vec::new();
            let count = comps.len();
            for (i, c) in comps.into_iter().enumerate() {
                cur.push(b'/');
                cur.extend_from_slice(c);
                match ops.mkdir(&cur, mode) {
                    Err(e) if e.kind() == ErrorKind::Exists => {
                        if !ops.stat(&cur, true)?.is_dir() {
                            // Like `mkdir -p`: EEXIST for the last name, ENOTDIR for a parent.
                            let kind = if i + 1 == count { ErrorKind::Exists } else { ErrorKind::NotDir };
                            return Err(Error::at(kind, p));
                        }
                    }
                    r => r?,
                }
            }
            Ok(())
        })
    }
    /// Creates a special file at `path`: a FIFO, a socket's name, or a device node numbered
    /// `rdev` ([`FileType::Fifo`](crate::FileType), `Socket`, `CharDevice`, `BlockDevice`).
    /// Only its name and attributes are stored: opening it through the store is refused.
    fn mknod(&self, path: impl AsRef<[u8]>, kind: crate::FileType, mode: u32, rdev: u64) -> Result<()> {
        self.ctx().run(|ops| ops.mknod(b(&path), kind, mode, rdev))
    }
    /// Removes an empty directory.
    fn rmdir(&self, path: impl AsRef<[u8]>) -> Result<()> {
        self.ctx().run(|ops| ops.rmdir(b(&path)))
    }
    /// Removes a file or symlink (an open file stays usable until its last handle closes).
    fn unlink(&self, path: impl AsRef<[u8]>) -> Result<()> {
        self.ctx().run(|ops| ops.unlink(b(&path)))
    }
    /// Renames atomically, replacing an existing target (a file by a file, an empty directory
    /// by a directory).
    fn rename(&self, from: impl AsRef<[u8]>, to: impl AsRef<[u8]>) -> Result<()> {
        self.rename_with(from, to, RenameFlags::default())
    }
    /// Renames with flags (no-replace, exchange).
    fn rename_with(&self, from: impl AsRef<[u8]>, to: impl AsRef<[u8]>, flags: RenameFlags) -> Result<()> {
        self.ctx().run(|ops| ops.rename(b(&from), b(&to), flags))
    }
    /// Creates a hard link `to` for the existing non-directory `from`.
    fn link(&self, from: impl AsRef<[u8]>, to: impl AsRef<[u8]>) -> Result<()> {
        self.ctx().run(|ops| ops.link(b(&from), b(&to)))
    }
    /// Creates a symlink at `link` whose target is `target` (stored as given).
    fn symlink(&self, target: impl AsRef<[u8]>, link: impl AsRef<[u8]>) -> Result<()> {
        self.ctx().run(|ops| ops.symlink(b(&target), b(&link)))
    }
    /// Reads a symlink's target.
    fn readlink(&self, path: impl AsRef<[u8]>) -> Result<Vec<u8>> {
        self.ctx().run(|ops| ops.readlink(b(&path)))
    }
    /// Lists a directory page: up to `limit` entries (0 for all) whose names sort after
    /// `after` (the cursor: the last name of the previous page), in byte order of names.
    fn readdir(&self, path: impl AsRef<[u8]>, after: Option<&[u8]>, limit: usize) -> Result<Vec<DirEntry>> {
        self.ctx().run(|ops| ops.readdir(b(&path), after, limit))
    }
    /// Sets permission bits.
    fn chmod(&self, path: impl AsRef<[u8]>, mode: u32) -> Result<()> {
        self.ctx().run(|ops| ops.chmod(b(&path), mode))
    }
    /// Changes owner and/or group (`None` keeps it), following symlinks.
    fn chown(&self, path: impl AsRef<[u8]>, uid: Option<u32>, gid: Option<u32>) -> Result<()> {
        self.ctx().run(|ops| ops.chown(b(&path), uid, gid, true))
    }
    /// Sets access and modification times, following symlinks.
    fn utimens(&self, path: impl AsRef<[u8]>, atime: SetTime, mtime: SetTime) -> Result<()> {
        self.ctx().run(|ops| ops.utimens(b(&path), atime, mtime, true))
    }
    /// Sets the size of a file.
    fn truncate(&self, path: impl AsRef<[u8]>, size: u64) -> Result<()> {
        self.ctx().run(|ops| {
            let (ino, _) = ops.open(b(&path), &OpenOptions::new().write(true))?;
            ops.truncate_ino(ino, size)
        })
    }
    /// Reads an extended attribute (ENODATA if absent).
    fn getxattr(&self, path: impl AsRef<[u8]>, name: impl AsRef<[u8]>) -> Result<Vec<u8>> {
        self.ctx().run(|ops| ops.getxattr(Target::Path(b(&path)), b(&name)))
    }
    /// Sets an extended attribute; see [`XattrFlags`].
    fn setxattr(&self, path: impl AsRef<[u8]>, name: impl AsRef<[u8]>, value: &[u8], flags: XattrFlags) -> Result<()> {
        self.ctx().run(|ops| ops.setxattr(Target::Path(b(&path)), b(&name), value, flags))
    }
    /// Lists extended attribute names.
    fn listxattr(&self, path: impl AsRef<[u8]>) -> Result<Vec<Vec<u8>>> {
        self.ctx().run(|ops| ops.listxattr(Target::Path(b(&path))))
    }
    /// Removes an extended attribute (ENODATA if absent).
    fn removexattr(&self, path: impl AsRef<[u8]>, name: impl AsRef<[u8]>) -> Result<()> {
        self.ctx().run(|ops| ops.removexattr(Target::Path(b(&path)), b(&name)))
    }
    /// Store-wide usage in O(1).
    fn statfs(&self) -> Result<StatFs> {
        self.ctx().run(|ops| ops.statfs())
    }
}

impl FileSystem for Store {
    fn ctx(&self) -> Ctx {
        Ctx::Auto(self.clone())
    }
}

impl FileSystem for Transaction {
    fn ctx(&self) -> Ctx {
        Ctx::Tx(self.shared.clone())
    }
}
