//! Quotas on directory trees (`FileSystem::set_quota`): limits on bytes and inodes, checked in
//! the commit that changes the usage. Every case runs on the memory backend and on RocksDB
//! (and on FoundationDB through `tests/foundationdb/run`): set, read and remove; EDQUOT on
//! create, write, truncate and in nested trees, changing nothing; EXDEV for renames and links
//! across trees; frees give space back; a quota on a tree with files counts them; bad input;
//! a dissolved tree (its top removed, or its quota removed while a file is open); fsck finds
//! and repairs a drifted counter; threads racing at the limit never pass it.
//!
//! The processes and kill -9 cases are in `quota_processes.rs`.

mod quota_common;

use quota_common::{assert_recount, assert_statfs, backends, fdb_store, race_threads};
use txvfs::fsck::{self, ProblemKind};
use txvfs::kv::Backend;
use txvfs::schema::{self, QuotaShard};
use txvfs::{
    Credential, ErrorKind, FileSystem, FileType, OpenOptions, QuotaLimits, RenameFlags, Store,
};

fn bytes(n: u64) -> QuotaLimits {
    QuotaLimits { bytes: Some(n), inodes: None }
}
fn inodes(n: u64) -> QuotaLimits {
    QuotaLimits { bytes: None, inodes: Some(n) }
}

fn used(s: &Store, p: &str) -> (u64, u64) {
    let q = s.quota(p).unwrap().expect("in a quota tree");
    (q.bytes_used, q.inodes_used)
}

fn kind<T: std::fmt::Debug>(r: txvfs::Result<T>) -> ErrorKind {
    r.unwrap_err().kind()
}

fn set_read_remove(s: &Store) {
    s.mkdir("/q", 0o755).unwrap();
    assert_eq!(s.quota("/q").unwrap(), None);
    s.set_quota("/q", QuotaLimits { bytes: Some(1000), inodes: Some(10) }).unwrap();
    let q = s.quota("/q").unwrap().unwrap();
    assert_eq!(q.path, b"/q");
    assert_eq!(q.limits, QuotaLimits { bytes: Some(1000), inodes: Some(10) });
    assert_eq!((q.bytes_used, q.inodes_used, q.parent), (0, 1, None)); // the top counts
    s.mkdir("/q/d", 0o755).unwrap();
    s.write_file("/q/d/f", &[1; 300]).unwrap();
    s.symlink("f", "/q/d/l").unwrap();
    assert_eq!(used(s, "/q"), (300, 4));
    // Any path inside answers for its innermost tree.
    assert_eq!(s.quota("/q/d/f").unwrap().unwrap().tree, q.tree);
    // New limits keep the usage.
    s.set_quota("/q", bytes(500)).unwrap();
    let q = s.quota("/q").unwrap().unwrap();
    assert_eq!((q.limits, q.bytes_used, q.inodes_used), (bytes(500), 300, 4));
    assert_eq!(kind(s.write_file("/q/big", &[0; 201])), ErrorKind::QuotaExceeded);
    s.remove_quota("/q").unwrap();
    assert_eq!(s.quota("/q").unwrap(), None);
    assert_eq!(s.quota("/q/d/f").unwrap(), None);
    s.write_file("/q/big", &[0; 201]).unwrap();
    assert_eq!(kind(s.remove_quota("/q")), ErrorKind::NotFound);
    // Set again: counts what is there.
    s.set_quota("/q", bytes(10_000)).unwrap();
    assert_eq!(used(s, "/q"), (501, 5));
}

fn edquot_changes_nothing(s: &Store) {
    s.mkdir("/q", 0o755).unwrap();
    s.set_quota("/q", inodes(3)).unwrap();
    s.write_file("/q/a", b"x").unwrap();
    s.mkdir("/q/d", 0o755).unwrap();
    let before = s.statfs().unwrap();
    let e = s.write_file("/q/d/b", b"y").unwrap_err();
    assert_eq!((e.kind(), e.code()), (ErrorKind::QuotaExceeded, libc::EDQUOT));
    assert!(e.message().contains("/q:"), "names the tree: {e}");
    for r in
        [s.mkdir("/q/e", 0o755), s.symlink("a", "/q/s"), s.mknod("/q/p", FileType::Fifo, 0o644, 0)]
    {
        assert_eq!(kind(r), ErrorKind::QuotaExceeded);
    }
    let o = OpenOptions::new().write(true).create(true);
    assert_eq!(kind(s.open("/q/c", &o)), ErrorKind::QuotaExceeded);
    assert_eq!(s.statfs().unwrap(), before);
    assert_eq!(used(s, "/q"), (1, 3));
    assert_eq!(s.readdir("/q", None, 0).unwrap().len(), 2);
    assert_eq!(s.readdir("/q/d", None, 0).unwrap().len(), 0);
    // Outside the tree nothing is limited.
    s.write_file("/free", b"z").unwrap();
}

