//! The VFS logic, free of SQLite types (the shape of mvsqlite's `mvfs`): stores, database
//! files with a write overlay committed as one txvfs transaction, SQLite's five lock levels
//! between handles of one process, in-memory journal and temp files, and commit groups.
//! `ffi.rs` translates SQLite's callbacks into calls on these types.

use parking_lot::Mutex;
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock, Weak};
use std::time::Duration;
use txvfs::{Error, ErrorKind, File, FileSystem, OpenOptions, Result, Store};

/// Store used when a database URI has no `store=` parameter and `TXVFS_SQLITE_STORE` is unset:
/// a RocksDB store in the directory `txvfs-store` under the current directory.
pub const DEFAULT_STORE: &str = "txvfs-store";

/// How often a commit is retried when another txvfs writer (not an SQLite connection: those
/// are serialized by the locks) conflicts with it.
const COMMIT_RETRIES: u32 = 20;

/// Process-wide counters, readable with `PRAGMA txvfs_stats`.
#[derive(Default)]
pub struct Stats {
    /// txvfs transactions committed for SQLite write transactions.
    pub commits: AtomicU64,
    /// ... of which were durable (synchronous != OFF).
    pub durable: AtomicU64,
    /// ... of which came from SQLITE_FCNTL_COMMIT_ATOMIC_WRITE (batch atomic writes).
    pub batch: AtomicU64,
    /// ... of which committed more than one database (commit groups).
    pub grouped: AtomicU64,
    /// Rollback journals opened (kept in memory).
    pub journals: AtomicU64,
}

/// The process's counters.
pub fn stats() -> &'static Stats {
    static S: OnceLock<Stats> = OnceLock::new();
    S.get_or_init(Stats::default)
}

fn stores() -> &'static Mutex<HashMap<String, Store>> {
    static S: OnceLock<Mutex<HashMap<String, Store>>> = OnceLock::new();
    S.get_or_init(Default::default)
}

/// Opens (or reuses) the store named by `uri`; `None` means the default store. Stores stay
/// open for the life of the process (a `memory:` store would otherwise vanish with its last
/// database handle).
pub fn open_store(uri: Option<&str>) -> Result<(Store, String)> {
    let uri = match uri {
        Some(u) if !u.is_empty() => u.to_string(),
        _ => std::env::var("TXVFS_SQLITE_STORE").unwrap_or_else(|_| DEFAULT_STORE.to_string()),
    };
    let mut map = stores().lock();
    if let Some(s) = map.get(&uri) {
        return Ok((s.clone(), ident(s, &uri)));
    }
    let s = Store::open(&uri)?;
    map.insert(uri.clone(), s.clone());
    let id = ident(&s, &uri);
    Ok((s, id))
}

fn ident(s: &Store, uri: &str) -> String {
    if uri.starts_with("memory:") {
        uri.to_string()
    } else {
        s.describe()
    }
}

/// A database path as SQLite names it, turned into a store path: absolute paths stay, relative
/// ones are taken from the store's root.
pub fn full_path(name: &str) -> String {
    let n = name.trim_start_matches("./");
    if n.starts_with('/') {
        n.to_string()
    } else {
        format!("/{n}")
    }
}

// ---------------------------------------------------------------------------------------------
// Locks

/// SQLite's lock levels.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    /// No lock.
    None = 0,
    /// Reading.
    Shared = 1,
    /// Intends to write; readers may still come and go.
    Reserved = 2,
    /// Waits for readers to leave; no new readers.
    Pending = 3,
    /// Writing.
    Exclusive = 4,
}

impl Level {
    /// From SQLite's integer.
    pub fn from_int(n: i32) -> Level {
        match n {
            0 => Level::None,
            1 => Level::Shared,
            2 => Level::Reserved,
            3 => Level::Pending,
            _ => Level::Exclusive,
        }
    }
}

#[derive(Default)]
struct LockState {
    shared: u32,
    reserved: bool,
    pending: bool,
    exclusive: bool,
}

