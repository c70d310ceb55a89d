//! File data through handles: fallocate modes, append, seek, sparse blocks; readdir paging.

use std::io::SeekFrom;
use txvfs::{ErrorKind, FallocateMode, FileSystem, OpenOptions, Options, Store};

fn small_blocks() -> Store {
    // 512-byte blocks and a 64-byte inline limit make every case cross block boundaries.
    Store::open_with("memory:", Options { block_size: 512, inline_limit: 64, ..Options::default() })
        .unwrap()
}

#[test]
fn fallocate_modes() {
    let s = small_blocks();
    let f = s.open("/f", &OpenOptions::new().read(true).write(true).create(true)).unwrap();
    f.write(&[9u8; 2000]).unwrap();
    f.allocate(FallocateMode::KeepSize, 0, 10_000).unwrap();
    assert_eq!(f.stat().unwrap().size, 2000);
    f.allocate(FallocateMode::Allocate, 1000, 3000).unwrap();
    assert_eq!(f.stat().unwrap().size, 4000);
    f.allocate(FallocateMode::PunchHole, 100, 1500).unwrap();
    let data = s.read_file("/f").unwrap();
    assert_eq!(data.len(), 4000);
    assert!(data[..100].iter().all(|&b| b == 9));
    assert!(data[100..1600].iter().all(|&b| b == 0), "punched range reads as zeros");
    assert!(data[1600..2000].iter().all(|&b| b == 9));
    assert!(data[2000..].iter().all(|&b| b == 0), "allocated tail reads as zeros");
    assert_eq!(f.allocate(FallocateMode::Allocate, 0, 0).unwrap_err().kind(), ErrorKind::Invalid);
    let ro = s.open("/f", &OpenOptions::new().read(true)).unwrap();
    assert_eq!(
        ro.allocate(FallocateMode::Allocate, 0, 1).unwrap_err().kind(),
        ErrorKind::BadHandle
    );
}

#[test]
fn append_seek_and_sparse_writes() {
    let s = small_blocks();
    let a = s.open("/log", &OpenOptions::new().append(true).create(true)).unwrap();
    let w = s.open("/log", &OpenOptions::new().write(true)).unwrap();
    a.write(b"one ").unwrap();
    w.write(b"XY").unwrap(); // overwrites at position 0
    a.write(b"two").unwrap(); // still goes to the end
    assert_eq!(s.read_file("/log").unwrap(), b"XYe two");
    let f = s.open("/sparse", &OpenOptions::new().read(true).write(true).create(true)).unwrap();
    f.write_at(b"end", 5000).unwrap();
    assert_eq!(f.seek(SeekFrom::End(-3)).unwrap(), 5000);
    let mut buf = [0u8; 10];
    assert_eq!(f.read(&mut buf).unwrap(), 3);
    assert_eq!(&buf[..3], b"end");
    assert_eq!(f.read(&mut buf).unwrap(), 0, "end of file");
    let data = s.read_file("/sparse").unwrap();
    assert!(data[..5000].iter().all(|&b| b == 0));
    assert_eq!(f.seek(SeekFrom::Current(-10_000)).unwrap_err().kind(), ErrorKind::Invalid);
    f.set_len(4999).unwrap();
    f.set_len(6000).unwrap();
    assert!(
        s.read_file("/sparse").unwrap().iter().all(|&b| b == 0),
        "shrink then grow reads zeros"
    );
}

#[test]
fn readdir_pages_with_a_cursor() {
    let s = Store::open("memory:").unwrap();
    s.mkdir("/d", 0o755).unwrap();
    s.transact(|tx| {
        for i in 0..250 {
            tx.write_file(format!("/d/n{i:03}"), b"")?;
        }
        Ok(())
    })
    .unwrap();
    let mut names = Vec::new();
    let mut cursor: Option<Vec<u8>> = None;
    loop {
        let page = s.readdir("/d", cursor.as_deref(), 100).unwrap();
        if page.is_empty() {
            break;
        }
        assert!(page.len() <= 100);
        cursor = Some(page.last().unwrap().name.to_vec());
        names.extend(page.into_iter().map(|e| e.name));
        // Entries created or deleted between pages do not disturb the cursor.
        s.unlink("/d/n000").ok();
    }
    assert_eq!(names.len(), 250);
    assert!(names.windows(2).all(|w| w[0] < w[1]), "sorted, no duplicates");
    assert_eq!(s.readdir("/d/n001", None, 0).unwrap_err().kind(), ErrorKind::NotDir);
}

#[test]
fn mkdir_all_and_fallocate_errors_match_linux() {
    let store = Store::open("memory:").unwrap();
    store.write_file("/file", b"x").unwrap();
    // `mkdir -p /file/sub`: ENOTDIR; `mkdir -p /file`: EEXIST.
    assert_eq!(store.mkdir_all("/file/sub", 0o755).unwrap_err().kind(), ErrorKind::NotDir);
    assert_eq!(store.mkdir_all("/file", 0o755).unwrap_err().kind(), ErrorKind::Exists);
    store.mkdir_all("/a/b", 0o755).unwrap();
    store.mkdir_all("/a/b", 0o755).unwrap();
    // fallocate past the largest file size, even when offset + length overflows: EFBIG.
    let f = store.open("/file", &OpenOptions::new().write(true)).unwrap();
    assert_eq!(
        f.allocate(FallocateMode::Allocate, u64::MAX - 1, 10).unwrap_err().kind(),
        ErrorKind::FileTooBig
    );
    assert_eq!(f.allocate(FallocateMode::Allocate, 0, 0).unwrap_err().kind(), ErrorKind::Invalid);
}