fn edquot_on_write_and_truncate(s: &Store) {
    s.mkdir("/q", 0o755).unwrap();
    s.set_quota("/q", bytes(100_000)).unwrap();
    s.write_file("/q/a", &[7; 90_000]).unwrap();
    let f = s.open("/q/a", &OpenOptions::new().write(true)).unwrap();
    assert_eq!(f.write_at(&[1; 10_000], 90_000).unwrap(), 10_000);
    assert_eq!(kind(f.write_at(&[1; 1], 100_000)), ErrorKind::QuotaExceeded);
    // Overwriting inside the file grows nothing.
    f.write_at(&[2; 5000], 0).unwrap();
    assert_eq!(kind(f.set_len(100_001)), ErrorKind::QuotaExceeded);
    assert_eq!(kind(s.truncate("/q/a", 200_000)), ErrorKind::QuotaExceeded);
    assert_eq!(s.stat("/q/a").unwrap().size, 100_000);
    assert_eq!(s.read_file("/q/a").unwrap()[..5000], [2; 5000]);
    // Truncating down frees; the space is usable again.
    f.set_len(40_000).unwrap();
    f.close().unwrap();
    assert_eq!(used(s, "/q"), (40_000, 2));
    s.write_file("/q/b", &[3; 60_000]).unwrap();
    assert_eq!(kind(s.write_file("/q/c", &[3; 1])), ErrorKind::QuotaExceeded);
    // A write that fails with EDQUOT in an explicit transaction leaves it usable.
    s.unlink("/q/b").unwrap();
    let tx = s.begin().unwrap();
    tx.write_file("/q/ok", &[1; 50_000]).unwrap();
    let no = tx.create("/q/no").unwrap();
    assert_eq!(kind(no.write(&[1; 20_000])), ErrorKind::QuotaExceeded);
    no.close().unwrap();
    tx.commit().unwrap();
    assert_eq!(used(s, "/q"), (90_000, 4));
    assert_eq!(s.stat("/q/no").unwrap().size, 0);
}

fn nested_trees(s: &Store) {
    s.mkdir_all("/a/b/c", 0o755).unwrap();
    s.set_quota("/a", bytes(100)).unwrap();
    s.set_quota("/a/b", bytes(1000)).unwrap();
    s.set_quota("/a/b/c", QuotaLimits { bytes: Some(50), inodes: Some(100) }).unwrap();
    let c = s.quota("/a/b/c").unwrap().unwrap();
    let b = s.quota("/a/b").unwrap().unwrap();
    assert_eq!((c.parent, b.parent), (Some(b.tree), Some(s.quota("/a").unwrap().unwrap().tree)));
    s.write_file("/a/b/c/f", &[0; 50]).unwrap();
    // The innermost limit.
    let e = s.write_file("/a/b/c/g", &[0; 1]).unwrap_err();
    assert!(e.message().starts_with("/a/b/c:"), "{e}");
    // An enclosing tree's limit, and the message names that tree.
    let e = s.write_file("/a/b/h", &[0; 51]).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::QuotaExceeded);
    assert!(e.message().starts_with("/a:"), "{e}");
    s.write_file("/a/b/h", &[0; 50]).unwrap();
    assert_eq!(used(s, "/a"), (100, 5));
    assert_eq!(used(s, "/a/b"), (100, 4));
    assert_eq!(used(s, "/a/b/c"), (50, 2));
    // Removing the middle quota: its files count toward /a only; /a/b/c now nests in /a.
    s.remove_quota("/a/b").unwrap();
    assert_eq!(s.quota("/a/b/c").unwrap().unwrap().parent, s.quota("/a").unwrap().map(|q| q.tree));
    assert_eq!(s.quota("/a/b").unwrap().unwrap().path, b"/a");
    s.unlink("/a/b/c/f").unwrap();
    assert_eq!(used(s, "/a"), (50, 4));
    // A quota set on a tree holding a nested one counts the nested tree's usage.
    s.remove_quota("/a").unwrap();
    s.set_quota("/a", bytes(60)).unwrap();
    assert_eq!(used(s, "/a"), (50, 4));
    assert_eq!(s.quota("/a/b/c").unwrap().unwrap().parent, s.quota("/a").unwrap().map(|q| q.tree));
}

