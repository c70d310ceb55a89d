//! The `sqlite3_io_methods` callbacks, and xOpen: a main database is a txvfs file ([`Db`]);
//! journals, super-journals and temp files live in memory ([`MemFile`]).

use super::{
    cstr, fail, fail_read, guard, host_batch_atomic, journal_store_id, set_error, sqlite_string,
    uri_param,
};
use crate::engine::{self, Db, Level, LockResult, MemFile};
use libsqlite3_sys as ffi;
use std::ffi::{c_char, c_int, c_void};
use std::ptr;
use std::sync::atomic::Ordering;
use std::sync::Arc;

enum Kind {
    Db(Box<Db>),
    /// `level`: the lock SQLite holds (memory files are private to their handle; the level is
    /// kept for SQLITE_FCNTL_LOCKSTATE).
    Mem {
        file: Arc<MemFile>,
        store_id: String,
        name: Option<String>,
        delete_on_close: bool,
        level: c_int,
        /// SQLITE_FCNTL_MMAP_SIZE's limit, only answered back: memory files lend nothing.
        mmap: i64,
    },
}

#[repr(C)]
pub(super) struct TxFile {
    base: ffi::sqlite3_file,
    kind: *mut Kind,
}

unsafe fn kind<'a>(f: *mut ffi::sqlite3_file) -> &'a mut Kind {
    &mut *(*(f as *mut TxFile)).kind
}

/// Version 3 for xFetch/xUnfetch (pages lent, `engine::lends`); version 2's shared memory
/// stays absent (no wal-index: see [`WAL_REFUSED`]).
static IO_METHODS: ffi::sqlite3_io_methods = ffi::sqlite3_io_methods {
    iVersion: 3,
    xClose: Some(x_close),
    xRead: Some(x_read),
    xWrite: Some(x_write),
    xTruncate: Some(x_truncate),
    xSync: Some(x_sync),
    xFileSize: Some(x_file_size),
    xLock: Some(x_lock),
    xUnlock: Some(x_unlock),
    xCheckReservedLock: Some(x_check_reserved_lock),
    xFileControl: Some(x_file_control),
    xSectorSize: Some(x_sector_size),
    xDeviceCharacteristics: Some(x_device_characteristics),
    xShmMap: None,
    xShmLock: None,
    xShmBarrier: None,
    xShmUnmap: None,
    xFetch: Some(x_fetch),
    xUnfetch: Some(x_unfetch),
};

/// SQLite never opens a `-wal` file on txvfs: `PRAGMA journal_mode=WAL` is answered by the
/// VFS ([`engine::wal`]) and the pager keeps its rollback journal.
const WAL_REFUSED: &str = "txvfs: no -wal file: journal_mode=WAL is handled by the VFS";

