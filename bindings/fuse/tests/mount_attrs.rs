//! The mount through real system calls: fallocate modes, special files, chmod/chown and ns
//! times, permissions as another user with supplementary groups, statfs (a quota tree's too),
//! read-only mounts, unlinked open files and store changes seen through the mount, a named
//! snapshot (read-only) and a writable clone of it. Each test mounts a fresh RocksDB store (see
//! `common`).

mod common;

use common::*;
use std::collections::HashMap;
use std::fs;
use std::io::{Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::fs::{FileExt, FileTypeExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;
use txvfs::{ErrorKind, FileSystem, FileType, InodeFileSystem, Options, Store};
use txvfs_fuse::MountOptions;

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
    assert_eq!(
        fs::symlink_metadata(m.path("fifo")).unwrap().mode(),
        libc::S_IFIFO | (0o644 & !current_umask())
    );
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
    let mut reader =
        fs::OpenOptions::new().read(true).custom_flags(libc::O_NONBLOCK).open(&fifo).unwrap();
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
    let out =
        c.args(["--", "sh", "-c", cmd]).env("LC_ALL", "C").stdin(Stdio::null()).output().unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into(),
        String::from_utf8_lossy(&out.stderr).into(),
    )
}

#[test]
fn permissions_use_the_callers_credential() {
    if Command::new("setpriv")
        .arg("--help")
        .stdout(Stdio::null())
        .status()
        .map(|s| !s.success())
        .unwrap_or(true)
    {
        skip("setpriv (util-linux) is not installed");
        return;
    }
    let Some(m) = Mount::new(MountOptions { allow_other: true, ..MountOptions::default() }) else {
        return;
    };
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
    let (ok, _, err) = as_nobody(
        "1234",
        &format!("echo mine > {}/mine && mkdir {}/sub", open.display(), open.display()),
    );
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
    assert!(
        before.f_bsize > 0
            && before.f_blocks >= before.f_bfree
            && before.f_bfree >= before.f_bavail
    );
    assert!(
        before.f_files >= before.f_ffree,
        "total inodes {} < free {}",
        before.f_files,
        before.f_ffree
    );
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

/// `df` on a directory of a quota tree shows the tree's limits and usage (XFS project quota
/// style); elsewhere the store's. Writes through the mount past the limit fail with EDQUOT,
/// a rename out of the tree with EXDEV.
#[test]
fn statfs_shows_the_quota_tree() {
    let Some(m) = default_mount() else { return };
    m.store.mkdir("/q", 0o755).unwrap();
    let limits = txvfs::QuotaLimits { bytes: Some(1 << 20), inodes: Some(100) };
    m.store.set_quota("/q", limits).unwrap();
    fs::create_dir(m.path("q/d")).unwrap();
    fs::write(m.path("q/d/f"), noise(300_000, 3)).unwrap();
    for p in [m.path("q"), m.path("q/d"), m.path("q/d/f")] {
        let s = statvfs(&p);
        assert_eq!(s.f_blocks * s.f_frsize, 1 << 20, "{}", p.display());
        assert_eq!(s.f_bfree * s.f_frsize, ((1 << 20) - 300_000) / s.f_frsize * s.f_frsize);
        assert_eq!((s.f_files, s.f_ffree), (100, 97), "{}", p.display());
    }
    let root = statvfs(m.mnt.path());
    assert_eq!(root.f_files - root.f_ffree, m.store.statfs().unwrap().files);
    assert!(root.f_blocks * root.f_frsize > 1 << 20);
    let e = fs::write(m.path("q/big"), noise(800_000, 4)).unwrap_err();
    assert_eq!(e.raw_os_error(), Some(libc::EDQUOT), "{e}");
    assert_eq!(m.store.quota("/q").unwrap().unwrap().bytes_used, 300_000);
    let e = fs::rename(m.path("q/d/f"), m.path("f")).unwrap_err();
    assert_eq!(e.raw_os_error(), Some(libc::EXDEV), "{e}");
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
    let Some(m) = Mount::new(MountOptions { ttl: Duration::ZERO, ..MountOptions::default() })
    else {
        return;
    };
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
    let names: Vec<_> =
        fs::read_dir(m.mnt.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(names, ["d"]);
}

// ---- snapshots and clones ----

/// A store with /d/f and /d/g and its named snapshot `base`; returns the snapshot's URI.
fn snapshot_base(dir: &std::path::Path) -> String {
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
    let uri = snapshot_base(db.path());
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
    let uri = snapshot_base(db.path());
    let clone =
        Store::create_clone(&uri, db.path().join("clone").to_str().unwrap(), Options::default())
            .unwrap();
    let Some(m) = Mount::of(clone, db, MountOptions::default()) else { return };
    assert_eq!(fs::read(m.path("d/f")).unwrap(), b"lower f");
    fs::rename(m.path("d"), m.path("e")).unwrap();
    fs::remove_file(m.path("e/g")).unwrap();
    fs::write(m.path("e/f"), b"upper f").unwrap();
    let names: Vec<_> =
        fs::read_dir(m.path("e")).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(names, vec![std::ffi::OsString::from("f")]);
    assert_eq!(fs::read(m.path("e/f")).unwrap(), b"upper f");
    let lower = Store::open(&uri).unwrap();
    assert_eq!(lower.read_file("/d/f").unwrap(), b"lower f");
    assert_eq!(lower.read_file("/d/g").unwrap(), b"lower g");
}
