//! FoundationDB's C client (`libfdb_c`, API version 7.3), loaded at run time.
//!
//! The library is opened with `dlopen` on the first `fdb:` open, so one build of every
//! artifact (the C library, the Python wheel, the SQLite extension, the CLI, the FUSE mount)
//! serves users with and without FoundationDB, as FoundationDB's own Python binding does.
//! Search order: the file named by `TXVFS_FDB_LIB`; otherwise `libfdb_c.so` on the loader's
//! path, then `$TXVFS_FDB_BIN_DIR/libfdb_c.so`. The library is never unloaded.
//!
//! The declarations follow `fdb_c.h` of FoundationDB 7.3.

use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::sync::OnceLock;

/// `fdb_error_t`: 0 for success, else one of FoundationDB's error codes.
pub type FdbErr = c_int;
/// `fdb_bool_t`.
pub type FdbBool = c_int;
/// An opaque `FDBFuture*`.
pub type FutureP = *mut c_void;
/// An opaque `FDBDatabase*`.
pub type DatabaseP = *mut c_void;
/// An opaque `FDBTransaction*`.
pub type TxnP = *mut c_void;
/// `FDBCallback`: called by the network thread when a future is ready (at most once).
pub type Callback = unsafe extern "C" fn(FutureP, *mut c_void);

/// The API version txvfs is written against (`FDB_API_VERSION`).
pub const API_VERSION: c_int = 730;

/// `FDBKeyValue`, declared under `#pragma pack(4)` in `fdb_c.h`: the pointers of consecutive
/// elements are only 4-byte aligned, so the fields must be read unaligned (`packed`).
#[repr(C, packed(4))]
#[derive(Clone, Copy)]
pub struct KeyValue {
    pub key: *const u8,
    pub key_length: c_int,
    pub value: *const u8,
    pub value_length: c_int,
}

impl KeyValue {
    /// The key, valid while the future that returned it lives.
    ///
    /// # Safety
    /// The future that owns the array must not have been destroyed.
    pub unsafe fn key<'a>(&self) -> &'a [u8] {
        let (p, n) = (self.key, self.key_length);
        slice(p, n)
    }
    /// The value, valid while the future that returned it lives.
    ///
    /// # Safety
    /// The future that owns the array must not have been destroyed.
    pub unsafe fn value<'a>(&self) -> &'a [u8] {
        let (p, n) = (self.value, self.value_length);
        slice(p, n)
    }
}

/// A byte slice from a pointer and length given by the library (null or 0: empty).
///
/// # Safety
/// `p` must point to `n` readable bytes that outlive `'a`.
pub unsafe fn slice<'a>(p: *const u8, n: c_int) -> &'a [u8] {
    if p.is_null() || n <= 0 {
        &[]
    } else {
        std::slice::from_raw_parts(p, n as usize)
    }
}

/// Option, mutation and streaming-mode codes from `fdb_c_options.g.h`.
pub mod opt {
    use std::ffi::c_int;
    pub const TR_AUTOMATIC_IDEMPOTENCY: c_int = 505;
    pub const TR_TIMEOUT: c_int = 500;
    pub const STREAMING_WANT_ALL: c_int = -2;
    pub const MUTATION_ADD: c_int = 2;
    pub const MUTATION_MAX: c_int = 12;
    pub const MUTATION_SET_VERSIONSTAMPED_KEY: c_int = 14;
    pub const MUTATION_SET_VERSIONSTAMPED_VALUE: c_int = 15;
    pub const CONFLICT_RANGE_READ: c_int = 0;
    pub const PREDICATE_RETRYABLE: c_int = 50000;
    pub const PREDICATE_MAYBE_COMMITTED: c_int = 50001;
}

macro_rules! api {
    ($($name:ident: fn($($arg:ty),*) $(-> $ret:ty)?;)*) => {
        /// The functions of `libfdb_c` that txvfs calls, resolved once.
        #[allow(non_snake_case)]
        pub struct Api {
            $(pub $name: unsafe extern "C" fn($($arg),*) $(-> $ret)?,)*
        }

        impl Api {
            /// Resolves every function in the library opened as `handle`.
            fn resolve(handle: *mut c_void, path: &str) -> Result<Api, String> {
                Ok(Api {
                    $($name: {
                        let name = concat!(stringify!($name), "\0");
                        // SAFETY: `handle` is a live dlopen handle and `name` is NUL-terminated.
                        let sym = unsafe { libc::dlsym(handle, name.as_ptr().cast()) };
                        if sym.is_null() {
                            return Err(format!(
                                "{path} is not FoundationDB's client library 7.3 or newer: \
                                 it lacks {}",
                                stringify!($name)
                            ));
                        }
                        // SAFETY: the symbol has this signature in fdb_c.h (API 730).
                        unsafe { std::mem::transmute::<*mut c_void, unsafe extern "C" fn($($arg),*) $(-> $ret)?>(sym) }
                    },)*
                })
            }
        }
    };
}