fn exdev_across_trees(s: &Store) {
    s.mkdir_all("/q/in", 0o755).unwrap();
    s.mkdir_all("/r", 0o755).unwrap();
    s.mkdir_all("/o", 0o755).unwrap();
    s.write_file("/o/f", b"out").unwrap();
    s.write_file("/q/in/g", b"in").unwrap();
    s.set_quota("/q", bytes(1000)).unwrap();
    s.set_quota("/r", bytes(1000)).unwrap();
    let xd = |r: txvfs::Result<()>| assert_eq!(kind(r), ErrorKind::CrossDevice);
    xd(s.rename("/o/f", "/q/f"));
    xd(s.rename("/q/in/g", "/o/g"));
    xd(s.rename("/q/in/g", "/r/g"));
    xd(s.rename("/q/in", "/o/in"));
    xd(s.link("/o/f", "/q/f"));
    xd(s.link("/q/in/g", "/o/g"));
    let exchange = RenameFlags { exchange: true, no_replace: false };
    xd(s.rename_with("/o/f", "/q/in/g", exchange));
    assert_eq!(s.read_file("/o/f").unwrap(), b"out");
    // Within one tree, and the tree's top itself within its enclosing tree, all is allowed.
    s.rename("/q/in/g", "/q/g").unwrap();
    s.link("/q/g", "/q/in/g2").unwrap();
    s.rename("/q", "/o/q").unwrap();
    assert_eq!(used(s, "/o/q"), (2, 3));
    assert_eq!(s.quota("/o/q").unwrap().unwrap().path, b"/o/q");
    // The hard link counts once; removing one name frees nothing, the last frees it.
    s.unlink("/o/q/g").unwrap();
    assert_eq!(used(s, "/o/q"), (2, 3));
    s.unlink("/o/q/in/g2").unwrap();
    assert_eq!(used(s, "/o/q"), (0, 2));
}

fn quota_on_a_full_tree(s: &Store) {
    s.mkdir_all("/t/x/y", 0o755).unwrap();
    s.write_file("/t/a", &[0; 5000]).unwrap();
    s.write_file("/t/x/y/b", &[0; 70_000]).unwrap();
    s.link("/t/a", "/t/x/a2").unwrap();
    s.symlink("/t/a", "/t/x/l").unwrap();
    // Below what is there: EDQUOT, and nothing set.
    let e = s.set_quota("/t", bytes(75_000 - 1)).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::QuotaExceeded, "{e}");
    assert_eq!(s.quota("/t").unwrap(), None);
    // /t, x, y, a (twice linked: one inode), b, l.
    let e = s.set_quota("/t", inodes(5)).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::QuotaExceeded, "{e}");
    s.set_quota("/t", QuotaLimits { bytes: Some(75_000), inodes: Some(6) }).unwrap();
    assert_eq!(used(s, "/t"), (75_000, 6));
    assert_eq!(kind(s.mkdir("/t/z", 0o755)), ErrorKind::QuotaExceeded);
    // A file with a hard link outside the tree cannot be counted in it.
    s.mkdir("/u", 0o755).unwrap();
    s.write_file("/u/f", b"shared").unwrap();
    s.link("/u/f", "/g").unwrap();
    let e = s.set_quota("/u", bytes(100)).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::CrossDevice, "{e}");
    assert_eq!(s.quota("/u").unwrap(), None);
}

