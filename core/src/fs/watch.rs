//! The reading side of the change feed: [`Store::watch`] gives a [`Watcher`], which reads the
//! records after its [`Cursor`] in commit order, filters them, and blocks for new ones.
//!
//! Waking: a commit of this process that writes a record wakes the waiters of this process at
//! once (a condition variable of the store's shared state). Commits of other processes wake
//! them through the backend ([`Backend::wake_on_stamped`]: FoundationDB's watches, a shared
//! RocksDB store's bell); a store no other process uses needs nothing more; elsewhere they are
//! seen by polling the feed, at most [`POLL_INTERVAL`] apart, while waiting.
//!
//! Durable only: a watcher hands out records (and moves its cursor past them) only once they
//! are durable, so a power cut never takes back what a consumer read, nor leaves its saved
//! cursor past the recovered store. Before `poll`, `wait` or the iterator return what they
//! read, they call [`Backend::sync_through`] once, at the version of the newest snapshot they
//! read at: on RocksDB the owner's shared fsync, skipped when its mark says that version is
//! already synced (durable writers' commits are); a client asks its owner; FoundationDB's
//! commits are durable when visible, so nothing happens there. A failed sync fails the call,
//! and nothing is handed out.

use super::feed::Signal;
use super::store::Store;
use crate::error::{Error, ErrorKind, Result};
use crate::kv::{self, Backend, Role, Wakeup};
use crate::schema::{self, Change, ChangeKind, Meta, STAMP_LEN};
use std::collections::VecDeque;
use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How often a waiting watcher looks for commits of other processes, on a backend that
/// cannot wake it ([`Backend::wake_on_stamped`]).
pub const POLL_INTERVAL: Duration = Duration::from_millis(20);

/// How often a waiting watcher looks anyway on a backend that wakes it (FoundationDB): a
/// safety net, not the way changes are seen.
pub const PUSHED_RECHECK: Duration = Duration::from_secs(5);

/// Records read per look at the feed.
const PAGE: usize = 512;

/// A position in a store's change feed: everything up to and including one committed
/// transaction. Opaque, ordered within its store, and serializable as a string
/// (`txvfs-c1-<store id>-<stamp>`, see [`fmt::Display`] and [`Cursor::parse`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Cursor {
    store: [u8; 16],
    stamp: [u8; STAMP_LEN],
}

impl Cursor {
    /// Parses a cursor string made by [`fmt::Display`]; [`ErrorKind::Invalid`] for anything else.
    pub fn parse(s: &str) -> Result<Cursor> {
        let bad = || {
            Error::new(
                ErrorKind::Invalid,
                format!("not a change feed cursor: {s:?} (expected txvfs-c1-<32 hex>-<20 hex>)"),
            )
        };
        let rest = s.strip_prefix("txvfs-c1-").ok_or_else(bad)?;
        let (id, stamp) = rest.split_once('-').ok_or_else(bad)?;
        let mut c = Cursor { store: [0; 16], stamp: [0; STAMP_LEN] };
        hex_into(id, &mut c.store).ok_or_else(bad)?;
        hex_into(stamp, &mut c.stamp).ok_or_else(bad)?;
        Ok(c)
    }

    /// The commit counter part of the stamp.
    fn counter(&self) -> u64 {
        u64::from_be_bytes(self.stamp[..8].try_into().unwrap())
    }
}

fn hex_into(s: &str, out: &mut [u8]) -> Option<()> {
    if s.len() != out.len() * 2 || !s.is_ascii() {
        return None;
    }
    for (i, b) in out.iter_mut().enumerate() {
        *b = u8::from_str_radix(&s[2 * i..2 * i + 2], 16).ok()?;
    }
    Some(())
}

impl fmt::Display for Cursor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("txvfs-c1-")?;
        self.store.iter().try_for_each(|b| write!(f, "{b:02x}"))?;
        f.write_str("-")?;
        self.stamp.iter().try_for_each(|b| write!(f, "{b:02x}"))
    }
}

