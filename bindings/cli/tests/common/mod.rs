//! What the CLI's test files share: a temporary directory with a store, and the built binary.
#![allow(dead_code)] // each test file uses its own part

use std::ffi::CString;
use std::io::Write;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

/// The `txvfs` binary built for these tests.
pub const BIN: &str = env!("CARGO_BIN_EXE_txvfs");

/// A temporary directory holding a store (`st`) and host trees.
pub struct Env {
    dir: tempfile::TempDir,
}

impl Env {
    pub fn new() -> Env {
        Env { dir: tempfile::tempdir().unwrap() }
    }
    pub fn store(&self) -> PathBuf {
        self.dir.path().join("st")
    }
    pub fn host(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }
    pub fn cmd(&self, args: &[&str]) -> Command {
        let mut c = Command::new(BIN);
        c.env_remove("TXVFS_STORE").arg("--store").arg(self.store()).args(args);
        c
    }
    pub fn run(&self, args: &[&str]) -> Output {
        self.cmd(args).output().unwrap()
    }
    pub fn run_stdin(&self, args: &[&str], input: &[u8]) -> Output {
        let mut child = self
            .cmd(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        child.stdin.take().unwrap().write_all(input).unwrap();
        child.wait_with_output().unwrap()
    }
    /// Runs a command that must succeed; returns its standard output.
    pub fn ok(&self, args: &[&str]) -> String {
        let o = self.run(args);
        assert!(
            o.status.success(),
            "txvfs {args:?} failed: {}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        );
        String::from_utf8(o.stdout).unwrap()
    }
    /// Runs a command that must fail with one `txvfs: ` line; returns (exit code, message).
    pub fn fails(&self, args: &[&str]) -> (i32, String) {
        let o = self.run(args);
        assert!(!o.status.success(), "txvfs {args:?} succeeded");
        let err = String::from_utf8(o.stderr).unwrap();
        assert!(
            err.starts_with("txvfs: ") && err.lines().count() == 1,
            "txvfs {args:?}: stderr {err:?}"
        );
        (o.status.code().unwrap(), err)
    }
    pub fn init(self) -> Env {
        self.ok(&["init"]);
        self
    }
}

/// `txvfs stat PATH`'s output line for a store path.
pub fn store_ino(env: &Env, path: &str) -> String {
    let st = env.ok(&["stat", path]);
    st.lines().find(|l| l.contains("Inode:")).unwrap().to_string()
}

/// Inode number of a store path, from `txvfs stat`.
pub fn ino_of(env: &Env, path: &str) -> u64 {
    store_ino(env, path).split_whitespace().nth(1).unwrap().parse().unwrap()
}

pub fn set_times(p: &Path, sec: i64, nsec: i64) {
    let c = CString::new(p.as_os_str().as_bytes()).unwrap();
    let t = libc::timespec { tv_sec: sec, tv_nsec: nsec };
    // SAFETY: valid C string and a two-element array.
    assert_eq!(
        unsafe {
            libc::utimensat(libc::AT_FDCWD, c.as_ptr(), [t, t].as_ptr(), libc::AT_SYMLINK_NOFOLLOW)
        },
        0
    );
}

/// Sets a user xattr; false if the host file system has none.
pub fn set_xattr(p: &Path, name: &str, value: &[u8]) -> bool {
    let (c, n) = (CString::new(p.as_os_str().as_bytes()).unwrap(), CString::new(name).unwrap());
    // SAFETY: valid C strings and buffer.
    unsafe { libc::lsetxattr(c.as_ptr(), n.as_ptr(), value.as_ptr().cast(), value.len(), 0) == 0 }
}

pub fn get_xattr(p: &Path, name: &str) -> Option<Vec<u8>> {
    let (c, n) = (CString::new(p.as_os_str().as_bytes()).unwrap(), CString::new(name).unwrap());
    let mut buf = vec![0u8; 256];
    // SAFETY: valid C strings and a buffer of buf.len() bytes.
    let r = unsafe { libc::lgetxattr(c.as_ptr(), n.as_ptr(), buf.as_mut_ptr().cast(), buf.len()) };
    (r >= 0).then(|| buf[..r as usize].to_vec())
}

/// A host tree with modes, times, a symlink, hard links, xattrs and a large file.
pub fn make_tree(root: &Path) -> bool {
    std::fs::create_dir_all(root.join("sub/deeper")).unwrap();
    std::fs::write(root.join("a.txt"), b"alpha").unwrap();
    std::fs::write(root.join("sub/big"), vec![7u8; 200_000]).unwrap();
    std::fs::write(root.join("sub/deeper/empty"), b"").unwrap();
    std::fs::hard_link(root.join("a.txt"), root.join("sub/a-link")).unwrap();
    std::os::unix::fs::symlink("../a.txt", root.join("sub/sym")).unwrap();
    std::fs::set_permissions(root.join("a.txt"), std::fs::Permissions::from_mode(0o604)).unwrap();
    std::fs::set_permissions(root.join("sub/deeper"), std::fs::Permissions::from_mode(0o750))
        .unwrap();
    let xattrs = set_xattr(&root.join("a.txt"), "user.color", b"blue")
        && set_xattr(&root.join("sub"), "user.dir", b"yes");
    for (i, p) in ["a.txt", "sub/big", "sub/deeper/empty", "sub/sym", "sub/deeper", "sub", ""]
        .iter()
        .enumerate()
    {
        set_times(&root.join(p), 1_000_000_000 + i as i64 * 1000, 123_456_789);
    }
    xattrs
}

/// Asserts that two host trees hold the same names, types, modes, mtimes, data, symlinks,
/// hard links and user xattrs.
pub fn assert_same_tree(a: &Path, b: &Path, xattrs: bool) {
    let (ma, mb) = (std::fs::symlink_metadata(a).unwrap(), std::fs::symlink_metadata(b).unwrap());
    assert_eq!(ma.file_type(), mb.file_type(), "{}", b.display());
    if ma.file_type().is_symlink() {
        // The core sets times through symlinks, so a symlink's own times are not kept.
        assert_eq!(std::fs::read_link(a).unwrap(), std::fs::read_link(b).unwrap());
        return;
    }
    assert_eq!(
        (ma.mtime(), ma.mtime_nsec()),
        (mb.mtime(), mb.mtime_nsec()),
        "mtime of {}",
        b.display()
    );
    assert_eq!(ma.mode(), mb.mode(), "mode of {}", b.display());
    assert_eq!(ma.nlink(), mb.nlink(), "links of {}", b.display());
    if xattrs {
        assert_eq!(get_xattr(a, "user.color"), get_xattr(b, "user.color"));
        assert_eq!(get_xattr(a, "user.dir"), get_xattr(b, "user.dir"));
    }
    if ma.is_dir() {
        let names = |p: &Path| {
            let mut v: Vec<_> =
                std::fs::read_dir(p).unwrap().map(|e| e.unwrap().file_name()).collect();
            v.sort();
            v
        };
        let (na, nb) = (names(a), names(b));
        assert_eq!(na, nb, "entries of {}", b.display());
        for n in na {
            assert_same_tree(&a.join(&n), &b.join(&n), xattrs);
        }
    } else {
        assert_eq!(std::fs::read(a).unwrap(), std::fs::read(b).unwrap());
    }
}
