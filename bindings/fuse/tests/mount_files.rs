//! The mount through real system calls: regular files (truncate, append, sparse, large files
//! byte for byte, O_EXCL), directories (big listings changed while read), symlinks, hard
//! links, renameat2 flags and extended attributes, checked through the store's API too.
//! Each test mounts a fresh RocksDB store (see `common`).

mod common;

use common::*;
use std::collections::HashMap;
use std::fs;
use std::io::{Seek, SeekFrom, Write};
use std::os::unix::fs::{FileExt, MetadataExt, OpenOptionsExt};
use std::path::Path;
use txvfs::{FileSystem, FileType};

// ---- regular files ----

#[test]
fn create_write_read_truncate_append() {
    let Some(m) = default_mount() else { return };
    let f = m.path("a.txt");
    fs::write(&f, b"hello world").unwrap();
    assert_eq!(fs::read(&f).unwrap(), b"hello world");
    assert_eq!(m.store.read_file("/a.txt").unwrap(), b"hello world");
    assert_eq!(fs::metadata(&f).unwrap().len(), 11);

    // Shrinking truncate(2) by path, then growing ftruncate(2): the regrown bytes read as zeros,
    // not as the data that was cut off.
    fs::write(&f, vec![0xAAu8; 100_000]).unwrap();
    sys(unsafe { libc::truncate(cpath(&f).as_ptr(), 10) }).unwrap();
    assert_eq!(fs::metadata(&f).unwrap().len(), 10);
    let h = fs::OpenOptions::new().read(true).write(true).open(&f).unwrap();
    h.set_len(100_000).unwrap();
    let mut want = vec![0xAAu8; 10];
    want.resize(100_000, 0);
    assert_eq!(fs::read(&f).unwrap(), want);
    assert_eq!(m.store.read_file("/a.txt").unwrap(), want);
    h.set_len(3).unwrap();
    drop(h);
    assert_eq!(m.store.read_file("/a.txt").unwrap(), [0xAA; 3]);

    // O_TRUNC on open.
    fs::write(&f, b"abc").unwrap();
    assert_eq!(m.store.read_file("/a.txt").unwrap(), b"abc");

    // O_APPEND: every write lands at the end, also with two handles taking turns.
    let mut a1 = fs::OpenOptions::new().append(true).open(&f).unwrap();
    let mut a2 = fs::OpenOptions::new().append(true).open(&f).unwrap();
    a1.write_all(b"A").unwrap();
    a2.write_all(b"B").unwrap();
    a1.write_all(b"C").unwrap();
    drop((a1, a2));
    assert_eq!(fs::read(&f).unwrap(), b"abcABC");
    assert_eq!(m.store.read_file("/a.txt").unwrap(), b"abcABC");

    // A file written through the store reads back through the mount.
    m.store.write_file("/from-store", b"store data").unwrap();
    assert_eq!(fs::read(m.path("from-store")).unwrap(), b"store data");
}

#[test]
fn open_missing_and_exclusive_create() {
    let Some(m) = default_mount() else { return };
    assert_eq!(errno(fs::File::open(m.path("missing"))), libc::ENOENT);
    assert_eq!(errno(fs::File::create(m.path("no/such/dir"))), libc::ENOENT);
    assert_eq!(errno(fs::OpenOptions::new().write(true).open(m.path("missing"))), libc::ENOENT);
    assert!(!m.store.exists("/missing").unwrap());

    let new = || fs::OpenOptions::new().write(true).create_new(true).mode(0o640).open(m.path("x"));
    new().unwrap().write_all(b"first").unwrap();
    assert_eq!(errno(new()), libc::EEXIST);
    assert_eq!(m.store.read_file("/x").unwrap(), b"first");
    let st = m.store.stat("/x").unwrap();
    assert_eq!(st.mode & 0o7777, 0o640 & !current_umask());
    // O_EXCL on a name that is a directory or a symlink fails too (no following).
    fs::create_dir(m.path("d")).unwrap();
    std::os::unix::fs::symlink("x", m.path("l")).unwrap();
    for name in ["d", "l"] {
        let r = fs::OpenOptions::new().write(true).create_new(true).open(m.path(name));
        assert_eq!(errno(r), libc::EEXIST, "{name}");
    }
    assert_eq!(errno(fs::OpenOptions::new().write(true).open(m.path("d"))), libc::EISDIR);
}

