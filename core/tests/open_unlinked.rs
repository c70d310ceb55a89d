//! A file unlinked while open stays readable and writable through its handle; its space is
//! freed at last close, or at the next open of the store after a crash.

use txvfs::{FileSystem, OpenOptions, Store};

#[test]
fn unlinked_file_lives_until_last_close() {
    let store = Store::open("memory:").unwrap();
    store.write_file("/f", &vec![5; 200_000]).unwrap();
    let before = store.statfs().unwrap().files;
    let rw = OpenOptions::new().read(true).write(true);
    let f1 = store.open("/f", &rw).unwrap();
    let f2 = store.open("/f", &rw).unwrap();
    store.unlink("/f").unwrap();
    assert!(!store.exists("/f").unwrap());
    assert_eq!(f1.stat().unwrap().nlink, 0);
    f1.write_at(b"still here", 0).unwrap();
    let mut buf = [0u8; 10];
    f2.read_at(&mut buf, 0).unwrap();
    assert_eq!(&buf, b"still here");
    f1.close().unwrap();
    assert_eq!(store.statfs().unwrap().files, before, "one handle still open");
    f2.close().unwrap();
    assert_eq!(store.statfs().unwrap().files, before - 1, "freed at last close");
}

#[test]
fn orphans_are_freed_at_next_open_after_a_crash() {
    if let Ok(dir) = std::env::var("TXVFS_ORPHAN_CHILD") {
        // Child: leave an unlinked file open and die without closing it.
        let store = Store::open(&dir).unwrap();
        let f = store.open("/victim", &OpenOptions::new().read(true)).unwrap();
        store.unlink("/victim").unwrap();
        store.sync().unwrap();
        std::mem::forget(f);
        std::process::abort();
    }
    let dir = tempfile::tempdir().unwrap();
    let uri = dir.path().to_str().unwrap().to_string();
    let files_before = {
        let store = Store::open(&uri).unwrap();
        store.write_file("/victim", &vec![1; 300_000]).unwrap();
        store.sync().unwrap();
        store.statfs().unwrap().files
    };
    let status = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "orphans_are_freed_at_next_open_after_a_crash", "--nocapture"])
        .env("TXVFS_ORPHAN_CHILD", &uri)
        .status()
        .unwrap();
    assert!(!status.success(), "child aborts");
    let store = Store::open(&uri).unwrap();
    assert!(!store.exists("/victim").unwrap());
    let fs = store.statfs().unwrap();
    assert_eq!(fs.files, files_before - 1, "the orphan inode was reaped at open");
}
