//! The `sqlite3_vfs` methods other than xOpen. xDelete and xAccess see the store's files
//! (a database name belongs to the store it was opened from, see [`engine::store_for_name`])
//! and the in-memory journals; deleting a super-journal is SQLite's commit point for a
//! transaction over attached databases.

use super::{cstr, fail, guard, journal_store_id, set_error, system_vfs, LAST_ERROR};
use crate::engine::{self, commit, MemFile};
use libsqlite3_sys as ffi;
use std::ffi::{c_char, c_int, c_void};
use std::ptr;
use txvfs::{ErrorKind, FileSystem};

/// The memory-file namespace of side file `n`: a journal's database store, else none.
unsafe fn side_store_id(name: *const c_char, n: &str) -> String {
    if n.ends_with("-journal") || n.ends_with("-wal") {
        journal_store_id(name, n)
    } else {
        String::new()
    }
}

pub(super) unsafe extern "C" fn x_delete(
    _vfs: *mut ffi::sqlite3_vfs,
    name: *const c_char,
    sync_dir: c_int,
) -> c_int {
    guard(ffi::SQLITE_IOERR_DELETE, || {
        let Some(n) = cstr(name) else { return ffi::SQLITE_IOERR_DELETE_NOENT };
        if engine::is_side_file(n) {
            // A super-journal's deletion commits the databases that named it.
            if let Err(e) = commit::commit_super(n) {
                return fail(&e, ffi::SQLITE_IOERR_DELETE);
            }
            return match MemFile::delete(&side_store_id(name, n), n) {
                true => ffi::SQLITE_OK,
                false => ffi::SQLITE_IOERR_DELETE_NOENT,
            };
        }
        if MemFile::delete("", n) {
            return ffi::SQLITE_OK;
        }
        let path = engine::canonical_path(n);
        let s = match engine::store_for_name(&path) {
            Ok(Some(s)) => s,
            Ok(None) => return ffi::SQLITE_IOERR_DELETE_NOENT,
            Err(e) => return fail(&e, ffi::SQLITE_IOERR_DELETE),
        };
        match s.store.unlink(&path) {
            Ok(()) if sync_dir != 0 => match s.store.sync() {
                Ok(()) => ffi::SQLITE_OK,
                Err(e) => fail(&e, ffi::SQLITE_IOERR_DIR_FSYNC),
            },
            Ok(()) => ffi::SQLITE_OK,
            Err(e) if matches!(e.kind(), ErrorKind::NotFound) => ffi::SQLITE_IOERR_DELETE_NOENT,
            Err(e) => fail(&e, ffi::SQLITE_IOERR_DELETE),
        }
    })
}

pub(super) unsafe extern "C" fn x_access(
    _vfs: *mut ffi::sqlite3_vfs,
    name: *const c_char,
    _flags: c_int,
    out: *mut c_int,
) -> c_int {
    guard(ffi::SQLITE_IOERR_ACCESS, || {
        *out = 0;
        let Some(n) = cstr(name) else { return ffi::SQLITE_OK };
        if engine::is_side_file(n) {
            // Journals, super-journals and WAL files live in memory only.
            *out = MemFile::exists(&side_store_id(name, n), n) as c_int;
            return ffi::SQLITE_OK;
        }
        if MemFile::exists("", n) {
            *out = 1;
            return ffi::SQLITE_OK;
        }
        let path = engine::canonical_path(n);
        match engine::store_for_name(&path)
            .and_then(|s| s.map(|s| s.store.exists(&path)).transpose())
        {
            Ok(e) => *out = e.unwrap_or(false) as c_int,
            Err(e) => return fail(&e, ffi::SQLITE_IOERR_ACCESS),
        }
        ffi::SQLITE_OK
    })
}