#[test]
fn large_and_sparse_files_byte_for_byte() {
    let Some(m) = default_mount() else { return };
    // Several MiB in one write(2) stream, not a multiple of the block or page size.
    let data = noise(9 * 1024 * 1024 + 12345, 7);
    fs::write(m.path("big"), &data).unwrap();
    assert_eq!(fs::metadata(m.path("big")).unwrap().len(), data.len() as u64);
    assert!(fs::read(m.path("big")).unwrap() == data, "big file read through the mount differs");
    assert!(m.store.read_file("/big").unwrap() == data, "big file read through the store differs");

    // pwrite and pread at offsets across block (64 KiB) and page boundaries.
    let mut model = data.clone();
    let h = fs::OpenOptions::new().read(true).write(true).open(m.path("big")).unwrap();
    for (i, off) in [0u64, 4095, 65534, 65536 * 3 - 1, 5 * 1024 * 1024 + 3, data.len() as u64 - 2]
        .into_iter()
        .enumerate()
    {
        let patch = noise(1000 + i * 777, off + 1);
        h.write_all_at(&patch, off).unwrap();
        let end = off as usize + patch.len();
        if end > model.len() {
            model.resize(end, 0);
        }
        model[off as usize..end].copy_from_slice(&patch);
        let mut back = vec![0u8; patch.len()];
        h.read_exact_at(&mut back, off).unwrap();
        assert!(back == patch, "pread at {off} differs");
    }
    // A read straddling end of file is short.
    let mut tail = vec![0u8; 100];
    assert_eq!(h.read_at(&mut tail, model.len() as u64 - 10).unwrap(), 10);
    assert_eq!(&tail[..10], &model[model.len() - 10..]);
    drop(h);
    assert!(fs::read(m.path("big")).unwrap() == model);
    assert!(m.store.read_file("/big").unwrap() == model);

    // A sparse file: one byte after a 10 MiB hole, and a block in the middle.
    let mut s = fs::File::create(m.path("sparse")).unwrap();
    s.seek(SeekFrom::Start(10 << 20)).unwrap();
    s.write_all(b"!").unwrap();
    s.write_all_at(b"middle", 3 << 20).unwrap();
    drop(s);
    let mut want = vec![0u8; (10 << 20) + 1];
    want[10 << 20] = b'!';
    want[3 << 20..(3 << 20) + 6].copy_from_slice(b"middle");
    assert_eq!(fs::metadata(m.path("sparse")).unwrap().len(), want.len() as u64);
    assert!(fs::read(m.path("sparse")).unwrap() == want);
    assert!(m.store.read_file("/sparse").unwrap() == want);
    // Reading at and past end of file gives nothing.
    let s = fs::File::open(m.path("sparse")).unwrap();
    assert_eq!(s.read_at(&mut [0u8; 10], want.len() as u64).unwrap(), 0);
    assert_eq!(s.read_at(&mut [0u8; 10], want.len() as u64 + 1000).unwrap(), 0);
}

// ---- directories ----

