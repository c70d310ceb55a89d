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
    let (ok, stdout, stderr) = shell_result(script);
    assert!(ok, "sqlite3 failed: {stderr}");
    stdout
}

/// Runs `script` in the sqlite3 shell: (success, standard output, standard error).
fn shell_result(script: &str) -> (bool, String, String) {
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
    (
        out.status.success(),
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
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
    let names: Vec<Vec<u8>> =
        store.readdir("/data", None, 0).unwrap().into_iter().map(|e| e.name.into_vec()).collect();
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

/// A database in a named snapshot opens read-only through the VFS, and in a writable clone of
/// the snapshot it takes writes that the snapshot never sees.
#[test]
fn databases_in_a_snapshot_and_a_clone() {
    let dir = tempfile::tempdir().unwrap();
    let store_uri = format!("rocksdb:{}", dir.path().join("store").display());
    let ext = extension();
    shell(&format!(
        ".load {ext}\n.open \"file:/app.db?vfs=txvfs&store={store_uri}\"\nCREATE TABLE t(x);\nINSERT INTO t VALUES (1), (2);\n",
        ext = ext.display()
    ));
    let snapshot_uri = {
        let store = Store::open(&store_uri).unwrap();
        store.create_named_snapshot("v1").unwrap();
        store.named_snapshot_uri("v1").unwrap()
    };
    // Read-only with mode=ro, or as SQLite finds it: the snapshot's own directory opened
    // read-write falls back to read-only, and writes fail with SQLITE_READONLY.
    let out = shell(&format!(
        ".load {ext}\n.open \"file:/app.db?vfs=txvfs&mode=ro&store={snapshot_uri}\"\nSELECT sum(x) FROM t;\n",
        ext = ext.display()
    ));
    assert_eq!(out.trim(), "3");
    let by_dir = dir.path().join("store/snapshots/v1");
    let (ok, out, err) = shell_result(&format!(
        ".load {ext}\n.open \"file:/app.db?vfs=txvfs&store={}\"\nSELECT sum(x) FROM t;\nINSERT INTO t VALUES (5);\nSELECT sum(x) FROM t;\n",
        by_dir.display(),
        ext = ext.display()
    ));
    assert!(!ok && err.contains("readonly"), "{err}");
    assert_eq!(out.lines().collect::<Vec<_>>(), vec!["3", "3"]);
    let clone_dir = dir.path().join("clone");
    Store::create_clone(&snapshot_uri, clone_dir.to_str().unwrap(), txvfs::Options::default())
        .unwrap();
    let out = shell(&format!(
        ".load {ext}\n.open \"file:/app.db?vfs=txvfs&store={}\"\nINSERT INTO t VALUES (10);\nSELECT sum(x) FROM t;\nPRAGMA integrity_check;\n",
        clone_dir.display(),
        ext = ext.display()
    ));
    assert_eq!(out.lines().collect::<Vec<_>>(), vec!["13", "ok"]);
    let out = shell(&format!(
        ".load {ext}\n.open \"file:/app.db?vfs=txvfs&mode=ro&store={snapshot_uri}\"\nSELECT sum(x) FROM t;\n",
        ext = ext.display()
    ));
    assert_eq!(out.trim(), "3");
}
