//! One database under several names (path spellings, a symlink, a hard link) has one set of
//! locks. The store is prepared here with the core API, closed, and then
//! `tests/sqlite/test_names.py` drives SQLite through the VFS in a separate process (one
//! process at a time opens a RocksDB store).

use std::path::PathBuf;
use std::process::Command;
use txvfs::{FileSystem, Store};

fn extension() -> PathBuf {
    if let Some(p) = std::env::var_os("TXVFS_SQLITE_LIB") {
        return p.into();
    }
    // target/release/deps/<test> -> target/release/libtxvfs_sqlite.so
    let exe = std::env::current_exe().unwrap();
    exe.parent().unwrap().parent().unwrap().join("libtxvfs_sqlite")
}

/// A Python whose sqlite3 module can load extensions: the one tests/sqlite/run found, else the
/// first of `python3` and Debian's `/usr/bin/python3` that can (pyenv builds often cannot).
fn python_that_loads_extensions() -> String {
    if let Ok(p) = std::env::var("TXVFS_SQLITE_PYTHON") {
        return p;
    }
    let can = |p: &str| {
        Command::new(p)
            .args(["-c", "import sqlite3, sys; sys.exit(not hasattr(sqlite3.Connection, 'enable_load_extension'))"])
            .status()
            .is_ok_and(|s| s.success())
    };
    ["python3", "/usr/bin/python3"]
        .into_iter()
        .find(|p| can(p))
        .expect("no python3 whose sqlite3 can load extensions (scripts/setup installs Debian's)")
        .to_string()
}

#[test]
fn one_database_under_several_names_has_one_lock() {
    let dir = tempfile::tempdir().unwrap();
    let store_uri = format!("rocksdb:{}", dir.path().join("store").display());
    let other_uri = format!("rocksdb:{}", dir.path().join("other").display());
    {
        let store = Store::open(&store_uri).unwrap();
        store.mkdir_all("/data", 0o755).unwrap();
        store.mkdir("/a", 0o755).unwrap();
        store.write_file("/data/x.db", b"").unwrap();
        store.symlink("x.db", "/data/link.db").unwrap();
        store.link("/data/x.db", "/data/hard.db").unwrap();
    }
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/sqlite/test_names.py");
    let python = python_that_loads_extensions();
    let out = Command::new(&python)
        .arg(&script)
        .arg(extension())
        .arg(&store_uri)
        .arg(&other_uri)
        .output()
        .expect("running python3");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    print!("{stdout}");
    assert!(out.status.success(), "test_names.py failed:\n{stdout}\n{stderr}");
    assert!(stdout.contains("names: 4 passed"), "{stdout}");
}
