//! Uses the txvfs VFS from rusqlite: loads the extension, runs a workload in a database that
//! lives in a txvfs store, checks integrity, a rolled-back transaction and a reopen; then a
//! reader's snapshot while another connection commits (SQLITE_BUSY_SNAPSHOT for its write
//! after) and `PRAGMA journal_mode=WAL`.
//! Usage: txvfs-rusqlite-check LIBTXVFS_SQLITE STORE_DIR

use rusqlite::{Connection, OpenFlags};

fn open(store: &str) -> rusqlite::Result<Connection> {
    let flags = OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_CREATE | OpenFlags::SQLITE_OPEN_URI;
    Connection::open_with_flags(format!("file:/rust/app.db?vfs=txvfs&store={store}"), flags)
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
    println!(
        "rusqlite: 5000 rows, integrity ok, rollback ok, reopen ok (journal_mode={journal}), \
         snapshot ok, busy_snapshot ok, wal ok"
    );
    Ok(())
}