pub(super) unsafe extern "C" fn x_open(
    _vfs: *mut ffi::sqlite3_vfs,
    name: *const c_char,
    file: *mut ffi::sqlite3_file,
    flags: c_int,
    out_flags: *mut c_int,
) -> c_int {
    (*file).pMethods = ptr::null();
    guard(ffi::SQLITE_CANTOPEN, || {
        let mut opened_flags = flags;
        let zname = cstr(name);
        let k = if flags & ffi::SQLITE_OPEN_MAIN_DB != 0 {
            let Some(path) = zname.map(engine::canonical_path) else {
                set_error(0, "txvfs: a main database needs a name".into());
                return ffi::SQLITE_CANTOPEN;
            };
            let store_uri = uri_param(name, c"store");
            // Empty is no group (filtered while an Option<String>: as an Option<&str>, LLVM
            // read the length of a None and valgrind reported the read).
            let group = uri_param(name, c"group").filter(|g| !g.is_empty());
            let store = match engine::open_store(store_uri.as_deref()) {
                Ok(s) => s,
                Err(e) => return fail(&e, ffi::SQLITE_CANTOPEN),
            };
            let create = flags & ffi::SQLITE_OPEN_CREATE != 0;
            let read_only = flags & ffi::SQLITE_OPEN_READONLY != 0;
            let group = group.as_deref();
            let opened = match Db::open(store.clone(), &path, create, read_only, group) {
                // A read-only store (a snapshot): open read-only and say so, as SQLite's unix
                // VFS does on a read-only file system; SQLite then refuses writes itself.
                Err(e) if e.kind() == txvfs::ErrorKind::ReadOnly && !read_only => {
                    opened_flags = (flags
                        & !(ffi::SQLITE_OPEN_READWRITE | ffi::SQLITE_OPEN_CREATE))
                        | ffi::SQLITE_OPEN_READONLY;
                    Db::open(store, &path, false, true, group)
                }
                r => r,
            };
            match opened {
                Ok(db) => Kind::Db(Box::new(db)),
                Err(e) => return fail(&e, ffi::SQLITE_CANTOPEN),
            }
        } else if flags & ffi::SQLITE_OPEN_WAL != 0 {
            set_error(0, WAL_REFUSED.into());
            return ffi::SQLITE_CANTOPEN;
        } else {
            let journal = flags & ffi::SQLITE_OPEN_MAIN_JOURNAL != 0;
            let delete_on_close = flags & ffi::SQLITE_OPEN_DELETEONCLOSE != 0;
            // A journal belongs to its database's store (two stores may hold one name).
            let store_id = match zname {
                Some(n) if journal => journal_store_id(name, n),
                _ => String::new(),
            };
            let file = MemFile::open(&store_id, zname, journal);
            Kind::Mem {
                file,
                store_id,
                name: zname.map(str::to_string),
                delete_on_close,
                level: ffi::SQLITE_LOCK_NONE,
                mmap: 0,
            }
        };
        let tf = file as *mut TxFile;
        (*tf).kind = Box::into_raw(Box::new(k));
        (*file).pMethods = &IO_METHODS;
        if !out_flags.is_null() {
            *out_flags = opened_flags;
        }
        ffi::SQLITE_OK
    })
}

pub(super) unsafe extern "C" fn x_close(file: *mut ffi::sqlite3_file) -> c_int {
    guard(ffi::SQLITE_IOERR_CLOSE, || {
        let tf = file as *mut TxFile;
        if (*tf).kind.is_null() {
            return ffi::SQLITE_OK;
        }
        let k = Box::from_raw((*tf).kind);
        (*tf).kind = ptr::null_mut();
        match *k {
            Kind::Db(db) => match db.close() {
                Ok(()) => ffi::SQLITE_OK,
                Err(e) => fail(&e, ffi::SQLITE_IOERR_CLOSE),
            },
            Kind::Mem { name, store_id, delete_on_close, .. } => {
                if let (Some(n), true) = (name, delete_on_close) {
                    MemFile::delete(&store_id, &n);
                }
                ffi::SQLITE_OK
            }
        }
    })
}

unsafe extern "C" fn x_read(
    file: *mut ffi::sqlite3_file,
    buf: *mut c_void,
    amt: c_int,
    off: i64,
) -> c_int {
    guard(ffi::SQLITE_IOERR_READ, || {
        let out = std::slice::from_raw_parts_mut(buf as *mut u8, amt as usize);
        let n = match kind(file) {
            Kind::Db(db) => match db.read(off as u64, out) {
                Ok(n) => n,
                Err(e) => {
                    out.fill(0);
                    return fail_read(&e, ffi::SQLITE_IOERR_READ);
                }
            },
            Kind::Mem { file, .. } => match file.read(off as u64, out) {
                Ok(n) => n,
                Err(e) => return io_fail(&e, ffi::SQLITE_IOERR_READ),
            },
        };
        // Short reads are zero-filled (done above): SQLite relies on it.
        if n < out.len() {
            ffi::SQLITE_IOERR_SHORT_READ
        } else {
            ffi::SQLITE_OK
        }
    })
}

/// xFetch: a page lent from the store's read cache, or `*pp = NULL` (SQLite reads it with
/// xRead): see [`Db::fetch`]. Journals and temp files never lend.
unsafe extern "C" fn x_fetch(
    file: *mut ffi::sqlite3_file,
    off: i64,
    amt: c_int,
    pp: *mut *mut c_void,
) -> c_int {
    *pp = ptr::null_mut();
    guard(ffi::SQLITE_IOERR_MMAP, || {
        if let (Kind::Db(db), Ok(off), Ok(amt)) =
            (kind(file), u64::try_from(off), usize::try_from(amt))
        {
            if let Some(p) = db.fetch(off, amt) {
                *pp = p as *mut c_void;
            }
        }
        ffi::SQLITE_OK
    })
}

