//! Pack images: round trips (store -> pack, host directory -> pack), the read-only backend,
//! the one-read cost model (the reader's own `pread` counter), and damaged images.

use std::collections::BTreeMap;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::sync::Arc;
use txvfs::pack::{self, PackBackend};
use txvfs::{ErrorKind, FileSystem, FileType, Options, SetTime, Store, XattrFlags};

/// Everything a reader can see of one path: type, mode, owner, size, times, links, data,
/// symlink target and extended attributes.
#[derive(Debug, PartialEq)]
struct Seen {
    kind: FileType,
    mode: u32,
    uid: u32,
    gid: u32,
    nlink: u64,
    size: u64,
    mtime: i64,
    atime: i64,
    data: Vec<u8>,
    xattrs: BTreeMap<Vec<u8>, Vec<u8>>,
}

/// Walks a store tree: path -> what is seen, and path -> inode number (for hard links).
fn walk(fs: &Store) -> (BTreeMap<Vec<u8>, Seen>, BTreeMap<Vec<u8>, u64>) {
    let (mut seen, mut inos) = (BTreeMap::new(), BTreeMap::new());
    let mut todo = vec![b"/".to_vec()];
    while let Some(p) = todo.pop() {
        let st = fs.lstat(&p).unwrap();
        let data = match st.kind {
            FileType::File => fs.read_file(&p).unwrap(),
            FileType::Symlink => fs.readlink(&p).unwrap(),
            _ => Vec::new(),
        };
        let mut xattrs = BTreeMap::new();
        for n in fs.listxattr(&p).unwrap() {
            let v = fs.getxattr(&p, &n).unwrap();
            xattrs.insert(n, v);
        }
        if st.kind == FileType::Dir {
            for e in fs.readdir(&p, None, 0).unwrap() {
                let mut c = if p == b"/" { p.clone() } else { [&p[..], b"/"].concat() };
                c.extend_from_slice(&e.name);
                todo.push(c);
            }
        }
        inos.insert(p.clone(), st.ino);
        seen.insert(
            p,
            Seen {
                kind: st.kind,
                mode: st.mode,
                uid: st.uid,
                gid: st.gid,
                nlink: st.nlink,
                size: st.size,
                mtime: st.mtime_ns,
                atime: st.atime_ns,
                data,
                xattrs,
            },
        );
    }
    (seen, inos)
}

/// A small store with every kind of entry: nested directories, inline and block files, a
/// large file over several blocks, a symlink, a hard link, a FIFO, xattrs and set times.
fn sample_store(dir: &Path) -> Store {
    let uri = dir.join("src").to_str().unwrap().to_string();
    let s = Store::open_with(
        &uri,
        Options { block_size: 4096, inline_limit: 512, ..Options::default() },
    )
    .unwrap();
    s.mkdir_all("/a/b/c", 0o750).unwrap();
    s.write_file("/a/small", b"tiny").unwrap();
    s.write_file("/a/b/block", &vec![7u8; 3000]).unwrap();
    let big: Vec<u8> = (0..300_000u32).map(|i| (i % 251) as u8).collect();
    s.write_file("/a/b/c/big", &big).unwrap();
    s.write_file("/empty", b"").unwrap();
    s.symlink("a/small", "/link").unwrap();
    s.link("/a/b/block", "/a/hard").unwrap();
    s.mknod("/fifo", FileType::Fifo, 0o600, 0).unwrap();
    s.setxattr("/a/small", "user.color", b"blue", XattrFlags::default()).unwrap();
    s.setxattr("/a", "user.empty", b"", XattrFlags::default()).unwrap();
    s.chmod("/a/small", 0o4640).unwrap();
    s.utimens("/a/small", SetTime::At(1_000_000_123), SetTime::At(2_000_000_456)).unwrap();
    s
}

fn open_pack(image: &Path) -> (Arc<PackBackend>, Store) {
    let b = PackBackend::open(image).unwrap();
    let s = Store::with_backend(b.clone(), Options::default(), None).unwrap();
    (b, s)
}

