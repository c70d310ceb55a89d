//! Shared by the mount tests: the mount guard (a fresh RocksDB store mounted on a fresh
//! directory), the loud skip where FUSE is missing, and small syscall helpers.
//!
//! Without FUSE (no /dev/fuse, or mounting refused with EPERM) each test writes a
//! `SKIPPED: <test>: <reason>` line to standard error (past the test harness's capture) and
//! passes; with `TXVFS_FUSE_REQUIRE=1` it fails instead (CI on a machine with FUSE sets it).
#![allow(dead_code)]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Once;

use std::ffi::CString;
use std::fs;
use std::io::{self, Write};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};
use txvfs::{Options, Store};
use txvfs_fuse::MountOptions;

/// Tests of this binary that did not run here.
static SKIPPED: AtomicUsize = AtomicUsize::new(0);
static REPORT_AT_EXIT: Once = Once::new();

extern "C" fn report_skipped() {
    let n = SKIPPED.load(Ordering::Relaxed);
    let _ = io::stderr().write_all(
        format!("\nSKIPPED: {n} test(s) of this binary did not run (see the lines above)\n")
            .as_bytes(),
    );
}

/// Reports that the running test cannot run here: a `SKIPPED` line on standard error, written
/// past the test harness's capture so that it shows in a normal `cargo test` run, and a count
/// of them when the binary exits; a failure when `TXVFS_FUSE_REQUIRE=1`.
#[track_caller]
pub fn skip(why: &str) {
    let test = std::thread::current().name().unwrap_or("?").to_string();
    if std::env::var("TXVFS_FUSE_REQUIRE").as_deref() == Ok("1") {
        panic!("{test}: TXVFS_FUSE_REQUIRE=1, but {why}");
    }
    SKIPPED.fetch_add(1, Ordering::Relaxed);
    // SAFETY: registers a function without arguments that only writes to standard error.
    REPORT_AT_EXIT.call_once(|| unsafe {
        libc::atexit(report_skipped);
    });
    let _ = io::stderr().write_all(format!("\nSKIPPED: {test}: {why}\n").as_bytes());
}

// ---- the mount guard ----

/// A store mounted on a temporary directory; dropping it unmounts (lazily with
/// `fusermount3 -u -z` if a plain unmount fails), then removes both directories.
pub struct Mount {
    session: Option<fuser::BackgroundSession>,
    pub store: Store,
    pub mnt: tempfile::TempDir,
    /// The store's directory, removed last.
    _db: tempfile::TempDir,
}

/// Why FUSE cannot be used here, if it cannot.
pub fn fuse_unavailable() -> Option<String> {
    match fs::OpenOptions::new().read(true).write(true).open("/dev/fuse") {
        Ok(_) => None,
        Err(e) => Some(format!("/dev/fuse cannot be opened ({e})")),
    }
}

impl Mount {
    /// A fresh store mounted with `options`, or None (after printing why) without FUSE.
    pub fn new(options: MountOptions) -> Option<Mount> {
        Mount::with_store(options, |_| {})
    }

    /// Like [`Mount::new`], with `fill` run on the store before it is mounted. A read-only
    /// mount gets the store reopened read-only after `fill`.
    pub fn with_store(options: MountOptions, fill: impl FnOnce(&Store)) -> Option<Mount> {
        if let Some(why) = fuse_unavailable() {
            skip(&why);
            return None;
        }
        let db = tempfile::tempdir().unwrap();
        let uri = db.path().join("st");
        let uri = uri.to_str().unwrap();
        let mut store = Store::open(uri).unwrap();
        fill(&store);
        if options.read_only {
            drop(store);
            store =
                Store::open_with(uri, Options { read_only: true, ..Options::default() }).unwrap();
        }
        // The mountpoint is the temporary directory itself, so every user can reach the mount
        // (the directory holding it is /tmp).
        let mnt = tempfile::tempdir().unwrap();
        match txvfs_fuse::spawn_mount(store.clone(), mnt.path(), &options) {
            Ok(session) => Some(Mount { session: Some(session), store, mnt, _db: db }),
            Err(e) if e.raw_os_error() == Some(libc::EPERM) => {
                skip(&format!("mounting FUSE is not permitted here ({e})"));
                None
            }
            Err(e) => panic!("mount on {}: {e}", mnt.path().display()),
        }
    }

