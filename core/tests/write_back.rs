//! Write-back handles buffer sequential writes and commit them at sync/close.

use std::io::SeekFrom;
use txvfs::{FileSystem, OpenOptions, Store};

#[test]
fn buffered_until_sync_or_close_then_exact() {
    let store = Store::open("memory:").unwrap();
    let f = store
        .open("/log", &OpenOptions::new().read(true).write(true).create(true).write_back(true))
        .unwrap();
    let mut expect = Vec::new();
    for i in 0..10_000u32 {
        let line = format!("line {i}\n");
        f.write(line.as_bytes()).unwrap();
        expect.extend_from_slice(line.as_bytes());
    }
    assert_eq!(store.stat("/log").unwrap().size, 0, "nothing committed yet");
    f.sync().unwrap();
    assert_eq!(store.read_file("/log").unwrap(), expect);
    // A seek breaks contiguity: the buffer is flushed and the new run starts where we seeked.
    f.seek(SeekFrom::Start(5)).unwrap();
    f.write(b"XX").unwrap();
    f.seek(SeekFrom::End(0)).unwrap();
    f.write(b"tail").unwrap();
    let mut buf = [0u8; 7];
    f.read_at(&mut buf, 0).unwrap();
    assert_eq!(&buf, b"line XX");
    f.close().unwrap();
    expect[5..7].copy_from_slice(b"XX");
    expect.extend_from_slice(b"tail");
    assert_eq!(store.read_file("/log").unwrap(), expect);
}