#[test]
fn store_round_trips_through_a_pack_entry_by_entry() {
    let dir = tempfile::tempdir().unwrap();
    let src = sample_store(dir.path());
    let image = dir.path().join("img.pack");
    let mut calls = 0;
    let stats = pack::pack_backend(&*src.backend(), &image, &mut |_| calls += 1).unwrap();
    assert_eq!(stats.inodes, 10, "root, a, b, c, 4 files (one hard-linked), link, fifo");
    assert_eq!(calls, 10);
    let (want, src_inos) = walk(&src);
    // Through the URI, like every binding.
    let packed = Store::open(&format!("pack:{}", image.display())).unwrap();
    let (got, inos) = walk(&packed);
    assert_eq!(got, want);
    assert_eq!(inos[&b"/a/hard".to_vec()], inos[&b"/a/b/block".to_vec()]);
    assert_eq!(src_inos.len(), inos.len());
    let st = packed.statfs().unwrap();
    assert_eq!((st.files, st.blocks_free), (10, 0), "a pack is full");
    let len = std::fs::metadata(&image).unwrap().len();
    assert_eq!(st.blocks, len / st.block_size, "the image's size");
}

#[test]
fn writes_to_a_pack_fail_with_erofs_and_change_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let src = sample_store(dir.path());
    let image = dir.path().join("img.pack");
    pack::pack_backend(&*src.backend(), &image, &mut |_| {}).unwrap();
    let before = std::fs::read(&image).unwrap();
    let (_, p) = open_pack(&image);
    let (want, _) = walk(&p);
    let errs = [
        p.write_file("/new", b"x").unwrap_err(),
        p.write_file("/a/small", b"x").unwrap_err(),
        p.mkdir("/d", 0o755).unwrap_err(),
        p.unlink("/a/small").unwrap_err(),
        p.rename("/a/small", "/moved").unwrap_err(),
        p.chmod("/a/small", 0o600).unwrap_err(),
        p.setxattr("/a/small", "user.x", b"1", XattrFlags::default()).unwrap_err(),
        p.truncate("/a/b/block", 0).unwrap_err(),
        p.remove_all("/a").unwrap_err(),
    ];
    for e in errs {
        assert_eq!(e.kind(), ErrorKind::ReadOnly, "{e}");
        assert_eq!(e.code(), libc::EROFS);
    }
    assert_eq!(walk(&p).0, want);
    assert_eq!(std::fs::read(&image).unwrap(), before, "the image is never written");
}

/// A tree like the seed's: three levels of directories, small files of 0..8 KiB.
fn seed_like_tree(s: &Store, seed: u64) -> Vec<Vec<u8>> {
    let mut x = seed;
    let mut rnd = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let mut files = Vec::new();
    s.transact(|tx| {
        files.clear();
        for a in 0..3 {
            for b in 0..3 {
                for c in 0..3 {
                    let d = format!("/d{a}/d{b}/d{c}");
                    tx.mkdir_all(&d, 0o755)?;
                    for f in 0..10 {
                        let p = format!("{d}/f{f}").into_bytes();
                        let n = (rnd() % 8193) as usize;
                        tx.write_file(&p, &vec![(rnd() % 256) as u8; n])?;
                        files.push(p);
                    }
                }
            }
        }
        Ok(())
    })
    .unwrap();
    files
}

