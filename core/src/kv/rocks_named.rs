//! Named snapshots of a RocksDB store: RocksDB checkpoints in `snapshots/NAME/` under the store
//! directory, opened read-only by `rocksdb:/store?snapshot=NAME` or by their own path.
//!
//! A checkpoint is a directory of hard links to the store's table files (which RocksDB never
//! changes once written) plus a copy of its small metadata files: cheap to make, consistent at
//! one instant (each commit is one atomic write batch), and it survives reopening, which a
//! RocksDB snapshot (a sequence number held in memory) does not. A snapshot directory holds
//! the marker `txvfs.snapshot`, so that opening it by path opens it read-only, and a
//! `txvfs.owner` file whose lock its readers share and its deletion takes alone.

use super::frozen::{FrozenBackend, FrozenRead};
use super::owner::{fork_generation, forked_error, SnapshotLock, OWNER_FILE};
use super::rocks_cf;
use super::{Backend, Limits, RocksBackend};
use crate::error::{Error, ErrorKind, Result};
use parking_lot::Mutex;
use rocksdb::{Options, DB};
use std::collections::HashMap;
use std::mem::ManuallyDrop;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock, Weak};

/// The directory of a store's named snapshots.
pub const SNAPSHOTS_DIR: &str = "snapshots";
/// The file that marks a directory as a named snapshot.
pub const MARKER: &str = "txvfs.snapshot";

/// Checks a snapshot name: 1 to 100 of `A-Z a-z 0-9 . _ -`, not starting with `.`.
pub(crate) fn check_name(name: &str) -> Result<()> {
    let ok = !name.is_empty()
        && name.len() <= 100
        && !name.starts_with('.')
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b));
    if ok {
        Ok(())
    } else {
        Err(Error::new(
            ErrorKind::Invalid,
            format!("{name:?}: a snapshot name is 1 to 100 of A-Z a-z 0-9 . _ - and does not start with '.'"),
        ))
    }
}

fn sync_dir(dir: &Path) -> Result<()> {
    std::fs::File::open(dir).and_then(|f| f.sync_all()).map_err(|e| Error::host_io(dir, e))
}

/// Makes the named snapshot `name` of `store`. Built under a hidden temporary name and renamed
/// into place, so an interrupted creation leaves no snapshot under the final name.
pub(crate) fn create(store: &RocksBackend, name: &str) -> Result<()> {
    check_name(name)?;
    // One creation at a time in this process, which owns the store and so makes every named
    // snapshot of it (other processes ask it to): two creations of one name would share the
    // temporary directory (one removing it under the other), and RocksDB's checkpoints taken
    // at once could link a table file that a compaction had just deleted.
    static CREATING: Mutex<()> = Mutex::new(());
    let _one = CREATING.lock();
    let dir = store.dir().join(SNAPSHOTS_DIR);
    std::fs::create_dir_all(&dir).map_err(|e| Error::host_io(&dir, e))?;
    let target = dir.join(name);
    if target.exists() {
        return Err(Error::new(
            ErrorKind::Exists,
            format!("rocksdb:{}: snapshot {name:?} exists", store.dir().display()),
        ));
    }
    let tmp = dir.join(format!(".{name}.tmp"));
    if tmp.exists() {
        std::fs::remove_dir_all(&tmp).map_err(|e| Error::host_io(&tmp, e))?;
    }
    store.checkpoint(&tmp)?;
    for file in [MARKER, OWNER_FILE] {
        let p = tmp.join(file);
        std::fs::File::create(&p).and_then(|f| f.sync_all()).map_err(|e| Error::host_io(&p, e))?;
    }
    sync_dir(&tmp)?;
    std::fs::rename(&tmp, &target).map_err(|e| Error::host_io(&target, e))?;
    sync_dir(&dir)
}

/// The names of the snapshots of the store in `store_dir`, sorted.
pub(crate) fn list(store_dir: &Path) -> Result<Vec<String>> {
    let dir = store_dir.join(SNAPSHOTS_DIR);
    let entries = match std::fs::read_dir(&dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(Error::host_io(&dir, e)),
    };
    let mut names = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| Error::host_io(&dir, e))?;
        let Ok(name) = entry.file_name().into_string() else { continue };
        if check_name(&name).is_ok() && entry.path().join(MARKER).is_file() {
            names.push(name);
        }
    }
    names.sort();
    Ok(names)
}

/// Deletes the snapshot `name` of the store in `store_dir`; [`ErrorKind::Busy`] while open.
pub(crate) fn delete(store_dir: &Path, name: &str) -> Result<()> {
    check_name(name)?;
    let dir = store_dir.join(SNAPSHOTS_DIR);
    let target = dir.join(name);
    let what = format!("rocksdb:{}?snapshot={name}", store_dir.display());
    if !target.join(MARKER).is_file() {
        return Err(Error::new(ErrorKind::NotFound, format!("{what}: no such snapshot")));
    }
    let lock = SnapshotLock::acquire(&target, &what, true)?;
    // Renamed away first: once the name is gone, nobody can open it, and an interrupted
    // removal leaves only a hidden directory, removed by the next creation of that name.
    let doomed = dir.join(format!(".{name}.tmp"));
    if doomed.exists() {
        std::fs::remove_dir_all(&doomed).map_err(|e| Error::host_io(&doomed, e))?;
    }
    std::fs::rename(&target, &doomed).map_err(|e| Error::host_io(&target, e))?;
    drop(lock);
    sync_dir(&dir)?;
    std::fs::remove_dir_all(&doomed).map_err(|e| Error::host_io(&doomed, e))
}