/// What a [`Watcher`] reports and where it starts.
#[derive(Clone, Debug, Default)]
pub struct WatchOptions {
    /// Only changes at or below these paths (`/a` matches `/a` and `/a/...`; a rename matches
    /// by either path). Empty: everything.
    pub prefixes: Vec<Vec<u8>>,
    /// Only these kinds of change. Empty: every kind.
    pub kinds: Vec<ChangeKind>,
    /// Start after this cursor (a consumer resuming); `None`: after the newest commit.
    pub since: Option<Cursor>,
}

/// The changes of one committed transaction that passed the watcher's filters.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Batch {
    /// The position after this transaction: resume from it to get what follows.
    pub cursor: Cursor,
    /// When it committed, in ms since the Unix epoch (the committer's clock).
    pub time_ms: u64,
    /// Its changes, in the order they were made.
    pub changes: Vec<Change>,
}

/// A consumer of a store's change feed (see [`Store::watch`]): [`Watcher::poll`],
/// [`Watcher::wait`], or iterate (blocking).
pub struct Watcher {
    store: Store,
    options: WatchOptions,
    /// Where reading the feed stands (past records the filters dropped too).
    read_at: Cursor,
    /// Where the caller stands: after everything handed out.
    returned: Cursor,
    /// Batches read but not handed out yet (by the iterator).
    ready: VecDeque<Batch>,
    /// The backend's armed wake-up, if it has them, and whether it has fired.
    wakeup: Option<(Wakeup, Arc<AtomicBool>)>,
    /// Whether a fetch found records since the wake-up was armed.
    progressed: bool,
    /// Records were read (into `ready`, or past by the filters) that may not be durable yet:
    /// `Some(v)`, the newest read version they were read at (`Some(None)`: unknown).
    unsynced: Option<Option<u64>>,
}

impl Store {
    /// Watches the store's change feed (turn it on first: [`Store::set_change_feed`]). Every
    /// transaction committed after the start (the newest commit, or `options.since`) is
    /// reported once, in commit order, with the changes that pass the filters.
    ///
    /// Errors ([`ErrorKind::Invalid`] unless said): the feed is off; a cursor of another
    /// store; a cursor from the future (beyond the newest commit); and
    /// [`ErrorKind::NoData`] when retention dropped changes after the cursor ("changes before
    /// cursor X were dropped; rescan").
    ///
    /// ```
    /// use txvfs::{FileSystem, Store, WatchOptions};
    /// let store = Store::open("memory:").unwrap();
    /// store.set_change_feed(true).unwrap();
    /// let mut watcher = store.watch(WatchOptions::default()).unwrap();
    /// store.write_file("/a.txt", b"one").unwrap();
    /// let batches = watcher.poll().unwrap();
    /// assert_eq!(batches[0].changes[0].path, b"/a.txt");
    /// ```
    pub fn watch(&self, options: WatchOptions) -> Result<Watcher> {
        let FeedState { id, newest, dropped, version } = self.feed_state()?;
        let cursor = match options.since {
            None => {
                // The start is a cursor the caller may save: durable, like every other.
                self.inner.backend.sync_through(version)?;
                Cursor { store: id, stamp: newest }
            }
            Some(c) => {
                check_cursor(&c, id, newest, dropped)?;
                c
            }
        };
        Ok(Watcher {
            store: self.clone(),
            options,
            read_at: cursor,
            returned: cursor,
            ready: VecDeque::new(),
            wakeup: None,
            progressed: true,
            unsynced: None,
        })
    }

    /// The store's identity, the newest record's stamp, the newest dropped counter, and the
    /// version they were read at.
    fn feed_state(&self) -> Result<FeedState> {
        let backend: &dyn Backend = &*self.inner.backend;
        kv::run_with_retries(backend, self.per_open.max_retries, false, |tx| {
            let on = tx
                .snapshot_get(&schema::feed_config_key())?
                .map(|v| schema::FeedConfig::decode(&v))
                .transpose()?
                .is_some_and(|c| c.on);
            let id = tx.snapshot_get(&schema::meta_key(Meta::StoreId))?;
            let id: [u8; 16] =
                match id.as_deref().map(<[u8; 16]>::try_from) {
                    Some(Ok(id)) if on => id,
                    _ => return Err(Error::new(
                        ErrorKind::Invalid,
                        "the change feed of this store is off (turn it on with set_change_feed)",
                    )),
                };
            let (s, e) = schema::feed_range();
            let newest = match tx.snapshot_get_range(&s, &e, 1, true)?.first() {
                Some((k, _)) => schema::feed_stamp(k)?,
                None => [0; STAMP_LEN],
            };
            let dropped = kv::decode_counter(
                tx.snapshot_get(&schema::meta_key(Meta::FeedDropped))?.as_deref(),
            );
            Ok(FeedState { id, newest, dropped, version: tx.read_version() })
        })
    }
}

