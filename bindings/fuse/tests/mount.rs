//! The FUSE adapter through real system calls on a real mount: each test mounts a fresh
//! RocksDB store on a fresh directory, works through the mount (std::fs, libc) and checks the
//! result through the store's own API too. What pjdfstest, fsx, git and sqlite3 already cover
//! (tests/fuse/run) is not repeated here.
//!
//! Without FUSE (no /dev/fuse, or mounting refused with EPERM) each test prints a
//! `skipped: ...` line and passes.

use std::collections::HashMap;
use std::ffi::CString;
use std::fs;
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::os::fd::AsRawFd;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileExt, FileTypeExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use txvfs::{ErrorKind, FileSystem, FileType, InodeFileSystem, OpenOptions, Options, RangeLockKind, Store};
use txvfs_fuse::MountOptions;

// ---- the mount guard ----

/// A store mounted on a temporary directory; dropping it unmounts (lazily with
/// `fusermount3 -u -z` if a plain unmount fails), then removes both directories.
struct Mount {
    session: Option<fuser::BackgroundSession>,
    store: Store,
    mnt: tempfile::TempDir,
    /// The store's directory, removed last.
    _db: tempfile::TempDir,
}

/// Why FUSE cannot be used here, if it cannot.
fn fuse_unavailable() -> Option<String> {
    match fs::OpenOptions::new().read(true).write(true).open("/dev/fuse") {
        Ok(_) => None,
        Err(e) => Some(format!("/dev/fuse cannot be opened ({e})")),
    }
}

impl Mount {
    /// A fresh store mounted with `options`, or None (after printing why) without FUSE.
    fn new(options: MountOptions) -> Option<Mount> {
        Mount::with_store(options, |_| {})
    }

    /// Like [`Mount::new`], with `fill` run on the store before it is mounted. A read-only
    /// mount gets the store reopened read-only after `fill`.
    fn with_store(options: MountOptions, fill: impl FnOnce(&Store)) -> Option<Mount> {
        if let Some(why) = fuse_unavailable() {
            println!("skipped: {why}");
            return None;
        }
        let db = tempfile::tempdir().unwrap();
        let uri = db.path().join("st");
        let uri = uri.to_str().unwrap();
        let mut store = Store::open(uri).unwrap();
        fill(&store);
        if options.read_only {
            drop(store);
            store = Store::open_with(uri, Options { read_only: true, ..Options::default() }).unwrap();
        }
        // The mountpoint is the temporary directory itself, so every user can reach the mount
        // (the directory holding it is /tmp).
        let mnt = tempfile::tempdir().unwrap();
        match txvfs_fuse::spawn_mount(store.clone(), mnt.path(), &options) {
            Ok(session) => Some(Mount { session: Some(session), store, mnt, _db: db }),
            Err(e) if e.raw_os_error() == Some(libc::EPERM) => {
                println!("skipped: mounting FUSE is not permitted here ({e})");
                None
            }
            Err(e) => panic!("mount on {}: {e}", mnt.path().display()),
        }
    }

    /// The mount's path for `rel` (store path `/rel`).
    fn path(&self, rel: &str) -> PathBuf {
        self.mnt.path().join(rel)
    }
}

impl Drop for Mount {
    fn drop(&mut self) {
        if let Some(session) = self.session.take() {
            if let Err(e) = session.umount_and_join() {
                eprintln!("unmount of {}: {e}; unmounting lazily", self.mnt.path().display());
                let _ = Command::new("fusermount3").arg("-u").arg("-z").arg(self.mnt.path()).status();
            }
        }
    }
}

fn default_mount() -> Option<Mount> {
    Mount::new(MountOptions::default())
}

// ---- small helpers ----

fn cpath(p: &Path) -> CString {
    CString::new(p.as_os_str().as_bytes()).unwrap()
}

fn cstr(s: &str) -> CString {
    CString::new(s).unwrap()
}

fn last_errno() -> i32 {
    io::Error::last_os_error().raw_os_error().unwrap()
}

/// A libc call's result: its return value, or errno when it returned -1.
fn sys<T: Into<i64> + Copy>(ret: T) -> Result<i64, i32> {
    match ret.into() {
        -1 => Err(last_errno()),
        r => Ok(r),
    }
}

/// The errno of a call that must fail.
#[track_caller]
fn errno<T: std::fmt::Debug>(r: io::Result<T>) -> i32 {
    r.expect_err("the call succeeded").raw_os_error().expect("not an OS error")
}

/// Deterministic pseudo-random bytes (xorshift64).
fn noise(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        })
        .collect()
}

