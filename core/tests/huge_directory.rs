//! A directory of 1,000,000 entries can be listed, renamed and deleted on a backend that
//! enforces FoundationDB's limits (10 MB and 5 s per transaction): listing pages with a
//! cursor, renaming is one small transaction, and `remove_all` deletes in bounded batches
//! that resume after an interruption.

use std::sync::Arc;
use txvfs::kv::{Backend, FaultyBackend, Limits, MemoryBackend};
use txvfs::{ErrorKind, FileSystem, Options, Store};

/// Keys other than the superblock, the counters and the root directory's own: after a
/// removal of everything, none may be left (no inode, entry, block, xattr or orphan).
fn leftover_keys(b: &dyn Backend) -> Vec<Vec<u8>> {
    let root = txvfs::schema::inode_range(txvfs::schema::ROOT_INO);
    let kvs = b.begin().unwrap().get_range(b"", &[0xff], 0, false).unwrap();
    kvs.into_iter()
        .map(|(k, _)| k)
        .filter(|k| !(k[0] == b'S' || k[0] == b'M' || (root.0 <= *k && *k < root.1)))
        .collect()
}

/// Creates `n` empty files `dir/fNNNNNNN` in transactions of 10,000, plus `subdirs`
/// subdirectories holding 3 files and a nested directory each.
fn populate(store: &Store, dir: &str, n: usize, subdirs: usize) {
    store.mkdir(dir, 0o755).unwrap();
    for start in (0..n).step_by(10_000) {
        store
            .transact(|tx| {
                for i in start..(start + 10_000).min(n) {
                    tx.write_file(format!("{dir}/f{i:07}"), b"")?;
                }
                Ok(())
            })
            .unwrap();
    }
    for s in 0..subdirs {
        let sub = format!("{dir}/sub{s}");
        store.mkdir_all(format!("{sub}/deeper/deepest"), 0o755).unwrap();
        for f in 0..3 {
            store.write_file(format!("{sub}/x{f}"), &[b'x'; 70_000]).unwrap();
        }
        store.write_file(format!("{sub}/deeper/deepest/leaf"), b"leaf").unwrap();
    }
}

/// Lists `dir` page by page (each page one transaction) and checks order and uniqueness.
fn list_all(store: &Store, dir: &str) -> usize {
    let mut after: Option<Vec<u8>> = None;
    let mut count = 0;
    loop {
        let page = store.readdir(dir, after.as_deref(), 10_000).unwrap();
        let Some(last) = page.last() else { return count };
        for w in page.windows(2) {
            assert!(w[0].name < w[1].name, "names must come in strictly increasing order");
        }
        if let Some(a) = &after {
            assert!(page[0].name.as_bytes() > a.as_slice(), "a page must start after the cursor");
        }
        count += page.len();
        after = Some(last.name.to_vec());
    }
}

#[test]
fn million_entries_list_rename_and_remove_within_limits() {
    let backend: Arc<dyn Backend> = Arc::new(MemoryBackend::new(Limits::FOUNDATIONDB));
    let store = Store::with_backend(backend.clone(), Options::default(), None).unwrap();
    let files_before = store.statfs().unwrap().files;

    populate(&store, "/big", 1_000_000, 10);
    assert_eq!(list_all(&store, "/big"), 1_000_010);
    assert_eq!(store.statfs().unwrap().files, files_before + 1 + 1_000_000 + 10 * 7);

    // Renaming the directory moves one entry, whatever its size.
    store.rename("/big", "/moved").unwrap();
    assert_eq!(store.stat("/big").unwrap_err().kind(), ErrorKind::NotFound);
    assert_eq!(store.read_file("/moved/sub3/deeper/deepest/leaf").unwrap(), b"leaf");
    assert_eq!(store.readdir("/moved", Some(b"f0999998"), 0).unwrap().len(), 1 + 10);

    store.remove_all("/moved").unwrap();
    assert_eq!(store.stat("/moved").unwrap_err().kind(), ErrorKind::NotFound);
    assert_eq!(store.readdir("/", None, 0).unwrap().len(), 0);
    assert_eq!(store.statfs().unwrap().files, files_before);
    assert_eq!(leftover_keys(&*backend), Vec::<Vec<u8>>::new());
}

#[test]
fn interrupted_remove_all_hides_the_tree_and_finishes_at_next_open() {
    let inner: Arc<dyn Backend> = Arc::new(MemoryBackend::new(Limits::FOUNDATIONDB));
    let (faulty, plan) = FaultyBackend::new(inner.clone());
    let store = Store::with_backend(faulty, Options::default(), None).unwrap();
    let files_before = store.statfs().unwrap().files;
    populate(&store, "/tree", 25_000, 5);
    store.write_file("/keep", b"kept").unwrap();

    // Let the detach and a few batches commit, then fail every commit.
    plan.fail_commits_after(4, u64::MAX);
    let err = store.remove_all("/tree").unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Backend, "{err}");
    plan.fail_commits(0);
    assert_eq!(
        store.stat("/tree").unwrap_err().kind(),
        ErrorKind::NotFound,
        "the tree vanished at once"
    );
    let left = store.statfs().unwrap().files;
    assert!(left > files_before + 1 && left < files_before + 1 + 25_000, "partly deleted: {left}");
    drop(store);

    // The next open of the store (here: without faults) deletes the rest.
    let store = Store::with_backend(inner.clone(), Options::default(), None).unwrap();
    assert_eq!(store.statfs().unwrap().files, files_before + 1);
    assert_eq!(store.read_file("/keep").unwrap(), b"kept");
    store.unlink("/keep").unwrap();
    assert_eq!(leftover_keys(&*inner), Vec::<Vec<u8>>::new());
}

#[test]
fn remove_all_errors_and_simple_cases() {
    let store = Store::open("memory:?limits=foundationdb").unwrap();
    assert_eq!(store.remove_all("/missing").unwrap_err().kind(), ErrorKind::NotFound);
    assert_eq!(store.remove_all("/").unwrap_err().kind(), ErrorKind::Busy);
    store.write_file("/file", b"x").unwrap();
    store.symlink("/file", "/link").unwrap();
    store.remove_all("/link").unwrap();
    assert_eq!(store.read_file("/file").unwrap(), b"x", "a symlink is removed, not followed");
    store.remove_all("/file").unwrap();
    assert!(!store.exists("/file").unwrap());
    store.mkdir("/empty", 0o755).unwrap();
    store.remove_all("/empty").unwrap();
    assert_eq!(store.readdir("/", None, 0).unwrap().len(), 0);
}

#[test]
fn remove_all_checks_permissions_before_changing_anything() {
    use txvfs::Credential;
    let store = Store::open("memory:").unwrap();
    store.mkdir_all("/home/ann/locked", 0o755).unwrap();
    store.write_file("/home/ann/locked/f", b"x").unwrap();
    store.write_file("/home/ann/g", b"y").unwrap();
    store.chown("/home/ann", Some(1000), Some(1000)).unwrap();
    store.chmod("/home", 0o777).unwrap();
    // `locked` stays root's and read-only for others: ann cannot empty it.
    let ann = store.with_credential(Some(Credential { uid: 1000, gid: 1000, groups: vec![] }));
    let err = ann.remove_all("/home/ann").unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Access, "{err}");
    assert_eq!(store.read_file("/home/ann/g").unwrap(), b"y", "nothing was removed");
    store.chown("/home/ann/locked", Some(1000), None).unwrap();
    ann.remove_all("/home/ann").unwrap();
    assert!(!store.exists("/home/ann").unwrap());
}
