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
//! Rows and files in one commit: inside a write transaction (after `BEGIN IMMEDIATE`),
//! `PRAGMA txvfs_files` returns the token of the connection's file transaction, which the
//! store's API joins ([`txvfs::Transaction::joined`]); what the program does through that
//! handle commits with the rows at the connection's `COMMIT`, in one txvfs commit, and is
//! dropped by its `ROLLBACK`. A conflict with another transaction fails the `COMMIT` with an I/O
//! error, and [`txvfs::Transaction::joined_commit_error`] says it is retryable: roll back if
//! SQLite is still in the transaction, and run the whole unit again. The VFS must be this copy
//! of txvfs: a Rust program links this crate and registers it with [`register_linked`]
//! (loading `libtxvfs_sqlite.so` as an extension gives another copy, whose tokens
//! `Transaction::joined` does not know). With SQLite's C API, linked as `-lsqlite3` (the
//! declarations and `sql`, which runs a statement and returns the first column of its first
//! row, are hidden; `tests/rows_and_files.rs` has them in full, and a conflict retried):
//!
//! ```
//! # use std::ffi::{c_char, c_int, c_void, CStr, CString};
//! # #[link(name = "sqlite3")]
//! # extern "C" {
//! #     fn sqlite3_open_v2(f: *const c_char, db: *mut *mut c_void, fl: c_int, v: *const c_char) -> c_int;
//! #     fn sqlite3_prepare_v2(db: *mut c_void, sql: *const c_char, n: c_int,
//! #         st: *mut *mut c_void, tail: *mut *const c_char) -> c_int;
//! #     fn sqlite3_step(st: *mut c_void) -> c_int;
//! #     fn sqlite3_column_text(st: *mut c_void, i: c_int) -> *const c_char;
//! #     fn sqlite3_finalize(st: *mut c_void) -> c_int;
//! #     fn sqlite3_close(db: *mut c_void) -> c_int;
//! # }
//! # fn sql(db: *mut c_void, q: &str) -> String {
//! #     let q = CString::new(q).unwrap();
//! #     let mut st = std::ptr::null_mut();
//! #     unsafe {
//! #         assert_eq!(sqlite3_prepare_v2(db, q.as_ptr(), -1, &mut st, std::ptr::null_mut()), 0);
//! #         let rc = sqlite3_step(st);
//! #         assert!(rc == 100 || rc == 101, "{q:?}: SQLite error {rc}");
//! #         let t = if rc == 100 { sqlite3_column_text(st, 0) } else { std::ptr::null() };
//! #         let out = if t.is_null() { String::new() } else { CStr::from_ptr(t).to_str().unwrap().into() };
//! #         sqlite3_finalize(st);
//! #         out
//! #     }
//! # }
//! use txvfs::{FileSystem, Store, Transaction};
//!
//! let dir = tempfile::tempdir()?;
//! let store = Store::open(dir.path().to_str().unwrap())?;
//! assert_eq!(txvfs_sqlite::register_linked(false), 0); // with the SQLite linked in
//! let uri = CString::new(format!("file:/index.db?vfs=txvfs&store={}", dir.path().display()))?;
//! let mut db = std::ptr::null_mut();
//! assert_eq!(unsafe { sqlite3_open_v2(uri.as_ptr(), &mut db, 0x46, std::ptr::null()) }, 0);
//! sql(db, "CREATE TABLE photos(name TEXT)");
//!
//! sql(db, "BEGIN IMMEDIATE");
//! let files = Transaction::joined(&sql(db, "PRAGMA txvfs_files"))?;
//! files.write_file("/a.jpg", b"JPEG")?;
//! sql(db, "INSERT INTO photos VALUES ('a.jpg')");
//! assert!(store.read_file("/a.jpg").is_err()); // nobody sees the file (or the row) yet
//! sql(db, "COMMIT"); // the row and the file, in one commit
//! assert_eq!(store.read_file("/a.jpg")?, b"JPEG");
//! assert_eq!(sql(db, "SELECT count(*) FROM photos"), "1");
//! # unsafe { sqlite3_close(db) };
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
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

/// Registers VFS `txvfs` with the SQLite linked into this program, as [`txvfs_sqlite_register`]
/// does (and as the default with `make_default`): `SQLITE_OK`, or `SQLITE_ERROR` when no
/// SQLite is linked. For libraries that carry this crate (libtxvfs): unlike a call to the
/// exported C symbol, which the dynamic linker may bind to another copy's (a
/// `libtxvfs_sqlite.so` loaded before with `RTLD_GLOBAL`, as SQLite loads extensions), this
/// call stays in this copy.
pub fn register_linked(make_default: bool) -> c_int {
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
        match ffi::register(api, false) {
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
    register_linked(false)
}

/// Like [`txvfs_sqlite_register`], and makes `txvfs` the default VFS.
#[no_mangle]
pub extern "C" fn txvfs_sqlite_register_default(_unused: *const c_char) -> c_int {
    register_linked(true)
}
