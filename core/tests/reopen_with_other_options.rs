//! A second open of a store that is already open in this process honours its own options
//! (issue 20, item 3). Before the fix it returned the first open's instance with the first
//! open's options: `read_only: true` on a second open gave a writable store.

use txvfs::{ErrorKind, FileSystem, Options, Store};

fn read_only() -> Options {
    Options { read_only: true, ..Options::default() }
}

#[test]
fn a_read_only_second_open_is_read_only() {
    let dir = tempfile::tempdir().unwrap();
    let uri = dir.path().to_str().unwrap();
    let writable = Store::open(uri).unwrap();
    writable.write_file("/f", b"1").unwrap();
    let ro = Store::open_with(uri, read_only()).unwrap();
    for e in [ro.write_file("/g", b""), ro.mkdir("/d", 0o755), ro.unlink("/f")] {
        assert_eq!(e.unwrap_err().kind(), ErrorKind::ReadOnly);
    }
    let tx = ro.begin().unwrap();
    assert_eq!(tx.write_file("/h", b"").unwrap_err().kind(), ErrorKind::ReadOnly);
    assert_eq!(ro.read_file("/f").unwrap(), b"1");
    writable.write_file("/f", b"2").unwrap();
    assert_eq!(ro.read_file("/f").unwrap(), b"2", "both handles see one store");
}

#[test]
fn a_writable_second_open_after_a_read_only_one_can_write() {
    let dir = tempfile::tempdir().unwrap();
    let uri = dir.path().to_str().unwrap();
    Store::open(uri).unwrap().write_file("/f", b"1").unwrap();
    let ro = Store::open_with(uri, read_only()).unwrap();
    let rw = Store::open(uri).unwrap();
    rw.write_file("/g", b"2").unwrap();
    assert_eq!(ro.read_file("/g").unwrap(), b"2");
    assert_eq!(ro.write_file("/h", b"").unwrap_err().kind(), ErrorKind::ReadOnly);
}

#[test]
fn per_open_retry_limits_are_kept() {
    let dir = tempfile::tempdir().unwrap();
    let uri = dir.path().to_str().unwrap();
    let _first = Store::open(uri).unwrap();
    let second = Store::open_with(uri, Options { max_retries: 0, ..Options::default() }).unwrap();
    // Conflict on every attempt: with no retries allowed the closure runs exactly once.
    let mut runs = 0;
    let r = second.transact(|tx| {
        runs += 1;
        tx.write_file("/c", b"x")?;
        Err::<(), _>(txvfs::Error::new(ErrorKind::Conflict, "forced"))
    });
    assert!(r.is_err());
    assert_eq!(runs, 1, "the second open's max_retries was ignored");
}