/// The URI that opens the named snapshot `name` of the store in `store_dir`.
pub(crate) fn uri(store_dir: &Path, name: &str) -> Result<String> {
    check_name(name)?;
    Ok(format!("rocksdb:{}?snapshot={name}", store_dir.display()))
}

/// True if `dir` is a named snapshot's directory.
pub(crate) fn is_snapshot_dir(dir: &Path) -> bool {
    dir.join(MARKER).is_file()
}

/// A named snapshot opened read-only.
struct SnapshotDb {
    /// Closed in `drop`, before the reader lock is released; never closed in a forked child
    /// (its RocksDB threads are gone).
    db: ManuallyDrop<DB>,
    path: PathBuf,
    lock: SnapshotLock,
}

impl Drop for SnapshotDb {
    fn drop(&mut self) {
        if !self.lock.inherited() {
            // SAFETY: dropped once, here; nothing uses the DB afterwards.
            unsafe { ManuallyDrop::drop(&mut self.db) };
        }
    }
}

impl FrozenRead for SnapshotDb {
    /// Refuses a snapshot inherited across fork(): its RocksDB instance did not survive it.
    fn usable(&self) -> Result<()> {
        if self.lock.inherited() {
            return Err(forked_error(
                &format!("snapshot {}", self.path.display()),
                self.lock.owner_pid(),
            ));
        }
        Ok(())
    }
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        let cf = self.db.cf_handle(rocks_cf::FEED_CF).filter(|_| rocks_cf::in_feed(key));
        match cf {
            Some(cf) => self.db.get_cf(cf, key),
            None => self.db.get(key),
        }
        .map_err(|e| {
            Error::new(ErrorKind::Backend, format!("{}: {}", self.path.display(), e.into_string()))
        })
    }
    fn scan(
        &self,
        start: &[u8],
        end: &[u8],
        reverse: bool,
        visit: &mut dyn FnMut(&[u8], &[u8]) -> bool,
    ) -> Result<()> {
        let cf = self.db.cf_handle(rocks_cf::FEED_CF);
        rocks_cf::scan_db(cf, start, end, reverse, visit, |cf, ro| match cf {
            Some(cf) => self.db.raw_iterator_cf_opt(cf, ro),
            None => self.db.raw_iterator_opt(ro),
        })
        .map_err(|e| {
            Error::new(ErrorKind::Backend, format!("{}: {}", self.path.display(), e.into_string()))
        })
    }
}

/// Each open named snapshot's directory, with its fork generation and the snapshot itself.
type OpenSnapshots = HashMap<PathBuf, (u64, Weak<dyn Backend>)>;

/// The named snapshots open in this process, with the fork generation they were opened in
/// (one inherited from a parent is not reused: it is refused, see [`SnapshotDb::usable`]).
fn registry() -> &'static Mutex<OpenSnapshots> {
    static SNAPSHOTS: OnceLock<Mutex<OpenSnapshots>> = OnceLock::new();
    SNAPSHOTS.get_or_init(Default::default)
}

/// Opens the named snapshot `name` of the store in `store_dir` read-only.
pub(crate) fn open_named(store_dir: &Path, name: &str) -> Result<Arc<dyn Backend>> {
    check_name(name)?;
    let what = format!("rocksdb:{}?snapshot={name}", store_dir.display());
    let dir = store_dir.join(SNAPSHOTS_DIR).join(name);
    if !is_snapshot_dir(&dir) {
        return Err(Error::new(ErrorKind::NotFound, format!("{what}: no such snapshot")));
    }
    open_dir(&dir, what)
}

/// Opens the named snapshot in directory `dir` read-only; `what` names it in messages. Opening
/// it again in this process gives the same instance.
pub(crate) fn open_dir(dir: &Path, what: String) -> Result<Arc<dyn Backend>> {
    let canon = dir.canonicalize().map_err(|e| Error::host_io(dir, e))?;
    let mut open = registry().lock();
    if let Some(b) =
        open.get(&canon).filter(|(g, _)| *g == fork_generation()).and_then(|(_, w)| w.upgrade())
    {
        return Ok(b);
    }
    let lock = SnapshotLock::acquire(&canon, &what, false)?;
    let mut opts: Options = RocksBackend::db_options();
    opts.create_if_missing(false);
    // A snapshot of a store written before the change feed's family has only the default one
    // (its records are there).
    let families = DB::list_cf(&opts, &canon).unwrap_or_default();
    let families = families.iter().map(|n| rocksdb::ColumnFamilyDescriptor::new(n, opts.clone()));
    let db = DB::open_cf_descriptors_read_only(&opts, &canon, families, false)
        .map_err(|e| Error::new(ErrorKind::Backend, format!("{what}: {}", e.into_string())))?;
    let view = Arc::new(SnapshotDb { db: ManuallyDrop::new(db), path: canon.clone(), lock });
    // The limits of the store it was taken from (see `RocksBackend::open`).
    let limits = Limits { max_key: Some(64 << 10), max_value: Some(64 << 20), ..Limits::UNLIMITED };
    let backend: Arc<dyn Backend> =
        Arc::new(FrozenBackend::new(view, limits, what, super::rocks::disk_space(&canon)));
    open.retain(|_, (_, w)| w.strong_count() > 0);
    open.insert(canon, (fork_generation(), Arc::downgrade(&backend)));
    Ok(backend)
}
