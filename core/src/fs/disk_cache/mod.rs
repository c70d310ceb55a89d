//! A cache of immutable values on local disk, bounded in bytes, kept across restarts, for
//! stores on a slow (remote) backend. It knows nothing of what the values are: the caller
//! (`fs/ops/chunks.rs`) only puts values that can never change under their key (chunks), so an
//! entry is never stale and needs no validation.
//!
//! Reads never wait for the cache disk longer than a deadline: files are read by I/O threads
//! and the caller gives up after the deadline (and skips the cache for [`BYPASS`] after that),
//! then reads the backend. Writes are queued to a writer thread and dropped when the queue is
//! full. Any failure of the cache disk (error, damaged or torn file, timeout) is a miss.
//! Eviction is segmented LRU ([`slru`]); the order is saved at close and reloaded at open.

mod files;
mod slru;

use files::{decode_entry, encode_entry, entry_path, write_atomic};
use parking_lot::Mutex;
use slru::{Segment, Slru};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, Sender, SyncSender};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long reads skip the cache after one of them waited past the deadline.
pub const BYPASS: Duration = Duration::from_secs(1);
/// Threads that read cache files.
const READERS: usize = 2;
/// Values waiting to be written; more are dropped.
const WRITE_QUEUE: usize = 64;
/// The index order is saved after this many new entries (and at close).
const SAVE_EVERY: u64 = 1024;
/// How long closing waits for the writer to finish its queue and save the index.
const CLOSE_WAIT: Duration = Duration::from_secs(2);

/// What a disk cache has done since it was opened.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DiskCacheStats {
    /// Reads answered from the cache.
    pub hits: u64,
    /// Reads of values the cache did not hold.
    pub misses: u64,
    /// Reads that found the entry unusable (damaged or torn file, I/O error): misses too.
    pub errors: u64,
    /// Reads that gave up on the cache disk at the deadline, or skipped it after one did.
    pub timeouts: u64,
    /// Values written to the cache.
    pub inserts: u64,
    /// Values not written because the writer's queue was full (a slow cache disk, or reads
    /// faster than the disk writes).
    pub dropped: u64,
    /// Entries evicted to stay within the size limit.
    pub evictions: u64,
    /// Bytes held (files, headers included).
    pub bytes: u64,
    /// Entries held.
    pub entries: u64,
    /// Why the cache is off, if it could not be opened (the store then reads the backend).
    pub disabled: Option<String>,
}

/// Faults of the cache disk, for tests: a delay before every file operation, and failures.
#[derive(Default)]
pub struct DiskCacheFaults {
    delay_ms: AtomicU64,
    fail: AtomicBool,
}

#[cfg(feature = "testing")]
impl DiskCacheFaults {
    /// Delays every later read and write of a cache file by `d` (a slow or hung disk).
    pub fn set_delay(&self, d: Duration) {
        self.delay_ms.store(d.as_millis() as u64, Ordering::SeqCst);
    }
    /// Makes every later read and write of a cache file fail (or work again).
    pub fn set_failing(&self, fail: bool) {
        self.fail.store(fail, Ordering::SeqCst);
    }
}

impl DiskCacheFaults {
    /// Sleeps for the set delay, then fails if asked to.
    fn apply(&self) -> std::io::Result<()> {
        let ms = self.delay_ms.load(Ordering::SeqCst);
        if ms > 0 {
            std::thread::sleep(Duration::from_millis(ms));
        }
        if self.fail.load(Ordering::SeqCst) {
            return Err(std::io::Error::other("injected cache disk failure"));
        }
        Ok(())
    }
}

/// What the cache's threads share.
struct Shared {
    entries: PathBuf,
    tmp: PathBuf,
    root: PathBuf,
    index: Mutex<Slru>,
    faults: DiskCacheFaults,
    counts: [AtomicU64; 7],
}