/// One database path of one store, shared by every handle on it in this process.
pub struct DbNode {
    store_id: String,
    locks: Mutex<LockState>,
}

fn nodes() -> &'static Mutex<HashMap<String, Weak<DbNode>>> {
    static S: OnceLock<Mutex<HashMap<String, Weak<DbNode>>>> = OnceLock::new();
    S.get_or_init(Default::default)
}

/// Outcome of a lock request.
#[derive(Debug, PartialEq, Eq)]
pub enum LockResult {
    /// Granted.
    Ok,
    /// Held by another handle: SQLite's busy handler retries.
    Busy,
}

// ---------------------------------------------------------------------------------------------
// Overlay: the writes of one SQLite write transaction, not yet committed.

/// Bytes written since the transaction began, as non-overlapping extents, and the file's
/// logical size once anything changed it.
#[derive(Clone, Default)]
pub struct Overlay {
    ext: BTreeMap<u64, Vec<u8>>,
    size: Option<u64>,
}

impl Overlay {
    /// True when nothing changed.
    pub fn is_empty(&self) -> bool {
        self.ext.is_empty() && self.size.is_none()
    }

    /// Records a write; `base` is the committed size (asked for once).
    pub fn write(&mut self, off: u64, data: &[u8], base: impl FnOnce() -> Result<u64>) -> Result<()> {
        if data.is_empty() {
            return Ok(());
        }
        let end = off + data.len() as u64;
        let size = match self.size {
            Some(s) => s,
            None => base()?,
        };
        self.size = Some(size.max(end));
        // Fast paths: inside one extent, or appending to the extent that ends at `off`.
        if let Some((&s, v)) = self.ext.range_mut(..=off).next_back() {
            let e = s + v.len() as u64;
            if off >= s && end <= e {
                v[(off - s) as usize..(end - s) as usize].copy_from_slice(data);
                return Ok(());
            }
            if e == off && self.ext.range(off + 1..=end).next().is_none() {
                let v = self.ext.get_mut(&s).expect("extent");
                v.extend_from_slice(data);
                if let Some(next) = self.ext.remove(&end) {
                    self.ext.get_mut(&s).expect("extent").extend_from_slice(&next);
                }
                return Ok(());
            }
        }
        // General case: merge every extent that overlaps or touches [off, end].
        let touching: Vec<u64> = self
            .ext
            .range(..=end)
            .rev()
            .take_while(|(&s, v)| s + v.len() as u64 >= off)
            .map(|(&s, _)| s)
            .collect();
        let mut start = off;
        let mut stop = end;
        for &s in &touching {
            start = start.min(s);
            stop = stop.max(s + self.ext[&s].len() as u64);
        }
        let mut buf = vec![0u8; (stop - start) as usize];
        for s in touching {
            let v = self.ext.remove(&s).expect("extent");
            buf[(s - start) as usize..(s - start) as usize + v.len()].copy_from_slice(&v);
        }
        buf[(off - start) as usize..(end - start) as usize].copy_from_slice(data);
        self.ext.insert(start, buf);
        Ok(())
    }

    /// Records a truncation to `size`.
    pub fn truncate(&mut self, size: u64) {
        self.size = Some(size);
        let beyond: Vec<u64> = self.ext.range(size..).map(|(&s, _)| s).collect();
        for s in beyond {
            self.ext.remove(&s);
        }
        if let Some((&s, v)) = self.ext.range_mut(..size).next_back() {
            if s + v.len() as u64 > size {
                v.truncate((size - s) as usize);
            }
        }
    }

    /// The logical size, if the overlay changed it.
    pub fn size(&self) -> Option<u64> {
        self.size
    }