fn bad_input(s: &Store) {
    s.mkdir("/d", 0o755).unwrap();
    s.write_file("/f", b"file").unwrap();
    let l = bytes(10);
    assert_eq!(kind(s.set_quota("/f", l)), ErrorKind::NotDir);
    assert_eq!(kind(s.set_quota("/nope", l)), ErrorKind::NotFound);
    assert_eq!(kind(s.quota("/nope")), ErrorKind::NotFound);
    assert_eq!(kind(s.remove_quota("/d")), ErrorKind::NotFound);
    assert_eq!(kind(s.remove_quota("/f")), ErrorKind::NotDir);
    for bad in [
        bytes(0),
        inodes(0),
        QuotaLimits::default(),
        bytes(u64::MAX),
        inodes(i64::MAX as u64 + 1),
        QuotaLimits { bytes: Some(5), inodes: Some(0) },
    ] {
        let e = s.set_quota("/d", bad).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Invalid, "{bad:?}: {e}");
        assert!(e.message().starts_with("/d: "), "{e}");
    }
    let user = s.with_credential(Some(Credential { uid: 1000, gid: 1000, groups: vec![] }));
    assert_eq!(kind(user.set_quota("/d", l)), ErrorKind::NotPermitted);
    s.set_quota("/d", l).unwrap();
    assert_eq!(kind(user.remove_quota("/d")), ErrorKind::NotPermitted);
    assert_eq!(s.quota("/d").unwrap().unwrap().limits, l);
    // The largest limit is fine.
    s.set_quota("/d", bytes(i64::MAX as u64)).unwrap();
}

/// The tree's top removed with `remove_all`, and a quota removed while a file of its tree is
/// open after its unlink: the tree dissolves, goes once nothing counts in it, fsck is clean.
fn dissolved_trees(s: &Store, backend: &dyn Backend) {
    s.mkdir_all("/q/d/e", 0o755).unwrap();
    s.mkdir("/p", 0o755).unwrap();
    s.set_quota("/p", bytes(1_000_000)).unwrap();
    s.mkdir_all("/p/q2/d", 0o755).unwrap();
    s.set_quota("/p/q2", bytes(1000)).unwrap();
    s.write_file("/p/q2/d/f", &[0; 700]).unwrap();
    s.remove_all("/p/q2").unwrap();
    assert_eq!(used(s, "/p"), (0, 1));
    assert_eq!(quota_records(backend), 1, "the removed tree's records are gone");
    // A file open after its unlink keeps counting until it is closed.
    s.set_quota("/q", bytes(1000)).unwrap();
    s.write_file("/q/d/f", &[0; 600]).unwrap();
    let f = s.open("/q/d/f", &OpenOptions::new().read(true).write(true)).unwrap();
    s.unlink("/q/d/f").unwrap();
    f.write_at(&[1; 100], 600).unwrap();
    s.remove_quota("/q").unwrap();
    assert_eq!(s.quota("/q").unwrap(), None);
    let e = s.set_quota("/q", bytes(1000)).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Busy, "{e}");
    assert_clean(backend);
    f.close().unwrap();
    s.set_quota("/q", bytes(1000)).unwrap();
    assert_eq!(used(s, "/q"), (0, 3));
    assert_clean(backend);
}

/// The number of quota records in the store.
fn quota_records(backend: &dyn Backend) -> usize {
    let mut tx = backend.begin().unwrap();
    let (start, end) = schema::scope_range(schema::Scope::Quotas);
    let keys = tx.get_range(&start, &end, 0, false).unwrap();
    keys.iter().filter(|(k, _)| k.len() == 9).count()
}

fn assert_clean(backend: &dyn Backend) {
    let r = fsck::check(backend, false, &mut |_| {}).unwrap();
    assert!(r.is_clean(), "{r}");
}

/// Damages shard `shard` of `tree` with `change`, behind the store's back.
fn change_shard(backend: &dyn Backend, tree: u64, shard: u8, change: impl FnOnce(&mut QuotaShard)) {
    let key = schema::quota_shard_key(tree, shard);
    let mut tx = backend.begin().unwrap();
    let mut sh = QuotaShard::decode(&tx.get(&key).unwrap().unwrap()).unwrap();
    change(&mut sh);
    tx.set(&key, &sh.encode()).unwrap();
    tx.commit(true).unwrap();
}

