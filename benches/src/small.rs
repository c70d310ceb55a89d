//! The small-file rows: 10,000 files of 4 KiB in 100 directories (`/w1/d042/f001234`, three
//! components to resolve), created in directory order, then
//! - stat of every file once, right after creating them, in creation order: first touch, the
//!   way `find`, `ls -l`, `rsync` and a backup walk a tree;
//! - stat of files picked at random with repeats: hot, mostly answered by caches;
//! - open+read+close of files picked at random;
//! - rename and delete of every file.
//!
//! Each system does a workload over all files before the next system starts it.

use super::sqlite::Sqlite;
use super::{time, Row};
use rand::{rngs::SmallRng, Rng, SeedableRng};
use rocksdb::{WriteOptions, DB};
use std::io::{Read, Write};
use std::path::Path;
use txvfs::{FileSystem, OpenOptions, Store};

/// Directories the files are spread over.
const DIRS: usize = 100;

/// The directory and name of file `i` (`r` names it after the rename).
fn path(i: usize, r: &str) -> (String, String) {
    (format!("w1/d{:03}", i % DIRS), format!("{r}{i:06}"))
}

/// The systems under test, as the rows see them.
pub(super) struct Systems<'a> {
    pub(super) store: &'a Store,
    pub(super) native: &'a Path,
    pub(super) raw: &'a DB,
    pub(super) wo: &'a WriteOptions,
    pub(super) sql: &'a Sqlite,
}

fn row(name: &str, unit: &'static str, t: [std::time::Duration; 4], ops: usize) -> Row {
    Row {
        name: name.into(),
        unit,
        txvfs: t[0],
        fs: Some(t[1]),
        rocks: Some(t[2]),
        sqlite: Some(t[3]),
        ops,
    }
}