#[test]
fn a_random_small_file_costs_one_read_and_a_listing_one_read() {
    let seed = 0x5eed_0017;
    println!("seed {seed:#x}");
    let dir = tempfile::tempdir().unwrap();
    let src = Store::open(dir.path().join("src").to_str().unwrap()).unwrap();
    let files = seed_like_tree(&src, seed);
    let image = dir.path().join("img.pack");
    pack::pack_backend(&*src.backend(), &image, &mut |_| {}).unwrap();
    let (b, p) = open_pack(&image);
    assert_eq!(b.preads(), 3, "open: header, globals, index");
    // A directory never read before: one read lists it.
    let n = b.preads();
    assert_eq!(p.readdir("/d1/d2/d0", None, 0).unwrap().len(), 10);
    let listing_reads = b.preads() - n;
    assert!(listing_reads <= 4, "/, d1, d1/d2, d1/d2/d0: one read each ({listing_reads})");
    // Warm the directory tables (they are cached), then read every file in a scrambled order.
    for a in 0..3 {
        for bb in 0..3 {
            for c in 0..3 {
                p.readdir(format!("/d{a}/d{bb}/d{c}"), None, 0).unwrap();
            }
        }
    }
    let mut order: Vec<usize> = (0..files.len()).collect();
    let mut x = seed;
    for i in (1..order.len()).rev() {
        x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        order.swap(i, (x >> 33) as usize % (i + 1));
    }
    for i in order {
        let f = &files[i];
        let before = b.preads();
        let st = p.stat(f).unwrap();
        let data = p.read_file(f).unwrap();
        assert_eq!(data.len() as u64, st.size);
        assert_eq!(data, src.read_file(f).unwrap());
        assert_eq!(
            b.preads() - before,
            1,
            "{}: stat + read in one pread",
            String::from_utf8_lossy(f)
        );
    }
    assert!(b.index_bytes() as u64 <= 8 * (b.inodes() + 1));
}

fn flip(image: &Path, at: u64) -> Vec<u8> {
    let mut bytes = std::fs::read(image).unwrap();
    bytes[at as usize] ^= 0x20;
    bytes
}

/// Reads everything in the pack at `image`: Ok only if the whole tree read back.
fn read_all(image: &Path) -> txvfs::Result<()> {
    let s = Store::with_backend(PackBackend::open(image)?, Options::default(), None)?;
    let mut todo = vec![b"/".to_vec()];
    while let Some(p) = todo.pop() {
        let st = s.lstat(&p)?;
        for n in s.listxattr(&p)? {
            s.getxattr(&p, &n)?;
        }
        match st.kind {
            FileType::File => drop(s.read_file(&p)?),
            FileType::Symlink => drop(s.readlink(&p)?),
            FileType::Dir => {
                for e in s.readdir(&p, None, 0)? {
                    todo.push([&p[..], if p == b"/" { b"" } else { b"/" }, &e.name].concat());
                }
            }
            _ => {}
        }
    }
    Ok(())
}

#[test]
fn damaged_and_truncated_images_are_refused_never_misread() {
    let dir = tempfile::tempdir().unwrap();
    let src = sample_store(dir.path());
    let image = dir.path().join("img.pack");
    pack::pack_backend(&*src.backend(), &image, &mut |_| {}).unwrap();
    let good = std::fs::read(&image).unwrap();
    let len = good.len() as u64;
    let bad = dir.path().join("bad.pack");
    // Every byte of the image is under a checksum: one flipped bit anywhere is refused. Every
    // offset of the first records and of the tail (globals, index), and a stride through the
    // data of the big file.
    let mut offsets: Vec<u64> =
        (0..len).filter(|o| o % 1009 == 0 || *o < 1200 || *o >= len - 800).collect();
    offsets.dedup();
    for &at in &offsets {
        std::fs::write(&bad, flip(&image, at)).unwrap();
        let e = read_all(&bad).expect_err(&format!("flipped byte {at} of {len} went unnoticed"));
        assert_eq!(e.kind(), ErrorKind::Corrupt, "byte {at}: {e}");
        assert!(e.to_string().contains("corrupt pack image"), "{e}");
    }
    for cut in [0, 1, 63, 64, 65, len / 2, len - 9, len - 1] {
        std::fs::write(&bad, &good[..cut as usize]).unwrap();
        let e =
            PackBackend::open(&bad).map(|_| ()).expect_err(&format!("image cut at {cut} opened"));
        assert_eq!(e.kind(), ErrorKind::Corrupt, "cut at {cut}: {e}");
    }
    let mut longer = good.clone();
    longer.extend_from_slice(b"junk");
    std::fs::write(&bad, &longer).unwrap();
    assert_eq!(PackBackend::open(&bad).map(|_| ()).unwrap_err().kind(), ErrorKind::Corrupt);
    std::fs::write(&bad, &good).unwrap();
    read_all(&bad).unwrap();
}

