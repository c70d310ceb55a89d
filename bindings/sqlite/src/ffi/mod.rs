//! SQLite's edge: the `sqlite3_vfs` ([`vfs`]) and `sqlite3_io_methods` ([`file`]) callbacks,
//! each inside a panic boundary, translating to `engine` calls and txvfs errors to
//! `SQLITE_IOERR_*` codes. This module holds what both share and the registration.

mod file;
mod vfs;

use crate::engine;
use file::{x_open, TxFile};
use libsqlite3_sys as ffi;
use std::cell::RefCell;
use std::ffi::{c_char, c_int, CStr, CString};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::ptr;
use std::sync::OnceLock;
use vfs::*;

/// The few SQLite routines the VFS calls, taken from the host's `sqlite3_api_routines` (loaded
/// extension) or from the host's symbols (static registration). Never a copy of SQLite.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct HostApi {
    /// `sqlite3_vfs_register`
    pub vfs_register: Option<unsafe extern "C" fn(*mut ffi::sqlite3_vfs, c_int) -> c_int>,
    /// `sqlite3_vfs_find`
    pub vfs_find: Option<unsafe extern "C" fn(*const c_char) -> *mut ffi::sqlite3_vfs>,
    /// `sqlite3_uri_parameter`
    pub uri_parameter: Option<unsafe extern "C" fn(*const c_char, *const c_char) -> *const c_char>,
    /// `sqlite3_mprintf` (error messages SQLite frees)
    pub mprintf: Option<unsafe extern "C" fn(*const c_char, ...) -> *mut c_char>,
    /// `sqlite3_libversion_number`
    pub libversion_number: Option<unsafe extern "C" fn() -> c_int>,
    /// `sqlite3_compileoption_used`
    pub compileoption_used: Option<unsafe extern "C" fn(*const c_char) -> c_int>,
}

static API: OnceLock<HostApi> = OnceLock::new();

fn api() -> &'static HostApi {
    API.get().expect("txvfs VFS used before registration")
}

thread_local! {
    pub(crate) static LAST_ERROR: RefCell<(c_int, String)> = const { RefCell::new((0, String::new())) };
}

fn set_error(errno: c_int, msg: String) {
    LAST_ERROR.with(|e| *e.borrow_mut() = (errno, msg));
}

/// Maps a txvfs error to an SQLite code (`ioerr` is the operation's `SQLITE_IOERR_*`) and
/// keeps its message for xGetLastError.
fn fail(e: &txvfs::Error, ioerr: c_int) -> c_int {
    set_error(e.code(), format!("txvfs: {e}"));
    match e.kind() {
        txvfs::ErrorKind::NoSpace => ffi::SQLITE_FULL,
        _ => ioerr,
    }
}

/// [`fail`] for reads (xRead, xFileSize): a retryable error there means the read
/// transaction's snapshot is gone (see `engine::snapshot`), answered as SQLite's WAL mode
/// answers a stale snapshot, `SQLITE_BUSY_SNAPSHOT`: end the transaction and run it again.
fn fail_read(e: &txvfs::Error, ioerr: c_int) -> c_int {
    if e.is_retryable() {
        set_error(e.code(), format!("txvfs: {e}"));
        return ffi::SQLITE_BUSY_SNAPSHOT;
    }
    fail(e, ioerr)
}

/// The identity of the store whose database a journal name (`<db>-journal`, `<db>-wal`)
/// belongs to: from the `store=` parameter SQLite keeps with the names it derives from a
/// database's, else the store that database was opened from. Never opens a store that is not
/// open yet (SQLite also asks about journal names it read from a super-journal, which carry
/// no parameters). "" when unknown.
fn journal_store_id(name: *const c_char, n: &str) -> String {
    if let Some(u) = uri_param(name, c"store") {
        return engine::open_store(Some(&u)).map(|s| s.id.clone()).unwrap_or_default();
    }
    let db = n.strip_suffix("-journal").or_else(|| n.strip_suffix("-wal")).unwrap_or(n);
    engine::known_store(&engine::canonical_path(db)).map(|s| s.id.clone()).unwrap_or_default()
}

/// Runs a callback body; a panic becomes `on_panic` instead of unwinding into SQLite.
fn guard(on_panic: c_int, f: impl FnOnce() -> c_int) -> c_int {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(rc) => rc,
        Err(p) => {
            set_error(0, format!("txvfs: {}", txvfs::error::panic_error(&*p).message()));
            on_panic
        }
    }
}

unsafe fn cstr<'a>(p: *const c_char) -> Option<&'a str> {
    if p.is_null() {
        None
    } else {
        CStr::from_ptr(p).to_str().ok()
    }
}

fn uri_param(name: *const c_char, key: &CStr) -> Option<String> {
    let f = api().uri_parameter?;
    // SAFETY: `name` is a filename SQLite passed to xOpen, the form uri_parameter accepts.
    unsafe { cstr(f(name, key.as_ptr())).map(str::to_string) }
}

/// True when the host SQLite was built with SQLITE_ENABLE_BATCH_ATOMIC_WRITE: only then does it
/// bracket a transaction's writes with SQLITE_FCNTL_BEGIN/COMMIT_ATOMIC_WRITE, so only then is
/// SQLITE_IOCAP_BATCH_ATOMIC true (claiming it elsewhere makes SQLite and its tests assume
/// atomic batches that never happen).
fn host_batch_atomic() -> bool {
    static B: OnceLock<bool> = OnceLock::new();
    *B.get_or_init(|| match api().compileoption_used {
        // SAFETY: a NUL-terminated option name.
        Some(f) => unsafe { f(c"ENABLE_BATCH_ATOMIC_WRITE".as_ptr()) != 0 },
        None => false,
    })
}