/// A file's own block size (`OpenOptions::block_size`): its data round-trips through writes at
/// every alignment, truncation and hole punching; a 4 KiB write into it stores one 4 KiB block;
/// the size is kept across reopening and fsck finds the store clean.
#[test]
fn files_with_their_own_block_size() {
    let dir = tempfile::tempdir().unwrap();
    let uri = format!("rocksdb:{}", dir.path().display());
    let store = Store::open(&uri).unwrap();
    let rw = OpenOptions::new().read(true).write(true).create(true);
    let f = store.open("/db", &rw.clone().block_size(4096)).unwrap();
    assert_eq!(f.stat().unwrap().blksize, 4096);
    let mut model = vec![0u8; 0];
    let mut put = |f: &txvfs::File, off: usize, data: &[u8]| {
        f.write_at(data, off as u64).unwrap();
        if model.len() < off + data.len() {
            model.resize(off + data.len(), 0);
        }
        model[off..off + data.len()].copy_from_slice(data);
    };
    for (i, (off, len)) in
        [(0, 4096), (8192, 4096), (100, 9000), (65536 * 2 + 17, 5), (4095, 2), (150_000, 70_000)]
            .into_iter()
            .enumerate()
    {
        put(&f, off, &vec![i as u8 + 1; len]);
    }
    assert_eq!(store.read_file("/db").unwrap(), model);
    f.set_len(200_001).unwrap();
    model.truncate(200_001);
    f.allocate(FallocateMode::PunchHole, 5000, 20_000).unwrap();
    model[5000..25_000].fill(0);
    assert_eq!(store.read_file("/db").unwrap(), model);
    // One 4 KiB write is one 4 KiB block value (tag byte + data), not a 64 KiB one.
    let backend = store.backend();
    let ino = f.stat().unwrap().ino;
    let block = backend
        .begin()
        .unwrap()
        .get(&txvfs::schema::block_key(ino, 40))
        .unwrap()
        .expect("block 40 of the file");
    assert_eq!(block.len(), 1 + 4096, "block 40 holds bytes 163840..167936 of a 4 KiB-block file");
    // A file that already has blocks keeps its block size; a new one without the option gets
    // the store's; a bad size is refused and creates nothing.
    drop(f);
    let again = store.open("/db", &rw.clone().block_size(1024)).unwrap();
    assert_eq!(again.stat().unwrap().blksize, 4096);
    assert_eq!(store.stat("/plain").map(|_| ()).unwrap_err().kind(), ErrorKind::NotFound);
    store.write_file("/plain", &[1u8; 100_000]).unwrap();
    assert_eq!(store.stat("/plain").unwrap().blksize, 65536);
    // File::set_block_size: while the file has no blocks; Busy after; Invalid for bad sizes.
    let h = store.open("/later", &rw).unwrap();
    assert_eq!(h.set_block_size(700).unwrap_err().kind(), ErrorKind::Invalid);
    h.write_at(&[5u8; 100], 0).unwrap(); // inline still: no blocks
    h.set_block_size(2048).unwrap();
    h.write_at(&[6u8; 9000], 100).unwrap();
    assert_eq!(h.stat().unwrap().blksize, 2048);
    assert_eq!(h.set_block_size(4096).unwrap_err().kind(), ErrorKind::Busy);
    assert_eq!(store.read_file("/later").unwrap(), [vec![5u8; 100], vec![6u8; 9000]].concat());
    let e = store.open("/bad", &rw.clone().block_size(3000)).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Invalid);
    assert!(!store.exists("/bad").unwrap());
    drop((again, backend, store));
    let store = Store::open(&uri).unwrap();
    assert_eq!(store.read_file("/db").unwrap(), model);
    assert_eq!(store.stat("/db").unwrap().blksize, 4096);
    let report = txvfs::fsck::check(&*store.backend(), false, &mut |_| {}).unwrap();
    assert!(report.is_clean(), "{report}");
}

/// Holes and the zeros past a short block read as zeros into a buffer full of other bytes
/// (reads copy block data and zero only what no block covers).
#[test]
fn holes_read_as_zeros_into_a_dirty_buffer() {
    let store = small_blocks(); // 512-byte blocks
    let f = store.open("/sparse", &OpenOptions::new().read(true).write(true).create(true)).unwrap();
    f.write_at(&[1u8; 100], 0).unwrap(); // block 0 short (100 bytes), then a hole
    f.write_at(&[2u8; 600], 1500).unwrap(); // blocks 2-4, with a hole in block 1
    f.write_at(&[3u8; 10], 5000).unwrap(); // far block, hole before it
    let mut expect = vec![0u8; 5010];
    expect[..100].fill(1);
    expect[1500..2100].fill(2);
    expect[5000..].fill(3);
    for (off, len) in [(0, 5010), (50, 3000), (90, 20), (2000, 3005), (600, 400), (4990, 20)] {
        let mut buf = vec![0xAAu8; len];
        let n = f.read_at(&mut buf, off as u64).unwrap();
        let want = &expect[off..(off + len).min(expect.len())];
        assert_eq!(&buf[..n], want, "read of {len} at {off}");
    }
}