/// xUnfetch: SQLite gives a lent page back. With a NULL page SQLite says a mapping of the
/// file may be stale: lends are not a mapping (each is exact at its fetch and lives until its
/// own xUnfetch), so there is nothing to drop.
unsafe extern "C" fn x_unfetch(file: *mut ffi::sqlite3_file, _off: i64, p: *mut c_void) -> c_int {
    guard(ffi::SQLITE_IOERR_MMAP, || {
        if let (Kind::Db(db), false) = (kind(file), p.is_null()) {
            if !db.unfetch(p as *const u8) {
                set_error(0, "txvfs: xUnfetch of a page that was not lent".into());
                return ffi::SQLITE_IOERR_MMAP;
            }
        }
        ffi::SQLITE_OK
    })
}

unsafe extern "C" fn x_write(
    file: *mut ffi::sqlite3_file,
    buf: *const c_void,
    amt: c_int,
    off: i64,
) -> c_int {
    guard(ffi::SQLITE_IOERR_WRITE, || {
        let data = std::slice::from_raw_parts(buf as *const u8, amt as usize);
        match kind(file) {
            Kind::Db(db) => match db.write(off as u64, data) {
                Ok(()) => ffi::SQLITE_OK,
                Err(e) => fail(&e, ffi::SQLITE_IOERR_WRITE),
            },
            Kind::Mem { file, .. } => match file.write(off as u64, data) {
                Ok(()) => ffi::SQLITE_OK,
                Err(e) => io_fail(&e, ffi::SQLITE_IOERR_WRITE),
            },
        }
    })
}

unsafe extern "C" fn x_truncate(file: *mut ffi::sqlite3_file, size: i64) -> c_int {
    guard(ffi::SQLITE_IOERR_TRUNCATE, || match kind(file) {
        Kind::Db(db) => match db.truncate(size as u64) {
            Ok(()) => ffi::SQLITE_OK,
            Err(e) => fail(&e, ffi::SQLITE_IOERR_TRUNCATE),
        },
        Kind::Mem { file, .. } => match file.truncate(size as u64) {
            Ok(()) => ffi::SQLITE_OK,
            Err(e) => io_fail(&e, ffi::SQLITE_IOERR_TRUNCATE),
        },
    })
}

/// A process-private file's I/O error (its temp file failed and memory could not take it).
fn io_fail(e: &std::io::Error, ioerr: c_int) -> c_int {
    set_error(e.raw_os_error().unwrap_or(0), format!("txvfs: journal or temp file: {e}"));
    ioerr
}

unsafe extern "C" fn x_sync(file: *mut ffi::sqlite3_file, _flags: c_int) -> c_int {
    guard(ffi::SQLITE_IOERR_FSYNC, || match kind(file) {
        Kind::Db(db) => match db.sync() {
            Ok(()) => ffi::SQLITE_OK,
            Err(e) => fail(&e, ffi::SQLITE_IOERR_FSYNC),
        },
        Kind::Mem { .. } => ffi::SQLITE_OK,
    })
}

unsafe extern "C" fn x_file_size(file: *mut ffi::sqlite3_file, out: *mut i64) -> c_int {
    guard(ffi::SQLITE_IOERR_FSTAT, || {
        let size = match kind(file) {
            Kind::Db(db) => match db.size() {
                Ok(s) => s,
                Err(e) => return fail_read(&e, ffi::SQLITE_IOERR_FSTAT),
            },
            Kind::Mem { file, .. } => file.size(),
        };
        *out = size as i64;
        ffi::SQLITE_OK
    })
}

unsafe extern "C" fn x_lock(file: *mut ffi::sqlite3_file, level: c_int) -> c_int {
    guard(ffi::SQLITE_IOERR_LOCK, || match kind(file) {
        Kind::Db(db) => match db.lock(Level::from_int(level)) {
            LockResult::Ok => ffi::SQLITE_OK,
            LockResult::Busy => ffi::SQLITE_BUSY,
            LockResult::BusySnapshot => ffi::SQLITE_BUSY_SNAPSHOT,
            LockResult::Failed(e) => fail(&e, ffi::SQLITE_IOERR_LOCK),
        },
        Kind::Mem { level: l, .. } => {
            *l = (*l).max(level);
            ffi::SQLITE_OK
        }
    })
}

