//! The change feed records what is changed through the mount (the inode-addressed calls):
//! names under a directory with their paths, in commit order (issue 31).

mod common;

use common::*;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use txvfs::{ChangeKind, WatchOptions};
use txvfs_fuse::MountOptions;

#[test]
fn changes_through_the_mount_are_in_the_feed() {
    let Some(m) = Mount::with_store(MountOptions::default(), |s| s.set_change_feed(true).unwrap())
    else {
        return;
    };
    let mut w = m.store.watch(WatchOptions::default()).unwrap();
    fs::create_dir(m.path("d")).unwrap();
    fs::create_dir(m.path("d/e")).unwrap();
    fs::write(m.path("d/e/a"), b"data").unwrap();
    fs::rename(m.path("d/e/a"), m.path("d/b")).unwrap();
    fs::set_permissions(m.path("d/e"), fs::Permissions::from_mode(0o700)).unwrap();
    fs::remove_file(m.path("d/b")).unwrap();
    fs::remove_dir(m.path("d/e")).unwrap();
    let got: Vec<(ChangeKind, String)> = w
        .poll()
        .unwrap()
        .iter()
        .flat_map(|b| &b.changes)
        .map(|c| {
            let mut p = String::from_utf8_lossy(&c.path).into_owned();
            if let Some(to) = &c.to {
                p = format!("{p} -> {}", String::from_utf8_lossy(to));
            }
            (c.kind, p)
        })
        .collect();
    // The kernel may add calls of its own (times, sizes); these must be there, in this order.
    let want = [
        (ChangeKind::Created, "/d"),
        (ChangeKind::Created, "/d/e"),
        (ChangeKind::Created, "/d/e/a"),
        (ChangeKind::Written, "/d/e/a"),
        (ChangeKind::Renamed, "/d/e/a -> /d/b"),
        (ChangeKind::Attrs, "/d/e"),
        (ChangeKind::Removed, "/d/b"),
        (ChangeKind::Removed, "/d/e"),
    ];
    let mut rest = got.iter();
    for (k, p) in want {
        assert!(
            rest.any(|(gk, gp)| *gk == k && gp == p),
            "{k:?} {p} missing or out of order in {got:?}"
        );
    }
}