pub(super) unsafe extern "C" fn x_full_pathname(
    _vfs: *mut ffi::sqlite3_vfs,
    name: *const c_char,
    n_out: c_int,
    out: *mut c_char,
) -> c_int {
    guard(ffi::SQLITE_CANTOPEN, || {
        let full = engine::canonical_path(cstr(name).unwrap_or(""));
        if full.len() + 1 > n_out as usize {
            set_error(libc::ENAMETOOLONG, format!("txvfs: path too long: {full}"));
            return ffi::SQLITE_CANTOPEN;
        }
        ptr::copy_nonoverlapping(full.as_ptr(), out as *mut u8, full.len());
        *out.add(full.len()) = 0;
        ffi::SQLITE_OK
    })
}

/// Delegated to the host's default VFS: real randomness in production, and the testfixture's
/// deterministic bytes under SQLITE_TEST (what SQLite's tests expect).
pub(super) unsafe extern "C" fn x_randomness(
    _vfs: *mut ffi::sqlite3_vfs,
    n: c_int,
    out: *mut c_char,
) -> c_int {
    let s = system_vfs();
    if let Some(f) = (*s).xRandomness {
        return f(s, n, out);
    }
    guard(0, || {
        let buf = std::slice::from_raw_parts_mut(out as *mut u8, n as usize);
        let mut done = 0;
        while done < buf.len() {
            let r = libc::getrandom(buf[done..].as_mut_ptr() as *mut c_void, buf.len() - done, 0);
            if r <= 0 {
                break;
            }
            done += r as usize;
        }
        done as c_int
    })
}

pub(super) unsafe extern "C" fn x_sleep(_vfs: *mut ffi::sqlite3_vfs, micros: c_int) -> c_int {
    std::thread::sleep(std::time::Duration::from_micros(micros.max(0) as u64));
    micros
}

/// Julian day number of the Unix epoch, in milliseconds.
const UNIX_EPOCH_JD_MS: i64 = 24405875 * 8640000;

fn now_jd_ms() -> i64 {
    let d = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    UNIX_EPOCH_JD_MS + d.as_millis() as i64
}

pub(super) unsafe extern "C" fn x_current_time(
    _vfs: *mut ffi::sqlite3_vfs,
    out: *mut f64,
) -> c_int {
    *out = now_jd_ms() as f64 / 86_400_000.0;
    ffi::SQLITE_OK
}

pub(super) unsafe extern "C" fn x_current_time_int64(
    _vfs: *mut ffi::sqlite3_vfs,
    out: *mut i64,
) -> c_int {
    *out = now_jd_ms();
    ffi::SQLITE_OK
}

pub(super) unsafe extern "C" fn x_get_last_error(
    _vfs: *mut ffi::sqlite3_vfs,
    n: c_int,
    out: *mut c_char,
) -> c_int {
    guard(0, || {
        let (errno, msg) = LAST_ERROR.with(|e| e.borrow().clone());
        if n > 0 && !out.is_null() {
            let len = msg.len().min(n as usize - 1);
            ptr::copy_nonoverlapping(msg.as_ptr(), out as *mut u8, len);
            *out.add(len) = 0;
        }
        errno
    })
}

pub(super) unsafe extern "C" fn x_dl_open(
    _vfs: *mut ffi::sqlite3_vfs,
    name: *const c_char,
) -> *mut c_void {
    let s = system_vfs();
    match (*s).xDlOpen {
        Some(f) => f(s, name),
        None => ptr::null_mut(),
    }
}

pub(super) unsafe extern "C" fn x_dl_error(
    _vfs: *mut ffi::sqlite3_vfs,
    n: c_int,
    out: *mut c_char,
) {
    let s = system_vfs();
    if let Some(f) = (*s).xDlError {
        f(s, n, out)
    }
}

pub(super) unsafe extern "C" fn x_dl_sym(
    _vfs: *mut ffi::sqlite3_vfs,
    h: *mut c_void,
    name: *const c_char,
) -> Option<unsafe extern "C" fn(*mut ffi::sqlite3_vfs, *mut c_void, *const c_char)> {
    let s = system_vfs();
    match (*s).xDlSym {
        Some(f) => f(s, h, name),
        None => None,
    }
}

pub(super) unsafe extern "C" fn x_dl_close(_vfs: *mut ffi::sqlite3_vfs, h: *mut c_void) {
    let s = system_vfs();
    if let Some(f) = (*s).xDlClose {
        f(s, h)
    }
}
