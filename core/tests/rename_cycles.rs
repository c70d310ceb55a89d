//! No rename may move a directory into its own subtree (issue 20, item 5), whoever calls:
//! the path API, the inode API the FUSE mount uses, or two threads renaming at once. Before
//! the fix the inode API looked only at the immediate parent, and two concurrent renames
//! (a into b, b into a) both committed, leaving a cycle detached from the root.

use std::sync::Barrier;
use txvfs::{ErrorKind, FileSystem, InodeFileSystem, RenameFlags, Store};

fn ino(store: &Store, path: &str) -> u64 {
    store.stat(path).unwrap().ino
}

#[test]
fn a_directory_cannot_move_below_itself_by_inode() {
    let store = Store::open("memory:").unwrap();
    store.mkdir_all("/a/b/c", 0o755).unwrap();
    let root = ino(&store, "/");
    for target in ["/a/b/c", "/a/b", "/a"] {
        let e = store
            .rename_at(root, "a", ino(&store, target), "moved", RenameFlags::default())
            .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Invalid, "into {target}: {e}");
    }
    assert!(store.exists("/a/b/c").unwrap());
}

#[test]
fn a_directory_cannot_move_below_itself_by_a_path_through_a_symlink() {
    let store = Store::open("memory:").unwrap();
    store.mkdir_all("/a/b", 0o755).unwrap();
    store.symlink("/a/b", "/l").unwrap();
    let e = store.rename("/a", "/l/a").unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Invalid, "{e}");
    assert!(store.exists("/a/b").unwrap());
}

/// True when both directories can still be reached from the root.
fn reachable(store: &Store) -> bool {
    ["/a", "/b", "/a/b", "/b/a"].iter().filter(|p| store.exists(p).unwrap()).count() == 2
}

#[test]
fn concurrent_crossed_renames_never_make_a_cycle() {
    let store = Store::open("memory:").unwrap();
    let root = ino(&store, "/");
    let barrier = Barrier::new(2);
    for round in 0..300 {
        store.mkdir("/a", 0o755).unwrap();
        store.mkdir("/b", 0o755).unwrap();
        let (a, b) = (ino(&store, "/a"), ino(&store, "/b"));
        let (ra, rb) = std::thread::scope(|s| {
            let t1 = s.spawn(|| {
                barrier.wait();
                store.rename_at(root, "a", b, "a", RenameFlags::default())
            });
            let t2 = s.spawn(|| {
                barrier.wait();
                store.rename_at(root, "b", a, "b", RenameFlags::default())
            });
            (t1.join().unwrap(), t2.join().unwrap())
        });
        assert!(ra.is_ok() || rb.is_ok(), "round {round}: neither rename happened: {ra:?} {rb:?}");
        assert!(reachable(&store), "round {round}: a cycle: a->b {ra:?}, b->a {rb:?}");
        let top = if store.exists("/a").unwrap() { "/a" } else { "/b" };
        store.remove_all(top).unwrap();
        assert!(!store.exists("/a").unwrap() && !store.exists("/b").unwrap());
    }
}