/// Waits (up to 20 s) for `cond`; false if it never held.
fn eventually(mut cond: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + Duration::from_secs(20);
    while Instant::now() < deadline {
        if cond() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    cond()
}

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

/// The process's umask, read without changing it (other tests create files meanwhile).
fn current_umask() -> u32 {
    let status = fs::read_to_string("/proc/self/status").unwrap();
    let mask = status.lines().find_map(|l| l.strip_prefix("Umask:")).expect("no Umask in /proc/self/status");
    u32::from_str_radix(mask.trim(), 8).unwrap()
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
    for (i, off) in [0u64, 4095, 65534, 65536 * 3 - 1, 5 * 1024 * 1024 + 3, data.len() as u64 - 2].into_iter().enumerate() {
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
    let removed = |i: usize| (0..100).contains(&i) || (1600..1700).contains(&i) || (2500..2600).contains(&i);
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
    let now: Vec<String> = fs::read_dir(&d).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
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
    let subdirs = fs::read_dir(&d).unwrap().filter(|e| e.as_ref().unwrap().file_type().unwrap().is_dir()).count();
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
    sys(unsafe { libc::renameat2(libc::AT_FDCWD, from.as_ptr(), libc::AT_FDCWD, to.as_ptr(), flags) }).map(drop)
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

fn setxattr(p: &Path, name: &str, value: &[u8], flags: libc::c_int) -> Result<(), i32> {
    let (p, name) = (cpath(p), cstr(name));
    // SAFETY: valid C strings and a buffer of `value.len()` bytes.
    sys(unsafe { libc::setxattr(p.as_ptr(), name.as_ptr(), value.as_ptr().cast(), value.len(), flags) }).map(drop)
}

/// getxattr(2) with a buffer of `size` bytes (a null buffer for 0): the value's length, and
/// the bytes read.
fn getxattr(p: &Path, name: &str, size: usize) -> Result<(usize, Vec<u8>), i32> {
    let (p, name) = (cpath(p), cstr(name));
    let mut buf = vec![0u8; size];
    let ptr = if size == 0 { std::ptr::null_mut() } else { buf.as_mut_ptr().cast() };
    // SAFETY: valid C strings and a buffer of `size` bytes (or none).
    let n = sys(unsafe { libc::getxattr(p.as_ptr(), name.as_ptr(), ptr, size) } as i64)? as usize;
    buf.truncate(if size == 0 { 0 } else { n });
    Ok((n, buf))
}

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

// ---- fallocate ----

fn fallocate(f: &fs::File, mode: libc::c_int, offset: i64, len: i64) -> Result<(), i32> {
    // SAFETY: a valid open descriptor.
    sys(unsafe { libc::fallocate(f.as_raw_fd(), mode, offset, len) }).map(drop)
}

#[test]
fn fallocate_modes() {
    let Some(m) = default_mount() else { return };
    let p = m.path("f");
    let data = noise(300_000, 11);
    fs::write(&p, &data).unwrap();
    let f = fs::OpenOptions::new().read(true).write(true).open(&p).unwrap();

    // Mode 0 grows the file; the new range reads as zeros.
    fallocate(&f, 0, 200_000, 200_000).unwrap();
    assert_eq!(f.metadata().unwrap().len(), 400_000);
    assert_eq!(m.store.stat("/f").unwrap().size, 400_000);
    let mut model = data.clone();
    model.resize(400_000, 0);
    assert!(fs::read(&p).unwrap() == model);
    // Mode 0 inside the file changes nothing.
    fallocate(&f, 0, 0, 1000).unwrap();
    assert_eq!(f.metadata().unwrap().len(), 400_000);

    // KEEP_SIZE past the end leaves the size alone.
    fallocate(&f, libc::FALLOC_FL_KEEP_SIZE, 350_000, 500_000).unwrap();
    assert_eq!(f.metadata().unwrap().len(), 400_000);
    assert_eq!(m.store.stat("/f").unwrap().size, 400_000);

    // PUNCH_HOLE|KEEP_SIZE zeroes the range (across block boundaries), keeps the size.
    fallocate(&f, libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE, 60_000, 100_000).unwrap();
    model[60_000..160_000].fill(0);
    assert_eq!(f.metadata().unwrap().len(), 400_000);
    let mut back = vec![0u8; 400_000];
    f.read_exact_at(&mut back, 0).unwrap();
    assert!(back == model, "punched range does not read as zeros through the open file");
    assert!(fs::read(&p).unwrap() == model);
    assert!(m.store.read_file("/f").unwrap() == model);
    // PUNCH_HOLE without KEEP_SIZE is invalid.
    assert_eq!(fallocate(&f, libc::FALLOC_FL_PUNCH_HOLE, 0, 10), Err(libc::EOPNOTSUPP));

    // Modes the store does not support: refused, nothing changed.
    assert_eq!(fallocate(&f, libc::FALLOC_FL_COLLAPSE_RANGE, 0, 65536), Err(libc::EOPNOTSUPP));
    assert_eq!(fallocate(&f, libc::FALLOC_FL_ZERO_RANGE, 0, 10), Err(libc::EOPNOTSUPP));
    assert_eq!(fallocate(&f, libc::FALLOC_FL_INSERT_RANGE, 0, 65536), Err(libc::EOPNOTSUPP));
    assert!(m.store.read_file("/f").unwrap() == model);
    // A read-only descriptor cannot allocate.
    let r = fs::File::open(&p).unwrap();
    assert_eq!(fallocate(&r, 0, 0, 500_000), Err(libc::EBADF));
}

// ---- special files and attributes ----

fn mknod(p: &Path, mode: libc::mode_t) -> Result<(), i32> {
    let p = cpath(p);
    // SAFETY: a valid C string.
    sys(unsafe { libc::mknod(p.as_ptr(), mode, 0) }).map(drop)
}

#[test]
fn special_files_and_types() {
    let Some(m) = default_mount() else { return };
    mknod(&m.path("fifo"), libc::S_IFIFO | 0o644).unwrap();
    mknod(&m.path("sock"), libc::S_IFSOCK | 0o600).unwrap();
    mknod(&m.path("plain"), libc::S_IFREG | 0o600).unwrap();
    fs::create_dir(m.path("dir")).unwrap();
    std::os::unix::fs::symlink("plain", m.path("link")).unwrap();
    assert_eq!(mknod(&m.path("fifo"), libc::S_IFIFO | 0o644), Err(libc::EEXIST));

    let kind = |n: &str| fs::symlink_metadata(m.path(n)).unwrap().file_type();
    assert!(kind("fifo").is_fifo());
    assert!(kind("sock").is_socket());
    assert!(kind("plain").is_file());
    assert!(kind("dir").is_dir());
    assert!(kind("link").is_symlink());
    assert_eq!(fs::symlink_metadata(m.path("fifo")).unwrap().mode(), libc::S_IFIFO | (0o644 & !current_umask()));
    for (n, k) in [
        ("fifo", FileType::Fifo),
        ("sock", FileType::Socket),
        ("plain", FileType::File),
        ("dir", FileType::Dir),
        ("link", FileType::Symlink),
    ] {
        assert_eq!(m.store.lstat(format!("/{n}")).unwrap().kind, k, "{n}");
    }
    // readdir reports the types too.
    let types: HashMap<String, fs::FileType> = fs::read_dir(m.mnt.path())
        .unwrap()
        .map(|e| e.unwrap())
        .map(|e| (e.file_name().into_string().unwrap(), e.file_type().unwrap()))
        .collect();
    assert!(types["fifo"].is_fifo() && types["sock"].is_socket() && types["link"].is_symlink());

    // The FIFO works as a pipe (the kernel runs it).
    let fifo = m.path("fifo");
    let mut reader = fs::OpenOptions::new().read(true).custom_flags(libc::O_NONBLOCK).open(&fifo).unwrap();
    let mut writer = fs::OpenOptions::new().write(true).open(&fifo).unwrap();
    writer.write_all(b"through the fifo").unwrap();
    let mut got = [0u8; 16];
    reader.read_exact(&mut got).unwrap();
    assert_eq!(&got, b"through the fifo");
    drop((reader, writer));
    assert_eq!(m.store.stat("/fifo").unwrap().size, 0);

    // A Unix socket bound on the mount: its name is a socket node in the store.
    let listener = std::os::unix::net::UnixListener::bind(m.path("live.sock")).unwrap();
    assert_eq!(m.store.lstat("/live.sock").unwrap().kind, FileType::Socket);
    let mut client = std::os::unix::net::UnixStream::connect(m.path("live.sock")).unwrap();
    client.write_all(b"hi").unwrap();
    let (mut server, _) = listener.accept().unwrap();
    let mut hi = [0u8; 2];
    server.read_exact(&mut hi).unwrap();
    assert_eq!(&hi, b"hi");
}

fn utimensat(p: &Path, atime: (i64, i64), mtime: (i64, i64)) -> Result<(), i32> {
    let p = cpath(p);
    let ts = [
        libc::timespec { tv_sec: atime.0, tv_nsec: atime.1 },
        libc::timespec { tv_sec: mtime.0, tv_nsec: mtime.1 },
    ];
    // SAFETY: a valid C string and two timespecs.
    sys(unsafe { libc::utimensat(libc::AT_FDCWD, p.as_ptr(), ts.as_ptr(), 0) }).map(drop)
}

fn now_ns() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as i64
}

#[test]
fn chmod_chown_and_times() {
    let Some(m) = default_mount() else { return };
    let p = m.path("f");
    fs::write(&p, b"x").unwrap();

    fs::set_permissions(&p, fs::Permissions::from_mode(0o4751)).unwrap();
    assert_eq!(fs::metadata(&p).unwrap().mode() & 0o7777, 0o4751);
    assert_eq!(m.store.stat("/f").unwrap().mode & 0o7777, 0o4751);
    std::os::unix::fs::chown(&p, Some(1000), Some(2000)).unwrap();
    let md = fs::metadata(&p).unwrap();
    assert_eq!((md.uid(), md.gid()), (1000, 2000));
    let st = m.store.stat("/f").unwrap();
    assert_eq!((st.uid, st.gid), (1000, 2000));
    std::os::unix::fs::chown(&p, None, Some(3000)).unwrap();
    let st = m.store.stat("/f").unwrap();
    assert_eq!((st.uid, st.gid), (1000, 3000));

    // Nanoseconds are kept, both ways, also before 1970.
    utimensat(&p, (1_600_000_000, 123_456_789), (1_700_000_000, 987_654_321)).unwrap();
    let md = fs::metadata(&p).unwrap();
    assert_eq!((md.atime(), md.atime_nsec()), (1_600_000_000, 123_456_789));
    assert_eq!((md.mtime(), md.mtime_nsec()), (1_700_000_000, 987_654_321));
    let st = m.store.stat("/f").unwrap();
    assert_eq!(st.atime_ns, 1_600_000_000_123_456_789);
    assert_eq!(st.mtime_ns, 1_700_000_000_987_654_321);
    utimensat(&p, (-2, 500_000_000), (0, 1)).unwrap();
    let st = m.store.stat("/f").unwrap();
    assert_eq!((st.atime_ns, st.mtime_ns), (-1_500_000_000, 1));
    let md = fs::metadata(&p).unwrap();
    assert_eq!((md.atime(), md.atime_nsec()), (-2, 500_000_000));

    // UTIME_OMIT leaves a time alone; UTIME_NOW sets the current time.
    utimensat(&p, (1_600_000_000, 5), (1_700_000_000, 6)).unwrap();
    let before = now_ns();
    utimensat(&p, (0, libc::UTIME_OMIT), (0, libc::UTIME_NOW)).unwrap();
    let st = m.store.stat("/f").unwrap();
    assert_eq!(st.atime_ns, 1_600_000_000_000_000_005);
    assert!(st.mtime_ns >= before, "UTIME_NOW gave {} before {before}", st.mtime_ns);
    let md = fs::metadata(&p).unwrap();
    assert_eq!((md.atime(), md.atime_nsec()), (1_600_000_000, 5));
    assert_eq!(md.mtime() as i64 * 1_000_000_000 + md.mtime_nsec(), st.mtime_ns);
    utimensat(&p, (0, libc::UTIME_NOW), (0, libc::UTIME_OMIT)).unwrap();
    let st2 = m.store.stat("/f").unwrap();
    assert!(st2.atime_ns >= before);
    assert_eq!(st2.mtime_ns, st.mtime_ns);
    // A write moves mtime and ctime forward.
    fs::OpenOptions::new().write(true).open(&p).unwrap().write_all(b"y").unwrap();
    let st3 = m.store.stat("/f").unwrap();
    assert!(st3.mtime_ns >= st2.mtime_ns && st3.ctime_ns >= st2.ctime_ns);
}

// ---- permissions with the caller's credential ----

/// Runs `cmd` (through `sh -c`) as uid/gid 65534 with supplementary groups `groups`
/// (none if empty); returns (success, stdout, stderr).
fn as_nobody(groups: &str, cmd: &str) -> (bool, String, String) {
    let mut c = Command::new("setpriv");
    c.args(["--reuid", "65534", "--regid", "65534"]);
    if groups.is_empty() {
        c.arg("--clear-groups");
    } else {
        c.args(["--groups", groups]);
    }
    let out = c.args(["--", "sh", "-c", cmd]).env("LC_ALL", "C").stdin(Stdio::null()).output().unwrap();
    (out.status.success(), String::from_utf8_lossy(&out.stdout).into(), String::from_utf8_lossy(&out.stderr).into())
}

#[test]
fn permissions_use_the_callers_credential() {
    if Command::new("setpriv").arg("--help").stdout(Stdio::null()).status().map(|s| !s.success()).unwrap_or(true) {
        println!("skipped: setpriv (util-linux) is not installed");
        return;
    }
    let Some(m) = Mount::new(MountOptions { allow_other: true, ..MountOptions::default() }) else { return };
    fs::set_permissions(m.mnt.path(), fs::Permissions::from_mode(0o755)).unwrap();
    let secret = m.path("secret");
    fs::write(&secret, b"root only").unwrap();
    fs::set_permissions(&secret, fs::Permissions::from_mode(0o600)).unwrap();
    let shared = m.path("shared");
    fs::write(&shared, b"group 1234").unwrap();
    fs::set_permissions(&shared, fs::Permissions::from_mode(0o640)).unwrap();
    std::os::unix::fs::chown(&shared, None, Some(1234)).unwrap();
    let open = m.path("open");
    fs::create_dir(&open).unwrap();
    fs::set_permissions(&open, fs::Permissions::from_mode(0o777)).unwrap();
    let (s, sh) = (secret.display(), shared.display());

    let (ok, _, err) = as_nobody("1234", &format!("cat {s}"));
    assert!(!ok && err.contains("Permission denied"), "{err}");
    // Readable through a supplementary group only: with it, and without it.
    let (ok, out, err) = as_nobody("1234", &format!("cat {sh}"));
    assert!(ok, "{err}");
    assert_eq!(out, "group 1234");
    let (ok, _, err) = as_nobody("", &format!("cat {sh}"));
    assert!(!ok && err.contains("Permission denied"), "{err}");
    let (ok, out, err) = as_nobody("5,1234,77", &format!("cat {sh}"));
    assert!(ok && out == "group 1234", "{err}");
    // The group may read, not write.
    let (ok, _, err) = as_nobody("1234", &format!("echo x >> {sh}"));
    assert!(!ok && err.contains("Permission denied"), "{err}");
    assert_eq!(m.store.read_file("/shared").unwrap(), b"group 1234");
    // Files made by the user are the user's.
    let (ok, _, err) = as_nobody("1234", &format!("echo mine > {}/mine && mkdir {}/sub", open.display(), open.display()));
    assert!(ok, "{err}");
    for p in ["/open/mine", "/open/sub"] {
        let st = m.store.stat(p).unwrap();
        assert_eq!((st.uid, st.gid), (65534, 65534), "{p}");
    }
    assert_eq!(m.store.read_file("/open/mine").unwrap(), b"mine\n");
    // Only the owner may chmod; others may not even remove a root file from a sticky
    // directory they can write.
    let (ok, _, err) = as_nobody("", &format!("chmod 777 {s}"));
    assert!(!ok && err.contains("Operation not permitted"), "{err}");
    assert_eq!(m.store.stat("/secret").unwrap().mode & 0o777, 0o600);
    fs::set_permissions(&open, fs::Permissions::from_mode(0o1777)).unwrap();
    fs::write(open.join("roots"), b"r").unwrap();
    let (ok, _, err) = as_nobody("", &format!("rm -f {}/roots", open.display()));
    assert!(!ok && err.contains("Operation not permitted"), "{err}");
    assert!(m.store.exists("/open/roots").unwrap());
    let (ok, _, err) = as_nobody("", &format!("rm {}/mine", open.display()));
    assert!(ok, "{err}");
    assert!(!m.store.exists("/open/mine").unwrap());
}

// ---- statfs, read-only mounts, unlinked open files, store changes ----

fn statvfs(p: &Path) -> libc::statvfs {
    let p = cpath(p);
    // SAFETY: a valid C string and a zeroed struct for the result.
    unsafe {
        let mut s: libc::statvfs = std::mem::zeroed();
        sys(libc::statvfs(p.as_ptr(), &mut s)).unwrap();
        s
    }
}

#[test]
fn statfs_counts_files() {
    let Some(m) = default_mount() else { return };
    let before = statvfs(m.mnt.path());
    assert_eq!(before.f_namemax, 255);
    assert!(before.f_bsize > 0 && before.f_blocks >= before.f_bfree && before.f_bfree >= before.f_bavail);
    assert!(before.f_files >= before.f_ffree, "total inodes {} < free {}", before.f_files, before.f_ffree);
    let used = |s: &libc::statvfs| s.f_files - s.f_ffree;
    assert_eq!(used(&before), m.store.statfs().unwrap().files);
    for i in 0..5 {
        fs::write(m.path(&format!("f{i}")), noise(100_000, i)).unwrap();
    }
    fs::create_dir(m.path("d")).unwrap();
    let after = statvfs(m.mnt.path());
    assert_eq!(used(&after), used(&before) + 6);
    assert_eq!(used(&after), m.store.statfs().unwrap().files);
    assert!(after.f_bfree <= before.f_bfree);
    // statfs on a file of the mount answers for the whole mount.
    assert_eq!(used(&statvfs(&m.path("f0"))), used(&after));
}

#[test]
fn read_only_mount() {
    let opts = MountOptions { read_only: true, ..MountOptions::default() };
    let fill = |s: &Store| {
        s.mkdir("/d", 0o755).unwrap();
        s.write_file("/d/f", b"kept").unwrap();
        s.setxattr("/d/f", "user.a", b"1", Default::default()).unwrap();
    };
    let Some(m) = Mount::with_store(opts, fill) else { return };
    let f = m.path("d/f");
    assert_eq!(fs::read(&f).unwrap(), b"kept");
    assert_eq!(fs::read_dir(m.path("d")).unwrap().count(), 1);
    assert_eq!(getxattr(&f, "user.a", 10), Ok((1, b"1".to_vec())));
    assert_eq!(errno(fs::OpenOptions::new().write(true).open(&f)), libc::EROFS);
    assert_eq!(errno(fs::OpenOptions::new().read(true).write(true).open(&f)), libc::EROFS);
    assert_eq!(errno(fs::write(m.path("new"), b"x")), libc::EROFS);
    assert_eq!(errno(fs::create_dir(m.path("d2"))), libc::EROFS);
    assert_eq!(errno(fs::remove_file(&f)), libc::EROFS);
    assert_eq!(errno(fs::rename(&f, m.path("g"))), libc::EROFS);
    assert_eq!(errno(fs::set_permissions(&f, fs::Permissions::from_mode(0o600))), libc::EROFS);
    assert_eq!(errno(std::os::unix::fs::symlink("x", m.path("l"))), libc::EROFS);
    assert_eq!(setxattr(&f, "user.b", b"2", 0), Err(libc::EROFS));
    assert_eq!(sys(unsafe { libc::truncate(cpath(&f).as_ptr(), 0) }), Err(libc::EROFS));
    assert_ne!(statvfs(m.mnt.path()).f_flag & libc::ST_RDONLY, 0);
    // Nothing changed in the store.
    assert_eq!(m.store.read_file("/d/f").unwrap(), b"kept");
    assert_eq!(m.store.readdir("/", None, 100).unwrap().len(), 1);
}

#[test]
fn unlinked_open_file_lives_until_closed() {
    let Some(m) = default_mount() else { return };
    let p = m.path("doomed");
    let data = noise(200_000, 5);
    fs::write(&p, &data).unwrap();
    let ino = m.store.stat("/doomed").unwrap().ino;
    let mut f = fs::OpenOptions::new().read(true).write(true).open(&p).unwrap();
    fs::remove_file(&p).unwrap();
    assert_eq!(errno(fs::metadata(&p)), libc::ENOENT);
    assert!(!m.store.exists("/doomed").unwrap());
    assert!(m.store.readdir("/", None, 10).unwrap().is_empty());
    // Still readable and writable through the descriptor; the inode has no links.
    let mut back = Vec::new();
    f.read_to_end(&mut back).unwrap();
    assert!(back == data);
    f.write_all_at(b"more", 1000).unwrap();
    let mut four = [0u8; 4];
    f.read_exact_at(&mut four, 1000).unwrap();
    assert_eq!(&four, b"more");
    assert_eq!(f.metadata().unwrap().nlink(), 0);
    let st = m.store.stat_ino(ino).unwrap();
    assert_eq!(st.nlink, 0);
    assert_eq!(st.size, data.len() as u64);
    // A new file may take the name meanwhile.
    fs::write(&p, b"new").unwrap();
    assert_eq!(m.store.read_file("/doomed").unwrap(), b"new");
    drop(f);
    // The kernel releases the handle after close returns; then the inode is gone.
    assert!(
        eventually(|| m.store.stat_ino(ino).is_err_and(|e| e.kind() == ErrorKind::NotFound)),
        "inode {ino} still in the store after the last close: {:?}",
        m.store.stat_ino(ino)
    );
    assert_eq!(fs::read(&p).unwrap(), b"new");
}

#[test]
fn store_changes_show_through_the_mount() {
    // With a ttl of 0 the kernel caches neither names nor attributes.
    let Some(m) = Mount::new(MountOptions { ttl: Duration::ZERO, ..MountOptions::default() }) else { return };
    fs::write(m.path("f"), b"mount").unwrap();
    assert_eq!(fs::read(m.path("f")).unwrap(), b"mount");
    assert_eq!(errno(fs::metadata(m.path("g"))), libc::ENOENT);

    m.store.write_file("/f", b"changed by the store").unwrap();
    m.store.write_file("/g", b"new").unwrap();
    m.store.mkdir("/d", 0o700).unwrap();
    assert_eq!(fs::metadata(m.path("f")).unwrap().len(), 20);
    assert_eq!(fs::read(m.path("f")).unwrap(), b"changed by the store");
    assert_eq!(fs::read(m.path("g")).unwrap(), b"new");
    assert_eq!(fs::metadata(m.path("d")).unwrap().mode() & 0o7777, 0o700);

    m.store.chmod("/d", 0o755).unwrap();
    m.store.unlink("/g").unwrap();
    m.store.rename("/f", "/d/f").unwrap();
    assert_eq!(fs::metadata(m.path("d")).unwrap().mode() & 0o7777, 0o755);
    assert_eq!(errno(fs::metadata(m.path("g"))), libc::ENOENT);
    assert_eq!(errno(fs::read(m.path("f"))), libc::ENOENT);
    assert_eq!(fs::read(m.path("d/f")).unwrap(), b"changed by the store");
    let names: Vec<_> = fs::read_dir(m.mnt.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(names, ["d"]);
}

// ---- the txvfs command ----

/// The built `txvfs` binary: the tests run from target/release/deps, it is in target/release.
fn txvfs_bin() -> Option<PathBuf> {
    let exe = std::env::current_exe().unwrap();
    let bin = exe.parent()?.parent()?.join("txvfs");
    bin.is_file().then_some(bin)
}

fn is_mounted(mnt: &Path) -> bool {
    let info = fs::read_to_string("/proc/self/mountinfo").unwrap();
    info.lines().any(|l| l.split(' ').nth(4) == Some(mnt.to_str().unwrap()))
}

/// A child process killed (and reaped) when dropped, and its mount undone if it left one.
struct Served {
    child: std::process::Child,
    mnt: PathBuf,
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if is_mounted(&self.mnt) {
            let _ = Command::new("fusermount3").arg("-u").arg("-z").arg(&self.mnt).status();
        }
    }
}

/// Starts `txvfs mount` on `store` at `mnt` and waits until it is mounted; `None` (after
/// saying why) where mounting is not permitted.
fn serve(bin: &Path, store: &Path, mnt: &Path) -> Option<Served> {
    let child = Command::new(bin)
        .arg("mount")
        .arg("--store")
        .arg(store)
        .arg(mnt)
        .args(["--cache-ttl", "0.1"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut served = Served { child, mnt: mnt.to_path_buf() };
    let mounted = eventually(|| is_mounted(mnt) || served.child.try_wait().unwrap().is_some());
    if let Some(status) = served.child.try_wait().unwrap() {
        let mut err = String::new();
        served.child.stderr.take().unwrap().read_to_string(&mut err).unwrap();
        if err.contains("Operation not permitted") {
            println!("skipped: txvfs mount is not permitted here: {err}");
            return None;
        }
        panic!("txvfs mount exited with {status}: {err}");
    }
    assert!(mounted, "txvfs mount did not mount {} in time", mnt.display());
    Some(served)
}

/// Waits for `served` to exit; its exit code and standard error.
fn exit_of(served: &mut Served) -> (Option<i32>, String) {
    let mut status = None;
    assert!(eventually(|| {
        status = served.child.try_wait().unwrap();
        status.is_some()
    }), "txvfs mount did not exit");
    let mut err = String::new();
    served.child.stderr.take().unwrap().read_to_string(&mut err).unwrap();
    (status.unwrap().code(), err)
}

/// A scratch directory with a store path `st` (not created) and an empty mount point `mnt`,
/// and the txvfs binary; `None` (after saying why) where FUSE or the binary is missing.
fn cli_setup() -> Option<(tempfile::TempDir, PathBuf, PathBuf, PathBuf)> {
    if let Some(why) = fuse_unavailable() {
        println!("skipped: {why}");
        return None;
    }
    let Some(bin) = txvfs_bin() else {
        println!("skipped: the txvfs binary is not built (cargo build --release -p txvfs-cli)");
        return None;
    };
    let dir = tempfile::tempdir().unwrap();
    let dir_path = fs::canonicalize(dir.path()).unwrap();
    let (store, mnt) = (dir_path.join("st"), dir_path.join("mnt"));
    fs::create_dir(&mnt).unwrap();
    Some((dir, bin, store, mnt))
}

#[test]
fn cli_mount_in_use_is_detached_on_sigterm_and_serves_its_last_user() {
    let Some((_dir, bin, store, mnt)) = cli_setup() else { return };
    drop(Store::open(store.to_str().unwrap()).unwrap());
    let Some(mut served) = serve(&bin, &store, &mnt) else { return };
    let mut open = fs::OpenOptions::new().read(true).write(true).create(true).truncate(true).open(mnt.join("busy")).unwrap();
    open.write_all(b"before ").unwrap();

    // SAFETY: a signal to our own child.
    assert_eq!(unsafe { libc::kill(served.child.id() as i32, libc::SIGTERM) }, 0);
    // The mount leaves the tree at once, but its user keeps working.
    assert!(eventually(|| !is_mounted(&mnt)), "still mounted after SIGTERM");
    assert!(served.child.try_wait().unwrap().is_none(), "txvfs mount exited while its mount was in use");
    open.write_all(b"after").unwrap();
    drop(open);
    let (code, err) = exit_of(&mut served);
    assert_eq!(code, Some(0), "txvfs mount: {err}");
    assert!(err.contains("busy: detached"), "{err}");
    drop(served);
    assert_eq!(Store::open(store.to_str().unwrap()).unwrap().read_file("/busy").unwrap(), b"before after");
}

#[test]
fn cli_mount_serves_until_sigterm() {
    let Some((_dir, bin, store, mnt)) = cli_setup() else { return };
    {
        let s = Store::open(store.to_str().unwrap()).unwrap();
        s.write_file("/before", b"in the store").unwrap();
    }
    let Some(mut served) = serve(&bin, &store, &mnt) else { return };
    assert_eq!(fs::read(mnt.join("before")).unwrap(), b"in the store");
    fs::write(mnt.join("after"), b"written through the mount").unwrap();

    // SAFETY: a signal to our own child.
    assert_eq!(unsafe { libc::kill(served.child.id() as i32, libc::SIGTERM) }, 0);
    let (code, err) = exit_of(&mut served);
    assert_eq!(code, Some(0), "txvfs mount: {err}");
    assert!(!is_mounted(&mnt), "{} still mounted after txvfs mount exited", mnt.display());
    drop(served);
    let s = Store::open(store.to_str().unwrap()).unwrap();
    assert_eq!(s.read_file("/after").unwrap(), b"written through the mount");
    assert_eq!(s.read_file("/before").unwrap(), b"in the store");
}

#[test]
fn cli_mount_failures_are_one_line() {
    let Some(bin) = txvfs_bin() else {
        println!("skipped: the txvfs binary is not built (cargo build --release -p txvfs-cli)");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let mnt = dir.path().join("mnt");
    fs::create_dir(&mnt).unwrap();
    let fails = |store: &Path, mnt: &Path| {
        let out = Command::new(&bin).arg("mount").arg("--store").arg(store).arg(mnt).stdin(Stdio::null()).output().unwrap();
        let err = String::from_utf8(out.stderr).unwrap();
        assert!(!out.status.success(), "txvfs mount {} {} succeeded", store.display(), mnt.display());
        assert!(err.starts_with("txvfs: ") && err.lines().count() == 1, "stderr {err:?}");
        assert!(!is_mounted(mnt));
        (out.status.code().unwrap(), err)
    };
    // No store at the path: nothing is created, nothing mounted.
    let missing = dir.path().join("nostore");
    let (code, err) = fails(&missing, &mnt);
    assert_eq!(code, libc::ENOENT);
    assert!(err.contains("no store there"), "{err}");
    assert!(!missing.exists());

    // A mountpoint that does not exist.
    let store = dir.path().join("st");
    drop(Store::open(store.to_str().unwrap()).unwrap());
    let (code, err) = fails(&store, &dir.path().join("nomnt"));
    assert_eq!(code, libc::ENOENT);
    assert!(err.contains("nomnt") && err.contains("No such file"), "{err}");
    // A mountpoint that is a file.
    let file = dir.path().join("file");
    fs::write(&file, b"").unwrap();
    let (code, err) = fails(&store, &file);
    assert_eq!(code, libc::ENOTDIR);
    assert!(err.contains("not a directory"), "{err}");
    // The store is unharmed and opens again.
    Store::open(store.to_str().unwrap()).unwrap().write_file("/ok", b"").unwrap();
}

// ---- locks ----
//
// POSIX record locks need a second process: a forked child that only makes system calls
// (open, fcntl, flock, write, _exit: no allocation), reporting four numbers through a pipe.

struct Forked {
    pid: libc::pid_t,
    rd: libc::c_int,
}

/// Forks a child that runs `f` and reports its result.
fn fork_child(f: impl FnOnce() -> [i64; 4]) -> Forked {
    let mut fds = [0; 2];
    // SAFETY: room for two descriptors.
    sys(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) }).unwrap();
    // SAFETY: the child makes only async-signal-safe calls (whatever `f` makes, write, _exit).
    let pid = unsafe { libc::fork() };
    if pid == 0 {
        // Keep none of the descriptors other tests have open (an inherited copy would keep
        // their files open, and their flocks held, while this child lives): only the pipe.
        // SAFETY: close_range is a plain system call.
        unsafe {
            libc::syscall(libc::SYS_close_range, 3u32, fds[1] as u32 - 1, 0u32);
            libc::syscall(libc::SYS_close_range, fds[1] as u32 + 1, u32::MAX, 0u32);
        }
        let r = f();
        // SAFETY: writes the result from the stack and exits without running destructors.
        unsafe {
            libc::write(fds[1], r.as_ptr().cast(), std::mem::size_of_val(&r));
            libc::_exit(0);
        }
    }
    assert!(pid > 0, "fork: {}", io::Error::last_os_error());
    // SAFETY: our copy of the write end.
    unsafe { libc::close(fds[1]) };
    Forked { pid, rd: fds[0] }
}

impl Forked {
    /// True once the child has reported (waiting at most `ms` milliseconds).
    fn reported_within(&self, ms: i32) -> bool {
        let mut p = libc::pollfd { fd: self.rd, events: libc::POLLIN, revents: 0 };
        // SAFETY: one pollfd.
        unsafe { libc::poll(&mut p, 1, ms) > 0 }
    }

    /// The child's result, after it has exited.
    fn result(self) -> [i64; 4] {
        let mut r = [0i64; 4];
        // SAFETY: reads into `r`.
        let n = unsafe { libc::read(self.rd, r.as_mut_ptr().cast(), std::mem::size_of_val(&r)) };
        assert_eq!(n as usize, std::mem::size_of_val(&r), "the child reported nothing");
        r
    }
}

impl Forked {
    fn kill(&self) {
        // SAFETY: a signal to our own child.
        unsafe { libc::kill(self.pid, libc::SIGKILL) };
    }
}

impl Drop for Forked {
    fn drop(&mut self) {
        self.kill();
        // A child killed inside a FUSE request dies only once the request is answered (a lock
        // wait, when the lock is freed): reap it if it goes, but do not wait for it forever.
        // SAFETY: our own child and pipe.
        let reaped = || unsafe { libc::waitpid(self.pid, std::ptr::null_mut(), libc::WNOHANG) != 0 };
        if !reaped() {
            let deadline = Instant::now() + Duration::from_secs(5);
            while !reaped() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(10));
            }
        }
        // SAFETY: our read end of the pipe.
        unsafe { libc::close(self.rd) };
    }
}

fn flock_struct(kind: libc::c_int, start: i64, len: i64) -> libc::flock {
    // SAFETY: flock is plain data.
    let mut fl: libc::flock = unsafe { std::mem::zeroed() };
    fl.l_type = kind as libc::c_short;
    fl.l_whence = libc::SEEK_SET as libc::c_short;
    fl.l_start = start;
    fl.l_len = len;
    fl
}

/// In a forked child: opens `path` read-write, runs fcntl(`cmd`) with `fl`; reports
/// [return value, errno, l_type, l_pid] (the last two as F_GETLK left them).
fn child_fcntl(path: &CString, cmd: libc::c_int, fl: libc::flock) -> Forked {
    fork_child(|| {
        let mut fl = fl;
        // SAFETY: system calls on a valid C string and a stack struct.
        unsafe {
            let fd = libc::open(path.as_ptr(), libc::O_RDWR);
            if fd < 0 {
                return [-1, *libc::__errno_location() as i64, -1, -1];
            }
            let r = libc::fcntl(fd, cmd, &mut fl as *mut libc::flock);
            let e = if r < 0 { *libc::__errno_location() } else { 0 };
            [r as i64, e as i64, fl.l_type as i64, fl.l_pid as i64]
        }
    })
}

fn fcntl_lock(f: &fs::File, cmd: libc::c_int, kind: libc::c_int, start: i64, len: i64) -> Result<libc::flock, i32> {
    let mut fl = flock_struct(kind, start, len);
    // SAFETY: a valid descriptor and struct.
    sys(unsafe { libc::fcntl(f.as_raw_fd(), cmd, &mut fl as *mut libc::flock) })?;
    Ok(fl)
}

fn is_lock_conflict(errno: i64) -> bool {
    errno == libc::EAGAIN as i64 || errno == libc::EACCES as i64
}

#[test]
fn posix_record_locks_between_processes() {
    let Some(m) = default_mount() else { return };
    let p = m.path("locked");
    fs::write(&p, vec![0u8; 100]).unwrap();
    let cp = cpath(&p);
    let f = fs::OpenOptions::new().read(true).write(true).open(&p).unwrap();
    fcntl_lock(&f, libc::F_SETLK, libc::F_WRLCK, 0, 10).unwrap();
    let me = std::process::id() as i64;

    // Another process: the locked range conflicts, F_GETLK names the holder, the rest is free.
    let r = child_fcntl(&cp, libc::F_SETLK, flock_struct(libc::F_WRLCK, 5, 10)).result();
    assert!(r[0] == -1 && is_lock_conflict(r[1]), "conflicting F_SETLK gave {r:?}");
    let r = child_fcntl(&cp, libc::F_SETLK, flock_struct(libc::F_RDLCK, 0, 1)).result();
    assert!(r[0] == -1 && is_lock_conflict(r[1]), "conflicting read lock gave {r:?}");
    let r = child_fcntl(&cp, libc::F_GETLK, flock_struct(libc::F_WRLCK, 0, 0)).result();
    assert_eq!(r[..3], [0, 0, libc::F_WRLCK as i64], "F_GETLK gave {r:?}");
    assert_eq!(r[3], me, "F_GETLK names pid {} instead of the holder {me}", r[3]);
    let r = child_fcntl(&cp, libc::F_SETLK, flock_struct(libc::F_WRLCK, 10, 10)).result();
    assert_eq!(r[..2], [0, 0], "lock of a free range gave {r:?}");
    let r = child_fcntl(&cp, libc::F_GETLK, flock_struct(libc::F_WRLCK, 10, 90)).result();
    assert_eq!(r[2], libc::F_UNLCK as i64, "F_GETLK on a free range gave {r:?}");

    // Read locks share.
    fcntl_lock(&f, libc::F_SETLK, libc::F_RDLCK, 0, 10).unwrap();
    let r = child_fcntl(&cp, libc::F_SETLK, flock_struct(libc::F_RDLCK, 0, 10)).result();
    assert_eq!(r[..2], [0, 0], "shared read lock gave {r:?}");

    // F_SETLKW waits for the holder to unlock.
    fcntl_lock(&f, libc::F_SETLK, libc::F_WRLCK, 0, 10).unwrap();
    let waiter = child_fcntl(&cp, libc::F_SETLKW, flock_struct(libc::F_WRLCK, 0, 10));
    assert!(!waiter.reported_within(300), "F_SETLKW did not wait for the lock");
    fcntl_lock(&f, libc::F_SETLK, libc::F_UNLCK, 0, 0).unwrap();
    assert!(waiter.reported_within(20_000), "F_SETLKW still waiting after the unlock");
    assert_eq!(waiter.result()[..2], [0, 0]);

    // A waiter killed while it waits leaves no lock behind once the holder unlocks (the
    // killed process lingers until its request is answered, then its close drops the lock).
    fcntl_lock(&f, libc::F_SETLK, libc::F_WRLCK, 0, 10).unwrap();
    let waiter = child_fcntl(&cp, libc::F_SETLKW, flock_struct(libc::F_WRLCK, 0, 10));
    assert!(!waiter.reported_within(300), "F_SETLKW did not wait for the lock");
    waiter.kill();
    fcntl_lock(&f, libc::F_SETLK, libc::F_UNLCK, 0, 0).unwrap();
    drop(waiter);
    assert!(
        eventually(|| child_fcntl(&cp, libc::F_SETLK, flock_struct(libc::F_WRLCK, 0, 10)).result()[0] == 0),
        "a killed F_SETLKW waiter left its lock behind"
    );
    let r = child_fcntl(&cp, libc::F_GETLK, flock_struct(libc::F_WRLCK, 0, 0)).result();
    assert_eq!(r[2], libc::F_UNLCK as i64, "{r:?}");

    // Closing any descriptor of the file drops the process's locks.
    fcntl_lock(&f, libc::F_SETLK, libc::F_WRLCK, 0, 0).unwrap();
    let r = child_fcntl(&cp, libc::F_SETLK, flock_struct(libc::F_WRLCK, 50, 1)).result();
    assert!(r[0] == -1 && is_lock_conflict(r[1]), "{r:?}");
    drop(fs::File::open(&p).unwrap());
    let r = child_fcntl(&cp, libc::F_SETLK, flock_struct(libc::F_WRLCK, 50, 1)).result();
    assert_eq!(r[..2], [0, 0], "lock still held after close: {r:?}");
    drop(f);
}

#[test]
fn flock_between_open_files() {
    let Some(m) = default_mount() else { return };
    let p = m.path("f");
    fs::write(&p, b"x").unwrap();
    let flock = |f: &fs::File, op| sys(unsafe { libc::flock(f.as_raw_fd(), op) });
    // flock belongs to the open file description: two opens conflict even in one process.
    let a = fs::File::open(&p).unwrap();
    let b = fs::File::open(&p).unwrap();
    flock(&a, libc::LOCK_EX).unwrap();
    assert_eq!(flock(&b, libc::LOCK_EX | libc::LOCK_NB), Err(libc::EWOULDBLOCK));
    assert_eq!(flock(&b, libc::LOCK_SH | libc::LOCK_NB), Err(libc::EWOULDBLOCK));
    flock(&a, libc::LOCK_SH).unwrap();
    flock(&b, libc::LOCK_SH | libc::LOCK_NB).unwrap();
    assert_eq!(flock(&a, libc::LOCK_EX | libc::LOCK_NB), Err(libc::EWOULDBLOCK));
    flock(&b, libc::LOCK_UN).unwrap();
    flock(&a, libc::LOCK_EX | libc::LOCK_NB).unwrap();
    // Closing the holder releases it; a forked child waits in LOCK_EX until then.
    let cp = cpath(&p);
    let waiter = fork_child(|| unsafe {
        let fd = libc::open(cp.as_ptr(), libc::O_RDONLY);
        let r = libc::flock(fd, libc::LOCK_EX);
        [fd as i64, r as i64, if r < 0 { *libc::__errno_location() as i64 } else { 0 }, 0]
    });
    assert!(!waiter.reported_within(300), "LOCK_EX did not wait for the holder");
    drop(a);
    assert!(waiter.reported_within(20_000), "LOCK_EX still waiting after the holder closed");
    let r = waiter.result();
    assert!(r[0] >= 0 && r[1] == 0, "{r:?}");
    drop(b);
}

/// POSIX record locks taken through the mount and through the library's handles on the same
/// store exclude each other: the adapter forwards them to the store's lock table.
#[test]
fn mount_locks_exclude_library_handles() {
    let Some(m) = default_mount() else { return };
    let p = m.path("shared");
    fs::write(&p, vec![0u8; 100]).unwrap();
    let rw = OpenOptions::new().read(true).write(true);
    let lib = m.store.open("/shared", &rw).unwrap();
    let would_block = |r: txvfs::Result<()>| matches!(r, Err(e) if e.kind() == ErrorKind::WouldBlock);

    // Record locks: the mount's lock stops the library, and the other way round.
    let f = fs::OpenOptions::new().read(true).write(true).open(&p).unwrap();
    fcntl_lock(&f, libc::F_SETLK, libc::F_WRLCK, 0, 10).unwrap();
    assert!(would_block(lib.lock_range(RangeLockKind::Write, 5, 1, false)), "library locked a range the mount holds");
    assert!(lib.test_lock(true, 0, 10).unwrap().is_some());
    lib.lock_range(RangeLockKind::Write, 20, 10, false).unwrap();
    let r = fcntl_lock(&f, libc::F_SETLK, libc::F_WRLCK, 25, 1).map(drop);
    assert!(matches!(r, Err(e) if is_lock_conflict(e as i64)), "mount locked a range the library holds: {r:?}");
    let held = fcntl_lock(&f, libc::F_GETLK, libc::F_WRLCK, 0, 0).unwrap();
    assert_eq!((held.l_type as i32, held.l_start, held.l_len), (libc::F_WRLCK, 20, 10));
    lib.lock_range(RangeLockKind::Unlock, 0, 0, false).unwrap();
    fcntl_lock(&f, libc::F_SETLK, libc::F_WRLCK, 25, 1).unwrap();
    // Closing the mount's descriptor frees its locks for the library.
    drop(f);
    assert!(eventually(|| lib.lock_range(RangeLockKind::Write, 0, 0, false).is_ok()), "the mount's locks outlived close");
    lib.lock_range(RangeLockKind::Unlock, 0, 0, false).unwrap();

    // F_SETLKW through the mount waits for the library's lock.
    lib.lock_range(RangeLockKind::Read, 0, 10, false).unwrap();
    let cp = cpath(&p);
    let waiter = child_fcntl(&cp, libc::F_SETLKW, flock_struct(libc::F_WRLCK, 5, 1));
    assert!(!waiter.reported_within(300), "F_SETLKW did not wait for the library's lock");
    let r = child_fcntl(&cp, libc::F_SETLK, flock_struct(libc::F_RDLCK, 0, 10)).result();
    assert_eq!(r[..2], [0, 0], "read locks through the mount and the library should share: {r:?}");
    lib.lock_range(RangeLockKind::Unlock, 0, 0, false).unwrap();
    assert!(waiter.reported_within(20_000), "F_SETLKW still waiting after the library unlocked");
    assert_eq!(waiter.result()[..2], [0, 0]);
    // The waiter's exit dropped its lock.
    assert!(eventually(|| lib.lock_range(RangeLockKind::Write, 0, 0, false).is_ok()));
    // `flock` stays in the kernel (see the adapter's documentation): it is not checked here.
    lib.close().unwrap();
}