#[test]
fn host_directory_round_trips_through_a_pack() {
    let dir = tempfile::tempdir().unwrap();
    let host = dir.path().join("host");
    std::fs::create_dir_all(host.join("x/y")).unwrap();
    std::fs::write(host.join("x/a.txt"), b"hello").unwrap();
    let big: Vec<u8> = (0..200_000u32).map(|i| (i * 31 % 256) as u8).collect();
    std::fs::write(host.join("x/y/big"), &big).unwrap();
    std::fs::write(host.join("empty"), b"").unwrap();
    std::fs::hard_link(host.join("x/a.txt"), host.join("x/y/hard")).unwrap();
    std::os::unix::fs::symlink("../a.txt", host.join("x/y/sym")).unwrap();
    let xattr_ok = xattr::set(&host.join("x/a.txt"), "user.k", b"v");
    std::fs::set_permissions(
        host.join("x/a.txt"),
        std::os::unix::fs::PermissionsExt::from_mode(0o640),
    )
    .unwrap();
    let image = dir.path().join("host.pack");
    let stats = pack::pack_dir(&host, &image, 65536, 4096, &mut |_| {}).unwrap();
    assert_eq!(stats.inodes, 7);
    let (_, p) = open_pack(&image);
    for rel in ["x", "x/y", "x/a.txt", "x/y/big", "empty", "x/y/hard", "x/y/sym"] {
        let hp = host.join(rel);
        let m = std::fs::symlink_metadata(&hp).unwrap();
        let sp = format!("/{rel}");
        let st = p.lstat(&sp).unwrap();
        assert_eq!(
            (st.mode, st.uid, st.gid, st.nlink),
            (m.mode(), m.uid(), m.gid(), m.nlink()),
            "{rel}"
        );
        // (Not atime: packing reads the host files, which may move their atime.)
        assert_eq!(st.mtime_ns, m.mtime() * 1_000_000_000 + m.mtime_nsec(), "{rel}");
        if m.is_file() {
            assert_eq!(p.read_file(&sp).unwrap(), std::fs::read(&hp).unwrap(), "{rel}");
        } else if m.file_type().is_symlink() {
            assert_eq!(
                p.readlink(&sp).unwrap(),
                std::fs::read_link(&hp).unwrap().as_os_str().as_bytes()
            );
        }
    }
    assert_eq!(p.lstat("/x/y/hard").unwrap().ino, p.lstat("/x/a.txt").unwrap().ino);
    if xattr_ok {
        assert_eq!(p.getxattr("/x/a.txt", "user.k").unwrap(), b"v");
    }
}

/// Host extended attributes, where the file system under the temporary directory has them.
mod xattr {
    use std::os::unix::ffi::OsStrExt;
    /// Sets `name` on `path`; false if the file system does not support user xattrs.
    pub fn set(path: &std::path::Path, name: &str, value: &[u8]) -> bool {
        let p = std::ffi::CString::new(path.as_os_str().as_bytes()).unwrap();
        let n = std::ffi::CString::new(name).unwrap();
        // SAFETY: valid C strings and a buffer of `value.len()` bytes.
        unsafe {
            libc::setxattr(p.as_ptr(), n.as_ptr(), value.as_ptr().cast(), value.len(), 0) == 0
        }
    }
}

#[test]
fn a_pack_is_read_at_one_snapshot() {
    // The store changes while the image is being built (from the progress callback, after
    // the root's record): the image still shows the tree as it was when the build began.
    let dir = tempfile::tempdir().unwrap();
    let src = sample_store(dir.path());
    let (want, _) = walk(&src);
    let image = dir.path().join("img.pack");
    let writer = src.clone();
    let mut changed = false;
    pack::pack_backend(&*src.backend(), &image, &mut |_| {
        if !changed {
            changed = true;
            writer
                .transact(|tx| {
                    tx.write_file("/later", b"x")?;
                    tx.write_file("/a/b/c/big", b"rewritten")?;
                    tx.unlink("/a/hard")?;
                    tx.rename("/a/small", "/a/b/moved")
                })
                .unwrap();
        }
    })
    .unwrap();
    assert!(changed);
    let (_, p) = open_pack(&image);
    assert_eq!(walk(&p).0, want);
}

