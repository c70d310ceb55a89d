//! Write-back handles lose nothing and duplicate nothing when a flush fails (issue 20, item
//! 7). Before the fix a failed flush inside `write()` kept the bytes buffered and the position
//! advanced, so a caller's retry wrote them twice, and dropping a handle discarded its flush
//! error with up to 4 MiB of data.

use txvfs::{ErrorKind, FileSystem, OpenOptions, Store};

const MIB: usize = 1 << 20;

fn write_back() -> OpenOptions {
    OpenOptions::new().write(true).create(true).write_back(true)
}

#[test]
fn a_write_whose_flush_fails_changes_nothing_and_can_be_retried() {
    // 6 MiB of room, 3 of them taken by ballast to free later.
    let store = Store::open("memory:?capacity=6500000").unwrap();
    store.write_file("/ballast", &vec![1u8; 3 * MIB]).unwrap();
    let f = store.open("/out", &write_back()).unwrap();
    let chunk = |i: usize| vec![i as u8 + 10; MIB];
    let mut written = 0;
    let failed_at = loop {
        match f.write(&chunk(written)) {
            Ok(_) => written += 1,
            Err(e) => {
                assert_eq!(e.kind(), ErrorKind::NoSpace, "{e}");
                break written;
            }
        }
        assert!(written < 16, "the store never filled up");
    };
    assert_eq!(f.position(), (failed_at * MIB) as u64, "a failed write moved the position");
    store.unlink("/ballast").unwrap();
    f.write(&chunk(failed_at)).unwrap(); // the caller's retry of the same bytes
    f.close().unwrap();
    let data = store.read_file("/out").unwrap();
    assert_eq!(data.len(), (failed_at + 1) * MIB, "bytes written twice or lost");
    for i in 0..=failed_at {
        assert!(
            data[i * MIB..(i + 1) * MIB].iter().all(|&b| b == i as u8 + 10),
            "chunk {i} is wrong"
        );
    }
}

#[test]
fn a_dropped_handle_whose_flush_fails_reports_at_the_next_sync() {
    let store = Store::open("memory:?capacity=2000000").unwrap();
    let f = store.open("/out", &write_back()).unwrap();
    f.write(&vec![3u8; 3 * MIB]).unwrap(); // buffered, not yet flushed
    drop(f); // the flush fails: no room
    let e = store.sync().expect_err("the lost write-back data must be reported");
    assert_eq!(e.kind(), ErrorKind::NoSpace, "{e}");
    assert!(e.message().contains("write-back"), "{e}");
    store.sync().unwrap(); // reported once, like an fsync error
}

#[test]
fn close_reports_a_failed_flush() {
    let store = Store::open("memory:?capacity=2000000").unwrap();
    let f = store.open("/out", &write_back()).unwrap();
    f.write(&vec![3u8; 3 * MIB]).unwrap();
    assert_eq!(f.close().unwrap_err().kind(), ErrorKind::NoSpace);
}
