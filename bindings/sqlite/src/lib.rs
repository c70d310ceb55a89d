//! SQLite VFS plugin for txvfs: SQLite databases whose write transactions each commit as one
//! txvfs transaction.
//!
//! - Loaded as an extension (`.load ./libtxvfs_sqlite`, `load_extension`): the entry point is
//!   `sqlite3_txvfssqlite_init` (the name SQLite derives from the file name), also exported as
//!   `sqlite3_txvfs_init`. It registers the VFS `txvfs` through the host's routines table and
//!   keeps the library loaded (`SQLITE_OK_LOAD_PERMANENTLY`).
//! - Linked into a program: [`txvfs_sqlite_register`] and [`txvfs_sqlite_register_default`]
//!   have the shape `SQLITE_EXTRA_INIT` expects (`int f(const char *)`) and find the host's
//!   SQLite through weak symbols (`src/host.c`), so the library never carries its own copy.
//!
//! What reaches the store:
//! - Inside an SQLite write transaction (RESERVED lock or more) pages stay in the VFS and
//!   commit as one txvfs transaction at SQLite's commit point: `SQLITE_FCNTL_COMMIT_PHASETWO`,
//!   `SQLITE_FCNTL_COMMIT_ATOMIC_WRITE` (batch atomic builds), or, for a transaction over
//!   attached databases, the deletion of its super-journal (every database that named it at
//!   `SQLITE_FCNTL_SYNC`, one txvfs transaction per store). Anything else (a rollback, a
//!   rollback that failed half-way) is dropped when the lock is released: the store never
//!   holds a page SQLite did not commit, so journals need not outlive the process.
//! - Writes made without a write lock (VFS shims, tools, `nolock=1`) commit durably at xSync,
//!   and at xClose at the latest.
//! - Locks belong to the file's identity (store, inode): every name of a database shares them.
//!
//! The logic lives in [`engine`] (no SQLite types); `ffi` is the SQLite edge.
#![warn(missing_docs)]

pub mod engine;
mod ffi;

use std::ffi::{c_char, c_int};

pub use ffi::HostApi;

extern "C" {
    /// Fills `api` from the host program's SQLite symbols (weak: NULL when absent).
    fn txvfs_sqlite_host_api(api: *mut HostApi);
}

/// Loadable-extension entry point under the name SQLite derives from `libtxvfs_sqlite.so`.
///
/// # Safety
/// Called by SQLite's extension loader.
#[no_mangle]
pub unsafe extern "C" fn sqlite3_txvfssqlite_init(
    _db: *mut libsqlite3_sys::sqlite3,
    _err: *mut *mut c_char,
    api: *const libsqlite3_sys::sqlite3_api_routines,
) -> c_int {
    ffi::extension_init(api)
}

/// Loadable-extension entry point under its documented short name.
///
/// # Safety
/// Called by SQLite's extension loader.
#[no_mangle]
pub unsafe extern "C" fn sqlite3_txvfs_init(
    db: *mut libsqlite3_sys::sqlite3,
    err: *mut *mut c_char,
    api: *const libsqlite3_sys::sqlite3_api_routines,
) -> c_int {
    sqlite3_txvfssqlite_init(db, err, api)
}

fn register_static(make_default: bool) -> c_int {
    let mut api = HostApi {
        vfs_register: None,
        vfs_find: None,
        uri_parameter: None,
        mprintf: None,
        libversion_number: None,
        compileoption_used: None,
    };
    // SAFETY: the shim only writes the struct's fields.
    unsafe { txvfs_sqlite_host_api(&mut api) };
    ffi_register(api, make_default)
}

fn ffi_register(api: HostApi, make_default: bool) -> c_int {
    ffi::register(api, make_default)
}

/// Registers VFS `txvfs` with the SQLite that the already loaded shared object `library`
/// carries or links to (a path as `dlopen` takes it: Python's `_sqlite3` module,
/// `libsqlite3.so.0`), not as the default: for hosts that load SQLite at run time and cannot
/// load extensions. Errors name what is missing.
pub fn register_with_library(library: &std::ffi::CStr) -> Result<(), String> {
    // SAFETY: dlopen/dlsym with valid C strings; the handle is kept (the library stays loaded
    // for the life of the process, as the VFS must).
    unsafe {
        let h = libc::dlopen(library.as_ptr(), libc::RTLD_NOW);
        if h.is_null() {
            return Err(format!("cannot open {library:?} to find SQLite in it"));
        }
        let sym = |name: &std::ffi::CStr| {
            let p = libc::dlsym(h, name.as_ptr());
            (!p.is_null()).then_some(p)
        };
        let (Some(reg), Some(find)) = (sym(c"sqlite3_vfs_register"), sym(c"sqlite3_vfs_find"))
        else {
            return Err(format!("{library:?} exports no SQLite (sqlite3_vfs_register)"));
        };
        // A symbol's address as the function pointer type of the field it fills.
        unsafe fn cast<F>(p: *mut libc::c_void) -> F {
            debug_assert_eq!(std::mem::size_of::<F>(), std::mem::size_of_val(&p));
            std::mem::transmute_copy(&p)
        }
        let api = HostApi {
            vfs_register: Some(cast(reg)),
            vfs_find: Some(cast(find)),
            uri_parameter: sym(c"sqlite3_uri_parameter").map(|p| cast(p)),
            mprintf: sym(c"sqlite3_mprintf").map(|p| cast(p)),
            libversion_number: sym(c"sqlite3_libversion_number").map(|p| cast(p)),
            compileoption_used: sym(c"sqlite3_compileoption_used").map(|p| cast(p)),
        };
        match ffi_register(api, false) {
            0 => Ok(()),
            rc => Err(format!("registering the VFS with {library:?} failed (SQLite error {rc})")),
        }
    }
}

/// Registers VFS `txvfs` with the SQLite linked into this program (not as the default).
/// Returns `SQLITE_OK`, or `SQLITE_ERROR` when no SQLite is linked. Safe to call any number
/// of times (for example as `SQLITE_EXTRA_INIT`, which runs after every `sqlite3_initialize`).
#[no_mangle]
pub extern "C" fn txvfs_sqlite_register(_unused: *const c_char) -> c_int {
    register_static(false)
}

/// Like [`txvfs_sqlite_register`], and makes `txvfs` the default VFS.
#[no_mangle]
pub extern "C" fn txvfs_sqlite_register_default(_unused: *const c_char) -> c_int {
    register_static(true)
}