unsafe extern "C" fn x_unlock(file: *mut ffi::sqlite3_file, level: c_int) -> c_int {
    guard(ffi::SQLITE_IOERR_UNLOCK, || match kind(file) {
        Kind::Db(db) => match db.unlock(Level::from_int(level)) {
            Ok(()) => ffi::SQLITE_OK,
            Err(e) => fail(&e, ffi::SQLITE_IOERR_UNLOCK),
        },
        Kind::Mem { level: l, .. } => {
            *l = (*l).min(level);
            ffi::SQLITE_OK
        }
    })
}

unsafe extern "C" fn x_check_reserved_lock(file: *mut ffi::sqlite3_file, out: *mut c_int) -> c_int {
    guard(ffi::SQLITE_IOERR_CHECKRESERVEDLOCK, || {
        *out = match kind(file) {
            Kind::Db(db) => db.reserved_by_anyone() as c_int,
            Kind::Mem { .. } => 0,
        };
        ffi::SQLITE_OK
    })
}

/// SQLITE_FCNTL_PRAGMA: `PRAGMA journal_mode` WAL and OFF are answered here (see
/// [`engine::wal`]); `txvfs_group`, `txvfs_files`, `txvfs_stats` and `txvfs_last_error` are txvfs's own; `synchronous` and
/// `locking_mode` are noted (and left to SQLite).
unsafe fn pragma(db: &mut Db, arg: *mut c_void) -> c_int {
    let args = arg as *mut *mut c_char;
    let name = cstr(*args.add(1)).unwrap_or("").to_ascii_lowercase();
    let value = cstr(*args.add(2)).map(|v| v.trim_matches(|c| c == '\'' || c == '"').to_string());
    let set = |msg: &str| *args = sqlite_string(msg);
    match name.as_str() {
        "journal_mode" => match db.journal_mode(value.as_deref()) {
            Ok(Some(answer)) => {
                set(answer);
                // sqlite3_mprintf failed: SQLite would answer an empty row, not an error.
                if (*args).is_null() {
                    return ffi::SQLITE_NOMEM;
                }
                ffi::SQLITE_OK
            }
            Ok(None) => ffi::SQLITE_NOTFOUND,
            Err(e) => {
                set(&format!("txvfs: {e}"));
                ffi::SQLITE_ERROR
            }
        },
        "locking_mode" => {
            if let Some(v) = &value {
                db.set_exclusive_mode(v.eq_ignore_ascii_case("exclusive"));
            }
            ffi::SQLITE_NOTFOUND
        }
        "synchronous" => {
            if let Some(v) = &value {
                db.set_sync_off(v.eq_ignore_ascii_case("off") || v == "0");
            }
            ffi::SQLITE_NOTFOUND
        }
        "txvfs_group" => {
            if let Some(v) = value {
                if let Err(e) = db.join_group(&v) {
                    set(&format!("txvfs: {e}"));
                    return ffi::SQLITE_ERROR;
                }
            }
            set(&db.group_name().unwrap_or_default());
            ffi::SQLITE_OK
        }
        "txvfs_files" => match db.files_token() {
            Ok(token) => {
                set(&token);
                if (*args).is_null() {
                    return ffi::SQLITE_NOMEM;
                }
                ffi::SQLITE_OK
            }
            Err(e) => {
                set(&format!("txvfs: {e}"));
                ffi::SQLITE_ERROR
            }
        },
        "txvfs_last_error" => {
            // What SQLite's messages leave out ("disk I/O error"): the last txvfs error on
            // this thread, with its errno (`sqlite3_system_errno` gives the number alone).
            let (errno, msg) = super::LAST_ERROR.with(|e| e.borrow().clone());
            set(&if msg.is_empty() { String::new() } else { format!("[Errno {errno}] {msg}") });
            ffi::SQLITE_OK
        }
        "txvfs_stats" => {
            let s = engine::stats();
            set(&format!(
                "commits={} durable={} batch={} grouped={} journals={} lends={} lent={} round_trips={}",
                s.commits.load(Ordering::Relaxed),
                s.durable.load(Ordering::Relaxed),
                s.batch.load(Ordering::Relaxed),
                s.grouped.load(Ordering::Relaxed),
                s.journals.load(Ordering::Relaxed),
                s.lends.load(Ordering::Relaxed),
                s.lent.load(Ordering::Relaxed),
                txvfs::round_trips()
            ));
            ffi::SQLITE_OK
        }
        _ => ffi::SQLITE_NOTFOUND,
    }
}