    /// Reads `buf.len()` bytes at `off` through the overlay; `base` reads committed bytes
    /// (zero-filling what it does not return). Returns how many bytes lie before the end of
    /// file; the rest of `buf` is zeros.
    pub fn read(&self, off: u64, buf: &mut [u8], base: impl FnOnce(&mut [u8]) -> Result<()>) -> Result<usize> {
        let end = off + buf.len() as u64;
        let covered = self
            .ext
            .range(..=off)
            .next_back()
            .is_some_and(|(&s, v)| s + v.len() as u64 >= end);
        if !covered {
            base(buf)?;
        }
        for (&s, v) in self.ext.range(..end).rev() {
            let e = s + v.len() as u64;
            if e <= off {
                break;
            }
            let from = s.max(off);
            let to = e.min(end);
            buf[(from - off) as usize..(to - off) as usize].copy_from_slice(&v[(from - s) as usize..(to - s) as usize]);
        }
        let valid = match self.size {
            Some(size) => size.saturating_sub(off).min(buf.len() as u64) as usize,
            None => buf.len(),
        };
        buf[valid..].fill(0);
        Ok(valid)
    }

    /// Applies the overlay to `f` (a handle inside the committing transaction).
    fn apply(&self, f: &File) -> Result<()> {
        if let Some(size) = self.size {
            if f.stat()?.size != size {
                f.set_len(size)?;
            }
        }
        for (&s, v) in &self.ext {
            f.write_at(v, s)?;
        }
        Ok(())
    }
}

// ---------------------------------------------------------------------------------------------
// Database files

/// The part of a database handle that a commit group can reach.
pub struct Member {
    path: String,
    /// Uncommitted writes.
    pub overlay: Overlay,
    /// xSync was called since the transaction began (synchronous != OFF).
    pub synced: bool,
    /// SQLite finished phase one of its commit (SQLITE_FCNTL_SYNC): the overlay is complete.
    pub ready: bool,
}

/// A commit group: databases whose SQLite transactions commit in one txvfs transaction.
pub struct Group {
    name: String,
    store_id: String,
    members: Mutex<Vec<Weak<Mutex<Member>>>>,
}

fn groups() -> &'static Mutex<HashMap<(String, String), Weak<Group>>> {
    static S: OnceLock<Mutex<HashMap<(String, String), Weak<Group>>>> = OnceLock::new();
    S.get_or_init(Default::default)
}

/// An open main database file.
pub struct Db {
    store: Store,
    store_id: String,
    path: String,
    node: Arc<DbNode>,
    /// Handle on the store: reads of committed data.
    file: File,
    level: Level,
    holds_reserved: bool,
    holds_pending: bool,
    member: Arc<Mutex<Member>>,
    group: Option<Arc<Group>>,
    /// Overlay as it was at SQLITE_FCNTL_BEGIN_ATOMIC_WRITE, while a batch is open.
    batch: Option<Overlay>,
    /// `PRAGMA synchronous=OFF` was seen: commits do not wait for durability.
    pub sync_off: bool,
}

impl Db {
    /// Opens the database `path` in `store` (creating it, and its parent directories, when
    /// `create`), joining commit group `group` if given.
    pub fn open(store: Store, store_id: String, path: &str, create: bool, read_only: bool, group: Option<&str>) -> Result<Db> {
        let node = {
            let mut map = nodes().lock();
            map.retain(|_, w| w.strong_count() > 0);
            match map.get(path).and_then(Weak::upgrade) {
                Some(n) if n.store_id != store_id => {
                    return Err(Error::new(
                        ErrorKind::Busy,
                        format!("{path} is already open from store {} in this process", n.store_id),
                    ))
                }
                Some(n) => n,
                None => {
                    let n = Arc::new(DbNode { store_id: store_id.clone(), locks: Mutex::new(LockState::default()) });
                    map.insert(path.to_string(), Arc::downgrade(&n));
                    n
                }
            }
        };
        if create {
            if let Some(i) = path.rfind('/') {
                if i > 0 {
                    store.mkdir_all(&path[..i], 0o755)?;
                }
            }
        }
        let opts = OpenOptions::new().read(true).write(!read_only).create(create && !read_only);
        let file = store.open(path, &opts)?;
        let member = Arc::new(Mutex::new(Member { path: path.to_string(), overlay: Overlay::default(), synced: false, ready: false }));
        let mut db = Db {
            store,
            store_id,
            path: path.to_string(),
            node,
            file,
            level: Level::None,
            holds_reserved: false,
            holds_pending: false,
            member,
            group: None,
            batch: None,
            sync_off: false,
        };
        if let Some(g) = group {
            db.join_group(g)?;
        }
        Ok(db)
    }

