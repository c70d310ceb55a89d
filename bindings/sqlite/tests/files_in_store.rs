//! A database written through the VFS (by the `sqlite3` shell, a separate process) is an
//! ordinary txvfs file: the core API sees it with SQLite's header and its full size, and no
//! journal is left in the store. The other way round: a database file put into the store with
//! the core API opens through the VFS.

use std::path::PathBuf;
use std::process::Command;
use txvfs::{FileSystem, Store};

fn extension() -> PathBuf {
    // target/release/deps/<test> -> target/release/libtxvfs_sqlite.so
    let exe = std::env::current_exe().unwrap();
    exe.parent().unwrap().parent().unwrap().join("libtxvfs_sqlite")
}

fn shell(script: &str) -> String {
    let out = Command::new("sqlite3")
        .arg("-batch")
        .arg(":memory:")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .and_then(|mut c| {
            use std::io::Write;
            c.stdin.take().unwrap().write_all(script.as_bytes())?;
            c.wait_with_output()
        })
        .expect("the sqlite3 shell (scripts/setup installs it)");
    assert!(out.status.success(), "sqlite3 failed: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn database_written_by_sqlite_is_a_txvfs_file_and_back() {
    let dir = tempfile::tempdir().unwrap();
    let store_dir = dir.path().join("store");
    let store_uri = format!("rocksdb:{}", store_dir.display());
    let out = shell(&format!(
        ".load {ext}\n.open \"file:/data/app.db?vfs=txvfs&store={store_uri}\"\n\
         CREATE TABLE t(x);\nBEGIN;\nINSERT INTO t SELECT value FROM generate_series(1, 5000);\nCOMMIT;\n\
         SELECT count(*) FROM t;\nPRAGMA page_count;\nPRAGMA page_size;\nPRAGMA integrity_check;\n",
        ext = extension().display()
    ));
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines[0], "5000");
    let pages: u64 = lines[1].parse().unwrap();
    let page_size: u64 = lines[2].parse().unwrap();
    assert_eq!(lines[3], "ok");

    let store = Store::open(&store_uri).unwrap();
    let st = store.stat("/data/app.db").unwrap();
    assert_eq!(st.size, pages * page_size);
    let data = store.read_file("/data/app.db").unwrap();
    assert_eq!(&data[..16], b"SQLite format 3\0");
    let names: Vec<Vec<u8>> = store.readdir("/data", None, 0).unwrap().into_iter().map(|e| e.name).collect();
    assert_eq!(names, vec![b"app.db".to_vec()], "no journal or temp file in the store");

    // The other direction: a database built by stock SQLite on disk, copied into the store
    // with the core API, opens through the VFS.
    let disk_db = dir.path().join("disk.db");
    let out = shell(&format!(
        ".open {}\nCREATE TABLE d(v);\nINSERT INTO d VALUES ('from disk');\n",
        disk_db.display()
    ));
    assert_eq!(out, "");
    store.mkdir("/copied", 0o755).unwrap();
    store.write_file("/copied/disk.db", &std::fs::read(&disk_db).unwrap()).unwrap();
    drop(store); // one process at a time opens a RocksDB store
    let out = shell(&format!(
        ".load {ext}\n.open \"file:/copied/disk.db?vfs=txvfs&store={store_uri}\"\n\
         SELECT v FROM d;\nPRAGMA integrity_check;\n",
        ext = extension().display()
    ));
    assert_eq!(out, "from disk\nok\n");
}
