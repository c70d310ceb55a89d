//! The change feed records what the inode-addressed calls (the FUSE mount's) change, like the
//! path calls: a name under a directory inode gets the directory's path; a non-directory
//! addressed only by its inode has no known path and is recorded with an empty one.

use txvfs::schema::ROOT_INO;
use txvfs::{
    ChangeKind, FileSystem, FileType, InodeFileSystem, OpenOptions, RenameFlags, SetAttr, Store,
    WatchOptions, XattrFlags,
};

fn kinds(batches: &[txvfs::Batch]) -> Vec<(ChangeKind, String, u64)> {
    batches
        .iter()
        .flat_map(|b| &b.changes)
        .map(|c| (c.kind, String::from_utf8_lossy(&c.path).into_owned(), c.ino))
        .collect()
}

#[test]
fn inode_calls_are_recorded_with_their_paths() {
    let d = tempfile::tempdir().unwrap();
    let rocks = Store::open(d.path().join("s").to_str().unwrap()).unwrap();
    for store in [Store::open("memory:").unwrap(), rocks] {
        store.set_change_feed(true).unwrap();
        store.mkdir("/top", 0o755).unwrap();
        let mut w = store.watch(WatchOptions::default()).unwrap();
        let top = store.stat("/top").unwrap().ino;
        let d = store.mkdir_at(top, "d", 0o755).unwrap().ino;
        let a = store.mknod_at(d, "a", FileType::File, 0o644, 0).unwrap().ino;
        let rw = OpenOptions::new().read(true).write(true);
        let f = store.open_at(d, "a", &rw).unwrap();
        f.write(b"one").unwrap();
        f.close().unwrap();
        let h = store.open_at(d, "h", &rw.clone().create(true)).unwrap();
        let h_ino = h.stat().unwrap().ino;
        h.write(b"new").unwrap();
        h.close().unwrap();
        let f = store.open_ino(a, &rw).unwrap();
        f.write(b"two").unwrap();
        f.close().unwrap();
        store.set_attr(a, &SetAttr { mode: Some(0o600), ..SetAttr::default() }).unwrap();
        store.set_attr(a, &SetAttr { size: Some(1), ..SetAttr::default() }).unwrap();
        store.setxattr_ino(a, "user.k", b"v", XattrFlags::Any).unwrap();
        store.setxattr_ino(d, "user.k", b"v", XattrFlags::Any).unwrap();
        store.removexattr_ino(d, "user.k").unwrap();
        store.link_at(a, d, "b").unwrap();
        let s = store.symlink_at("a", d, "s").unwrap().ino;
        store.rename_at(d, "b", ROOT_INO, "c", RenameFlags::default()).unwrap();
        store.unlink_at(ROOT_INO, "c").unwrap();
        store.rename_at(top, "d", ROOT_INO, "e", RenameFlags::default()).unwrap();
        store.unlink_at(d, "s").unwrap();
        store.unlink_at(d, "a").unwrap();
        store.unlink_at(d, "h").unwrap();
        store.rmdir_at(ROOT_INO, "e").unwrap();
        let got = w.poll().unwrap();
        let expect = [
            (ChangeKind::Created, "/top/d", d),
            (ChangeKind::Created, "/top/d/a", a),
            (ChangeKind::Written, "/top/d/a", a),
            (ChangeKind::Created, "/top/d/h", h_ino),
            (ChangeKind::Written, "/top/d/h", h_ino),
            (ChangeKind::Written, "", a),
            (ChangeKind::Attrs, "", a),
            (ChangeKind::Written, "", a),
            (ChangeKind::Xattrs, "", a),
            (ChangeKind::Xattrs, "/top/d", d),
            (ChangeKind::Xattrs, "/top/d", d),
            (ChangeKind::Linked, "/top/d/b", a),
            (ChangeKind::Created, "/top/d/s", s),
            (ChangeKind::Renamed, "/top/d/b", a),
            (ChangeKind::Removed, "/c", a),
            (ChangeKind::Renamed, "/top/d", d),
            (ChangeKind::Removed, "/e/s", s),
            (ChangeKind::Removed, "/e/a", a),
            (ChangeKind::Removed, "/e/h", h_ino),
            (ChangeKind::Removed, "/e", d),
        ];
        let expect: Vec<_> = expect.iter().map(|(k, p, i)| (*k, p.to_string(), *i)).collect();
        assert_eq!(kinds(&got), expect, "{}", store.describe());
        let renamed: Vec<_> = got
            .iter()
            .flat_map(|b| &b.changes)
            .filter(|c| c.kind == ChangeKind::Renamed)
            .map(|c| String::from_utf8_lossy(c.to.as_deref().unwrap()).into_owned())
            .collect();
        assert_eq!(renamed, ["/c", "/e"]);
    }
}