unsafe extern "C" fn x_file_control(
    file: *mut ffi::sqlite3_file,
    op: c_int,
    arg: *mut c_void,
) -> c_int {
    guard(ffi::SQLITE_IOERR, || {
        let db = match kind(file) {
            Kind::Db(db) => db,
            Kind::Mem { level, mmap, .. } => {
                return match op {
                    ffi::SQLITE_FCNTL_MMAP_SIZE => {
                        let p = arg as *mut i64;
                        let new = (*p).min(engine::lends::MAX_MMAP_SIZE as i64);
                        (*p, *mmap) = (*mmap, if new >= 0 { new } else { *mmap });
                        ffi::SQLITE_OK
                    }
                    ffi::SQLITE_FCNTL_LOCKSTATE => {
                        *(arg as *mut c_int) = *level;
                        ffi::SQLITE_OK
                    }
                    ffi::SQLITE_FCNTL_VFSNAME => {
                        *(arg as *mut *mut c_char) = sqlite_string("txvfs");
                        ffi::SQLITE_OK
                    }
                    _ => ffi::SQLITE_NOTFOUND,
                }
            }
        };
        match op {
            ffi::SQLITE_FCNTL_SYNC => {
                // The argument names the super-journal of a multi-database commit, if any.
                db.phase_one_done(cstr(arg as *const c_char));
                ffi::SQLITE_OK
            }
            ffi::SQLITE_FCNTL_LOCKSTATE => {
                *(arg as *mut c_int) = db.level() as c_int;
                ffi::SQLITE_OK
            }
            ffi::SQLITE_FCNTL_COMMIT_PHASETWO => match db.commit() {
                Ok(()) => ffi::SQLITE_OK,
                Err(e) => fail(&e, ffi::SQLITE_IOERR_WRITE),
            },
            ffi::SQLITE_FCNTL_BEGIN_ATOMIC_WRITE => {
                db.begin_batch();
                ffi::SQLITE_OK
            }
            ffi::SQLITE_FCNTL_COMMIT_ATOMIC_WRITE => match db.commit_batch() {
                Ok(()) => ffi::SQLITE_OK,
                Err(e) => fail(&e, ffi::SQLITE_IOERR_COMMIT_ATOMIC),
            },
            ffi::SQLITE_FCNTL_ROLLBACK_ATOMIC_WRITE => {
                db.rollback_batch();
                ffi::SQLITE_OK
            }
            ffi::SQLITE_FCNTL_MMAP_SIZE => {
                // In: the new limit (negative: only asking); out: the limit before, as the
                // unix VFS answers (PRAGMA mmap_size reads it back).
                let p = arg as *mut i64;
                let old = db.mmap_limit(u64::try_from(*p).ok());
                *p = old as i64;
                ffi::SQLITE_OK
            }
            ffi::SQLITE_FCNTL_PRAGMA => pragma(db, arg),
            ffi::SQLITE_FCNTL_VFSNAME => {
                *(arg as *mut *mut c_char) = sqlite_string("txvfs");
                ffi::SQLITE_OK
            }
            _ => ffi::SQLITE_NOTFOUND,
        }
    })
}

unsafe extern "C" fn x_sector_size(_file: *mut ffi::sqlite3_file) -> c_int {
    4096
}

unsafe extern "C" fn x_device_characteristics(file: *mut ffi::sqlite3_file) -> c_int {
    guard(0, || {
        let base = ffi::SQLITE_IOCAP_POWERSAFE_OVERWRITE
            | ffi::SQLITE_IOCAP_SAFE_APPEND
            | ffi::SQLITE_IOCAP_SEQUENTIAL;
        match kind(file) {
            Kind::Db(db) if db.batch_capable() && host_batch_atomic() => {
                base | ffi::SQLITE_IOCAP_BATCH_ATOMIC
            }
            _ => base,
        }
    })
}
