//! One owner per RocksDB store, whatever the path into the process: a holder of the owner lock
//! that does not serve the store (simulated by taking txvfs's owner lock the way a txvfs from
//! before shared stores would) is refused with the holder named, and a store inherited across
//! fork() refuses every call in the child without damaging the parent's store; the child may
//! open the store again, as a client of the parent (kv/shared).

use std::ffi::CString;
use std::sync::Mutex;
use txvfs::{ErrorKind, FileSystem, Store};

/// The tests run one at a time: a fork while another test thread holds a lock (the store
/// registry, RocksDB's) would leave the child waiting forever.
static SERIAL: Mutex<()> = Mutex::new(());

/// Takes the store's owner lock through a fresh open file description, as a second copy of
/// txvfs in this process (or another process) would; returns the descriptor or the errno.
fn lock_like_another_copy(dir: &std::path::Path) -> Result<i32, i32> {
    let path = CString::new(dir.join("txvfs.owner").to_str().unwrap()).unwrap();
    // SAFETY: plain libc calls on a path we own; flock zeroed means the whole file.
    unsafe {
        let fd = libc::open(path.as_ptr(), libc::O_RDWR | libc::O_CREAT | libc::O_CLOEXEC, 0o644);
        assert!(fd >= 0);
        let mut fl: libc::flock = std::mem::zeroed();
        fl.l_type = libc::F_WRLCK as libc::c_short;
        if libc::fcntl(fd, libc::F_OFD_SETLK, &mut fl) == -1 {
            let e = *libc::__errno_location();
            libc::close(fd);
            return Err(e);
        }
        libc::ftruncate(fd, 0);
        libc::pwrite(fd, b"4242\n".as_ptr().cast(), 5, 0); // a txvfs from before sharing: no mode
        Ok(fd)
    }
}

#[test]
fn an_open_store_holds_the_owner_lock_against_other_copies() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path().to_str().unwrap()).unwrap();
    store.write_file("/a", b"1").unwrap();
    assert_eq!(lock_like_another_copy(dir.path()), Err(libc::EAGAIN));
    drop(store);
    let fd = lock_like_another_copy(dir.path()).expect("released when the store closes");
    // SAFETY: our descriptor.
    unsafe { libc::close(fd) };
}

#[test]
fn a_store_held_by_a_txvfs_that_does_not_share_is_refused_with_the_holder_named() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    Store::open(dir.path().to_str().unwrap()).unwrap().write_file("/kept", b"data").unwrap();
    let fd = lock_like_another_copy(dir.path()).unwrap();
    let Err(e) = Store::open(dir.path().to_str().unwrap()) else {
        panic!("refused while another copy owns it")
    };
    assert_eq!(e.kind(), ErrorKind::Busy);
    assert!(e.message().contains("exclusive use by process 4242"), "{}", e.message());
    // SAFETY: our descriptor.
    unsafe { libc::close(fd) };
    let s = Store::open(dir.path().to_str().unwrap()).unwrap();
    assert_eq!(s.read_file("/kept").unwrap(), b"data");
}

/// Runs `child` in a forked child and returns its exit status (0: every check held).
fn in_child(child: impl FnOnce() -> bool) -> i32 {
    // SAFETY: the child only runs `child` and leaves with _exit, never returning into the
    // test harness.
    unsafe {
        let pid = libc::fork();
        assert!(pid >= 0);
        if pid == 0 {
            let ok = std::panic::catch_unwind(std::panic::AssertUnwindSafe(child)).unwrap_or(false);
            libc::_exit(if ok { 0 } else { 1 });
        }
        let mut status = 0;
        libc::waitpid(pid, &mut status, 0);
        if libc::WIFEXITED(status) {
            libc::WEXITSTATUS(status)
        } else {
            100
        }
    }
}

#[test]
fn a_store_inherited_across_fork_refuses_every_call_and_the_parent_store_survives() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let uri = dir.path().to_str().unwrap().to_string();
    let store = Store::open(&uri).unwrap();
    for i in 0..50 {
        store.write_file(format!("/before{i}"), b"parent").unwrap();
    }
    let parent = std::process::id();
    let status = in_child(|| {
        let refused = |r: txvfs::Result<()>| {
            r.as_ref().is_err_and(|e| e.kind() == ErrorKind::Busy && e.message().contains("fork"))
        };
        let writes = (0..50).all(|i| refused(store.write_file(format!("/child{i}"), b"child")));
        let read = refused(store.read_file("/before0").map(|_| ()));
        let tx = refused(store.begin().map(|_| ()));
        // Opening it again in the child makes the child a client of the parent's store.
        let reopen = match Store::open(&uri) {
            Ok(s) => {
                s.read_file("/before0").is_ok_and(|d| d == b"parent")
                    && s.write_file("/from-child", b"child").is_ok()
            }
            Err(e) => {
                eprintln!("child could not reopen (parent {parent}): {e}");
                false
            }
        };
        writes && read && tx && reopen
    });
    assert_eq!(status, 0, "the child could use or reopen the parent's store");
    for i in 0..50 {
        store.write_file(format!("/after{i}"), b"parent").unwrap();
    }
    drop(store);
    let s = Store::open(&uri).unwrap();
    for i in 0..50 {
        assert_eq!(s.read_file(format!("/before{i}")).unwrap(), b"parent");
        assert_eq!(s.read_file(format!("/after{i}")).unwrap(), b"parent");
        assert!(!s.exists(format!("/child{i}")).unwrap());
    }
    assert_eq!(
        s.read_file("/from-child").unwrap(),
        b"child",
        "the child's reopened store wrote through the parent"
    );
}

