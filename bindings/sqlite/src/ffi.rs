//! SQLite's edge: the `sqlite3_vfs` and `sqlite3_io_methods` callbacks, each inside a panic
//! boundary, translating to `engine` calls and txvfs errors to `SQLITE_IOERR_*` codes.

use crate::engine::{self, Db, Level, LockResult, MemFile};
use libsqlite3_sys as ffi;
use std::cell::RefCell;
use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::ptr;
use std::sync::atomic::Ordering;
use std::sync::{Arc, OnceLock};

/// The few SQLite routines the VFS calls, taken from the host's `sqlite3_api_routines` (loaded
/// extension) or from the host's symbols (static registration). Never a copy of SQLite.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct HostApi {
    pub vfs_register: Option<unsafe extern "C" fn(*mut ffi::sqlite3_vfs, c_int) -> c_int>,
    pub vfs_find: Option<unsafe extern "C" fn(*const c_char) -> *mut ffi::sqlite3_vfs>,
    pub uri_parameter: Option<unsafe extern "C" fn(*const c_char, *const c_char) -> *const c_char>,
    pub mprintf: Option<unsafe extern "C" fn(*const c_char, ...) -> *mut c_char>,
    pub libversion_number: Option<unsafe extern "C" fn() -> c_int>,
}

static API: OnceLock<HostApi> = OnceLock::new();

fn api() -> &'static HostApi {
    API.get().expect("txvfs VFS used before registration")
}

thread_local! {
    static LAST_ERROR: RefCell<(c_int, String)> = const { RefCell::new((0, String::new())) };
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

/// Runs a callback body; a panic becomes `on_panic` instead of unwinding into SQLite.
fn guard(on_panic: c_int, f: impl FnOnce() -> c_int) -> c_int {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(rc) => rc,
        Err(p) => {
            let msg = p
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| p.downcast_ref::<String>().cloned())
                .unwrap_or_default();
            set_error(0, format!("txvfs: internal panic: {msg}"));
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

/// Allocates `s` with sqlite3_mprintf (for SQLITE_FCNTL_PRAGMA results and messages).
fn sqlite_string(s: &str) -> *mut c_char {
    let Some(m) = api().mprintf else { return ptr::null_mut() };
    let c = CString::new(s.replace('\0', " ")).unwrap_or_default();
    // SAFETY: "%s" with one C string argument.
    unsafe { m(c"%s".as_ptr(), c.as_ptr()) }
}

// ---------------------------------------------------------------------------------------------
// Files

enum Kind {
    Db(Db),
    Mem { file: Arc<MemFile>, name: Option<String>, delete_on_close: bool },
}

#[repr(C)]
struct TxFile {
    base: ffi::sqlite3_file,
    kind: *mut Kind,
}

unsafe fn kind<'a>(f: *mut ffi::sqlite3_file) -> &'a mut Kind {
    &mut *(*(f as *mut TxFile)).kind
}

static IO_METHODS: ffi::sqlite3_io_methods = ffi::sqlite3_io_methods {
    iVersion: 1,
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
    xFetch: None,
    xUnfetch: None,
};

const WAL_REFUSED: &str = "txvfs: WAL mode is not supported (no shared memory); every write transaction already \
commits atomically as one txvfs transaction: use journal_mode DELETE (the default), TRUNCATE, PERSIST or MEMORY";

unsafe extern "C" fn x_open(
    _vfs: *mut ffi::sqlite3_vfs,
    name: *const c_char,
    file: *mut ffi::sqlite3_file,
    flags: c_int,
    out_flags: *mut c_int,
) -> c_int {
    (*file).pMethods = ptr::null();
    guard(ffi::SQLITE_CANTOPEN, || {
        let zname = cstr(name);
        let k = if flags & ffi::SQLITE_OPEN_MAIN_DB != 0 {
            let Some(path) = zname else {
                set_error(0, "txvfs: a main database needs a name".into());
                return ffi::SQLITE_CANTOPEN;
            };
            let store_uri = uri_param(name, c"store");
            let group = uri_param(name, c"group");
            let (store, id) = match engine::open_store(store_uri.as_deref()) {
                Ok(s) => s,
                Err(e) => return fail(&e, ffi::SQLITE_CANTOPEN),
            };
            let create = flags & ffi::SQLITE_OPEN_CREATE != 0;
            let read_only = flags & ffi::SQLITE_OPEN_READONLY != 0;
            match Db::open(store, id, path, create, read_only, group.as_deref().filter(|g| !g.is_empty())) {
                Ok(db) => Kind::Db(db),
                Err(e) => return fail(&e, ffi::SQLITE_CANTOPEN),
            }
        } else if flags & ffi::SQLITE_OPEN_WAL != 0 {
            set_error(0, WAL_REFUSED.into());
            return ffi::SQLITE_CANTOPEN;
        } else {
            let journal = flags & ffi::SQLITE_OPEN_MAIN_JOURNAL != 0;
            let delete_on_close = flags & ffi::SQLITE_OPEN_DELETEONCLOSE != 0;
            Kind::Mem { file: MemFile::open(zname, journal), name: zname.map(str::to_string), delete_on_close }
        };
        let tf = file as *mut TxFile;
        (*tf).kind = Box::into_raw(Box::new(k));
        (*file).pMethods = &IO_METHODS;
        if !out_flags.is_null() {
            *out_flags = flags;
        }
        ffi::SQLITE_OK
    })
}

unsafe extern "C" fn x_close(file: *mut ffi::sqlite3_file) -> c_int {
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
            Kind::Mem { name, delete_on_close, .. } => {
                if let (Some(n), true) = (name, delete_on_close) {
                    MemFile::delete(&n);
                }
                ffi::SQLITE_OK
            }
        }
    })
}