/// Allocates `s` with sqlite3_mprintf (for SQLITE_FCNTL_PRAGMA results and messages).
fn sqlite_string(s: &str) -> *mut c_char {
    let Some(m) = api().mprintf else { return ptr::null_mut() };
    let c = CString::new(s.replace('\0', " ")).unwrap_or_default();
    // SAFETY: "%s" with one C string argument.
    unsafe { m(c"%s".as_ptr(), c.as_ptr()) }
}

/// The system VFS that loads extensions (xDlOpen & co. are delegated to it).
static mut SYSTEM_VFS: *mut ffi::sqlite3_vfs = ptr::null_mut();

unsafe fn system_vfs() -> *mut ffi::sqlite3_vfs {
    *ptr::addr_of!(SYSTEM_VFS)
}

struct VfsCell(std::cell::UnsafeCell<ffi::sqlite3_vfs>);
// SAFETY: SQLite owns the struct's `pNext` link under its own mutex; we write it only before
// the first registration.
unsafe impl Sync for VfsCell {}

static VFS: VfsCell = VfsCell(std::cell::UnsafeCell::new(ffi::sqlite3_vfs {
    iVersion: 2,
    szOsFile: std::mem::size_of::<TxFile>() as c_int,
    mxPathname: 1024,
    pNext: ptr::null_mut(),
    zName: c"txvfs".as_ptr(),
    pAppData: ptr::null_mut(),
    xOpen: Some(x_open),
    xDelete: Some(x_delete),
    xAccess: Some(x_access),
    xFullPathname: Some(x_full_pathname),
    xDlOpen: Some(x_dl_open),
    xDlError: Some(x_dl_error),
    xDlSym: Some(x_dl_sym),
    xDlClose: Some(x_dl_close),
    xRandomness: Some(x_randomness),
    xSleep: Some(x_sleep),
    xCurrentTime: Some(x_current_time),
    xGetLastError: Some(x_get_last_error),
    xCurrentTimeInt64: Some(x_current_time_int64),
    xSetSystemCall: None,
    xGetSystemCall: None,
    xNextSystemCall: None,
}));

/// Registers the VFS with the host SQLite whose routines are `host`. Safe to call again and
/// again (SQLite re-links an already registered VFS).
pub(crate) fn register(host: HostApi, make_default: bool) -> c_int {
    guard(ffi::SQLITE_ERROR, || {
        let (Some(reg), Some(find)) = (host.vfs_register, host.vfs_find) else {
            return ffi::SQLITE_ERROR;
        };
        let api = API.get_or_init(|| host);
        // SAFETY: plain calls into the host SQLite.
        unsafe {
            if system_vfs().is_null() {
                let mut sys = find(ptr::null());
                if !sys.is_null() && sys == VFS.0.get() {
                    sys = find(c"unix".as_ptr());
                }
                if sys.is_null() {
                    return ffi::SQLITE_ERROR;
                }
                *ptr::addr_of_mut!(SYSTEM_VFS) = sys;
            }
            let _ = api;
            reg(VFS.0.get(), make_default as c_int)
        }
    })
}

/// Loadable-extension entry point (`sqlite3_txvfs_init`, also exported under the name SQLite
/// derives from the file name, `sqlite3_txvfssqlite_init`): registers VFS `txvfs` (not as the
/// default) and asks SQLite to keep the library loaded.
///
/// # Safety
/// Called by SQLite's extension loader with a valid routines table.
pub(crate) unsafe fn extension_init(api: *const ffi::sqlite3_api_routines) -> c_int {
    if api.is_null() {
        return ffi::SQLITE_ERROR;
    }
    let a = &*api;
    let host = HostApi {
        vfs_register: a.vfs_register,
        vfs_find: a.vfs_find,
        uri_parameter: a.uri_parameter,
        mprintf: a.mprintf,
        libversion_number: a.libversion_number,
        compileoption_used: a.compileoption_used,
    };
    match register(host, std::env::var_os("TXVFS_SQLITE_DEFAULT").is_some_and(|v| v == "1")) {
        ffi::SQLITE_OK => ffi::SQLITE_OK_LOAD_PERMANENTLY,
        rc => rc,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lost_locks_and_snapshots_are_an_ioerr_whose_system_errno_is_eio() {
        // Issue 37: the core reports a lost lock or a snapshot lost with its owner as EIO (as
        // NFS reports lost locks); SQLite gets the operation's SQLITE_IOERR_* and, through
        // xGetLastError (sqlite3_system_errno), EIO and the message.
        let kind = txvfs::ErrorKind::from_code(libc::EIO).expect("EIO is one of the core's kinds");
        let e = txvfs::Error::new(kind, "this handle's locks on inode 7 were lost");
        assert_eq!(fail(&e, ffi::SQLITE_IOERR_READ), ffi::SQLITE_IOERR_READ);
        let mut buf = [0 as c_char; 128];
        // SAFETY: the VFS argument is not used; `buf` has the length given.
        let errno =
            unsafe { x_get_last_error(ptr::null_mut(), buf.len() as c_int, buf.as_mut_ptr()) };
        assert_eq!(errno, libc::EIO);
        // SAFETY: x_get_last_error wrote a NUL-terminated string into `buf`.
        let msg = unsafe { CStr::from_ptr(buf.as_ptr()) }.to_str().unwrap();
        assert_eq!(msg, "txvfs: this handle's locks on inode 7 were lost");
    }
}
