//! SQLite as a baseline: the system library (`libsqlite3`, its own build, not txvfs's VFS
//! extension) through a minimal FFI, so the workspace keeps one `libsqlite3-sys` feature set
//! (the extension crate's `loadable_extension`, which a linked rusqlite could not share).
//!
//! Files are rows of one table, `e(dir, name, size, data)` with a unique index on
//! `(dir, name)`, in WAL mode with `synchronous=NORMAL` (commits not synced, like txvfs's
//! default auto-commit calls); each create is its own transaction.

use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::path::Path;

#[allow(non_camel_case_types)]
type sqlite3 = c_void;
#[allow(non_camel_case_types)]
type stmt = c_void;

const SQLITE_ROW: c_int = 100;
const SQLITE_DONE: c_int = 101;
/// `SQLITE_TRANSIENT`: SQLite copies bound values.
const TRANSIENT: isize = -1;

#[link(name = "sqlite3")]
extern "C" {
    fn sqlite3_open(path: *const c_char, db: *mut *mut sqlite3) -> c_int;
    fn sqlite3_close(db: *mut sqlite3) -> c_int;
    fn sqlite3_exec(
        db: *mut sqlite3,
        sql: *const c_char,
        cb: *const c_void,
        arg: *mut c_void,
        err: *mut *mut c_char,
    ) -> c_int;
    fn sqlite3_errmsg(db: *mut sqlite3) -> *const c_char;
    fn sqlite3_prepare_v2(
        db: *mut sqlite3,
        sql: *const c_char,
        n: c_int,
        st: *mut *mut stmt,
        tail: *mut *const c_char,
    ) -> c_int;
    fn sqlite3_bind_text(st: *mut stmt, i: c_int, s: *const c_char, n: c_int, d: isize) -> c_int;
    fn sqlite3_bind_blob(st: *mut stmt, i: c_int, s: *const c_void, n: c_int, d: isize) -> c_int;
    fn sqlite3_bind_int64(st: *mut stmt, i: c_int, v: i64) -> c_int;
    fn sqlite3_step(st: *mut stmt) -> c_int;
    fn sqlite3_reset(st: *mut stmt) -> c_int;
    fn sqlite3_column_int64(st: *mut stmt, i: c_int) -> i64;
    fn sqlite3_column_blob(st: *mut stmt, i: c_int) -> *const c_void;
    fn sqlite3_column_bytes(st: *mut stmt, i: c_int) -> c_int;
    fn sqlite3_finalize(st: *mut stmt) -> c_int;
}

/// An open SQLite database holding files as rows.
pub struct Sqlite {
    db: *mut sqlite3,
    insert: Stmt,
    stat: Stmt,
    read: Stmt,
    list: Stmt,
    rename: Stmt,
    delete: Stmt,
    replace: Stmt,
    blobs: Stmt,
}

/// A prepared statement.
struct Stmt(*mut stmt);

impl Drop for Stmt {
    fn drop(&mut self) {
        // SAFETY: prepared by `Sqlite::prepare`, finalized once.
        unsafe { sqlite3_finalize(self.0) };
    }
}

impl Sqlite {
    /// Opens (creates) the database file `path` with the files table.
    pub fn open(path: &Path) -> Sqlite {
        let p = CString::new(path.to_str().expect("utf-8 path")).unwrap();
        let mut db = std::ptr::null_mut();
        // SAFETY: valid C string and out pointer.
        assert_eq!(unsafe { sqlite3_open(p.as_ptr(), &mut db) }, 0, "sqlite3_open");
        let exec = |sql: &str| {
            let s = CString::new(sql).unwrap();
            // SAFETY: open handle, valid C string, no callback.
            let rc = unsafe {
                sqlite3_exec(
                    db,
                    s.as_ptr(),
                    std::ptr::null(),
                    std::ptr::null_mut(),
                    std::ptr::null_mut(),
                )
            };
            assert_eq!(rc, 0, "{sql}: {}", errmsg(db));
        };
        exec("PRAGMA journal_mode=WAL");
        exec("PRAGMA synchronous=NORMAL");
        exec("CREATE TABLE e(dir TEXT NOT NULL, name TEXT NOT NULL, size INTEGER, data BLOB)");
        exec("CREATE UNIQUE INDEX e_path ON e(dir, name)");
        let prepare = |sql: &str| {
            let s = CString::new(sql).unwrap();
            let mut st = std::ptr::null_mut();
            // SAFETY: open handle, valid C string and out pointer.
            let rc =
                unsafe { sqlite3_prepare_v2(db, s.as_ptr(), -1, &mut st, std::ptr::null_mut()) };
            assert_eq!(rc, 0, "{sql}: {}", errmsg(db));
            Stmt(st)
        };
        Sqlite {
            insert: prepare("INSERT INTO e(dir, name, size, data) VALUES (?1, ?2, ?3, ?4)"),
            stat: prepare("SELECT size FROM e WHERE dir = ?1 AND name = ?2"),
            read: prepare("SELECT data FROM e WHERE dir = ?1 AND name = ?2"),
            list: prepare("SELECT name FROM e WHERE dir = ?1"),
            rename: prepare("UPDATE e SET name = ?3 WHERE dir = ?1 AND name = ?2"),
            delete: prepare("DELETE FROM e WHERE dir = ?1 AND name = ?2"),
            replace: prepare(
                "INSERT OR REPLACE INTO e(dir, name, size, data) VALUES (?1, ?2, ?3, ?4)",
            ),
            blobs: prepare("SELECT data FROM e WHERE dir = ?1 ORDER BY name"),
            db,
        }
    }