    /// The store path.
    pub fn path(&self) -> &str {
        &self.path
    }

    /// Puts this database in commit group `name` (an empty name leaves its group).
    pub fn join_group(&mut self, name: &str) -> Result<()> {
        if let Some(g) = self.group.take() {
            g.members.lock().retain(|w| w.upgrade().is_some_and(|m| !Arc::ptr_eq(&m, &self.member)));
        }
        if name.is_empty() {
            return Ok(());
        }
        let key = (self.store_id.clone(), name.to_string());
        let g = {
            let mut map = groups().lock();
            map.retain(|_, w| w.strong_count() > 0);
            match map.get(&key).and_then(Weak::upgrade) {
                Some(g) => g,
                None => {
                    let g = Arc::new(Group { name: name.to_string(), store_id: self.store_id.clone(), members: Mutex::new(Vec::new()) });
                    map.insert(key, Arc::downgrade(&g));
                    g
                }
            }
        };
        debug_assert_eq!(g.store_id, self.store_id);
        g.members.lock().push(Arc::downgrade(&self.member));
        self.group = Some(g);
        Ok(())
    }

    /// The commit group's name, if any.
    pub fn group_name(&self) -> Option<String> {
        self.group.as_ref().map(|g| g.name.clone())
    }

    /// True when the database may report batch atomic writes (not in a commit group, whose
    /// members commit together at phase two).
    pub fn batch_capable(&self) -> bool {
        self.group.is_none()
    }

    /// Reads at `off` into `buf`; returns the bytes before end of file (the rest is zeros).
    pub fn read(&self, off: u64, buf: &mut [u8]) -> Result<usize> {
        let m = self.member.lock();
        m.overlay.read(off, buf, |b| {
            let mut done = 0;
            while done < b.len() {
                let n = self.file.read_at(&mut b[done..], off + done as u64)?;
                if n == 0 {
                    break;
                }
                done += n;
            }
            b[done..].fill(0);
            Ok(())
        })
    }

    fn committed_size(&self) -> Result<u64> {
        Ok(self.file.stat()?.size)
    }

    /// Writes into the uncommitted overlay.
    pub fn write(&self, off: u64, data: &[u8]) -> Result<()> {
        let mut m = self.member.lock();
        m.overlay.write(off, data, || self.committed_size())
    }

    /// Truncates the overlay's view of the file.
    pub fn truncate(&self, size: u64) -> Result<()> {
        self.member.lock().overlay.truncate(size);
        Ok(())
    }

    /// The file's size as this handle sees it.
    pub fn size(&self) -> Result<u64> {
        if let Some(s) = self.member.lock().overlay.size() {
            return Ok(s);
        }
        self.committed_size()
    }

    /// xSync: remembers that the transaction asked for durability.
    pub fn sync(&self) {
        self.member.lock().synced = true;
    }

    /// SQLITE_FCNTL_SYNC: phase one of SQLite's commit is complete for this database.
    pub fn phase_one_done(&self) {
        self.member.lock().ready = true;
    }

    /// SQLITE_FCNTL_BEGIN_ATOMIC_WRITE.
    pub fn begin_batch(&mut self) {
        self.batch = Some(self.member.lock().overlay.clone());
    }

    /// SQLITE_FCNTL_COMMIT_ATOMIC_WRITE: commits the batch now.
    pub fn commit_batch(&mut self) -> Result<()> {
        self.batch = None;
        let durable = !self.sync_off;
        let r = commit_members(&self.store, &[self.member.clone()], durable);
        if r.is_ok() {
            stats().batch.fetch_add(1, Ordering::Relaxed);
        }
        r
    }

