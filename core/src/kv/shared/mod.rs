//! One RocksDB store shared by several processes on one machine.
//!
//! The process that holds the store's owner lock (`owner.rs`) opens RocksDB and runs the
//! resolver (`occ.rs`) for everyone: its own transactions stay in-process, at full speed, and a
//! server thread answers other processes on `txvfs.sock` in the store directory
//! (`server.rs`). Every other process is a client (`client.rs`): its transactions run on the
//! owner's backend, one request per read, writes sent with the commit, so one resolver checks
//! every process's commits (serializable across processes) and durable commits share fsyncs.
//!
//! When the owner goes away (exit, SIGKILL), its clients' connections end: transactions in
//! flight fail with a retryable conflict; a commit in flight is resolved by its receipt, asked
//! of the next owner (`receipts.rs`: success, or the retryable conflict); and the next
//! begin in each client recovers: one of them takes the owner lock, opens RocksDB (which
//! replays its log: every acknowledged commit is there) and serves; the others connect to it.
//!
//! A store opened with `?mode=exclusive` serves nobody and is refused to every other process.
//!
//! No process waits for ever on another: client calls, connections and failovers are bounded by
//! the store's `owner_timeout` (`waits.rs`).

mod access;
mod alive;
mod area;
mod bell;
mod client;
mod client_cache;
mod client_hello;
mod client_snapshot;
mod client_txn;
mod endpoint;
mod open;
mod protocol;
mod receipts;
mod ring;
mod server;
mod snapshot;
mod spin;
mod waits;

pub use client::guess_counts;
pub use client::round_trips;
#[doc(hidden)]
pub use server::replies_sent;
pub use spin::spin_counts;
pub use waits::DEFAULT_OWNER_TIMEOUT;

use super::owner::{fork_generation, owner_info};
use super::rocks::RocksBackend;
use super::{
    Backend, CacheStats, CacheWatch, Limits, NamedSnapshots, ReadCacheControl, Role, Sharing,
    Snapshots, Txn,
};
use crate::error::{Error, ErrorKind, Result};
use alive::Alive;
use client::{Client, ConnectError};
use open::{first_mode, not_served, try_mode};
use parking_lot::Mutex;
use server::Server;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock, Weak};
use std::time::{Duration, Instant};

/// Name of the socket inside a store directory.
pub const SOCKET_FILE: &str = "txvfs.sock";

/// How long a begin waits for a store's new owner to take over before giving up.
pub const RECOVERY_TIMEOUT: Duration = Duration::from_secs(20);

/// Runs `f` on the socket path of store directory `dir`. A Unix socket path has at most 107
/// bytes; a longer one is reached through `/proc/self/fd/N/` of the directory, opened for it.
fn socket_path<T>(dir: &Path, f: impl FnOnce(&Path) -> std::io::Result<T>) -> std::io::Result<T> {
    let direct = dir.join(SOCKET_FILE);
    if direct.as_os_str().len() < 100 {
        return f(&direct);
    }
    let d = std::fs::File::open(dir)?;
    use std::os::unix::io::AsRawFd;
    f(&PathBuf::from(format!("/proc/self/fd/{}/{SOCKET_FILE}", d.as_raw_fd())))
}

/// Whether this process is still alone on the store, and what to do when it stops being so.
pub(crate) struct AloneState {
    alone: AtomicBool,
    hooks: Mutex<Vec<Box<dyn Fn() + Send + Sync>>>,
}

impl AloneState {
    fn new() -> Arc<AloneState> {
        Arc::new(AloneState { alone: AtomicBool::new(true), hooks: Mutex::new(Vec::new()) })
    }

    /// Another process (or copy of the library) is or may be here: runs the hooks once, before
    /// it is served. The hooks lock stays held while they run, so a hook registered meanwhile
    /// runs after them (it sees `alone` false and publishes as it goes).
    pub(crate) fn become_shared(&self) {
        let hooks = self.hooks.lock();
        if self.alone.swap(false, Ordering::SeqCst) {
            for hook in hooks.iter() {
                hook();
            }
        }
    }
}

enum Mode {
    /// This process owns the files; `server` is None in exclusive mode; `bell`: the store's
    /// bell, which the server hands its clients (`bell.rs`).
    Owner {
        local: Arc<RocksBackend>,
        server: Option<Server>,
        bell: Option<Arc<bell::Bell>>,
    },
    Client(Arc<Client>),
    /// Being dropped.
    Gone,
}