    /// Runs `sql` (no result rows), e.g. `BEGIN` and `COMMIT` around a batch of creates.
    pub fn exec(&self, sql: &str) {
        let s = CString::new(sql).unwrap();
        // SAFETY: open handle, valid C string, no callback.
        let rc = unsafe {
            sqlite3_exec(
                self.db,
                s.as_ptr(),
                std::ptr::null(),
                std::ptr::null_mut(),
                std::ptr::null_mut(),
            )
        };
        assert_eq!(rc, 0, "{sql}: {}", errmsg(self.db));
    }

    /// Creates file `name` in `dir` holding `data` (one transaction).
    pub fn create(&self, dir: &str, name: &str, data: &[u8]) {
        let st = self.insert.0;
        // SAFETY: prepared statement; SQLite copies the bound values (TRANSIENT).
        unsafe {
            bind(st, 1, dir);
            bind(st, 2, name);
            sqlite3_bind_int64(st, 3, data.len() as i64);
            sqlite3_bind_blob(st, 4, data.as_ptr().cast(), data.len() as c_int, TRANSIENT);
            assert_eq!(sqlite3_step(st), SQLITE_DONE, "insert: {}", errmsg(self.db));
            sqlite3_reset(st);
        }
    }

    /// Creates or replaces file `name` in `dir` (one transaction unless inside `BEGIN`).
    pub fn replace(&self, dir: &str, name: &str, data: &[u8]) {
        let st = self.replace.0;
        // SAFETY: prepared statement; SQLite copies the bound values (TRANSIENT).
        unsafe {
            bind(st, 1, dir);
            bind(st, 2, name);
            sqlite3_bind_int64(st, 3, data.len() as i64);
            sqlite3_bind_blob(st, 4, data.as_ptr().cast(), data.len() as c_int, TRANSIENT);
            assert_eq!(sqlite3_step(st), SQLITE_DONE, "replace: {}", errmsg(self.db));
            sqlite3_reset(st);
        }
    }

    /// Renames file `from` in `dir` to `to` (one transaction).
    pub fn rename(&self, dir: &str, from: &str, to: &str) {
        let st = self.rename.0;
        // SAFETY: prepared statement; SQLite copies the bound values (TRANSIENT).
        unsafe {
            bind(st, 1, dir);
            bind(st, 2, from);
            bind(st, 3, to);
            assert_eq!(sqlite3_step(st), SQLITE_DONE, "rename: {}", errmsg(self.db));
            sqlite3_reset(st);
        }
    }

    /// Deletes file `name` in `dir` (one transaction).
    pub fn delete(&self, dir: &str, name: &str) {
        let st = self.delete.0;
        // SAFETY: prepared statement; SQLite copies the bound values (TRANSIENT).
        unsafe {
            bind(st, 1, dir);
            bind(st, 2, name);
            assert_eq!(sqlite3_step(st), SQLITE_DONE, "delete: {}", errmsg(self.db));
            sqlite3_reset(st);
        }
    }