#[test]
fn a_child_may_open_the_store_once_the_parent_has_closed_it() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let uri = dir.path().to_str().unwrap().to_string();
    Store::open(&uri).unwrap().write_file("/f", b"x").unwrap();
    // The store is closed before the fork: nothing is inherited, the child is an owner.
    let status = in_child(|| {
        let s = Store::open(&uri).unwrap();
        s.write_file("/from-child", b"y").is_ok() && s.read_file("/f").is_ok_and(|d| d == b"x")
    });
    assert_eq!(status, 0);
    assert_eq!(Store::open(&uri).unwrap().read_file("/from-child").unwrap(), b"y");
}

/// An in-process snapshot of a store is part of the store: inherited across fork(), it
/// refuses reads in the child too (its RocksDB threads did not survive the fork).
#[test]
fn a_snapshot_inherited_across_fork_refuses_every_call() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path().to_str().unwrap()).unwrap();
    store.write_file("/a", b"1").unwrap();
    let snap = store.snapshot().unwrap();
    let status = in_child(|| {
        snap.read_file("/a")
            .is_err_and(|e| e.kind() == ErrorKind::Busy && e.message().contains("fork"))
    });
    assert_eq!(status, 0, "the child could read the parent's snapshot");
    assert_eq!(snap.read_file("/a").unwrap(), b"1");
}

/// A named snapshot opened before fork() is refused in the child (its RocksDB instance did
/// not survive the fork), the child may open the snapshot again for itself, and the child's
/// inherited copy of the snapshot's reader lock does not outlive the parent's reader: once
/// the parent closes the snapshot, it can delete it while the child still runs.
#[test]
fn a_named_snapshot_inherited_across_fork_is_refused_and_holds_nothing_in_the_child() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path().to_str().unwrap()).unwrap();
    store.write_file("/a", b"1").unwrap();
    store.create_named_snapshot("s").unwrap();
    let uri = store.named_snapshot_uri("s").unwrap();
    let snap = Store::open(&uri).unwrap();
    assert_eq!(snap.read_file("/a").unwrap(), b"1");
    let (mut ready, mut done) = ([0i32; 2], [0i32; 2]);
    // SAFETY: plain pipe(2) calls into arrays of two descriptors.
    assert!(unsafe { libc::pipe(ready.as_mut_ptr()) == 0 && libc::pipe(done.as_mut_ptr()) == 0 });
    // SAFETY: the child only runs the checks below and leaves with _exit.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0);
    if pid == 0 {
        let ok = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let refused = snap
                .read_file("/a")
                .is_err_and(|e| e.kind() == ErrorKind::Busy && e.message().contains("fork"));
            let reopened =
                Store::open(&uri).is_ok_and(|s| s.read_file("/a").is_ok_and(|d| d == b"1"));
            refused && reopened
        }))
        .unwrap_or(false);
        // SAFETY: one byte to and from our own pipes; then leave without unwinding.
        unsafe {
            libc::write(ready[1], [ok as u8].as_ptr().cast(), 1);
            let mut b = [0u8];
            libc::read(done[0], b.as_mut_ptr().cast(), 1);
            libc::_exit(0);
        }
    }
    let mut ok = [0u8];
    // SAFETY: reads one byte from our pipe.
    assert_eq!(unsafe { libc::read(ready[0], ok.as_mut_ptr().cast(), 1) }, 1);
    drop(snap);
    let deleted = store.delete_named_snapshot("s");
    // SAFETY: wakes the child and waits for it.
    unsafe {
        libc::write(done[1], [1u8].as_ptr().cast(), 1);
        libc::waitpid(pid, std::ptr::null_mut(), 0);
    }
    assert_eq!(ok[0], 1, "the child could read the parent's named snapshot, or not open it again");
    deleted.expect("the parent could not delete its snapshot while a forked child lived");
}
