//! First-touch stat: every file of a fresh tree stat'ed once, right after the tree was
//! created, in creation order, the way `find`, `ls -l`, `rsync` and a backup walk a tree (the
//! main `stat` row picks files at random with repeats, which mostly hits caches). Paths are
//! `/w1/d042/f001234`: 100 directories under `/w1`, three components to resolve.

use super::sqlite::Sqlite;
use super::{time, Row};
use rocksdb::{WriteOptions, DB};
use std::path::Path;
use txvfs::{FileSystem, Store};

/// Directories the files are spread over.
const DIRS: usize = 100;

/// The path of file `i` (without the leading slash).
fn path(i: usize) -> (String, String) {
    (format!("w1/d{:03}", i % DIRS), format!("f{i:06}"))
}

/// Creates `files` small files under `w1` in every system (untimed), then stats each once.
pub(super) fn stat_once(
    store: &Store,
    native: &Path,
    raw: &DB,
    wo: &WriteOptions,
    sql: &Sqlite,
    files: usize,
) -> Row {
    let data = vec![5u8; 100];
    store.mkdir("/w1", 0o755).unwrap();
    for d in 0..DIRS {
        store.mkdir(format!("/w1/d{d:03}"), 0o755).unwrap();
        std::fs::create_dir_all(native.join(format!("w1/d{d:03}"))).unwrap();
    }
    // In directory order, so the walk below is a depth-first one like find's.
    let order: Vec<usize> = (0..DIRS).flat_map(|d| (d..files).step_by(DIRS)).collect();
    for &i in &order {
        let (dir, name) = path(i);
        store.write_file(format!("/{dir}/{name}"), &data).unwrap();
        std::fs::write(native.join(&dir).join(&name), &data).unwrap();
        raw.put_opt(format!("{dir}/{name}"), &data, wo).unwrap();
        sql.create(&dir, &name, &data);
    }
    let paths: Vec<(String, String)> = order.iter().map(|&i| path(i)).collect();
    let (t_tx, _) = time(|| {
        for (dir, name) in &paths {
            assert_eq!(store.stat(format!("/{dir}/{name}")).unwrap().size, 100);
        }
    });
    let (t_fs, _) = time(|| {
        for (dir, name) in &paths {
            assert_eq!(std::fs::metadata(native.join(dir).join(name)).unwrap().len(), 100);
        }
    });
    let (t_rk, _) = time(|| {
        for (dir, name) in &paths {
            assert!(raw.get_pinned(format!("{dir}/{name}")).unwrap().is_some());
        }
    });
    let (t_sq, _) = time(|| {
        for (dir, name) in &paths {
            assert_eq!(sql.stat(dir, name), 100);
        }
    });
    Row {
        name: "stat each file once, after creating them (/w1/d042/f001234)".into(),
        unit: "call",
        txvfs: t_tx,
        fs: Some(t_fs),
        rocks: Some(t_rk),
        sqlite: Some(t_sq),
        ops: paths.len(),
    }
}