#[test]
fn mkdir_rmdir_and_big_listing() {
    let Some(m) = default_mount() else { return };
    let d = m.path("big");
    fs::create_dir(&d).unwrap();
    assert_eq!(errno(fs::create_dir(&d)), libc::EEXIST);
    const N: usize = 3000;
    let names: Vec<String> = (0..N).map(|i| format!("e{i:04}")).collect();
    for (i, n) in names.iter().enumerate() {
        if i % 10 == 0 {
            fs::create_dir(d.join(n)).unwrap();
        } else {
            fs::File::create(d.join(n)).unwrap();
        }
    }
    // The store has them all; the directory's link count counts its subdirectories.
    assert_eq!(m.store.readdir("/big", None, 10 * N).unwrap().len(), N);
    assert_eq!(fs::metadata(&d).unwrap().nlink(), 2 + N as u64 / 10);

    // Every name exactly once, with its type (more than two pages of the adapter's listing).
    let mut seen: HashMap<String, bool> = HashMap::new();
    for e in fs::read_dir(&d).unwrap() {
        let e = e.unwrap();
        let name = e.file_name().into_string().unwrap();
        let is_dir = e.file_type().unwrap().is_dir();
        assert!(seen.insert(name.clone(), is_dir).is_none(), "{name} listed twice");
    }
    assert_eq!(seen.len(), N);
    for (i, n) in names.iter().enumerate() {
        assert_eq!(seen.get(n), Some(&(i % 10 == 0)), "{n}");
    }

    // Changing the directory during a listing: no name twice, and every name that was there
    // all along exactly once. Deleted are names already listed, names the adapter has probably
    // fetched but not returned, and names it cannot have fetched yet; new names sort before
    // and after the position of the listing.
    let removed =
        |i: usize| (0..100).contains(&i) || (1600..1700).contains(&i) || (2500..2600).contains(&i);
    let mut listing = fs::read_dir(&d).unwrap();
    let mut counts: HashMap<String, usize> = HashMap::new();
    for e in listing.by_ref().take(1500) {
        *counts.entry(e.unwrap().file_name().into_string().unwrap()).or_default() += 1;
    }
    for (i, n) in names.iter().enumerate().filter(|(i, _)| removed(*i)) {
        if i % 10 == 0 {
            fs::remove_dir(d.join(n)).unwrap();
        } else {
            fs::remove_file(d.join(n)).unwrap();
        }
    }
    for i in 0..50 {
        fs::File::create(d.join(format!("a{i:02}"))).unwrap();
        fs::File::create(d.join(format!("z{i:02}"))).unwrap();
    }
    for e in listing {
        *counts.entry(e.unwrap().file_name().into_string().unwrap()).or_default() += 1;
    }
    for (name, count) in &counts {
        assert_eq!(*count, 1, "{name} listed {count} times");
    }
    for (_, n) in names.iter().enumerate().filter(|(i, _)| !removed(*i)) {
        assert!(counts.contains_key(n), "{n} missing from the listing");
    }
    // A fresh listing shows exactly the current contents.
    let now: Vec<String> =
        fs::read_dir(&d).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
    assert_eq!(now.len(), N - 300 + 100);
    assert_eq!(m.store.readdir("/big", None, 10 * N).unwrap().len(), now.len());

    // rmdir: not empty, not a directory, then empty.
    assert_eq!(errno(fs::remove_dir(&d)), libc::ENOTEMPTY);
    assert_eq!(errno(fs::remove_dir(d.join("e0101"))), libc::ENOTDIR);
    fs::create_dir(m.path("empty")).unwrap();
    fs::remove_dir(m.path("empty")).unwrap();
    assert!(!m.store.exists("/empty").unwrap());
    assert_eq!(errno(fs::metadata(m.path("empty"))), libc::ENOENT);
    // The directory's link count follows its subdirectories.
    let subdirs = fs::read_dir(&d)
        .unwrap()
        .filter(|e| e.as_ref().unwrap().file_type().unwrap().is_dir())
        .count();
    assert_eq!(fs::metadata(&d).unwrap().nlink(), 2 + subdirs as u64);
    assert_eq!(m.store.stat("/big").unwrap().nlink, 2 + subdirs as u64);
}

// ---- names: symlinks, hard links, renames ----