unsafe extern "C" fn x_read(file: *mut ffi::sqlite3_file, buf: *mut c_void, amt: c_int, off: i64) -> c_int {
    guard(ffi::SQLITE_IOERR_READ, || {
        let out = std::slice::from_raw_parts_mut(buf as *mut u8, amt as usize);
        let n = match kind(file) {
            Kind::Db(db) => match db.read(off as u64, out) {
                Ok(n) => n,
                Err(e) => {
                    out.fill(0);
                    return fail(&e, ffi::SQLITE_IOERR_READ);
                }
            },
            Kind::Mem { file, .. } => file.read(off as u64, out),
        };
        // Short reads are zero-filled (done above): SQLite relies on it.
        if n < out.len() {
            ffi::SQLITE_IOERR_SHORT_READ
        } else {
            ffi::SQLITE_OK
        }
    })
}

unsafe extern "C" fn x_write(file: *mut ffi::sqlite3_file, buf: *const c_void, amt: c_int, off: i64) -> c_int {
    guard(ffi::SQLITE_IOERR_WRITE, || {
        let data = std::slice::from_raw_parts(buf as *const u8, amt as usize);
        match kind(file) {
            Kind::Db(db) => match db.write(off as u64, data) {
                Ok(()) => ffi::SQLITE_OK,
                Err(e) => fail(&e, ffi::SQLITE_IOERR_WRITE),
            },
            Kind::Mem { file, .. } => {
                file.write(off as u64, data);
                ffi::SQLITE_OK
            }
        }
    })
}

unsafe extern "C" fn x_truncate(file: *mut ffi::sqlite3_file, size: i64) -> c_int {
    guard(ffi::SQLITE_IOERR_TRUNCATE, || match kind(file) {
        Kind::Db(db) => match db.truncate(size as u64) {
            Ok(()) => ffi::SQLITE_OK,
            Err(e) => fail(&e, ffi::SQLITE_IOERR_TRUNCATE),
        },
        Kind::Mem { file, .. } => {
            file.truncate(size as u64);
            ffi::SQLITE_OK
        }
    })
}

unsafe extern "C" fn x_sync(file: *mut ffi::sqlite3_file, _flags: c_int) -> c_int {
    guard(ffi::SQLITE_IOERR_FSYNC, || {
        if let Kind::Db(db) = kind(file) {
            db.sync();
        }
        ffi::SQLITE_OK
    })
}