    /// SQLITE_FCNTL_ROLLBACK_ATOMIC_WRITE: forgets the batch's writes.
    pub fn rollback_batch(&mut self) {
        if let Some(o) = self.batch.take() {
            self.member.lock().overlay = o;
        }
    }

    /// Commits this database's overlay, and those of its commit group's members that finished
    /// phase one, as one txvfs transaction (SQLITE_FCNTL_COMMIT_PHASETWO, or the last moment:
    /// the write lock's release).
    pub fn commit(&self) -> Result<()> {
        let mut members = vec![self.member.clone()];
        if let Some(g) = &self.group {
            let mut list = g.members.lock();
            list.retain(|w| w.strong_count() > 0);
            for w in list.iter() {
                if let Some(m) = w.upgrade() {
                    if !Arc::ptr_eq(&m, &self.member) && m.lock().ready {
                        members.push(m);
                    }
                }
            }
        }
        let durable = members.iter().any(|m| m.lock().synced) && !self.sync_off;
        commit_members(&self.store, &members, durable)
    }

    // -- locks --------------------------------------------------------------------------------

    /// The level this handle holds.
    pub fn level(&self) -> Level {
        self.level
    }

    /// xLock.
    pub fn lock(&mut self, want: Level) -> LockResult {
        if self.level >= want {
            return LockResult::Ok;
        }
        let mut st = self.node.locks.lock();
        match want {
            Level::None => LockResult::Ok,
            Level::Shared => {
                if st.pending || st.exclusive {
                    return LockResult::Busy;
                }
                st.shared += 1;
                self.level = Level::Shared;
                LockResult::Ok
            }
            Level::Reserved => {
                if st.reserved || st.pending || st.exclusive {
                    return LockResult::Busy;
                }
                st.reserved = true;
                self.holds_reserved = true;
                self.level = Level::Reserved;
                LockResult::Ok
            }
            Level::Pending | Level::Exclusive => {
                if !self.holds_pending {
                    if st.pending || st.exclusive || (st.reserved && !self.holds_reserved) {
                        return LockResult::Busy;
                    }
                    st.pending = true;
                    self.holds_pending = true;
                    self.level = Level::Pending;
                }
                if want == Level::Pending {
                    return LockResult::Ok;
                }
                if st.shared > 1 {
                    return LockResult::Busy;
                }
                st.exclusive = true;
                self.level = Level::Exclusive;
                LockResult::Ok
            }
        }
    }

    /// xUnlock to `to` (Shared or None). A write transaction that SQLite did not commit at
    /// phase two (a rollback, which SQLite undoes by writing the original pages back) commits
    /// its overlay here, before the lock is released.
    pub fn unlock(&mut self, to: Level) -> Result<()> {
        if self.level <= to {
            return Ok(());
        }
        let mut result = Ok(());
        if self.level >= Level::Reserved && to <= Level::Shared {
            let pending = {
                let m = self.member.lock();
                !m.overlay.is_empty()
            };
            if pending {
                result = self.commit();
            }
            let mut m = self.member.lock();
            m.synced = false;
            m.ready = false;
            self.batch = None;
        }
        let mut st = self.node.locks.lock();
        if self.level == Level::Exclusive {
            st.exclusive = false;
        }
        if self.holds_pending {
            st.pending = false;
            self.holds_pending = false;
        }
        if self.holds_reserved {
            st.reserved = false;
            self.holds_reserved = false;
        }
        if to == Level::None {
            st.shared = st.shared.saturating_sub(1);
        }
        self.level = to;
        result
    }

    /// xCheckReservedLock: does any handle hold RESERVED or more?
    pub fn reserved_by_anyone(&self) -> bool {
        let st = self.node.locks.lock();
        st.reserved || st.pending || st.exclusive
    }

    /// Closes the handle (releasing its locks).
    pub fn close(mut self) -> Result<()> {
        let r = self.unlock(Level::None);
        if let Some(g) = self.group.take() {
            g.members.lock().retain(|w| w.upgrade().is_some_and(|m| !Arc::ptr_eq(&m, &self.member)));
        }
        r
    }
}