fn fsck_repairs_drift(s: &Store, backend: &dyn Backend) {
    s.mkdir("/q", 0o755).unwrap();
    s.set_quota("/q", QuotaLimits { bytes: Some(1000), inodes: Some(100) }).unwrap();
    s.write_file("/q/f", &[0; 100]).unwrap();
    assert_clean(backend);
    let tree = s.quota("/q").unwrap().unwrap().tree;
    change_shard(backend, tree, 5, |sh| sh.used_bytes -= 40);
    let r = fsck::check(backend, true, &mut |_| {}).unwrap();
    assert_eq!(r.problems.len(), 1, "{r}");
    assert_eq!(r.problems[0].kind, ProblemKind::QuotaUsage);
    assert!(r.problems[0].message.contains("counts 60 bytes"), "{r}");
    assert_eq!(r.repaired(), 1);
    assert_clean(backend);
    assert_eq!(used(s, "/q"), (100, 2));
    // Allowances that no longer add up to the limit are found and repaired too.
    change_shard(backend, tree, 3, |sh| sh.allow_bytes += 1);
    let r = fsck::check(backend, true, &mut |_| {}).unwrap();
    assert_eq!((r.problems.len(), r.repaired()), (1, 1), "{r}");
    assert_clean(backend);
    s.write_file("/q/g", &[0; 900]).unwrap();
    assert_eq!(kind(s.write_file("/q/h", &[0; 1])), ErrorKind::QuotaExceeded);
}

/// Runs `case` on a fresh store of each backend.
fn each(case: fn(&Store)) {
    for (name, backend, _dir) in backends() {
        println!("backend: {name}");
        let s = Store::with_backend(backend.clone(), txvfs::Options::default(), None).unwrap();
        case(&s);
        assert_recount(&*backend);
        assert_statfs(&s);
    }
}

fn each_raw(case: fn(&Store, &dyn Backend)) {
    for (name, backend, _dir) in backends() {
        println!("backend: {name}");
        let s = Store::with_backend(backend.clone(), txvfs::Options::default(), None).unwrap();
        case(&s, &*backend);
        assert_recount(&*backend);
        assert_statfs(&s);
    }
}

#[test]
fn set_read_and_remove() {
    each(set_read_remove);
}
#[test]
fn edquot_on_create_changes_nothing() {
    each(edquot_changes_nothing);
}
#[test]
fn edquot_on_write_extension_and_truncate() {
    each(edquot_on_write_and_truncate);
}
#[test]
fn nested_trees_count_toward_every_enclosing_tree() {
    each(nested_trees);
}
#[test]
fn rename_and_link_across_trees_are_exdev() {
    each(exdev_across_trees);
}
#[test]
fn quota_on_a_tree_with_files_counts_them() {
    each(quota_on_a_full_tree);
}
#[test]
fn bad_input_gives_clear_errors() {
    each(bad_input);
}
#[test]
fn dissolved_trees_go_when_empty() {
    each_raw(dissolved_trees);
}
#[test]
fn fsck_finds_and_repairs_a_drifted_counter() {
    each_raw(fsck_repairs_drift);
}

#[test]
fn threads_racing_at_the_limit_never_pass_it() {
    for (name, backend, _dir) in backends() {
        println!("backend: {name}");
        let s = Store::with_backend(backend.clone(), txvfs::Options::default(), None).unwrap();
        race_threads(&s, 4, 20261129);
        assert_recount(&*backend);
    }
}

/// The same cases on FoundationDB; `tests/foundationdb/run` runs it.
#[test]
#[ignore = "needs a FoundationDB cluster: tests/foundationdb/run"]
fn quota_foundationdb() {
    type Case = (&'static str, fn(&Store));
    let cases: [Case; 7] = [
        ("set_read_remove", set_read_remove),
        ("edquot_changes_nothing", edquot_changes_nothing),
        ("edquot_on_write_and_truncate", edquot_on_write_and_truncate),
        ("nested_trees", nested_trees),
        ("exdev_across_trees", exdev_across_trees),
        ("quota_on_a_full_tree", quota_on_a_full_tree),
        ("bad_input", bad_input),
    ];
    for (name, case) in cases {
        println!("case: {name}");
        let (s, backend) = fdb_store(name);
        case(&s);
        assert_recount(&*backend);
        assert_statfs(&s);
    }
    let (s, backend) = fdb_store("race");
    race_threads(&s, 4, 20261129);
    assert_recount(&*backend);
    let (s, backend) = fdb_store("fsck");
    fsck_repairs_drift(&s, &*backend);
}