/// A pack is a read-only backend, so it can be a writable clone's lower layer: changes go to
/// the clone, the image stays as it was.
#[test]
fn a_clone_over_a_pack_writes_to_the_clone_only() {
    let d = tempfile::tempdir().unwrap();
    let src_uri = d.path().join("src").to_str().unwrap().to_string();
    let src = Store::open(&src_uri).unwrap();
    src.write_file("/kept", b"from the pack").unwrap();
    src.write_file("/gone", b"deleted in the clone").unwrap();
    drop(src);
    let image = d.path().join("img.pack");
    pack::pack_store(&src_uri, &image, &mut |_| {}).unwrap();
    let before = std::fs::read(&image).unwrap();
    let lower = format!("pack:{}", image.display());
    let upper = d.path().join("clone");
    let clone =
        Store::create_clone(&lower, upper.to_str().unwrap(), txvfs::Options::default()).unwrap();
    clone.write_file("/new", b"clone only").unwrap();
    clone.unlink("/gone").unwrap();
    assert_eq!(clone.read_file("/kept").unwrap(), b"from the pack");
    assert!(!clone.exists("/gone").unwrap());
    drop(clone);
    let again = Store::open(upper.to_str().unwrap()).unwrap();
    assert_eq!(again.read_file("/new").unwrap(), b"clone only");
    assert!(!again.exists("/gone").unwrap());
    assert_eq!(std::fs::read(&image).unwrap(), before, "the image never changes");
}

#[test]
fn lookups_in_a_large_directory_find_every_name_and_no_other() {
    // Names that share their first 8 bytes, differ only in length, or hold NUL-free bytes
    // past 8: the reader's hash table and key prefixes must tell them all apart.
    let dir = tempfile::tempdir().unwrap();
    let s = Store::open(dir.path().join("src").to_str().unwrap()).unwrap();
    s.mkdir("/d", 0o755).unwrap();
    let mut names: Vec<String> = Vec::new();
    for i in 0..300 {
        names.push(format!("n{i}"));
        names.push(format!("common-prefix-{i:04}"));
        names.push("x".repeat(1 + i % 40));
    }
    names.sort();
    names.dedup();
    for (i, n) in names.iter().enumerate() {
        s.write_file(format!("/d/{n}"), i.to_string().as_bytes()).unwrap();
    }
    let image = dir.path().join("img.pack");
    pack::pack_backend(&*s.backend(), &image, &mut |_| {}).unwrap();
    let (_, p) = open_pack(&image);
    for (i, n) in names.iter().enumerate() {
        assert_eq!(p.read_file(format!("/d/{n}")).unwrap(), i.to_string().as_bytes(), "{n}");
    }
    for missing in [
        "n",
        "n300",
        "common-prefix-",
        "common-prefix-0300",
        "common-prefix-00000",
        "x".repeat(41).as_str(),
        "y",
    ] {
        assert_eq!(
            p.stat(format!("/d/{missing}")).unwrap_err().kind(),
            ErrorKind::NotFound,
            "{missing}"
        );
    }
    let listed: Vec<String> = p
        .readdir("/d", None, 0)
        .unwrap()
        .into_iter()
        .map(|e| String::from_utf8(e.name.into_vec()).unwrap())
        .collect();
    assert_eq!(listed, names);
}

#[test]
fn an_image_of_an_older_format_is_refused_with_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let src = sample_store(dir.path());
    let image = dir.path().join("img.pack");
    pack::pack_backend(&*src.backend(), &image, &mut |_| {}).unwrap();
    // Rewrite the header as version 1 (with a valid header checksum).
    let mut bytes = std::fs::read(&image).unwrap();
    bytes[8..12].copy_from_slice(&1u32.to_le_bytes());
    let crc = pack::format::crc32c(&bytes[..60]);
    bytes[60..64].copy_from_slice(&crc.to_le_bytes());
    std::fs::write(&image, &bytes).unwrap();
    let e = Store::open(&format!("pack:{}", image.display())).map(|_| ()).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Corrupt);
    assert!(e.to_string().contains("version 1") && e.to_string().contains("rebuild"), "{e}");
}