api! {
    fdb_select_api_version_impl: fn(c_int, c_int) -> FdbErr;
    fdb_get_max_api_version: fn() -> c_int;
    fdb_get_error: fn(FdbErr) -> *const c_char;
    fdb_error_predicate: fn(c_int, FdbErr) -> FdbBool;
    fdb_setup_network: fn() -> FdbErr;
    fdb_run_network: fn() -> FdbErr;
    fdb_stop_network: fn() -> FdbErr;
    fdb_future_destroy: fn(FutureP);
    fdb_future_block_until_ready: fn(FutureP) -> FdbErr;
    fdb_future_get_error: fn(FutureP) -> FdbErr;
    fdb_future_set_callback: fn(FutureP, Callback, *mut c_void) -> FdbErr;
    fdb_future_get_int64: fn(FutureP, *mut i64) -> FdbErr;
    fdb_future_get_value: fn(FutureP, *mut FdbBool, *mut *const u8, *mut c_int) -> FdbErr;
    fdb_future_get_keyvalue_array: fn(FutureP, *mut *const KeyValue, *mut c_int, *mut FdbBool) -> FdbErr;
    fdb_create_database: fn(*const c_char, *mut DatabaseP) -> FdbErr;
    fdb_database_destroy: fn(DatabaseP);
    fdb_database_create_transaction: fn(DatabaseP, *mut TxnP) -> FdbErr;
    fdb_transaction_destroy: fn(TxnP);
    fdb_transaction_set_option: fn(TxnP, c_int, *const u8, c_int) -> FdbErr;
    fdb_transaction_get_read_version: fn(TxnP) -> FutureP;
    fdb_transaction_get: fn(TxnP, *const u8, c_int, FdbBool) -> FutureP;
    fdb_transaction_get_range: fn(TxnP, *const u8, c_int, FdbBool, c_int, *const u8, c_int, FdbBool, c_int, c_int, c_int, c_int, c_int, FdbBool, FdbBool) -> FutureP;
    fdb_transaction_set: fn(TxnP, *const u8, c_int, *const u8, c_int);
    fdb_transaction_atomic_op: fn(TxnP, *const u8, c_int, *const u8, c_int, c_int);
    fdb_transaction_clear: fn(TxnP, *const u8, c_int);
    fdb_transaction_clear_range: fn(TxnP, *const u8, c_int, *const u8, c_int);
    fdb_transaction_add_conflict_range: fn(TxnP, *const u8, c_int, *const u8, c_int, c_int) -> FdbErr;
    fdb_transaction_commit: fn(TxnP) -> FutureP;
    fdb_transaction_watch: fn(TxnP, *const u8, c_int) -> FutureP;
    fdb_transaction_on_error: fn(TxnP, FdbErr) -> FutureP;
}

impl Api {
    /// FoundationDB's message for `code`.
    pub fn message(&self, code: FdbErr) -> String {
        // SAFETY: fdb_get_error returns a static NUL-terminated string for any code.
        let p = unsafe { (self.fdb_get_error)(code) };
        if p.is_null() {
            return format!("error {code}");
        }
        // SAFETY: see above.
        unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
    }
}

static API: OnceLock<Result<Api, String>> = OnceLock::new();

/// The loaded library, opening it on the first call (see the module docs). The error says
/// what was searched and how to install FoundationDB's client.
pub fn api() -> Result<&'static Api, String> {
    API.get_or_init(load).as_ref().map_err(Clone::clone)
}

/// Where the library is looked for, in order (see the module docs).
pub fn candidates() -> Vec<String> {
    if let Some(file) = std::env::var_os("TXVFS_FDB_LIB").filter(|f| !f.is_empty()) {
        return vec![file.to_string_lossy().into_owned()];
    }
    let mut c = vec!["libfdb_c.so".to_string()];
    if let Some(dir) = std::env::var_os("TXVFS_FDB_BIN_DIR").filter(|d| !d.is_empty()) {
        c.push(std::path::Path::new(&dir).join("libfdb_c.so").to_string_lossy().into_owned());
    }
    c
}

fn load() -> Result<Api, String> {
    let mut tried = Vec::new();
    for path in candidates() {
        let c = CString::new(path.clone()).map_err(|_| format!("{path:?}: contains NUL"))?;
        // SAFETY: dlopen with a NUL-terminated name; the handle is never closed.
        let handle = unsafe { libc::dlopen(c.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
        if handle.is_null() {
            tried.push(format!("{path} ({})", dlerror()));
            continue;
        }
        return Api::resolve(handle, &path);
    }
    Err(format!(
        "cannot load FoundationDB's client library: tried {}. Install FoundationDB's client \
         package 7.3 (foundationdb-clients, which puts libfdb_c.so on the loader's path), or \
         set TXVFS_FDB_LIB to the file libfdb_c.so",
        tried.join(", ")
    ))
}

fn dlerror() -> String {
    // SAFETY: dlerror returns null or a NUL-terminated message owned by libc.
    let p = unsafe { libc::dlerror() };
    if p.is_null() {
        return "unknown error".into();
    }
    // SAFETY: see above.
    unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
}
