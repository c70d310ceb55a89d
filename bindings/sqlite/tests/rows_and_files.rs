//! Rows and files in one commit, from Rust: a program that links `txvfs`, `txvfs_sqlite` and
//! the system SQLite (`-lsqlite3`, declared below), registers the VFS with
//! `txvfs_sqlite_register` (its weak references resolve to that SQLite), and puts file writes
//! (through [`Transaction::joined`]) and rows (through SQLite's C API) in one commit.

use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::ptr;
use txvfs::{ErrorKind, FileSystem, Store, Transaction};

#[allow(non_camel_case_types)]
type sqlite3 = c_void;
#[allow(non_camel_case_types)]
type sqlite3_stmt = c_void;

const SQLITE_OK: c_int = 0;
const SQLITE_IOERR: c_int = 10;
const SQLITE_ROW: c_int = 100;
const SQLITE_DONE: c_int = 101;
const SQLITE_OPEN_READWRITE: c_int = 0x2;
const SQLITE_OPEN_CREATE: c_int = 0x4;
const SQLITE_OPEN_URI: c_int = 0x40;

#[link(name = "sqlite3")]
extern "C" {
    fn sqlite3_open_v2(
        f: *const c_char,
        db: *mut *mut sqlite3,
        fl: c_int,
        vfs: *const c_char,
    ) -> c_int;
    fn sqlite3_close(db: *mut sqlite3) -> c_int;
    fn sqlite3_exec(
        db: *mut sqlite3,
        sql: *const c_char,
        cb: *const c_void,
        arg: *mut c_void,
        err: *mut *mut c_char,
    ) -> c_int;
    fn sqlite3_prepare_v2(
        db: *mut sqlite3,
        sql: *const c_char,
        n: c_int,
        st: *mut *mut sqlite3_stmt,
        tail: *mut *const c_char,
    ) -> c_int;
    fn sqlite3_step(st: *mut sqlite3_stmt) -> c_int;
    fn sqlite3_column_text(st: *mut sqlite3_stmt, i: c_int) -> *const c_char;
    fn sqlite3_finalize(st: *mut sqlite3_stmt) -> c_int;
    fn sqlite3_errmsg(db: *mut sqlite3) -> *const c_char;
    fn sqlite3_get_autocommit(db: *mut sqlite3) -> c_int;
    fn sqlite3_free(p: *mut c_void);
}

/// A connection to database `path` of the store at `dir`, through the VFS `txvfs`.
struct Db(*mut sqlite3);

impl Db {
    fn open(dir: &std::path::Path, path: &str) -> Db {
        assert_eq!(txvfs_sqlite::txvfs_sqlite_register(ptr::null()), SQLITE_OK);
        let uri = CString::new(format!("file:{path}?vfs=txvfs&store={}", dir.display())).unwrap();
        let mut db = ptr::null_mut();
        let flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_URI;
        // SAFETY: valid C strings and out-pointer.
        let rc = unsafe { sqlite3_open_v2(uri.as_ptr(), &mut db, flags, ptr::null()) };
        let db = Db(db);
        assert_eq!(rc, SQLITE_OK, "open: {}", db.errmsg());
        db
    }

    fn errmsg(&self) -> String {
        // SAFETY: a live connection; SQLite owns the message.
        unsafe { CStr::from_ptr(sqlite3_errmsg(self.0)).to_string_lossy().into_owned() }
    }

    /// Runs `sql`: Ok, or (SQLite's result code, message).
    fn exec(&self, sql: &str) -> Result<(), (c_int, String)> {
        let c = CString::new(sql).unwrap();
        let mut err: *mut c_char = ptr::null_mut();
        // SAFETY: a live connection, a valid C string; SQLite allocates `err`, freed here.
        unsafe {
            let rc = sqlite3_exec(self.0, c.as_ptr(), ptr::null(), ptr::null_mut(), &mut err);
            if rc == SQLITE_OK {
                return Ok(());
            }
            let msg = if err.is_null() {
                self.errmsg()
            } else {
                CStr::from_ptr(err).to_string_lossy().into_owned()
            };
            sqlite3_free(err.cast());
            Err((rc, msg))
        }
    }

    fn ok(&self, sql: &str) {
        if let Err((rc, msg)) = self.exec(sql) {
            panic!("{sql}: SQLite error {rc}: {msg}");
        }
    }

    /// The first column of the first row of `sql`: Ok(None) without a row, Err on an error.
    fn one(&self, sql: &str) -> Result<Option<String>, String> {
        let c = CString::new(sql).unwrap();
        let mut st = ptr::null_mut();
        // SAFETY: a live connection; the statement is finalized before returning.
        unsafe {
            if sqlite3_prepare_v2(self.0, c.as_ptr(), -1, &mut st, ptr::null_mut()) != SQLITE_OK {
                return Err(self.errmsg());
            }
            let out = match sqlite3_step(st) {
                SQLITE_ROW => {
                    let t = sqlite3_column_text(st, 0);
                    Ok((!t.is_null()).then(|| CStr::from_ptr(t).to_string_lossy().into_owned()))
                }
                SQLITE_DONE => Ok(None),
                _ => Err(self.errmsg()),
            };
            sqlite3_finalize(st);
            out
        }
    }