#[derive(Clone, Copy)]
enum Count {
    Hits,
    Misses,
    Errors,
    Timeouts,
    Inserts,
    Evictions,
    Dropped,
}

impl Shared {
    fn count(&self, c: Count) {
        self.counts[c as usize].fetch_add(1, Ordering::Relaxed);
    }
    fn counted(&self, c: Count) -> u64 {
        self.counts[c as usize].load(Ordering::Relaxed)
    }
    fn read_entry(&self, key: &[u8]) -> Option<Vec<u8>> {
        self.faults.apply().ok()?;
        decode_entry(std::fs::read(entry_path(&self.entries, key)).ok()?, key)
    }
    fn write_entry(&self, key: &[u8], value: &[u8]) {
        let bytes = encode_entry(key, value);
        let written = self
            .faults
            .apply()
            .and_then(|()| write_atomic(&self.tmp, &entry_path(&self.entries, key), &bytes));
        if written.is_err() {
            self.count(Count::Errors);
            return;
        }
        self.count(Count::Inserts);
        let evicted = self.index.lock().insert(key, bytes.len() as u64, Segment::Probation);
        for k in evicted {
            self.count(Count::Evictions);
            let _ = std::fs::remove_file(entry_path(&self.entries, &k));
        }
    }
    fn save(&self) {
        let index = files::encode_index(&self.index.lock().entries());
        if self.faults.apply().is_ok() {
            let _ = write_atomic(&self.tmp, &self.root.join("index"), &index);
        }
    }
}

enum WriteJob {
    Put(Vec<u8>, Vec<u8>),
    Remove(Vec<u8>),
    Close(SyncSender<()>),
}

struct ReadJob {
    key: Vec<u8>,
    reply: SyncSender<Option<Vec<u8>>>,
}

/// An open disk cache (see the module docs). Dropping it saves the index and unlocks the
/// directory.
pub struct DiskCache {
    shared: Arc<Shared>,
    reads: Sender<ReadJob>,
    writes: SyncSender<WriteJob>,
    deadline: Duration,
    bypass_until: Mutex<Option<Instant>>,
    dir: PathBuf,
    capacity: u64,
    /// Held (flock'd) while open; closing it unlocks the directory.
    _lock: std::fs::File,
}

