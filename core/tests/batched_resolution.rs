//! On a backend with a round trip per read (FoundationDB), path resolution reads the entries
//! and the inode a path needs in one batch, guessed from the entries seen before
//! (`fs/ops/prefetch.rs`): a `stat` of a known path is one read however deep it is, and a
//! guess gone stale (renamed, replaced, removed, its permissions changed by another process)
//! never changes an answer. The remote is the memory backend behind `FaultyBackend`, which
//! counts reads (a batch counts once); no test asserts a time.

use std::sync::Arc;
use std::time::Duration;
use txvfs::kv::{Backend, FaultPlan, FaultyBackend, Limits, MemoryBackend};
use txvfs::{Credential, ErrorKind, FileSystem, Options, Store};

/// Two stores on one remote (two processes, each with guesses of its own), and the first
/// one's plan (which counts its reads).
fn two_processes() -> (Store, Arc<FaultPlan>, Store) {
    two_processes_with(Limits::UNLIMITED)
}

/// [`two_processes`] on a remote with `limits`.
fn two_processes_with(limits: Limits) -> (Store, Arc<FaultPlan>, Store) {
    let memory: Arc<dyn Backend> = Arc::new(MemoryBackend::new(limits));
    let open = || {
        let (b, plan) = FaultyBackend::new(memory.clone());
        plan.set_read_latency(Duration::from_micros(50));
        let backend: Arc<dyn Backend> = b;
        (Store::with_backend(backend, Options::default(), None).unwrap(), plan)
    };
    let (one, plan) = open();
    let (other, _) = open();
    (one, plan, other)
}

/// The reads `f` makes on the store behind `plan`.
fn reads<R>(plan: &FaultPlan, f: impl FnOnce() -> R) -> (R, u64) {
    let before = plan.reads();
    let r = f();
    (r, plan.reads() - before)
}

#[test]
fn a_stat_of_a_known_path_is_one_read_however_deep() {
    let (store, plan, _) = two_processes();
    store.mkdir_all("/a/b/c", 0o755).unwrap();
    store.write_file("/a/b/c/f", b"data").unwrap();
    store.write_file("/top", b"x").unwrap();
    let first = store.stat("/a/b/c/f").unwrap();
    let (st, n) = reads(&plan, || store.stat("/a/b/c/f").unwrap());
    assert_eq!((st.ino, st.size), (first.ino, 4));
    assert_eq!(n, 1, "a stat of /a/b/c/f seen before: 4 entries and an inode in one batch");
    store.stat("/top").unwrap();
    let (_, n) = reads(&plan, || store.stat("/top").unwrap());
    assert_eq!(n, 1, "a stat of /top seen before");
    // A directory: its path and inode in one batch, then its times and link count.
    store.stat("/a/b/c").unwrap();
    let (st, n) = reads(&plan, || store.stat("/a/b/c").unwrap());
    assert!(st.is_dir());
    assert!(n <= 2, "a stat of the directory /a/b/c seen before: {n} reads");
}

#[test]
fn stale_guesses_never_change_an_answer() {
    let (store, _plan, other) = two_processes();
    store.mkdir_all("/a/b", 0o755).unwrap();
    store.write_file("/a/b/f", b"old").unwrap();
    store.symlink("/a/b", "/link").unwrap();
    for p in ["/a/b/f", "/link/f"] {
        assert_eq!(store.read_file(p).unwrap(), b"old");
    }
    // Another process renames the directory away and puts a new one in its place.
    other.rename("/a/b", "/a/moved").unwrap();
    other.mkdir("/a/b", 0o755).unwrap();
    other.write_file("/a/b/f", b"new file").unwrap();
    let moved = other.stat("/a/moved/f").unwrap();
    for p in ["/a/b/f", "/link/f"] {
        let st = store.stat(p).unwrap();
        assert_eq!(st.size, 8, "{p}");
        assert_ne!(st.ino, moved.ino, "{p}");
        assert_eq!(store.read_file(p).unwrap(), b"new file", "{p}");
    }
    // The file replaced by a directory, then the symbolic link by a file.
    other.unlink("/a/b/f").unwrap();
    other.mkdir("/a/b/f", 0o700).unwrap();
    assert!(store.stat("/a/b/f").unwrap().is_dir());
    assert_eq!(store.read_file("/a/b/f").unwrap_err().kind(), ErrorKind::IsDir);
    other.unlink("/link").unwrap();
    other.write_file("/link", b"").unwrap();
    assert_eq!(store.stat("/link/f").unwrap_err().kind(), ErrorKind::NotDir);
    // Removed: gone here too.
    other.remove_all("/a").unwrap();
    for p in ["/a/b/f", "/a/moved/f", "/a"] {
        assert_eq!(store.stat(p).unwrap_err().kind(), ErrorKind::NotFound, "{p}");
    }
}

#[test]
fn a_permission_taken_away_elsewhere_is_seen() {
    let (store, _plan, other) = two_processes();
    store.mkdir_all("/d/e", 0o755).unwrap();
    store.write_file("/d/e/f", b"x").unwrap();
    let user = store.with_credential(Some(Credential { uid: 1000, gid: 1000, groups: vec![] }));
    assert_eq!(user.stat("/d/e/f").unwrap().size, 1);
    assert_eq!(user.stat("/d/e/f").unwrap().size, 1);
    other.chmod("/d/e", 0o700).unwrap();
    assert_eq!(user.stat("/d/e/f").unwrap_err().kind(), ErrorKind::Access);
    other.chmod("/d/e", 0o755).unwrap();
    assert_eq!(user.stat("/d/e/f").unwrap().size, 1);
}

