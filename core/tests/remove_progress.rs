//! `Store::remove_all_with` reports its progress: after each batch, the entries removed so
//! far, growing to the number of inodes the removal freed.

use txvfs::fs::REMOVE_BATCH;
use txvfs::{FileSystem, Store};

/// Inodes in use, from `statfs`.
fn inodes(store: &Store) -> u64 {
    store.statfs().unwrap().files
}

/// Creates under `top` a directory larger than one batch, a few nested directories with
/// files and symlinks, and an empty directory; returns the number of names created below `top`.
fn populate(store: &Store, top: &str) -> u64 {
    let mut names = 0;
    store.mkdir(top, 0o755).unwrap();
    let wide = format!("{top}/wide");
    store.mkdir(&wide, 0o755).unwrap();
    names += 1;
    let n = REMOVE_BATCH * 2 + 17;
    store
        .transact(|tx| {
            for i in 0..n {
                tx.write_file(format!("{wide}/f{i:05}"), format!("{i}").as_bytes())?;
            }
            Ok(())
        })
        .unwrap();
    names += n as u64;
    for d in 0..5 {
        let sub = format!("{top}/d{d}/inner");
        store.mkdir_all(&sub, 0o755).unwrap();
        names += 2;
        for f in 0..7 {
            store.write_file(format!("{sub}/x{f}"), &vec![b'x'; 100 * f]).unwrap();
            store.symlink(format!("x{f}"), format!("{sub}/s{f}")).unwrap();
            names += 2;
        }
    }
    store.mkdir(format!("{top}/empty"), 0o700).unwrap();
    names + 1
}

#[test]
fn counts_grow_to_the_inodes_removed() {
    let store = Store::open("memory:?limits=foundationdb").unwrap();
    let names = populate(&store, "/t");
    store.write_file("/keep", b"stays").unwrap();
    let before = inodes(&store);
    let mut counts = Vec::new();
    store.remove_all_with("/t", &mut |n| counts.push(n)).unwrap();
    let freed = before - inodes(&store);
    assert_eq!(freed, names + 1, "the tree and its top are gone");
    assert!(counts.windows(2).all(|w| w[0] <= w[1]), "counts never go back: {counts:?}");
    assert_eq!(counts.last(), Some(&freed), "the last count is the number of inodes removed");
    assert!(counts.len() >= 3, "one report per batch: {} reports", counts.len());
    assert!(counts[0] > 0 && counts[0] < freed, "the first report comes early: {counts:?}");
    assert!(store.stat("/t").is_err());
    assert_eq!(store.read_file("/keep").unwrap(), b"stays");

    // A file or symlink is one entry; the plain call still works and reports nothing.
    store.symlink("keep", "/link").unwrap();
    let mut counts = Vec::new();
    store.remove_all_with("/link", &mut |n| counts.push(n)).unwrap();
    assert_eq!(counts, [1]);
    populate(&store, "/u");
    store.remove_all("/u").unwrap();
    assert_eq!(inodes(&store), before - freed);
    // A missing path reports nothing.
    let mut called = false;
    assert!(store.remove_all_with("/nope", &mut |_| called = true).is_err());
    assert!(!called);
}