    /// Visits the data of every row of `dir` in name order (a file stored as numbered chunk
    /// rows); returns the bytes visited.
    pub fn scan(&self, dir: &str, mut visit: impl FnMut(&[u8])) -> usize {
        let st = self.blobs.0;
        let mut total = 0;
        // SAFETY: prepared statement, stepped to its end, then reset; each blob is used
        // before the next step.
        unsafe {
            bind(st, 1, dir);
            loop {
                match sqlite3_step(st) {
                    SQLITE_ROW => {
                        let n = sqlite3_column_bytes(st, 0) as usize;
                        let p = sqlite3_column_blob(st, 0).cast::<u8>();
                        visit(std::slice::from_raw_parts(p, n));
                        total += n;
                    }
                    SQLITE_DONE => break,
                    rc => panic!("scan {dir}: {rc}"),
                }
            }
            sqlite3_reset(st);
        }
        total
    }

    /// Reads `buf.len()` bytes at `offset` of row `name` of `dir`; returns the bytes read.
    pub fn read_at(&self, dir: &str, name: &str, offset: usize, buf: &mut [u8]) -> usize {
        let st = self.read.0;
        // SAFETY: prepared statement; the blob is copied out before the reset.
        unsafe {
            bind(st, 1, dir);
            bind(st, 2, name);
            assert_eq!(sqlite3_step(st), SQLITE_ROW, "read {dir}/{name}");
            let n = (sqlite3_column_bytes(st, 0) as usize).saturating_sub(offset).min(buf.len());
            let p = sqlite3_column_blob(st, 0).cast::<u8>().add(offset);
            buf[..n].copy_from_slice(std::slice::from_raw_parts(p, n));
            sqlite3_reset(st);
            n
        }
    }

    /// The size of file `name` in `dir`.
    pub fn stat(&self, dir: &str, name: &str) -> i64 {
        let st = self.stat.0;
        // SAFETY: prepared statement; the column is read before the reset.
        unsafe {
            bind(st, 1, dir);
            bind(st, 2, name);
            assert_eq!(sqlite3_step(st), SQLITE_ROW, "stat {dir}/{name}");
            let size = sqlite3_column_int64(st, 0);
            sqlite3_reset(st);
            size
        }
    }

    /// Reads file `name` in `dir` into `buf`; returns its length.
    pub fn read(&self, dir: &str, name: &str, buf: &mut [u8]) -> usize {
        let st = self.read.0;
        // SAFETY: prepared statement; the blob is copied out before the reset.
        unsafe {
            bind(st, 1, dir);
            bind(st, 2, name);
            assert_eq!(sqlite3_step(st), SQLITE_ROW, "read {dir}/{name}");
            let n = sqlite3_column_bytes(st, 0) as usize;
            let p = sqlite3_column_blob(st, 0).cast::<u8>();
            buf[..n].copy_from_slice(std::slice::from_raw_parts(p, n));
            sqlite3_reset(st);
            n
        }
    }

    /// Lists directory `dir`; returns the number of entries.
    pub fn list(&self, dir: &str) -> usize {
        let st = self.list.0;
        let mut n = 0;
        // SAFETY: prepared statement, stepped to its end, then reset.
        unsafe {
            bind(st, 1, dir);
            loop {
                match sqlite3_step(st) {
                    SQLITE_ROW => {
                        // Fetch the name like a readdir would.
                        let _ = sqlite3_column_blob(st, 0);
                        n += 1;
                    }
                    SQLITE_DONE => break,
                    rc => panic!("list {dir}: {rc}"),
                }
            }
            sqlite3_reset(st);
        }
        n
    }
}

impl Drop for Sqlite {
    fn drop(&mut self) {
        for st in [
            &mut self.insert,
            &mut self.stat,
            &mut self.read,
            &mut self.list,
            &mut self.rename,
            &mut self.delete,
            &mut self.replace,
            &mut self.blobs,
        ] {
            drop(std::mem::replace(st, Stmt(std::ptr::null_mut())));
        }
        // SAFETY: every statement is finalized; the handle is closed once.
        unsafe { sqlite3_close(self.db) };
    }
}

/// Binds text parameter `i` (copied by SQLite).
unsafe fn bind(st: *mut stmt, i: c_int, s: &str) {
    sqlite3_bind_text(st, i, s.as_ptr().cast(), s.len() as c_int, TRANSIENT);
}

fn errmsg(db: *mut sqlite3) -> String {
    // SAFETY: an open handle's message is a valid C string.
    unsafe { CStr::from_ptr(sqlite3_errmsg(db)) }.to_string_lossy().into_owned()
}