/// See [`Store::feed_state`].
struct FeedState {
    id: [u8; 16],
    newest: [u8; STAMP_LEN],
    dropped: u64,
    version: Option<u64>,
}

fn check_cursor(c: &Cursor, id: [u8; 16], newest: [u8; STAMP_LEN], dropped: u64) -> Result<()> {
    if c.store != id {
        return Err(Error::new(ErrorKind::Invalid, format!("cursor {c} belongs to another store")));
    }
    if c.stamp > newest {
        return Err(Error::new(
            ErrorKind::Invalid,
            format!("cursor {c} is from the future: this store has no such commit yet"),
        ));
    }
    if c.counter() < dropped {
        return Err(dropped_error(c));
    }
    Ok(())
}

fn dropped_error(c: &Cursor) -> Error {
    Error::new(ErrorKind::NoData, format!("changes before cursor {c} were dropped; rescan"))
}

fn under(path: &[u8], prefix: &[u8]) -> bool {
    let prefix = prefix.strip_suffix(b"/").unwrap_or(prefix);
    path.starts_with(prefix) && (path.len() == prefix.len() || path[prefix.len()] == b'/')
}

impl Watcher {
    /// The position after everything returned so far: save it to resume later
    /// ([`WatchOptions::since`]).
    pub fn cursor(&self) -> Cursor {
        self.returned
    }

    /// Every batch committed after the cursor that is there now (without blocking); empty
    /// when there is none. What it returns is durable: on RocksDB it syncs once first where
    /// the writers' own fsyncs have not (see the module's comment); a failed sync is an error,
    /// and nothing is handed out.
    pub fn poll(&mut self) -> Result<Vec<Batch>> {
        if self.ready.is_empty() {
            while self.fetch()? && self.ready.len() < PAGE {}
        }
        self.drain()
    }

    /// [`Watcher::poll`], waiting up to `timeout` for at least one batch; empty when none came.
    pub fn wait(&mut self, timeout: Duration) -> Result<Vec<Batch>> {
        self.wait_ready(Some(Instant::now() + timeout))?;
        self.drain()
    }

    fn drain(&mut self) -> Result<Vec<Batch>> {
        self.settle()?;
        let out: Vec<Batch> = self.ready.drain(..).collect();
        self.returned = self.read_at;
        Ok(out)
    }

    /// Makes what was read durable before any of it is handed out or the cursor moves past it
    /// (see the module's comment): one [`Backend::sync_through`], none when nothing was read
    /// since the last. On failure nothing changes, and the next call tries again.
    fn settle(&mut self) -> Result<()> {
        if let Some(version) = self.unsynced {
            self.store.inner.backend.sync_through(version)?;
            self.unsynced = None;
        }
        Ok(())
    }

    /// Fetches until `ready` has a batch or the deadline passes (`None`: never).
    fn wait_ready(&mut self, deadline: Option<Instant>) -> Result<()> {
        let signal = self.store.inner.feed.signal.clone();
        while self.ready.is_empty() {
            let seen = *signal.seq.lock();
            if self.fetch()? {
                self.progressed = true;
                continue;
            }
            let now = Instant::now();
            let most = if self.arm(&signal) { PUSHED_RECHECK } else { POLL_INTERVAL };
            let nap = match deadline {
                Some(d) if d <= now => {
                    // Nothing passed the filters: the caller now stands where reading does.
                    self.settle()?;
                    self.returned = self.read_at;
                    return Ok(());
                }
                Some(d) => (d - now).min(most),
                None => most,
            };
            let mut seq = signal.seq.lock();
            if *seq == seen {
                signal.moved.wait_for(&mut seq, nap);
            }
        }
        Ok(())
    }