#[test]
fn symlinks_and_hard_links() {
    let Some(m) = default_mount() else { return };
    fs::create_dir(m.path("d")).unwrap();
    fs::write(m.path("d/f"), b"data").unwrap();
    std::os::unix::fs::symlink("d/f", m.path("to-file")).unwrap();
    std::os::unix::fs::symlink("d", m.path("to-dir")).unwrap();
    std::os::unix::fs::symlink("nowhere", m.path("dangling")).unwrap();
    assert_eq!(fs::read_link(m.path("to-file")).unwrap(), Path::new("d/f"));
    assert_eq!(m.store.readlink("/to-file").unwrap(), b"d/f");
    assert!(fs::symlink_metadata(m.path("to-file")).unwrap().file_type().is_symlink());
    assert_eq!(fs::symlink_metadata(m.path("to-file")).unwrap().len(), 3);
    assert_eq!(m.store.lstat("/to-file").unwrap().kind, FileType::Symlink);
    assert_eq!(fs::read(m.path("to-file")).unwrap(), b"data");
    assert!(fs::metadata(m.path("to-dir")).unwrap().is_dir());
    assert_eq!(fs::read(m.path("to-dir/f")).unwrap(), b"data");
    assert_eq!(errno(fs::metadata(m.path("dangling"))), libc::ENOENT);
    assert_eq!(errno(fs::read_link(m.path("d/f"))), libc::EINVAL);
    // A symlink made in the store reads back through the mount.
    m.store.symlink("/d/../d/f", "/from-store").unwrap();
    assert_eq!(fs::read_link(m.path("from-store")).unwrap(), Path::new("/d/../d/f"));

    // Hard links: one inode, the link count through the mount and the store.
    fs::hard_link(m.path("d/f"), m.path("g")).unwrap();
    let (a, b) = (fs::metadata(m.path("d/f")).unwrap(), fs::metadata(m.path("g")).unwrap());
    assert_eq!(a.ino(), b.ino());
    assert_eq!(b.nlink(), 2);
    assert_eq!(m.store.stat("/d/f").unwrap().nlink, 2);
    assert_eq!(m.store.stat("/g").unwrap().ino, m.store.stat("/d/f").unwrap().ino);
    fs::write(m.path("g"), b"changed").unwrap();
    assert_eq!(fs::read(m.path("d/f")).unwrap(), b"changed");
    fs::remove_file(m.path("d/f")).unwrap();
    assert_eq!(fs::metadata(m.path("g")).unwrap().nlink(), 1);
    assert_eq!(m.store.stat("/g").unwrap().nlink, 1);
    assert_eq!(m.store.read_file("/g").unwrap(), b"changed");
    assert_eq!(errno(fs::hard_link(m.path("d"), m.path("d2"))), libc::EPERM);
    assert_eq!(errno(fs::hard_link(m.path("g"), m.path("to-dir"))), libc::EEXIST);
}

fn renameat2(from: &Path, to: &Path, flags: libc::c_uint) -> Result<(), i32> {
    let (from, to) = (cpath(from), cpath(to));
    // SAFETY: two valid C strings.
    sys(unsafe {
        libc::renameat2(libc::AT_FDCWD, from.as_ptr(), libc::AT_FDCWD, to.as_ptr(), flags)
    })
    .map(drop)
}

