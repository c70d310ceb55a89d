//! `txvfs mount` as a process: it serves until SIGTERM, detaches a mount in use and serves
//! its last user, and fails with one line on a bad store or mountpoint.

mod common;

use common::*;
use std::fs;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use txvfs::{FileSystem, Store};

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
            skip(&format!("txvfs mount is not permitted here: {err}"));
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
    assert!(
        eventually(|| {
            status = served.child.try_wait().unwrap();
            status.is_some()
        }),
        "txvfs mount did not exit"
    );
    let mut err = String::new();
    served.child.stderr.take().unwrap().read_to_string(&mut err).unwrap();
    (status.unwrap().code(), err)
}

/// A scratch directory with a store path `st` (not created) and an empty mount point `mnt`,
/// and the txvfs binary; `None` (after saying why) where FUSE or the binary is missing.
fn cli_setup() -> Option<(tempfile::TempDir, PathBuf, PathBuf, PathBuf)> {
    if let Some(why) = fuse_unavailable() {
        skip(&why);
        return None;
    }
    let Some(bin) = txvfs_bin() else {
        skip("the txvfs binary is not built (cargo build --release -p txvfs-cli)");
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
    let mut open = fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(mnt.join("busy"))
        .unwrap();
    open.write_all(b"before ").unwrap();

    // SAFETY: a signal to our own child.
    assert_eq!(unsafe { libc::kill(served.child.id() as i32, libc::SIGTERM) }, 0);
    // The mount leaves the tree at once, but its user keeps working.
    assert!(eventually(|| !is_mounted(&mnt)), "still mounted after SIGTERM");
    assert!(
        served.child.try_wait().unwrap().is_none(),
        "txvfs mount exited while its mount was in use"
    );
    open.write_all(b"after").unwrap();
    drop(open);
    let (code, err) = exit_of(&mut served);
    assert_eq!(code, Some(0), "txvfs mount: {err}");
    assert!(err.contains("busy: detached"), "{err}");
    drop(served);
    assert_eq!(
        Store::open(store.to_str().unwrap()).unwrap().read_file("/busy").unwrap(),
        b"before after"
    );
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
        skip("the txvfs binary is not built (cargo build --release -p txvfs-cli)");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let mnt = dir.path().join("mnt");
    fs::create_dir(&mnt).unwrap();
    let fails = |store: &Path, mnt: &Path| {
        let out = Command::new(&bin)
            .arg("mount")
            .arg("--store")
            .arg(store)
            .arg(mnt)
            .stdin(Stdio::null())
            .output()
            .unwrap();
        let err = String::from_utf8(out.stderr).unwrap();
        assert!(
            !out.status.success(),
            "txvfs mount {} {} succeeded",
            store.display(),
            mnt.display()
        );
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