/// A RocksDB store that several processes may use at once; see the module docs.
pub struct SharedBackend {
    /// This backend, for its clients' transactions (to ask a commit's outcome after a failover).
    me: Weak<SharedBackend>,
    dir: PathBuf,
    exclusive: bool,
    mode: Mutex<Mode>,
    generation: u64,
    /// The process that opened it (for the error in a forked child).
    pid: u32,
    /// This process's liveness locks (opened at the first registration); a client attaches
    /// the file to each lock request it sends its owner.
    alive: Arc<Mutex<Option<Alive>>>,
    sharing: Arc<AloneState>,
    /// The read cache's size (`Options::cache_size`), applied to the owner's cache or to this
    /// client's (kept exact by the owner's change ring, `client_cache.rs`), at open and after
    /// every failover.
    cache_bytes: AtomicU64,
    /// The deadline of every wait on the owner (`owner_timeout`).
    timeout: Duration,
    /// How many times this process looked for a new owner after losing its connection.
    recoveries: AtomicU64,
}

fn registry() -> &'static Mutex<HashMap<PathBuf, Weak<SharedBackend>>> {
    static STORES: OnceLock<Mutex<HashMap<PathBuf, Weak<SharedBackend>>>> = OnceLock::new();
    STORES.get_or_init(Default::default)
}

/// The error for a store another process owns exclusively, or that this process may not share.
fn busy(dir: &Path, why: String) -> Error {
    Error::new(ErrorKind::Busy, format!("rocksdb:{}: {why}", dir.display()))
}

impl SharedBackend {
    /// Opens the store in directory `canon` (canonical): as its owner if nobody holds it, else
    /// as a client of the process that does. `exclusive` refuses sharing both ways.
    pub fn open(canon: &Path, exclusive: bool) -> Result<Arc<SharedBackend>> {
        SharedBackend::open_with(canon, exclusive, None)
    }

    /// [`SharedBackend::open`], bounding every wait on another process by `owner_timeout`
    /// ([`DEFAULT_OWNER_TIMEOUT`] when None). A store already open in this process keeps the
    /// deadline of its first open.
    pub fn open_with(
        canon: &Path,
        exclusive: bool,
        owner_timeout: Option<Duration>,
    ) -> Result<Arc<SharedBackend>> {
        let timeout = owner_timeout.unwrap_or(DEFAULT_OWNER_TIMEOUT);
        let mut stores = registry().lock();
        // One instance per directory in a process, in the mode of its first open.
        let key = canon.to_path_buf();
        if let Some(b) = stores.get(&key).and_then(Weak::upgrade) {
            if b.generation == fork_generation() {
                return Ok(b);
            }
        }
        let sharing = AloneState::new();
        let alive = Arc::new(Mutex::new(None));
        let mode = first_mode(canon, exclusive, &sharing, &alive, timeout)?;
        // A client shares the store; so does an owner that finds live processes on it (the
        // clients of a dead owner, whose locks and marks are in the store): it must check
        // them from its first call, not only once one of them has connected.
        if matches!(mode, Mode::Client(_)) || !exclusive && alive::others_alive(canon) {
            sharing.become_shared();
        }
        let backend = Arc::new_cyclic(|me| SharedBackend {
            me: me.clone(),
            dir: canon.to_path_buf(),
            exclusive,
            mode: Mutex::new(mode),
            generation: fork_generation(),
            pid: std::process::id(),
            alive,
            sharing,
            cache_bytes: AtomicU64::new(0),
            timeout,
            recoveries: AtomicU64::new(0),
        });
        stores.retain(|_, w| w.strong_count() > 0);
        stores.insert(key, Arc::downgrade(&backend));
        Ok(backend)
    }

    /// True while this process owns the store's files (and serves the others).
    pub fn is_owner(&self) -> bool {
        matches!(*self.mode.lock(), Mode::Owner { .. })
    }

    /// How many RocksDB snapshots the store's engine holds (every process's snapshots and
    /// running transactions), when this process owns it; None in a client. For tests.
    #[doc(hidden)]
    pub fn engine_snapshots(&self) -> Option<u64> {
        match &*self.mode.lock() {
            Mode::Owner { local, .. } => Some(local.engine_snapshots()),
            _ => None,
        }
    }

    /// `f` of the store's engine where this process (not a fork's child) owns it; else None.
    fn owner_here<T>(&self, f: impl FnOnce(&Arc<RocksBackend>) -> Option<T>) -> Option<T> {
        if self.generation != fork_generation() {
            return None;
        }
        match &*self.mode.lock() {
            Mode::Owner { local, .. } => f(local),
            _ => None,
        }
    }

    /// How many times this process has looked for a new owner after losing its connection to
    /// the old one (a failover, as this process saw it). For tests.
    #[doc(hidden)]
    pub fn recoveries(&self) -> u64 {
        self.recoveries.load(Ordering::SeqCst)
    }