#[test]
fn renames_with_flags() {
    let Some(m) = default_mount() else { return };
    fs::write(m.path("a"), b"A").unwrap();
    fs::write(m.path("b"), b"B").unwrap();
    fs::create_dir(m.path("dir")).unwrap();
    fs::write(m.path("dir/inner"), b"I").unwrap();

    // Plain rename replaces the target.
    fs::rename(m.path("a"), m.path("b")).unwrap();
    assert_eq!(fs::read(m.path("b")).unwrap(), b"A");
    assert!(!m.store.exists("/a").unwrap());
    assert_eq!(m.store.read_file("/b").unwrap(), b"A");

    // RENAME_NOREPLACE: EEXIST over an existing name, a plain move otherwise.
    fs::write(m.path("c"), b"C").unwrap();
    assert_eq!(renameat2(&m.path("c"), &m.path("b"), libc::RENAME_NOREPLACE), Err(libc::EEXIST));
    assert_eq!(m.store.read_file("/b").unwrap(), b"A");
    assert_eq!(m.store.read_file("/c").unwrap(), b"C");
    renameat2(&m.path("c"), &m.path("dir/c"), libc::RENAME_NOREPLACE).unwrap();
    assert_eq!(m.store.read_file("/dir/c").unwrap(), b"C");
    assert_eq!(errno(fs::metadata(m.path("c"))), libc::ENOENT);

    // RENAME_EXCHANGE swaps a file and a directory; both names must exist.
    renameat2(&m.path("b"), &m.path("dir"), libc::RENAME_EXCHANGE).unwrap();
    assert_eq!(fs::read(m.path("dir")).unwrap(), b"A");
    assert_eq!(fs::read(m.path("b/inner")).unwrap(), b"I");
    assert!(m.store.stat("/b").unwrap().is_dir());
    assert_eq!(m.store.read_file("/dir").unwrap(), b"A");
    assert_eq!(m.store.read_file("/b/c").unwrap(), b"C");
    assert_eq!(renameat2(&m.path("b"), &m.path("none"), libc::RENAME_EXCHANGE), Err(libc::ENOENT));
    assert_eq!(
        renameat2(&m.path("b"), &m.path("dir"), libc::RENAME_EXCHANGE | libc::RENAME_NOREPLACE),
        Err(libc::EINVAL)
    );

    // RENAME_WHITEOUT is refused and changes nothing.
    assert_eq!(renameat2(&m.path("dir"), &m.path("w"), libc::RENAME_WHITEOUT), Err(libc::EINVAL));
    assert_eq!(m.store.read_file("/dir").unwrap(), b"A");
    assert!(!m.store.exists("/w").unwrap());

    // A directory cannot move into itself; a directory replaces only an empty directory.
    assert_eq!(errno(fs::rename(m.path("b"), m.path("b/inner2"))), libc::EINVAL);
    fs::create_dir(m.path("e")).unwrap();
    fs::rename(m.path("e"), m.path("b/sub")).unwrap();
    fs::create_dir(m.path("f")).unwrap();
    assert_eq!(errno(fs::rename(m.path("f"), m.path("b"))), libc::ENOTEMPTY);
    assert_eq!(errno(fs::rename(m.path("f"), m.path("dir"))), libc::ENOTDIR);
    assert_eq!(errno(fs::rename(m.path("dir"), m.path("f"))), libc::EISDIR);
    fs::rename(m.path("f"), m.path("b/sub")).unwrap();
    assert!(m.store.stat("/b/sub").unwrap().is_dir());
    assert!(!m.store.exists("/f").unwrap());
    assert_eq!(m.store.stat("/b").unwrap().nlink, 3);
}

// ---- extended attributes ----

fn listxattr(p: &Path, size: usize) -> Result<(usize, Vec<u8>), i32> {
    let p = cpath(p);
    let mut buf = vec![0u8; size];
    let ptr = if size == 0 { std::ptr::null_mut() } else { buf.as_mut_ptr().cast() };
    // SAFETY: a valid C string and a buffer of `size` bytes (or none).
    let n = sys(unsafe { libc::listxattr(p.as_ptr(), ptr, size) } as i64)? as usize;
    buf.truncate(if size == 0 { 0 } else { n });
    Ok((n, buf))
}

fn removexattr(p: &Path, name: &str) -> Result<(), i32> {
    let (p, name) = (cpath(p), cstr(name));
    // SAFETY: two valid C strings.
    sys(unsafe { libc::removexattr(p.as_ptr(), name.as_ptr()) }).map(drop)
}

