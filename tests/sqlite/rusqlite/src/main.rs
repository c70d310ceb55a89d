//! Uses the txvfs VFS from rusqlite: loads the extension, runs a workload in a database that
//! lives in a txvfs store, checks integrity, a rolled-back transaction and a reopen; then a
//! reader's snapshot while another connection commits (SQLITE_BUSY_SNAPSHOT for its write
//! after) and `PRAGMA journal_mode=WAL`; then, in journal modes DELETE and WAL, a writer that
//! does not block readers, writers that exclude each other (`busy_timeout` waits), the reader's
//! snapshot across another connection's commit, and WAL remembered, checkpointed and undone
//! ([`concurrency`]).
//! Usage: txvfs-rusqlite-check LIBTXVFS_SQLITE STORE_DIR
//!        txvfs-rusqlite-check stock DIR JOURNAL_MODE   ([`concurrency`] on stock SQLite with a
//!        host file, the reference: passes in WAL mode, fails in rollback modes)
//!        (internal: txvfs-rusqlite-check LIB|stock --write URI JOURNAL_MODE, the writer process)

use rusqlite::{Connection, OpenFlags};
use std::time::Duration;

fn open(store: &str) -> rusqlite::Result<Connection> {
    open_db(&format!("file:/rust/app.db?vfs=txvfs&store={store}"))
}

fn open_db(uri: &str) -> rusqlite::Result<Connection> {
    let flags = OpenFlags::SQLITE_OPEN_READ_WRITE
        | OpenFlags::SQLITE_OPEN_CREATE
        | OpenFlags::SQLITE_OPEN_URI;
    Connection::open_with_flags(uri, flags)
}

fn rows(conn: &Connection) -> rusqlite::Result<i64> {
    conn.query_row("SELECT count(*) FROM t", [], |r| r.get(0))
}

fn text(conn: &Connection, sql: &str) -> rusqlite::Result<String> {
    conn.query_row(sql, [], |r| r.get(0))
}

fn extended_code<T: std::fmt::Debug>(r: rusqlite::Result<T>) -> i32 {
    match r {
        Err(rusqlite::Error::SqliteFailure(e, _)) => e.extended_code,
        other => panic!("expected an SQLite error, got {other:?}"),
    }
}