    /// Finds the store's current owner after the old one went away: connects to it, or becomes
    /// it. Waits up to the longer of [`RECOVERY_TIMEOUT`] and `owner_timeout` for a new owner
    /// to start serving.
    fn recover(&self, mode: &mut Mode) -> Result<()> {
        // After a failover others are here (and their locks are in the store) whatever happens.
        self.sharing.become_shared();
        self.recoveries.fetch_add(1, Ordering::SeqCst);
        let wait = self.timeout.max(RECOVERY_TIMEOUT);
        let deadline = Instant::now() + wait;
        loop {
            match try_mode(&self.dir, self.exclusive, &self.sharing, &self.alive, self.timeout)? {
                Some(m) => {
                    let bytes = self.cache_bytes.load(Ordering::SeqCst);
                    match &m {
                        Mode::Owner { local, .. } => {
                            if let Some(c) = local.read_cache() {
                                c.set_capacity(bytes);
                            }
                        }
                        Mode::Client(c) => c.set_cache_capacity(bytes),
                        Mode::Gone => {}
                    }
                    // What waits on the old owner's bell looks again, and arms on the new one.
                    let old = std::mem::replace(mode, m);
                    if let Some(bell) = mode_bell(&old) {
                        bell.wake_all();
                    }
                    return Ok(());
                }
                None if Instant::now() >= deadline => {
                    return Err(not_served(&self.dir, wait));
                }
                None => std::thread::sleep(Duration::from_millis(20)),
            }
        }
    }

    /// Whether the commit with receipt `id` took effect, asked of the store's current owner
    /// (found anew if the connection to the old one was lost: see `receipts.rs`).
    pub(crate) fn commit_outcome(&self, id: &[u8]) -> Result<bool> {
        self.on_current(|local| receipts::committed(&**local, id), |c| c.outcome(id))
    }

    /// Runs `owner` on this process's engine, or `client` on the connection to the owner;
    /// when the owner has gone, first finds the new one (connects to it, or becomes it).
    fn on_current<T>(
        &self,
        owner: impl FnOnce(&Arc<RocksBackend>) -> Result<T>,
        client: impl Fn(&Arc<Client>) -> Result<T>,
    ) -> Result<T> {
        let mut mode = self.mode.lock();
        loop {
            match &*mode {
                Mode::Owner { local, .. } => return owner(local),
                Mode::Client(c) if !c.lost() => {
                    let c = c.clone();
                    drop(mode);
                    match client(&c) {
                        Err(_) if c.lost() => mode = self.mode.lock(),
                        r => return r,
                    }
                }
                Mode::Client(_) => self.recover(&mut mode)?,
                Mode::Gone => unreachable!("a backend being dropped has no callers"),
            }
        }
    }
}

impl Drop for SharedBackend {
    fn drop(&mut self) {
        if let Mode::Owner { local, server: Some(server), .. } =
            std::mem::replace(self.mode.get_mut(), Mode::Gone)
        {
            if self.generation != fork_generation() {
                // A forked child's copy: its sockets are the parent's; leave them alone.
                server.abandon();
            } else {
                // Stop serving, then remove the socket, then close RocksDB and the owner lock
                // (in that order, so a socket file never outlives its server's lock).
                let endpoint = server.endpoint().clone();
                drop(server);
                endpoint.remove();
            }
            drop(local);
        }
    }
}