/// Applies the overlays of `members` in one txvfs transaction and commits it (retrying
/// conflicts with other txvfs writers). Success or failure, the overlays are emptied: after a
/// failure the store still holds the last committed state, which SQLite re-reads.
fn commit_members(store: &Store, members: &[Arc<Mutex<Member>>], durable: bool) -> Result<()> {
    let mut guards: Vec<_> = {
        let mut sorted: Vec<&Arc<Mutex<Member>>> = members.iter().collect();
        sorted.sort_by_key(|m| Arc::as_ptr(m) as usize);
        sorted.into_iter().map(|m| m.lock()).collect()
    };
    let dirty = guards.iter().filter(|m| !m.overlay.is_empty()).count();
    if dirty == 0 {
        return Ok(());
    }
    let mut attempt = 0;
    let result = loop {
        let r = (|| {
            let tx = store.begin()?;
            for m in guards.iter().filter(|m| !m.overlay.is_empty()) {
                let f = tx.open(&m.path, &OpenOptions::new().read(true).write(true).create(true))?;
                m.overlay.apply(&f)?;
                f.close()?;
            }
            tx.commit_durable(durable)
        })();
        match r {
            Err(e) if e.is_retryable() && attempt < COMMIT_RETRIES => {
                std::thread::sleep(Duration::from_millis(1 << attempt.min(6)));
                attempt += 1;
            }
            r => break r,
        }
    };
    for m in guards.iter_mut() {
        m.overlay = Overlay::default();
        m.synced = false;
        m.ready = false;
    }
    if result.is_ok() {
        let s = stats();
        s.commits.fetch_add(1, Ordering::Relaxed);
        if durable {
            s.durable.fetch_add(1, Ordering::Relaxed);
        }
        if dirty > 1 {
            s.grouped.fetch_add(1, Ordering::Relaxed);
        }
    }
    result
}

// ---------------------------------------------------------------------------------------------
// Memory files: rollback journals, super-journals and temp files.

/// A file kept in process memory. Journals never need to outlive the process: a txvfs commit
/// is atomic, so after a crash there is nothing to roll back.
#[derive(Default)]
pub struct MemFile {
    data: Mutex<Vec<u8>>,
}

fn mem_files() -> &'static Mutex<HashMap<String, Arc<MemFile>>> {
    static S: OnceLock<Mutex<HashMap<String, Arc<MemFile>>>> = OnceLock::new();
    S.get_or_init(Default::default)
}

impl MemFile {
    /// Opens (creating) the named memory file, or an anonymous one for `None`.
    pub fn open(name: Option<&str>, journal: bool) -> Arc<MemFile> {
        if journal {
            stats().journals.fetch_add(1, Ordering::Relaxed);
        }
        match name {
            None => Arc::new(MemFile::default()),
            Some(n) => mem_files().lock().entry(n.to_string()).or_default().clone(),
        }
    }

    /// True when a named memory file exists.
    pub fn exists(name: &str) -> bool {
        mem_files().lock().contains_key(name)
    }

    /// Deletes a named memory file; false if there was none.
    pub fn delete(name: &str) -> bool {
        mem_files().lock().remove(name).is_some()
    }

    /// Reads at `off`; returns the bytes available (the rest of `buf` is zeroed).
    pub fn read(&self, off: u64, buf: &mut [u8]) -> usize {
        let d = self.data.lock();
        let n = (d.len() as u64).saturating_sub(off).min(buf.len() as u64) as usize;
        if n > 0 {
            buf[..n].copy_from_slice(&d[off as usize..off as usize + n]);
        }
        buf[n..].fill(0);
        n
    }

    /// Writes at `off`, growing the file.
    pub fn write(&self, off: u64, data: &[u8]) {
        let mut d = self.data.lock();
        let end = off as usize + data.len();
        if d.len() < end {
            d.resize(end, 0);
        }
        d[off as usize..end].copy_from_slice(data);
    }