/// Connections of one process on `uri` in journal mode `jm` (each sets it, as applications do):
/// a writer holding EXCLUSIVE does not keep a reader out (no busy timeout) and keeps a second
/// writer out (SQLITE_BUSY); a third with a busy timeout waits and commits after it; a reader's
/// snapshot survives another commit (of a connection of this process, then of another process)
/// and its write then gets SQLITE_BUSY_SNAPSHOT. `txvfs`: also
/// journal_mode=WAL remembered by a connection that sets no mode, wal_checkpoint's answer and
/// the switch back with the data.
fn concurrency(lib: &str, uri: &str, jm: &str, txvfs: bool) -> rusqlite::Result<()> {
    let connect = |busy_ms: u64| -> rusqlite::Result<Connection> {
        let c = open_db(uri)?;
        c.busy_timeout(Duration::from_millis(busy_ms))?;
        let _: String = c.query_row(&format!("PRAGMA journal_mode={jm}"), [], |r| r.get(0))?;
        Ok(c)
    };
    let holder = connect(30_000)?;
    holder.execute_batch("CREATE TABLE t(v); INSERT INTO t VALUES ('one')")?;
    holder.execute_batch("BEGIN EXCLUSIVE; INSERT INTO t VALUES ('held')")?;
    let reader = connect(0)?;
    assert_eq!(rows(&reader)?, 1, "a reader under BEGIN EXCLUSIVE sees the committed state");
    let second = connect(0)?;
    assert_eq!(extended_code(second.execute_batch("BEGIN IMMEDIATE")), rusqlite::ffi::SQLITE_BUSY);
    let waiter = std::thread::spawn({
        let uri = uri.to_string();
        let jm = jm.to_string();
        move || -> rusqlite::Result<i64> {
            let c = open_db(&uri)?;
            c.busy_timeout(Duration::from_secs(30))?;
            let _: String = c.query_row(&format!("PRAGMA journal_mode={jm}"), [], |r| r.get(0))?;
            c.execute("INSERT INTO t VALUES ('waited')", [])?;
            rows(&c)
        }
    });
    std::thread::sleep(Duration::from_millis(300)); // the waiter most likely waits now (passes either way)
    holder.execute_batch("COMMIT")?;
    assert_eq!(
        waiter.join().expect("waiter thread")?,
        3,
        "the waiting writer committed after the holder"
    );

    // A reader's snapshot across another connection's commit.
    reader.execute_batch("BEGIN")?;
    assert_eq!(rows(&reader)?, 3);
    holder.execute("INSERT INTO t VALUES ('while reading')", [])?;
    assert_eq!(rows(&reader)?, 3, "the reader keeps its snapshot");
    let e = extended_code(reader.execute("INSERT INTO t VALUES ('stale')", []));
    assert_eq!(e, rusqlite::ffi::SQLITE_BUSY_SNAPSHOT, "a stale reader's write");
    reader.execute_batch("ROLLBACK")?;
    assert_eq!(rows(&reader)?, 4);

    // The same with the writer in another process (this program again, `--write`).
    reader.execute_batch("BEGIN")?;
    assert_eq!(rows(&reader)?, 4);
    let exe = std::env::current_exe().expect("this program's path");
    let out = std::process::Command::new(exe)
        .args([lib, "--write", uri, jm])
        .output()
        .expect("run the writer process");
    let said = String::from_utf8_lossy(&out.stdout);
    assert_eq!(said.trim(), "write 0", "the writer process, while this one reads");
    assert_eq!(rows(&reader)?, 4, "the reader keeps its snapshot");
    let e = extended_code(reader.execute("INSERT INTO t VALUES ('stale')", []));
    assert_eq!(e, rusqlite::ffi::SQLITE_BUSY_SNAPSHOT, "a stale reader's write");
    reader.execute_batch("ROLLBACK")?;
    assert_eq!(rows(&reader)?, 5);
    assert_eq!(text(&reader, "PRAGMA integrity_check")?, "ok");
    if txvfs {
        assert_eq!(text(&holder, "PRAGMA journal_mode=WAL")?, "wal");
        let ckpt: (i64, i64, i64) = holder
            .query_row("PRAGMA wal_checkpoint", [], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?;
        assert_eq!(
            ckpt,
            (0, -1, -1),
            "nothing to copy: SQLite's answer for a database not in its own WAL"
        );
        let fresh = open_db(uri)?;
        assert_eq!(
            text(&fresh, "PRAGMA journal_mode")?,
            "wal",
            "another connection reads the mode"
        );
        assert_eq!(text(&fresh, "PRAGMA journal_mode=DELETE")?, "delete");
        assert_eq!(rows(&fresh)?, 5, "the data is the same after switching back");
        assert_eq!(text(&open_db(uri)?, "PRAGMA journal_mode")?, "delete");
    }
    Ok(())
}

/// The writer process of [`concurrency`]: one INSERT with a busy timeout (shorter on stock
/// SQLite, where a reader blocks it in rollback modes); prints `write` and SQLite's result code.
fn write_role(lib: &str, uri: &str, jm: &str) -> rusqlite::Result<()> {
    if lib != "stock" {
        let loader = Connection::open_in_memory()?;
        unsafe {
            loader.load_extension_enable()?;
            loader.load_extension(lib, None::<&str>)?;
        }
    }
    let c = open_db(uri)?;
    c.busy_timeout(Duration::from_millis(if lib == "stock" { 2_000 } else { 30_000 }))?;
    let _: String = c.query_row(&format!("PRAGMA journal_mode={jm}"), [], |r| r.get(0))?;
    let code = match c.execute("INSERT INTO t VALUES ('from another process')", []) {
        Ok(_) => 0,
        Err(e) => extended_code::<()>(Err(e)),
    };
    println!("write {code}");
    Ok(())
}

fn check(conn: &Connection, rows: i64) -> rusqlite::Result<()> {
    let integrity: String = conn.query_row("PRAGMA integrity_check", [], |r| r.get(0))?;
    assert_eq!(integrity, "ok");
    let count: i64 = conn.query_row("SELECT count(*) FROM t", [], |r| r.get(0))?;
    assert_eq!(count, rows);
    Ok(())
}

fn main() -> rusqlite::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let (lib, store) = (&args[1], &args[2]);
    if store == "--write" {
        return write_role(lib, &args[3], &args[4]);
    }
    if lib == "stock" {
        concurrency(lib, &format!("file:{store}/host.db"), &args[3], false)?;
        println!("rusqlite, stock SQLite, journal_mode={}: concurrency ok", args[3]);
        return Ok(());
    }
    // Loading registers the VFS process-wide and keeps the library loaded.
    let loader = Connection::open_in_memory()?;
    unsafe {
        loader.load_extension_enable()?;
        loader.load_extension(lib, None::<&str>)?;
        loader.load_extension_disable()?;
    }

    let mut conn = open(store)?;
    conn.execute_batch("CREATE TABLE t(id INTEGER PRIMARY KEY, v BLOB NOT NULL)")?;
    let tx = conn.transaction()?;
    for i in 0..5000 {
        tx.execute("INSERT INTO t(v) VALUES (?1)", [vec![(i % 251) as u8; 100]])?;
    }
    tx.commit()?;
    check(&conn, 5000)?;

    // A rolled-back transaction leaves nothing behind.
    let tx = conn.transaction()?;
    tx.execute("DELETE FROM t WHERE id % 2 = 0", [])?;
    tx.rollback()?;
    check(&conn, 5000)?;
    drop(conn);

    // A new connection sees the committed state.
    let conn = open(store)?;
    check(&conn, 5000)?;
    let journal: String = conn.query_row("PRAGMA journal_mode", [], |r| r.get(0))?;

    // A reader's snapshot: another connection commits meanwhile; the reader's write is then
    // refused with SQLITE_BUSY_SNAPSHOT.
    let writer = open(store)?;
    conn.execute_batch("BEGIN")?;
    check(&conn, 5000)?;
    writer.execute("INSERT INTO t(v) VALUES (x'00')", [])?;
    let seen: i64 = conn.query_row("SELECT count(*) FROM t", [], |r| r.get(0))?;
    assert_eq!(seen, 5000, "the reader keeps its snapshot");
    match conn.execute("INSERT INTO t(v) VALUES (x'01')", []) {
        Err(rusqlite::Error::SqliteFailure(e, _)) => {
            assert_eq!(e.extended_code, rusqlite::ffi::SQLITE_BUSY_SNAPSHOT)
        }
        other => panic!("a stale reader's write: {other:?}"),
    }
    conn.execute_batch("ROLLBACK")?;
    check(&conn, 5001)?;
    let wal: String = conn.query_row("PRAGMA journal_mode=WAL", [], |r| r.get(0))?;
    assert_eq!(wal, "wal");
    for jm in ["delete", "wal"] {
        concurrency(lib, &format!("file:/rust/rw-{jm}.db?vfs=txvfs&store={store}"), jm, true)?;
    }
    println!(
        "rusqlite: 5000 rows, integrity ok, rollback ok, reopen ok (journal_mode={journal}), \
         snapshot ok, busy_snapshot ok, wal ok, concurrency (delete, wal) ok"
    );
    Ok(())
}