#[test]
fn inode_calls_record_nothing_while_the_feed_is_off() {
    let store = Store::open("memory:").unwrap();
    let d = store.mkdir_at(ROOT_INO, "d", 0o755).unwrap().ino;
    store.mknod_at(d, "a", FileType::File, 0o644, 0).unwrap();
    store.set_change_feed(true).unwrap();
    let mut w = store.watch(WatchOptions::default()).unwrap();
    assert!(w.poll().unwrap().is_empty());
}

#[test]
fn a_transaction_of_inode_calls_sees_its_own_new_directories() {
    let d = tempfile::tempdir().unwrap();
    let rocks = Store::open(d.path().join("s").to_str().unwrap()).unwrap();
    for store in [Store::open("memory:").unwrap(), rocks] {
        store.set_change_feed(true).unwrap();
        let mut w = store.watch(WatchOptions::default()).unwrap();
        let tx = store.begin().unwrap();
        let t = tx.mkdir_at(ROOT_INO, "t", 0o755).unwrap().ino;
        let u = tx.mkdir_at(t, "u", 0o755).unwrap().ino;
        let f = tx.mknod_at(u, "f", FileType::File, 0o644, 0).unwrap().ino;
        tx.rename_at(u, "f", t, "g", RenameFlags::default()).unwrap();
        tx.commit().unwrap();
        let got = w.poll().unwrap();
        assert_eq!(got.len(), 1, "one transaction, one batch");
        let expect = [
            (ChangeKind::Created, "/t", t),
            (ChangeKind::Created, "/t/u", u),
            (ChangeKind::Created, "/t/u/f", f),
            (ChangeKind::Renamed, "/t/u/f", f),
        ];
        let expect: Vec<_> = expect.iter().map(|(k, p, i)| (*k, p.to_string(), *i)).collect();
        assert_eq!(kinds(&got), expect, "{}", store.describe());
    }
}

#[test]
fn a_renamed_directory_gives_its_new_path() {
    let store = Store::open("memory:").unwrap();
    store.set_change_feed(true).unwrap();
    let a = store.mkdir_at(ROOT_INO, "a", 0o755).unwrap().ino;
    store.mknod_at(a, "x", FileType::File, 0o644, 0).unwrap(); // learns a's name
    store.rename("/a", "/b").unwrap();
    store.mkdir("/a", 0o755).unwrap(); // another directory takes the old name
    let mut w = store.watch(WatchOptions::default()).unwrap();
    let y = store.mknod_at(a, "y", FileType::File, 0o644, 0).unwrap().ino;
    store.mkdir("/c", 0o755).unwrap();
    store.rename("/b", "/c/b").unwrap();
    let z = store.mknod_at(a, "z", FileType::File, 0o644, 0).unwrap().ino;
    let got: Vec<_> =
        kinds(&w.poll().unwrap()).into_iter().filter(|c| c.2 == y || c.2 == z).collect();
    assert_eq!(
        got,
        [
            (ChangeKind::Created, "/b/y".to_string(), y),
            (ChangeKind::Created, "/c/b/z".to_string(), z)
        ]
    );
}