    /// Sets the size.
    pub fn truncate(&self, size: u64) {
        self.data.lock().resize(size as usize, 0);
    }

    /// The size.
    pub fn size(&self) -> u64 {
        self.data.lock().len() as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn base_zero(b: &mut [u8]) -> Result<()> {
        b.fill(7);
        Ok(())
    }

    #[test]
    fn overlay_merges_and_reads_through() {
        let mut o = Overlay::default();
        o.write(4096, &[1; 4096], || Ok(8192)).unwrap();
        o.write(0, &[2; 4096], || Ok(8192)).unwrap();
        o.write(8192, &[3; 100], || Ok(8192)).unwrap();
        assert_eq!(o.ext.len(), 1, "adjacent writes merge into one extent");
        assert_eq!(o.size(), Some(8292));
        let mut buf = vec![0; 200];
        assert_eq!(o.read(8192, &mut buf, base_zero).unwrap(), 100);
        assert!(buf[..100].iter().all(|&b| b == 3) && buf[100..].iter().all(|&b| b == 0));
        o.write(100, &[9; 10], || Ok(0)).unwrap();
        let mut b2 = vec![0; 20];
        o.read(95, &mut b2, base_zero).unwrap();
        assert_eq!(&b2[..5], &[2; 5]);
        assert_eq!(&b2[5..15], &[9; 10]);
    }

    #[test]
    fn overlay_truncate_hides_base_and_extents() {
        let mut o = Overlay::default();
        o.write(10, &[1; 20], || Ok(100)).unwrap();
        o.truncate(15);
        let mut buf = vec![0; 10];
        assert_eq!(o.read(10, &mut buf, base_zero).unwrap(), 5);
        assert_eq!(buf, [1, 1, 1, 1, 1, 0, 0, 0, 0, 0]);
        let mut b = vec![0; 4];
        assert_eq!(o.read(0, &mut b, base_zero).unwrap(), 4);
        assert_eq!(b, [7; 4], "bytes the overlay does not cover come from the base");
    }

    #[test]
    fn overlay_overlapping_writes() {
        let mut o = Overlay::default();
        o.write(0, &[1; 10], || Ok(0)).unwrap();
        o.write(20, &[2; 10], || Ok(0)).unwrap();
        o.write(5, &[3; 20], || Ok(0)).unwrap();
        assert_eq!(o.ext.len(), 1);
        let v = &o.ext[&0];
        assert_eq!(v.len(), 30);
        assert_eq!(&v[..5], &[1; 5]);
        assert_eq!(&v[5..25], &[3; 20]);
        assert_eq!(&v[25..], &[2; 5]);
    }

    #[test]
    fn five_lock_levels() {
        let (store, id) = open_store(Some("memory:")).unwrap();
        let mut a = Db::open(store.clone(), id.clone(), "/locks.db", true, false, None).unwrap();
        let mut b = Db::open(store, id, "/locks.db", true, false, None).unwrap();
        assert_eq!(a.lock(Level::Shared), LockResult::Ok);
        assert_eq!(b.lock(Level::Shared), LockResult::Ok);
        assert_eq!(a.lock(Level::Reserved), LockResult::Ok);
        assert!(b.reserved_by_anyone());
        assert_eq!(b.lock(Level::Reserved), LockResult::Busy);
        assert_eq!(a.lock(Level::Exclusive), LockResult::Busy, "b still reads");
        assert_eq!(a.level(), Level::Pending);
        b.unlock(Level::None).unwrap();
        assert_eq!(b.lock(Level::Shared), LockResult::Busy, "pending keeps new readers out");
        assert_eq!(a.lock(Level::Exclusive), LockResult::Ok);
        a.write(0, b"hello").unwrap();
        a.unlock(Level::Shared).unwrap();
        assert_eq!(b.lock(Level::Shared), LockResult::Ok);
        let mut buf = [0u8; 5];
        assert_eq!(b.read(0, &mut buf).unwrap(), 5);
        assert_eq!(&buf, b"hello");
        a.close().unwrap();
        b.close().unwrap();
    }
}