#[test]
fn extended_attributes() {
    let Some(m) = default_mount() else { return };
    let f = m.path("f");
    fs::write(&f, b"x").unwrap();
    assert_eq!(listxattr(&f, 0), Ok((0, vec![])));
    assert_eq!(getxattr(&f, "user.none", 0), Err(libc::ENODATA));
    assert_eq!(getxattr(&f, "user.none", 100), Err(libc::ENODATA));

    setxattr(&f, "user.color", b"blue", 0).unwrap();
    assert_eq!(m.store.getxattr("/f", "user.color").unwrap(), b"blue");
    // Size 0 asks for the length; a buffer too small is ERANGE; a large one gets the value.
    assert_eq!(getxattr(&f, "user.color", 0), Ok((4, vec![])));
    assert_eq!(getxattr(&f, "user.color", 3), Err(libc::ERANGE));
    assert_eq!(getxattr(&f, "user.color", 4), Ok((4, b"blue".to_vec())));
    assert_eq!(getxattr(&f, "user.color", 100), Ok((4, b"blue".to_vec())));

    // XATTR_CREATE fails on an existing name, XATTR_REPLACE on a missing one.
    assert_eq!(setxattr(&f, "user.color", b"red", libc::XATTR_CREATE), Err(libc::EEXIST));
    assert_eq!(setxattr(&f, "user.size", b"big", libc::XATTR_REPLACE), Err(libc::ENODATA));
    assert!(m.store.getxattr("/f", "user.size").is_err());
    setxattr(&f, "user.color", b"green", libc::XATTR_REPLACE).unwrap();
    setxattr(&f, "user.size", b"", libc::XATTR_CREATE).unwrap();
    assert_eq!(getxattr(&f, "user.size", 0), Ok((0, vec![])));
    assert_eq!(getxattr(&f, "user.size", 10), Ok((0, vec![])));
    assert_eq!(m.store.getxattr("/f", "user.color").unwrap(), b"green");

    // A large value (near the kernel's 64 KiB limit), byte for byte.
    let big = noise(60_000, 3);
    setxattr(&f, "user.big", &big, 0).unwrap();
    assert_eq!(getxattr(&f, "user.big", 0).unwrap().0, big.len());
    assert!(getxattr(&f, "user.big", 65536).unwrap().1 == big);
    assert!(m.store.getxattr("/f", "user.big").unwrap() == big);

    // The list: NUL-terminated names; size 0 for its length, ERANGE when too small.
    let (len, _) = listxattr(&f, 0).unwrap();
    let (n, list) = listxattr(&f, len).unwrap();
    assert_eq!(n, len);
    let mut names: Vec<&[u8]> = list.split(|&b| b == 0).filter(|n| !n.is_empty()).collect();
    names.sort();
    assert_eq!(names, [&b"user.big"[..], b"user.color", b"user.size"]);
    assert_eq!(list.last(), Some(&0));
    assert_eq!(listxattr(&f, len - 1), Err(libc::ERANGE));

    // Remove; removing again is ENODATA. An attribute set in the store shows in the mount.
    removexattr(&f, "user.color").unwrap();
    assert_eq!(removexattr(&f, "user.color"), Err(libc::ENODATA));
    assert_eq!(getxattr(&f, "user.color", 10), Err(libc::ENODATA));
    assert!(m.store.getxattr("/f", "user.color").is_err());
    m.store.setxattr("/f", "user.from-store", b"yes", Default::default()).unwrap();
    assert_eq!(getxattr(&f, "user.from-store", 10), Ok((3, b"yes".to_vec())));
    // Directories carry them too.
    fs::create_dir(m.path("d")).unwrap();
    setxattr(&m.path("d"), "user.d", b"1", 0).unwrap();
    assert_eq!(m.store.getxattr("/d", "user.d").unwrap(), b"1");
}