impl Backend for SharedBackend {
    fn begin(&self) -> Result<Box<dyn Txn>> {
        if self.generation != fork_generation() {
            return Err(super::owner::forked_error(
                &format!("rocksdb:{}", self.dir.display()),
                self.pid,
            ));
        }
        self.on_current(|local| local.begin(), |c| c.begin(self.me.clone()))
    }
    fn begin_cached(&self) -> Option<Box<dyn Txn>> {
        self.owner_here(|local| local.begin_cached())
    }
    fn cache_watch(&self) -> Option<Box<dyn CacheWatch>> {
        // A client's cache learns of commits from the ring only when a transaction begins:
        // its handles read through it (`begin_cached` is the owner's alone as well).
        self.owner_here(|local| local.cache_watch())
    }
    fn limits(&self) -> Limits {
        match &*self.mode.lock() {
            Mode::Owner { local, .. } => local.limits(),
            Mode::Client(c) => c.limits(),
            Mode::Gone => Limits::UNLIMITED,
        }
    }
    fn sync(&self) -> Result<()> {
        // A lost owner is replaced first. What the old owner acknowledged is in its WAL, which
        // the new owner replayed at open (RocksDB flushes recovered data to synced table
        // files), so the new owner's sync covers it.
        self.on_current(|local| local.sync(), |c| c.sync())
    }
    fn sync_through(&self, read_version: Option<u64>) -> Result<()> {
        // A client's transactions carry no version of the owner's: it asks the owner, whose
        // sync skips the fsync when every commit it made visible is durable.
        self.on_current(|local| local.sync_through(read_version), |c| c.sync())
    }
    fn describe(&self) -> String {
        format!("rocksdb:{}", self.dir.display())
    }
    fn disk_space(&self) -> Option<(u64, u64)> {
        super::rocks::disk_space(&self.dir)
    }
    fn sharing(&self) -> Option<&dyn Sharing> {
        (!self.exclusive).then_some(self)
    }
    fn snapshots(&self) -> Option<&dyn Snapshots> {
        Some(self)
    }
    fn named_snapshots(&self) -> Option<&dyn NamedSnapshots> {
        Some(self)
    }
    fn read_cache(&self) -> Option<&dyn ReadCacheControl> {
        Some(self)
    }
    /// The store's bell wakes waiters of other processes (`bell.rs`).
    fn wake_on_stamped(
        &self,
        prefix: &[u8],
        after: &[u8],
        wake: Box<dyn FnOnce() + Send>,
    ) -> Result<Option<super::Wakeup>> {
        match self.bell() {
            Some(bell) => bell.arm(self, prefix, after, wake),
            None => Ok(None),
        }
    }
    fn announce_stamped(&self, _prefix: &[u8]) {
        if let Some(bell) = self.bell() {
            bell.ring();
        }
    }
}

impl SharedBackend {
    /// The store's bell: its owner's (this process's, or the one a client was handed),
    /// unless the store is exclusive or it could not be made.
    fn bell(&self) -> Option<Arc<bell::Bell>> {
        mode_bell(&self.mode.lock()).cloned()
    }
}

fn mode_bell(mode: &Mode) -> Option<&Arc<bell::Bell>> {
    match mode {
        Mode::Owner { bell, .. } => bell.as_ref(),
        Mode::Client(c) => c.bell.as_ref(),
        Mode::Gone => None,
    }
}

impl Sharing for SharedBackend {
    fn role(&self) -> Role {
        if self.is_owner() {
            Role::Primary
        } else {
            Role::Secondary
        }
    }
    fn alone(&self) -> bool {
        self.exclusive || self.sharing.alone.load(Ordering::SeqCst)
    }
    fn on_sharing(&self, hook: Box<dyn Fn() + Send + Sync>) {
        let mut hooks = self.sharing.hooks.lock();
        if !self.sharing.alone.load(Ordering::SeqCst) {
            return; // already shared: the caller publishes as it goes
        }
        hooks.push(hook);
    }
    fn register_process(&self, process: u64) -> Result<()> {
        let mut alive = self.alive.lock();
        if alive.is_none() {
            *alive = Some(Alive::open(&self.dir)?);
        }
        alive.as_mut().expect("opened above").register(process)
    }
    fn process_alive(&self, process: u64) -> Option<bool> {
        self.alive.lock().as_ref().map(|a| a.is_alive(process))
    }
    /// A client sends it to the owner (to the next one after a failover: a lock request is
    /// idempotent); the owner runs it itself.
    fn serve_locks(&self, request: &[u8]) -> Option<Result<Vec<u8>>> {
        self.on_current(|_| Ok(None), |c| c.serve_locks(request)).transpose()
    }
}

impl ReadCacheControl for SharedBackend {
    fn set_capacity(&self, bytes: u64) {
        self.cache_bytes.store(bytes, Ordering::SeqCst);
        match &*self.mode.lock() {
            Mode::Owner { local, .. } => {
                if let Some(c) = local.read_cache() {
                    c.set_capacity(bytes);
                }
            }
            Mode::Client(c) => c.set_cache_capacity(bytes),
            Mode::Gone => {}
        }
    }
    fn stats(&self) -> Option<CacheStats> {
        match &*self.mode.lock() {
            Mode::Owner { local, .. } => local.read_cache().and_then(|c| c.stats()),
            Mode::Client(c) => c.cache_stats(),
            Mode::Gone => None,
        }
    }
}

impl NamedSnapshots for SharedBackend {
    fn create(&self, name: &str) -> Result<()> {
        // The owner creates it: in this process, or asked by this client.
        self.on_current(
            |local| NamedSnapshots::create(&**local, name),
            |c| client_snapshot::create_named(c, name),
        )
    }
    fn list(&self) -> Result<Vec<String>> {
        super::rocks_named::list(&self.dir)
    }
    fn delete(&self, name: &str) -> Result<()> {
        super::rocks_named::delete(&self.dir, name)
    }
    fn uri(&self, name: &str) -> Result<String> {
        super::rocks_named::uri(&self.dir, name)
    }
}