#[test]
fn a_transaction_reads_its_own_changes_through_the_guesses() {
    let (store, _plan, _) = two_processes();
    store.mkdir_all("/x/y", 0o755).unwrap();
    store.write_file("/x/y/f", b"1").unwrap();
    assert_eq!(store.stat("/x/y/f").unwrap().size, 1);
    let tx = store.begin().unwrap();
    assert_eq!(tx.stat("/x/y/f").unwrap().size, 1);
    tx.rename("/x/y", "/x/z").unwrap();
    tx.mkdir("/x/y", 0o755).unwrap();
    tx.write_file("/x/y/f", b"22").unwrap();
    assert_eq!(tx.stat("/x/y/f").unwrap().size, 2);
    assert_eq!(tx.stat("/x/z/f").unwrap().size, 1);
    // Unseen outside until the commit.
    assert_eq!(store.stat("/x/y/f").unwrap().size, 1);
    tx.commit().unwrap();
    assert_eq!(store.read_file("/x/y/f").unwrap(), b"22");
    assert_eq!(store.read_file("/x/z/f").unwrap(), b"1");
}

#[test]
fn a_concurrent_rename_of_a_read_ahead_directory_conflicts() {
    let (store, _plan, other) = two_processes();
    store.mkdir_all("/p/q", 0o755).unwrap();
    store.write_file("/p/q/f", b"v").unwrap();
    store.stat("/p/q/f").unwrap();
    let tx = store.begin().unwrap();
    assert_eq!(tx.read_file("/p/q/f").unwrap(), b"v");
    tx.write_file("/out", b"copied").unwrap();
    other.rename("/p/q", "/p/r").unwrap();
    assert_eq!(tx.commit().unwrap_err().kind(), ErrorKind::Conflict);
}

/// On a backend with a time limit, an explicit transaction renews itself by replaying what it
/// read (`kv/journal.rs`): what it read ahead and used is replayed too, so a change to it
/// fails the transaction.
#[test]
fn a_long_transaction_rechecks_what_it_read_ahead() {
    let limit = Duration::from_millis(400);
    let (store, _plan, other) =
        two_processes_with(Limits { max_txn_duration: Some(limit), ..Limits::UNLIMITED });
    store.mkdir_all("/p/q", 0o755).unwrap();
    store.write_file("/p/q/f", b"v").unwrap();
    store.stat("/p/q/f").unwrap();
    let tx = store.begin().unwrap();
    assert_eq!(tx.stat("/p/q/f").unwrap().size, 1);
    other.rename("/p/q", "/p/r").unwrap();
    // Past half the limit: the next call renews the transaction.
    std::thread::sleep(limit * 3 / 4);
    let r = tx.write_file("/out", b"x").and_then(|()| tx.commit());
    assert_eq!(r.unwrap_err().kind(), ErrorKind::Conflict);
}

/// Removing a tree reads the inodes of each batch of entries together, not one after the
/// other (1,000 entries per transaction, `Store::remove_all`).
#[test]
fn removing_a_directory_reads_its_files_together() {
    let memory: Arc<dyn Backend> = Arc::new(MemoryBackend::new(Limits::UNLIMITED));
    let (b, plan) = FaultyBackend::new(memory.clone());
    plan.set_read_latency(Duration::from_micros(50));
    let store = Store::with_backend(b, Options::default(), None).unwrap();
    store.mkdir("/big", 0o755).unwrap();
    store
        .transact(|tx| (0..300).try_for_each(|i| tx.write_file(format!("/big/f{i:03}"), b"x")))
        .unwrap();
    // Two entries of one inode in the same batch, one with a link outside, one with xattrs.
    store.link("/big/f000", "/big/g").unwrap();
    store.link("/big/f001", "/outside").unwrap();
    store.setxattr("/big/f002", "user.a", b"1", txvfs::XattrFlags::default()).unwrap();
    store.write_file("/big/f002", b"xattr kept until the inode goes").unwrap();
    let files = store.statfs().unwrap().files;
    let (_, n) = reads(&plan, || store.remove_all("/big").unwrap());
    assert!(n < 30, "removing 300 files took {n} reads");
    assert_eq!(store.statfs().unwrap().files, files - 300, "all but /outside's inode freed");
    let st = store.stat("/outside").unwrap();
    assert_eq!((st.nlink, store.read_file("/outside").unwrap()), (1, b"x".to_vec()));
    store.mkdir("/big", 0o755).unwrap();
    assert!(store.readdir("/big", None, 0).unwrap().is_empty());
    // Nothing of the freed inodes is left: no inode, entry, block or extended attribute.
    let report = txvfs::fsck::check(&*memory, false, &mut |_| {}).unwrap();
    assert!(report.is_clean(), "{:?}", report.problems);
}

#[test]
fn a_create_reads_its_directory_in_the_same_batch() {
    // A create reads its directory's inode (the quota tree the new inode joins): with a path
    // seen before, it comes in the batch with the entries.
    let (store, plan, _) = two_processes();
    store.mkdir_all("/a/b/c", 0o755).unwrap();
    store.write_file("/a/b/c/first", b"").unwrap();
    let (_, n) = reads(&plan, || store.mkdir("/a/b/c/new", 0o755).unwrap());
    assert_eq!(n, 1, "mkdir /a/b/c/new: the entries and the directory's inode in one batch");
}