    /// `store` (whose data lives under `db`, removed after the unmount) mounted with
    /// `options`, or None (after printing why) without FUSE.
    pub fn of(store: Store, db: tempfile::TempDir, options: MountOptions) -> Option<Mount> {
        if let Some(why) = fuse_unavailable() {
            skip(&why);
            return None;
        }
        let mnt = tempfile::tempdir().unwrap();
        match txvfs_fuse::spawn_mount(store.clone(), mnt.path(), &options) {
            Ok(session) => Some(Mount { session: Some(session), store, mnt, _db: db }),
            Err(e) if e.raw_os_error() == Some(libc::EPERM) => {
                skip(&format!("mounting FUSE is not permitted here ({e})"));
                None
            }
            Err(e) => panic!("mount on {}: {e}", mnt.path().display()),
        }
    }

    /// The mount's path for `rel` (store path `/rel`).
    pub fn path(&self, rel: &str) -> PathBuf {
        self.mnt.path().join(rel)
    }
}

impl Drop for Mount {
    fn drop(&mut self) {
        if let Some(session) = self.session.take() {
            if let Err(e) = session.umount_and_join() {
                eprintln!("unmount of {}: {e}; unmounting lazily", self.mnt.path().display());
                let _ =
                    Command::new("fusermount3").arg("-u").arg("-z").arg(self.mnt.path()).status();
            }
        }
    }
}

pub fn default_mount() -> Option<Mount> {
    Mount::new(MountOptions::default())
}

// ---- small helpers ----

pub fn cpath(p: &Path) -> CString {
    CString::new(p.as_os_str().as_bytes()).unwrap()
}

pub fn cstr(s: &str) -> CString {
    CString::new(s).unwrap()
}

pub fn last_errno() -> i32 {
    io::Error::last_os_error().raw_os_error().unwrap()
}

/// A libc call's result: its return value, or errno when it returned -1.
pub fn sys<T: Into<i64> + Copy>(ret: T) -> Result<i64, i32> {
    match ret.into() {
        -1 => Err(last_errno()),
        r => Ok(r),
    }
}

/// The errno of a call that must fail.
#[track_caller]
pub fn errno<T: std::fmt::Debug>(r: io::Result<T>) -> i32 {
    r.expect_err("the call succeeded").raw_os_error().expect("not an OS error")
}

/// Deterministic pseudo-random bytes (xorshift64).
pub fn noise(len: usize, seed: u64) -> Vec<u8> {
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
pub fn eventually(mut cond: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + Duration::from_secs(20);
    while Instant::now() < deadline {
        if cond() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    cond()
}

/// The process's umask, read without changing it (other tests create files meanwhile).
pub fn current_umask() -> u32 {
    let status = fs::read_to_string("/proc/self/status").unwrap();
    let mask = status
        .lines()
        .find_map(|l| l.strip_prefix("Umask:"))
        .expect("no Umask in /proc/self/status");
    u32::from_str_radix(mask.trim(), 8).unwrap()
}

pub fn setxattr(p: &Path, name: &str, value: &[u8], flags: libc::c_int) -> Result<(), i32> {
    let (p, name) = (cpath(p), cstr(name));
    // SAFETY: valid C strings and a buffer of `value.len()` bytes.
    sys(unsafe {
        libc::setxattr(p.as_ptr(), name.as_ptr(), value.as_ptr().cast(), value.len(), flags)
    })
    .map(drop)
}

/// getxattr(2) with a buffer of `size` bytes (a null buffer for 0): the value's length, and
/// the bytes read.
pub fn getxattr(p: &Path, name: &str, size: usize) -> Result<(usize, Vec<u8>), i32> {
    let (p, name) = (cpath(p), cstr(name));
    let mut buf = vec![0u8; size];
    let ptr = if size == 0 { std::ptr::null_mut() } else { buf.as_mut_ptr().cast() };
    // SAFETY: valid C strings and a buffer of `size` bytes (or none).
    let n = sys(unsafe { libc::getxattr(p.as_ptr(), name.as_ptr(), ptr, size) } as i64)? as usize;
    buf.truncate(if size == 0 { 0 } else { n });
    Ok((n, buf))
}