unsafe extern "C" fn x_file_size(file: *mut ffi::sqlite3_file, out: *mut i64) -> c_int {
    guard(ffi::SQLITE_IOERR_FSTAT, || {
        let size = match kind(file) {
            Kind::Db(db) => match db.size() {
                Ok(s) => s,
                Err(e) => return fail(&e, ffi::SQLITE_IOERR_FSTAT),
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
        },
        Kind::Mem { .. } => ffi::SQLITE_OK,
    })
}

unsafe extern "C" fn x_unlock(file: *mut ffi::sqlite3_file, level: c_int) -> c_int {
    guard(ffi::SQLITE_IOERR_UNLOCK, || match kind(file) {
        Kind::Db(db) => match db.unlock(Level::from_int(level)) {
            Ok(()) => ffi::SQLITE_OK,
            Err(e) => fail(&e, ffi::SQLITE_IOERR_UNLOCK),
        },
        Kind::Mem { .. } => ffi::SQLITE_OK,
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

/// SQLITE_FCNTL_PRAGMA: `PRAGMA journal_mode=WAL` is refused; `txvfs_group` and `txvfs_stats`
/// are txvfs's own; `synchronous` is noted (and left to SQLite).
unsafe fn pragma(db: &mut Db, arg: *mut c_void) -> c_int {
    let args = arg as *mut *mut c_char;
    let name = cstr(*args.add(1)).unwrap_or("").to_ascii_lowercase();
    let value = cstr(*args.add(2)).map(|v| v.trim_matches(|c| c == '\'' || c == '"').to_string());
    let set = |msg: &str| *args = sqlite_string(msg);
    match name.as_str() {
        "journal_mode" if value.as_deref().is_some_and(|v| v.eq_ignore_ascii_case("wal")) => {
            set(WAL_REFUSED);
            ffi::SQLITE_ERROR
        }
        "synchronous" => {
            if let Some(v) = &value {
                db.sync_off = v.eq_ignore_ascii_case("off") || v == "0";
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
        "txvfs_stats" => {
            let s = engine::stats();
            set(&format!(
                "commits={} durable={} batch={} grouped={} journals={}",
                s.commits.load(Ordering::Relaxed),
                s.durable.load(Ordering::Relaxed),
                s.batch.load(Ordering::Relaxed),
                s.grouped.load(Ordering::Relaxed),
                s.journals.load(Ordering::Relaxed)
            ));
            ffi::SQLITE_OK
        }
        _ => ffi::SQLITE_NOTFOUND,
    }
}

unsafe extern "C" fn x_file_control(file: *mut ffi::sqlite3_file, op: c_int, arg: *mut c_void) -> c_int {
    guard(ffi::SQLITE_IOERR, || {
        let Kind::Db(db) = kind(file) else { return ffi::SQLITE_NOTFOUND };
        match op {
            ffi::SQLITE_FCNTL_SYNC => {
                db.phase_one_done();
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
        let base = ffi::SQLITE_IOCAP_POWERSAFE_OVERWRITE | ffi::SQLITE_IOCAP_SAFE_APPEND | ffi::SQLITE_IOCAP_SEQUENTIAL;
        match kind(file) {
            Kind::Db(db) if db.batch_capable() => base | ffi::SQLITE_IOCAP_BATCH_ATOMIC,
            _ => base,
        }
    })
}

// ---------------------------------------------------------------------------------------------
// The VFS

unsafe extern "C" fn x_delete(_vfs: *mut ffi::sqlite3_vfs, name: *const c_char, _sync_dir: c_int) -> c_int {
    guard(ffi::SQLITE_IOERR_DELETE, || {
        if let Some(n) = cstr(name) {
            if !MemFile::delete(n) {
                return ffi::SQLITE_IOERR_DELETE_NOENT;
            }
        }
        ffi::SQLITE_OK
    })
}

unsafe extern "C" fn x_access(_vfs: *mut ffi::sqlite3_vfs, name: *const c_char, _flags: c_int, out: *mut c_int) -> c_int {
    guard(ffi::SQLITE_IOERR_ACCESS, || {
        // SQLite asks about journals, super-journals and WAL files: all of them live in memory.
        *out = cstr(name).is_some_and(MemFile::exists) as c_int;
        ffi::SQLITE_OK
    })
}

unsafe extern "C" fn x_full_pathname(_vfs: *mut ffi::sqlite3_vfs, name: *const c_char, n_out: c_int, out: *mut c_char) -> c_int {
    guard(ffi::SQLITE_CANTOPEN, || {
        let full = engine::full_path(cstr(name).unwrap_or(""));
        if full.len() + 1 > n_out as usize {
            set_error(libc::ENAMETOOLONG, format!("txvfs: path too long: {full}"));
            return ffi::SQLITE_CANTOPEN;
        }
        ptr::copy_nonoverlapping(full.as_ptr(), out as *mut u8, full.len());
        *out.add(full.len()) = 0;
        ffi::SQLITE_OK
    })
}

unsafe extern "C" fn x_randomness(_vfs: *mut ffi::sqlite3_vfs, n: c_int, out: *mut c_char) -> c_int {
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

unsafe extern "C" fn x_sleep(_vfs: *mut ffi::sqlite3_vfs, micros: c_int) -> c_int {
    std::thread::sleep(std::time::Duration::from_micros(micros.max(0) as u64));
    micros
}

/// Julian day number of the Unix epoch, in milliseconds.
const UNIX_EPOCH_JD_MS: i64 = 24405875 * 8640000;

fn now_jd_ms() -> i64 {
    let d = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    UNIX_EPOCH_JD_MS + d.as_millis() as i64
}

unsafe extern "C" fn x_current_time(_vfs: *mut ffi::sqlite3_vfs, out: *mut f64) -> c_int {
    *out = now_jd_ms() as f64 / 86_400_000.0;
    ffi::SQLITE_OK
}

unsafe extern "C" fn x_current_time_int64(_vfs: *mut ffi::sqlite3_vfs, out: *mut i64) -> c_int {
    *out = now_jd_ms();
    ffi::SQLITE_OK
}

unsafe extern "C" fn x_get_last_error(_vfs: *mut ffi::sqlite3_vfs, n: c_int, out: *mut c_char) -> c_int {
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

/// The system VFS that loads extensions (xDlOpen & co. are delegated to it).
static mut SYSTEM_VFS: *mut ffi::sqlite3_vfs = ptr::null_mut();

unsafe fn system_vfs() -> *mut ffi::sqlite3_vfs {
    *ptr::addr_of!(SYSTEM_VFS)
}

unsafe extern "C" fn x_dl_open(_vfs: *mut ffi::sqlite3_vfs, name: *const c_char) -> *mut c_void {
    let s = system_vfs();
    match (*s).xDlOpen {
        Some(f) => f(s, name),
        None => ptr::null_mut(),
    }
}

unsafe extern "C" fn x_dl_error(_vfs: *mut ffi::sqlite3_vfs, n: c_int, out: *mut c_char) {
    let s = system_vfs();
    if let Some(f) = (*s).xDlError {
        f(s, n, out)
    }
}

unsafe extern "C" fn x_dl_sym(
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

unsafe extern "C" fn x_dl_close(_vfs: *mut ffi::sqlite3_vfs, h: *mut c_void) {
    let s = system_vfs();
    if let Some(f) = (*s).xDlClose {
        f(s, h)
    }
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
        uri_parameter: std::mem::transmute::<
            Option<unsafe extern "C" fn(*const c_char, *const c_char) -> *const c_char>,
            Option<unsafe extern "C" fn(*const c_char, *const c_char) -> *const c_char>,
        >(a.uri_parameter),
        mprintf: a.mprintf,
        libversion_number: a.libversion_number,
    };
    match register(host, std::env::var_os("TXVFS_SQLITE_DEFAULT").is_some_and(|v| v == "1")) {
        ffi::SQLITE_OK => ffi::SQLITE_OK_LOAD_PERMANENTLY,
        rc => rc,
    }
}
