//! Mounting a named snapshot (read-only: writes fail with EROFS) and a writable clone of it
//! (renames and deletes of lower files through the kernel), the snapshot left unchanged.

mod common;

use common::*;
use std::fs;
use txvfs::{FileSystem, Options, Store};
use txvfs_fuse::MountOptions;

/// A store with /d/f and /d/g and its named snapshot `base`; returns the snapshot's URI.
fn base(dir: &std::path::Path) -> String {
    let store = Store::open(dir.join("base").to_str().unwrap()).unwrap();
    store.mkdir("/d", 0o755).unwrap();
    store.write_file("/d/f", b"lower f").unwrap();
    store.write_file("/d/g", b"lower g").unwrap();
    store.create_named_snapshot("base").unwrap();
    store.named_snapshot_uri("base").unwrap()
}

#[test]
fn mounted_snapshot_is_read_only() {
    let db = tempfile::tempdir().unwrap();
    let uri = base(db.path());
    let snap = Store::open(&uri).unwrap();
    let Some(m) = Mount::of(snap, db, MountOptions::default()) else { return };
    assert_eq!(fs::read(m.path("d/f")).unwrap(), b"lower f");
    assert_eq!(errno(fs::OpenOptions::new().write(true).open(m.path("d/f"))), libc::EROFS);
    assert_eq!(errno(fs::remove_file(m.path("d/g"))), libc::EROFS);
    assert_eq!(errno(fs::write(m.path("new"), b"x")), libc::EROFS);
    assert_eq!(m.store.read_file("/d/g").unwrap(), b"lower g");
}

#[test]
fn mounted_clone_changes_only_itself() {
    let db = tempfile::tempdir().unwrap();
    let uri = base(db.path());
    let clone = Store::create_clone(&uri, db.path().join("clone").to_str().unwrap(), Options::default()).unwrap();
    let Some(m) = Mount::of(clone, db, MountOptions::default()) else { return };
    assert_eq!(fs::read(m.path("d/f")).unwrap(), b"lower f");
    fs::rename(m.path("d"), m.path("e")).unwrap();
    fs::remove_file(m.path("e/g")).unwrap();
    fs::write(m.path("e/f"), b"upper f").unwrap();
    let names: Vec<_> = fs::read_dir(m.path("e")).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(names, vec![std::ffi::OsString::from("f")]);
    assert_eq!(fs::read(m.path("e/f")).unwrap(), b"upper f");
    let lower = Store::open(&uri).unwrap();
    assert_eq!(lower.read_file("/d/f").unwrap(), b"lower f");
    assert_eq!(lower.read_file("/d/g").unwrap(), b"lower g");
}