impl DiskCache {
    /// Opens the cache in `dir` (created if missing) for the values of the store `identity`,
    /// holding at most `capacity` bytes, reading with `deadline`. Entries of another identity
    /// are deleted, and so are those whose key `keep` refuses. `WouldBlock` if another open
    /// cache uses `dir`.
    pub fn open(
        dir: &Path,
        capacity: u64,
        identity: &[u8],
        deadline: Duration,
        keep: &dyn Fn(&[u8]) -> bool,
    ) -> std::io::Result<DiskCache> {
        let (entries, tmp) = (dir.join("entries"), dir.join("tmp"));
        std::fs::create_dir_all(&entries)?;
        let lock = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(dir.join("lock"))?;
        // SAFETY: flock on a descriptor we own; it conflicts with every other open of the file.
        if unsafe { libc::flock(lock.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
            return Err(std::io::Error::new(
                std::io::ErrorKind::WouldBlock,
                "in use by another open store",
            ));
        }
        let _ = std::fs::remove_dir_all(&tmp);
        std::fs::create_dir_all(&tmp)?;
        let recorded = std::fs::read(dir.join("store")).ok().and_then(|b| files::decode_store(&b));
        let index = if recorded.as_deref() == Some(identity) {
            load_index(dir, &entries, capacity, keep)?
        } else {
            // Another store's entries (or none that are known good).
            std::fs::remove_dir_all(&entries)?;
            std::fs::create_dir_all(&entries)?;
            let _ = std::fs::remove_file(dir.join("index"));
            write_atomic(&tmp, &dir.join("store"), &files::encode_store(identity))?;
            Slru::new(capacity)
        };
        let shared = Arc::new(Shared {
            entries,
            tmp,
            root: dir.to_path_buf(),
            index: Mutex::new(index),
            faults: DiskCacheFaults::default(),
            counts: Default::default(),
        });
        let (reads, read_rx) = mpsc::channel::<ReadJob>();
        let read_rx = Arc::new(Mutex::new(read_rx));
        for _ in 0..READERS {
            let (shared, rx) = (shared.clone(), read_rx.clone());
            std::thread::Builder::new()
                .name("txvfs-cache-read".into())
                .spawn(move || reader(&shared, &rx))?;
        }
        let (writes, write_rx) = mpsc::sync_channel::<WriteJob>(WRITE_QUEUE);
        let s = shared.clone();
        std::thread::Builder::new()
            .name("txvfs-cache-write".into())
            .spawn(move || writer(&s, write_rx))?;
        Ok(DiskCache {
            shared,
            reads,
            writes,
            deadline,
            bypass_until: Mutex::new(None),
            dir: dir.to_path_buf(),
            capacity,
            _lock: lock,
        })
    }

    /// The directory and capacity it was opened with.
    pub fn config(&self) -> (&Path, u64) {
        (&self.dir, self.capacity)
    }

    fn bypassing(&self) -> bool {
        let mut until = self.bypass_until.lock();
        match *until {
            Some(t) if Instant::now() < t => true,
            Some(_) => {
                *until = None;
                false
            }
            None => false,
        }
    }

    /// The value of `key`, if the cache holds it and reads it back whole within the deadline.
    pub fn get(&self, key: &[u8]) -> Option<Vec<u8>> {
        self.get_many(&[key.to_vec()]).pop().flatten()
    }

    /// The values of `keys` (each as [`DiskCache::get`]), read in parallel by the I/O threads,
    /// all within one deadline.
    pub fn get_many(&self, keys: &[Vec<u8>]) -> Vec<Option<Vec<u8>>> {
        let mut pending = Vec::with_capacity(keys.len());
        for key in keys {
            if !self.shared.index.lock().contains(key) {
                self.shared.count(Count::Misses);
                pending.push(None);
            } else if self.bypassing() {
                self.shared.count(Count::Timeouts);
                pending.push(None);
            } else {
                let (reply, answer) = mpsc::sync_channel(1);
                let sent = self.reads.send(ReadJob { key: key.clone(), reply }).is_ok();
                pending.push(sent.then_some(answer));
            }
        }
        let until = Instant::now() + self.deadline;
        keys.iter().zip(pending).map(|(key, answer)| self.answer(key, answer?, until)).collect()
    }

    /// The answer of one read job, waiting for it until `until`.
    fn answer(
        &self,
        key: &[u8],
        answer: Receiver<Option<Vec<u8>>>,
        until: Instant,
    ) -> Option<Vec<u8>> {
        match answer.recv_timeout(until.saturating_duration_since(Instant::now())) {
            Ok(Some(v)) => {
                self.shared.index.lock().touch(key);
                self.shared.count(Count::Hits);
                Some(v)
            }
            Ok(None) | Err(mpsc::RecvTimeoutError::Disconnected) => {
                if self.shared.index.lock().remove(key) {
                    // Damaged, torn or unreadable: forget it (the writer deletes the file).
                    self.shared.count(Count::Errors);
                    let _ = self.writes.try_send(WriteJob::Remove(key.to_vec()));
                } else {
                    // Evicted while it was being read.
                    self.shared.count(Count::Misses);
                }
                None
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {
                self.shared.count(Count::Timeouts);
                *self.bypass_until.lock() = Some(Instant::now() + BYPASS);
                None
            }
        }
    }

    /// Queues `value` to be kept under `key` (dropped if the queue is full or the disk slow).
    pub fn put(&self, key: &[u8], value: &[u8]) {
        if self.bypassing() || self.shared.index.lock().contains(key) {
            return;
        }
        if self.writes.try_send(WriteJob::Put(key.to_vec(), value.to_vec())).is_err() {
            self.shared.count(Count::Dropped);
        }
    }

    /// What the cache has done so far.
    pub fn stats(&self) -> DiskCacheStats {
        let s = &self.shared;
        let (bytes, entries) = {
            let i = s.index.lock();
            (i.bytes(), i.len() as u64)
        };
        DiskCacheStats {
            hits: s.counted(Count::Hits),
            misses: s.counted(Count::Misses),
            errors: s.counted(Count::Errors),
            timeouts: s.counted(Count::Timeouts),
            inserts: s.counted(Count::Inserts),
            dropped: s.counted(Count::Dropped),
            evictions: s.counted(Count::Evictions),
            bytes,
            entries,
            disabled: None,
        }
    }

    /// The fault switches of the cache disk (tests).
    #[cfg(feature = "testing")]
    pub fn faults(&self) -> &DiskCacheFaults {
        &self.shared.faults
    }

    /// Waits until every value queued so far is written (or dropped), up to [`CLOSE_WAIT`].
    pub fn flush(&self) {
        let (done, wait) = mpsc::sync_channel(1);
        if self.writes.send(WriteJob::Close(done)).is_ok() {
            let _ = wait.recv_timeout(CLOSE_WAIT);
        }
    }
}

impl Drop for DiskCache {
    fn drop(&mut self) {
        // The writer finishes its queue and saves the index; a hung disk is not waited for.
        self.flush();
    }
}

/// Loads the index of the entries on disk: in the saved order, then the files the saved index
/// does not know (written after it was saved), oldest first; trimmed to `capacity`. Files that
/// are no entry's, or whose key `keep` refuses, are deleted.
fn load_index(
    dir: &Path,
    entries: &Path,
    capacity: u64,
    keep: &dyn Fn(&[u8]) -> bool,
) -> std::io::Result<Slru> {
    let mut sizes = std::collections::HashMap::new();
    let mut unknown = Vec::new();
    for e in std::fs::read_dir(entries)? {
        let e = e?;
        let meta = e.metadata()?;
        match e.file_name().to_str().and_then(files::unhex) {
            Some(key) if meta.is_file() && keep(&key) => {
                unknown.push((meta.modified().ok(), key.clone()));
                sizes.insert(key, meta.len());
            }
            _ => {
                let _ = std::fs::remove_file(e.path());
            }
        }
    }
    let saved = std::fs::read(dir.join("index"))
        .ok()
        .and_then(|b| files::decode_index(&b))
        .unwrap_or_default();
    unknown.sort();
    let order = saved.into_iter().chain(unknown.into_iter().map(|(_, k)| (Segment::Probation, k)));
    let mut bounded = Slru::new(capacity);
    for (seg, key) in order {
        let Some(size) = sizes.remove(&key) else { continue };
        for k in bounded.insert(&key, size, seg) {
            let _ = std::fs::remove_file(entry_path(entries, &k));
        }
    }
    Ok(bounded)
}

fn reader(shared: &Shared, jobs: &Mutex<Receiver<ReadJob>>) {
    loop {
        let job = match jobs.lock().recv() {
            Ok(j) => j,
            Err(_) => return,
        };
        let _ = job.reply.send(shared.read_entry(&job.key));
    }
}

fn writer(shared: &Shared, jobs: Receiver<WriteJob>) {
    let mut since_save = 0;
    for job in jobs {
        match job {
            WriteJob::Put(k, v) => {
                shared.write_entry(&k, &v);
                since_save += 1;
                if since_save >= SAVE_EVERY {
                    shared.save();
                    since_save = 0;
                }
            }
            WriteJob::Remove(k) => {
                let _ = std::fs::remove_file(entry_path(&shared.entries, &k));
            }
            WriteJob::Close(done) => {
                shared.save();
                since_save = 0;
                let _ = done.send(());
            }
        }
    }
}