    fn count(&self, table: &str) -> String {
        self.one(&format!("SELECT count(*) FROM {table}")).unwrap().unwrap()
    }

    /// `PRAGMA txvfs_files`: the token of this write transaction's file transaction.
    fn files(&self) -> Transaction {
        let token = self.one("PRAGMA txvfs_files").unwrap().unwrap();
        Transaction::joined(&token).unwrap()
    }

    fn in_transaction(&self) -> bool {
        // SAFETY: a live connection.
        unsafe { sqlite3_get_autocommit(self.0) == 0 }
    }
}

impl Drop for Db {
    fn drop(&mut self) {
        // SAFETY: the connection is not used afterwards.
        unsafe { sqlite3_close(self.0) };
    }
}

#[test]
fn rows_and_files_commit_together_or_not_at_all() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path().to_str().unwrap()).unwrap();
    let db = Db::open(dir.path(), "/index.db");
    let other = Db::open(dir.path(), "/index.db");
    db.ok("CREATE TABLE photos(name TEXT PRIMARY KEY)");

    // COMMIT: both.
    db.ok("BEGIN IMMEDIATE");
    let files = db.files();
    assert!(files.is_joined());
    assert!(files.store().same_store(&store));
    files.write_file("/a.jpg", b"jpeg").unwrap();
    db.ok("INSERT INTO photos VALUES ('a.jpg')");
    // Isolated until COMMIT: the store's API and another connection see neither.
    assert_eq!(store.read_file("/a.jpg").unwrap_err().kind(), ErrorKind::NotFound);
    assert_eq!(other.count("photos"), "0");
    assert_eq!(files.commit().unwrap_err().kind(), ErrorKind::Invalid);
    db.ok("COMMIT");
    assert_eq!(store.read_file("/a.jpg").unwrap(), b"jpeg");
    assert_eq!(other.count("photos"), "1");
    // The handle outlives its transaction, which is over.
    assert_eq!(files.write_file("/late", b"x").unwrap_err().kind(), ErrorKind::Invalid);

    // ROLLBACK: neither.
    db.ok("BEGIN IMMEDIATE");
    let files = db.files();
    files.write_file("/b.jpg", b"b").unwrap();
    db.ok("INSERT INTO photos VALUES ('b.jpg')");
    db.ok("ROLLBACK");
    assert_eq!(store.read_file("/b.jpg").unwrap_err().kind(), ErrorKind::NotFound);
    assert_eq!(db.count("photos"), "1");

    // Outside a write transaction the pragma fails.
    let e = db.one("PRAGMA txvfs_files").unwrap_err();
    assert!(e.contains("BEGIN IMMEDIATE"), "{e}");
}

#[test]
fn a_conflict_fails_the_commit_retryably_and_the_unit_runs_again() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path().to_str().unwrap()).unwrap();
    let db = Db::open(dir.path(), "/index.db");
    db.ok("CREATE TABLE counts(v TEXT)");
    store.write_file("/count", b"5").unwrap();

    // The unit, run until it commits: read the file, write it and a row naming its value.
    let mut runs = 0;
    loop {
        runs += 1;
        db.ok("BEGIN IMMEDIATE");
        let token = db.one("PRAGMA txvfs_files").unwrap().unwrap();
        let files = Transaction::joined(&token).unwrap();
        let v = String::from_utf8(files.read_file("/count").unwrap()).unwrap();
        if runs == 1 {
            store.write_file("/count", b"6").unwrap(); // another transaction, before COMMIT
        }
        files.write_file("/count", format!("{v}+1").as_bytes()).unwrap();
        db.ok(&format!("INSERT INTO counts VALUES ('{v}')"));
        match db.exec("COMMIT") {
            Ok(()) => break,
            Err((rc, msg)) => {
                assert_eq!(rc & 0xff, SQLITE_IOERR, "{msg}");
                let why = Transaction::joined_commit_error(&token).expect("the commit's error");
                assert!(why.is_retryable(), "{why}");
                assert_eq!(why.kind(), ErrorKind::Conflict);
                if db.in_transaction() {
                    db.ok("ROLLBACK");
                }
                assert!(runs < 5, "still conflicting after {runs} runs");
            }
        }
    }
    assert_eq!(runs, 2);
    assert_eq!(store.read_file("/count").unwrap(), b"6+1");
    assert_eq!(db.one("SELECT group_concat(v) FROM counts").unwrap().unwrap(), "6");
}