    /// Makes sure the backend wakes this watcher when a record after `read_at` commits, where
    /// it can ([`Backend::wake_on_stamped`]); false when it cannot, and the caller polls.
    fn arm(&mut self, signal: &Arc<Signal>) -> bool {
        if self.store.inner.backend.role() == Role::Sole {
            return true; // every commit is this process's: the signal covers them all
        }
        if let Some((_, fired)) = &self.wakeup {
            if !fired.load(Ordering::Acquire) {
                return true;
            }
            self.wakeup = None;
            if !self.progressed {
                // The last wake-up brought nothing new (a failed watch): poll once rather
                // than spin on a backend that fails at once.
                self.progressed = true;
                return false;
            }
        }
        let fired = Arc::new(AtomicBool::new(false));
        let wake = {
            let (fired, signal) = (fired.clone(), signal.clone());
            Box::new(move || {
                fired.store(true, Ordering::Release);
                signal.bump();
            })
        };
        let backend = &self.store.inner.backend;
        // A failure to arm falls back to polling; the next fetch reports a broken backend.
        match backend.wake_on_stamped(&schema::feed_prefix(), &self.read_at.stamp, wake) {
            Ok(Some(w)) => {
                self.wakeup = Some((w, fired));
                self.progressed = false;
                true
            }
            _ => false,
        }
    }

    fn wanted(&self, c: &Change) -> bool {
        let kinds = &self.options.kinds;
        let prefixes = &self.options.prefixes;
        (kinds.is_empty() || kinds.contains(&c.kind))
            && (prefixes.is_empty()
                || prefixes
                    .iter()
                    .any(|p| under(&c.path, p) || c.to.as_deref().is_some_and(|t| under(t, p))))
    }

    /// Reads the records committed after the cursor (one page) into `ready`; false when
    /// there were none.
    fn fetch(&mut self) -> Result<bool> {
        let backend: Arc<dyn Backend> = self.store.inner.backend.clone();
        let after = self.read_at;
        let (records, dropped, version) =
            kv::run_with_retries(&*backend, self.store.per_open.max_retries, false, |tx| {
                let mut start = schema::feed_key(&after.stamp);
                start.push(0);
                let (_, end) = schema::feed_range();
                let records = tx.snapshot_get_range(&start, &end, PAGE, false)?;
                let dropped = kv::decode_counter(
                    tx.snapshot_get(&schema::meta_key(Meta::FeedDropped))?.as_deref(),
                );
                Ok((records, dropped, tx.read_version()))
            })?;
        // Read in one snapshot: if nothing after the cursor was dropped there, every record
        // after it is in `records` (retention drops the oldest records only).
        if after.counter() < dropped {
            return Err(dropped_error(&after));
        }
        let any = !records.is_empty();
        if any {
            self.unsynced = Some(match self.unsynced {
                None => version,
                Some(v) => v.zip(version).map(|(a, b)| a.max(b)),
            });
        }
        for (k, v) in records {
            let stamp = schema::feed_stamp(&k)?;
            let (time_ms, changes) = schema::decode_record(&v)?;
            let cursor = Cursor { store: after.store, stamp };
            self.read_at = cursor;
            let changes: Vec<Change> = changes.into_iter().filter(|c| self.wanted(c)).collect();
            if !changes.is_empty() {
                self.ready.push_back(Batch { cursor, time_ms, changes });
            }
        }
        Ok(any)
    }
}

/// Blocks for each next batch; an error ends nothing (the next call tries again).
impl Iterator for Watcher {
    type Item = Result<Batch>;
    fn next(&mut self) -> Option<Result<Batch>> {
        if let Err(e) = self.wait_ready(None).and_then(|()| self.settle()) {
            return Some(Err(e));
        }
        let batch = self.ready.pop_front()?;
        self.returned = if self.ready.is_empty() { self.read_at } else { batch.cursor };
        Some(Ok(batch))
    }
}