/// Runs the small-file rows over `files` files of `data`.
pub(super) fn rows(s: &Systems, files: usize, data: &[u8]) -> Vec<Row> {
    let Systems { store, native, raw, wo, sql } = *s;
    store.mkdir("/w1", 0o755).unwrap();
    for d in 0..DIRS {
        store.mkdir(format!("/w1/d{d:03}"), 0o755).unwrap();
        std::fs::create_dir_all(native.join(format!("w1/d{d:03}"))).unwrap();
    }
    // In directory order, so a walk in creation order is a depth-first one like find's.
    let order: Vec<usize> = (0..DIRS).flat_map(|d| (d..files).step_by(DIRS)).collect();
    let paths: Vec<(String, String)> = order.iter().map(|&i| path(i, "f")).collect();
    let n = paths.len();
    let mut rows = Vec::new();

    // --- create + write 4 KiB + close ---
    let t_tx = time(|| {
        for (dir, name) in &paths {
            let f = store.create(format!("/{dir}/{name}")).unwrap();
            f.write(data).unwrap();
            f.close().unwrap();
        }
    })
    .0;
    let t_fs = time(|| {
        for (dir, name) in &paths {
            let mut f = std::fs::File::create(native.join(dir).join(name)).unwrap();
            f.write_all(data).unwrap();
        }
    })
    .0;
    let t_rk = time(|| {
        for (dir, name) in &paths {
            raw.put_opt(format!("{dir}/{name}"), data, wo).unwrap();
        }
    })
    .0;
    let t_sq = time(|| {
        for (dir, name) in &paths {
            sql.create(dir, name, data);
        }
    })
    .0;
    rows.push(row("create+write 4 KiB+close", "file", [t_tx, t_fs, t_rk, t_sq], n));

    // --- first touch: every file once, right after the creates, in creation order ---
    let size = data.len() as u64;
    let stats = |paths: &[(String, String)]| {
        let t_tx = time(|| {
            for (dir, name) in paths {
                assert_eq!(store.stat(format!("/{dir}/{name}")).unwrap().size, size);
            }
        })
        .0;
        let t_fs = time(|| {
            for (dir, name) in paths {
                assert_eq!(std::fs::metadata(native.join(dir).join(name)).unwrap().len(), size);
            }
        })
        .0;
        let t_rk = time(|| {
            for (dir, name) in paths {
                assert!(raw.get_pinned(format!("{dir}/{name}")).unwrap().is_some());
            }
        })
        .0;
        let t_sq = time(|| {
            for (dir, name) in paths {
                assert_eq!(sql.stat(dir, name), size as i64);
            }
        })
        .0;
        [t_tx, t_fs, t_rk, t_sq]
    };
    rows.push(row("stat each file once, right after creating them", "call", stats(&paths), n));

    // --- hot stat: files picked at random, with repeats ---
    let mut rng = SmallRng::seed_from_u64(7);
    let picks: Vec<(String, String)> = (0..n).map(|_| paths[rng.gen_range(0..n)].clone()).collect();
    rows.push(row("stat (random, with repeats)", "call", stats(&picks), n));

    // --- open + read 4 KiB + close ---
    let t_tx = time(|| {
        let mut buf = vec![0u8; 8192];
        for (dir, name) in &picks {
            let f = store.open(format!("/{dir}/{name}"), &OpenOptions::new().read(true)).unwrap();
            assert_eq!(f.read(&mut buf).unwrap(), data.len());
        }
    })
    .0;
    let t_fs = time(|| {
        let mut buf = vec![0u8; 8192];
        for (dir, name) in &picks {
            let mut f = std::fs::File::open(native.join(dir).join(name)).unwrap();
            assert_eq!(f.read(&mut buf).unwrap(), data.len());
        }
    })
    .0;
    let t_rk = time(|| {
        for (dir, name) in &picks {
            assert_eq!(raw.get(format!("{dir}/{name}")).unwrap().unwrap().len(), data.len());
        }
    })
    .0;
    let t_sq = time(|| {
        let mut buf = vec![0u8; 8192];
        for (dir, name) in &picks {
            assert_eq!(sql.read(dir, name, &mut buf), data.len());
        }
    })
    .0;
    rows.push(row("open+read 4 KiB+close", "file", [t_tx, t_fs, t_rk, t_sq], n));

    // --- write_file: a 4 KiB file's contents replaced in one call (one commit) ---
    let t_tx = time(|| {
        for (dir, name) in &paths {
            store.write_file(format!("/{dir}/{name}"), data).unwrap();
        }
    })
    .0;
    let t_fs = time(|| {
        for (dir, name) in &paths {
            std::fs::write(native.join(dir).join(name), data).unwrap();
        }
    })
    .0;
    let t_rk = time(|| {
        for (dir, name) in &paths {
            raw.put_opt(format!("{dir}/{name}"), data, wo).unwrap();
        }
    })
    .0;
    let t_sq = time(|| {
        for (dir, name) in &paths {
            sql.replace(dir, name, data);
        }
    })
    .0;
    rows.push(row("write_file 4 KiB (replace, one call)", "file", [t_tx, t_fs, t_rk, t_sq], n));

    // --- rename (raw RocksDB: the value moves to a new key in one batch) ---
    let renamed: Vec<(String, String)> = order.iter().map(|&i| path(i, "r")).collect();
    let t_tx = time(|| {
        for ((dir, a), (_, b)) in paths.iter().zip(&renamed) {
            store.rename(format!("/{dir}/{a}"), format!("/{dir}/{b}")).unwrap();
        }
    })
    .0;
    let t_fs = time(|| {
        for ((dir, a), (_, b)) in paths.iter().zip(&renamed) {
            std::fs::rename(native.join(dir).join(a), native.join(dir).join(b)).unwrap();
        }
    })
    .0;
    let t_rk = time(|| {
        for ((dir, a), (_, b)) in paths.iter().zip(&renamed) {
            let v = raw.get(format!("{dir}/{a}")).unwrap().unwrap();
            let mut batch = rocksdb::WriteBatch::default();
            batch.delete(format!("{dir}/{a}"));
            batch.put(format!("{dir}/{b}"), v);
            raw.write_opt(batch, wo).unwrap();
        }
    })
    .0;
    let t_sq = time(|| {
        for ((dir, a), (_, b)) in paths.iter().zip(&renamed) {
            sql.rename(dir, a, b);
        }
    })
    .0;
    rows.push(row("rename 4 KiB file", "file", [t_tx, t_fs, t_rk, t_sq], n));

    // --- delete ---
    let t_tx = time(|| {
        for (dir, name) in &renamed {
            store.unlink(format!("/{dir}/{name}")).unwrap();
        }
    })
    .0;
    let t_fs = time(|| {
        for (dir, name) in &renamed {
            std::fs::remove_file(native.join(dir).join(name)).unwrap();
        }
    })
    .0;
    let t_rk = time(|| {
        for (dir, name) in &renamed {
            raw.delete_opt(format!("{dir}/{name}"), wo).unwrap();
        }
    })
    .0;
    let t_sq = time(|| {
        for (dir, name) in &renamed {
            sql.delete(dir, name);
        }
    })
    .0;
    rows.push(row("delete 4 KiB file", "file", [t_tx, t_fs, t_rk, t_sq], n));
    rows
}
