//! Fault injection: a backend that fails a commit, a read, or a write (ENOSPC) at every step of
//! every kind of operation in turn. Each failure must reach the caller as an error of the
//! right kind, and must leave the store exactly as it was: the same tree (names, attributes,
//! contents, extended attributes) and the same key-value pairs, byte for byte. An explicit
//! transaction whose operation failed part-way must refuse further work and its commit, and
//! nothing of it may become visible.

use std::sync::Arc;
use txvfs::kv::{self, Backend, FaultPlan, FaultyBackend};
use txvfs::schema::{self, Meta};
use txvfs::{ErrorKind, File, FileSystem, OpenOptions, Options, Result, Store, XattrFlags};

fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u32).wrapping_mul(2654435761).rotate_left(seed as u32 % 32) as u8 ^ seed)
        .collect()
}

/// Every node below `dir`: path, full lstat, contents or target, extended attributes.
fn walk(store: &Store, dir: &str, out: &mut Vec<String>) {
    for e in store.readdir(dir, None, 0).unwrap() {
        let p = format!(
            "{}/{}",
            dir.trim_end_matches('/'),
            String::from_utf8(e.name.into_vec()).unwrap()
        );
        let st = store.lstat(&p).unwrap();
        let mut line = format!("{p} {st:?}");
        // listxattr follows symlinks (there is no llistxattr), and a symlink may dangle.
        let mut names = if st.is_symlink() { Vec::new() } else { store.listxattr(&p).unwrap() };
        names.sort();
        for n in names {
            line += &format!(" xattr {:?}={:?}", n, store.getxattr(&p, &n).unwrap());
        }
        if st.is_dir() {
            out.push(line);
            walk(store, &p, out);
        } else if st.is_symlink() {
            out.push(format!("{line} -> {:?}", store.readlink(&p).unwrap()));
        } else {
            let data = store.read_file(&p).unwrap();
            assert_eq!(data.len() as u64, st.size, "{p}: size and contents disagree");
            out.push(format!("{line} data {:x}", fnv(&data)));
        }
    }
}

fn fnv(data: &[u8]) -> u64 {
    data.iter().fold(0xcbf29ce484222325u64, |h, &b| (h ^ b as u64).wrapping_mul(0x100000001b3))
}

/// What the store shows through the API, and what the backend holds underneath.
#[derive(Debug, PartialEq)]
struct Dump {
    tree: Vec<String>,
    root: String,
    files: u64,
    kv: Vec<(Vec<u8>, Vec<u8>)>,
}

/// A full dump, read while no fault is armed. The raw pairs leave out the inode allocator's
/// high-water mark, which advances in a transaction of its own by design.
fn dump(store: &Store, raw: &Arc<dyn Backend>) -> Dump {
    let mut tree = Vec::new();
    walk(store, "/", &mut tree);
    let mut tx = raw.begin().unwrap();
    let next_ino = schema::meta_key(Meta::NextIno);
    let kv = tx
        .get_range(&[], &[0xff], 0, false)
        .unwrap()
        .into_iter()
        .filter(|(k, _)| *k != next_ino)
        .collect();
    Dump {
        tree,
        root: format!("{:?}", store.stat("/").unwrap()),
        files: store.statfs().unwrap().files,
        kv,
    }
}

fn setup(store: &Store) {
    store.mkdir("/d", 0o755).unwrap();
    store.write_file("/d/f", &pattern(150_000, 1)).unwrap(); // three 64 KiB blocks
    store.write_file("/d/small", b"hello").unwrap(); // inline
    store.mkdir("/d/sub", 0o700).unwrap();
    store.write_file("/d/sub/s", &pattern(5000, 2)).unwrap();
    store.write_file("/x", b"x").unwrap();
    store.setxattr("/x", "user.a", b"1", XattrFlags::Any).unwrap();
    store.symlink("/d/f", "/l").unwrap();
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Op {
    WriteFileNew,
    WriteFileReplace,
    Mkdir,
    Rename,
    RenameReplace,
    Unlink,
    Truncate,
    FileWrite,
    TxCommit,
    Setxattr,
}

const OPS: [Op; 10] = [
    Op::WriteFileNew,
    Op::WriteFileReplace,
    Op::Mkdir,
    Op::Rename,
    Op::RenameReplace,
    Op::Unlink,
    Op::Truncate,
    Op::FileWrite,
    Op::TxCommit,
    Op::Setxattr,
];

#[derive(Clone, Copy, Debug, PartialEq)]
enum Fault {
    Commit,
    Read,
    NoSpace,
}

impl Fault {
    fn arm(self, plan: &FaultPlan, skip: u64) {
        match self {
            Fault::Commit => plan.fail_commits_after(skip, 1),
            Fault::Read => plan.fail_reads_after(skip, 1),
            Fault::NoSpace => plan.fail_writes_nospace_after(skip, 1),
        }
    }
    fn disarm(plan: &FaultPlan) {
        plan.fail_commits(0);
        plan.fail_reads(0);
        plan.fail_writes_nospace(0);
    }
    fn kind(self) -> ErrorKind {
        match self {
            Fault::Commit | Fault::Read => ErrorKind::Backend,
            Fault::NoSpace => ErrorKind::NoSpace,
        }
    }
}

/// What happened inside an explicit transaction whose step failed before its commit.
#[derive(Default)]
struct TxReport {
    failed_part_way: bool,
}

/// The steps of the explicit transaction: several files, a handle inside it, then commit. A
/// step that fails is followed by a probe (another operation) and the commit, which must both
/// fail when the transaction is poisoned; a transaction left usable is rolled back.
fn run_tx(store: &Store, fault: Fault, report: &mut TxReport) -> Result<()> {
    let tx = store.begin()?;
    let steps = |tx: &txvfs::Transaction| -> Result<()> {
        tx.write_file("/d/t1", &pattern(70_000, 3))?;
        tx.rename("/d/f", "/d/t2")?;
        tx.unlink("/d/small")?;
        tx.mkdir("/d/sub/deeper", 0o755)?;
        let f = tx.open("/d/t2", &OpenOptions::new().read(true).write(true))?;
        f.write_at(&pattern(80_000, 4), 100_000)?;
        tx.setxattr("/d/t2", "user.t", b"t", XattrFlags::Any)?;
        tx.truncate("/d/sub/s", 10)
    };
    if let Err(e) = steps(&tx) {
        let probe = tx.write_file("/d/probe", b"p");
        match probe {
            Err(pe) => {
                report.failed_part_way = true;
                assert!(
                    pe.message().contains("failed earlier"),
                    "probe after a poisoning failure: {pe}"
                );
                let ce = tx.commit().expect_err("a poisoned transaction must not commit");
                assert_eq!(ce.kind(), e.kind(), "commit of a poisoned transaction: {ce}");
            }
            Ok(()) => {
                // Failed before writing anything: still usable, and a write fault always
                // poisons (the write itself was the failure).
                assert_ne!(
                    fault,
                    Fault::NoSpace,
                    "an ENOSPC failure must poison the transaction: {e}"
                );
                tx.rollback();
            }
        }
        return Err(e);
    }
    tx.commit()
}

fn run_op(store: &Store, op: Op, fault: Fault, handle: &File, report: &mut TxReport) -> Result<()> {
    match op {
        Op::WriteFileNew => store.write_file("/d/new", &pattern(100_000, 7)),
        // From three blocks to an inline file: clears blocks, rewrites the inode.
        Op::WriteFileReplace => store.write_file("/d/f", &pattern(3000, 8)),
        Op::Mkdir => store.mkdir("/d/sub2", 0o750),
        Op::Rename => store.rename("/d/f", "/d/sub/g"),
        // Replaces (and so deletes) an existing file.
        Op::RenameReplace => store.rename("/d/small", "/d/sub/s"),
        Op::Unlink => store.unlink("/d/f"),
        // Mid-block: drops a block and rewrites the partial one.
        Op::Truncate => store.truncate("/d/f", 70_000),
        // Spans blocks 0..2 and extends the file: read-modify-write of two partial blocks.
        Op::FileWrite => handle.write_at(&pattern(100_000, 9), 60_000).map(|_| ()),
        Op::TxCommit => run_tx(store, fault, report),
        Op::Setxattr => store.setxattr("/x", "user.b", b"value", XattrFlags::Any),
    }
}

/// Fails `op` at its first, second, ... read (write, commit) until it gets through without
/// reaching the fault; checks every failure. Returns how many failures were injected.
fn exhaust(raw: &Arc<dyn Backend>, op: Op, fault: Fault) -> (u64, u64) {
    let (faulty, plan) = FaultyBackend::new(raw.clone());
    let store = Store::with_backend(faulty, Options::default(), None).unwrap();
    setup(&store);
    let handle = store.open("/d/f", &OpenOptions::new().read(true).write(true)).unwrap();
    let before = dump(&store, raw);
    let mut part_way = 0;
    for skip in 0.. {
        assert!(skip < 1000, "{op:?} never got past the fault");
        let fired_before = plan.injected();
        let mut report = TxReport::default();
        fault.arm(&plan, skip);
        let r = run_op(&store, op, fault, &handle, &mut report);
        Fault::disarm(&plan);
        let fired = plan.injected() - fired_before;
        if fired == 0 {
            r.unwrap_or_else(|e| panic!("{op:?} failed without a fault: {e}"));
            assert_ne!(dump(&store, raw), before, "{op:?} changed nothing");
            return (skip, part_way);
        }
        assert_eq!(fired, 1);
        let e = r.expect_err(&format!(
            "{op:?}: an injected {fault:?} fault at step {skip} was swallowed"
        ));
        assert_eq!(e.kind(), fault.kind(), "{op:?}, {fault:?} at step {skip}: {e}");
        part_way += report.failed_part_way as u64;
        let after = dump(&store, raw);
        if after != before {
            assert_eq!(after.tree, before.tree, "{op:?}, {fault:?} at step {skip}: tree changed");
            let changed: Vec<_> = after.kv.iter().filter(|p| !before.kv.contains(p)).collect();
            let lost: Vec<_> = before.kv.iter().filter(|p| !after.kv.contains(p)).collect();
            panic!("{op:?}, {fault:?} at step {skip}: state changed: new/changed {changed:?}, lost {lost:?}");
        }
    }
    unreachable!()
}

fn every_failure_is_reported_and_changes_nothing(open: impl Fn() -> Arc<dyn Backend>) {
    let mut total = 0;
    for op in OPS {
        for fault in [Fault::Commit, Fault::Read, Fault::NoSpace] {
            let raw = open();
            let (injected, part_way) = exhaust(&raw, op, fault);
            assert!(injected > 0, "{op:?}: no {fault:?} was reached at all");
            if op == Op::TxCommit && fault != Fault::Commit {
                assert!(part_way > 0, "no {fault:?} fault poisoned the transaction part-way");
            }
            total += injected;
        }
    }
    eprintln!("{total} injected failures checked");
}

#[test]
fn memory_every_failure_is_reported_and_changes_nothing() {
    every_failure_is_reported_and_changes_nothing(|| kv::open("memory:").unwrap());
}

#[test]
fn rocksdb_every_failure_is_reported_and_changes_nothing() {
    let dirs = std::cell::RefCell::new(Vec::new());
    every_failure_is_reported_and_changes_nothing(|| {
        let d = tempfile::tempdir().unwrap();
        let b = kv::open(d.path().to_str().unwrap()).unwrap();
        dirs.borrow_mut().push(d);
        b
    });
}

/// A transaction whose operation failed after writing part of its changes refuses every
/// further operation, its open handles and its commit; none of it becomes visible, and the
/// store keeps working.
fn poisoned_transaction_refuses_further_work(raw: Arc<dyn Backend>) {
    let (faulty, plan) = FaultyBackend::new(raw.clone());
    let store = Store::with_backend(faulty, Options::default(), None).unwrap();
    setup(&store);
    let before = dump(&store, &raw);
    for fault in [Fault::NoSpace, Fault::Read] {
        let tx = store.begin().unwrap();
        tx.write_file("/d/a", &pattern(90_000, 5)).unwrap();
        let f = tx.open("/d/a", &OpenOptions::new().read(true).write(true)).unwrap();
        tx.rename("/d/small", "/d/b").unwrap();
        // Unlink writes the dentry deletion, then reads the inode: fail after the first write.
        match fault {
            Fault::NoSpace => plan.fail_writes_nospace_after(1, 1),
            _ => plan.fail_reads_after(2, 1),
        }
        let injected = plan.injected();
        let e = tx.unlink("/d/f").unwrap_err();
        assert_eq!(plan.injected(), injected + 1);
        Fault::disarm(&plan);
        assert_eq!(e.kind(), fault.kind(), "{e}");
        for r in [
            tx.write_file("/d/c", b"c"),
            tx.mkdir("/d/e", 0o755),
            tx.read_file("/d/a").map(|_| ()),
            tx.stat("/d").map(|_| ()),
        ] {
            let err = r.expect_err("operation on a poisoned transaction succeeded");
            assert_eq!(err.kind(), e.kind(), "{err}");
        }
        let mut buf = [0u8; 4];
        assert_eq!(f.read_at(&mut buf, 0).unwrap_err().kind(), ErrorKind::BadHandle);
        assert_eq!(f.write_at(b"zz", 0).unwrap_err().kind(), ErrorKind::BadHandle);
        let ce = tx.commit().unwrap_err();
        assert_eq!(ce.kind(), e.kind());
        assert!(ce.message().contains("cannot commit"), "{ce}");
        assert!(f.write_at(b"zz", 0).is_err(), "handle of a finished transaction still writes");
        drop(f);
        assert_eq!(
            dump(&store, &raw),
            before,
            "{fault:?}: part of a failed transaction became visible"
        );
    }
    // The store still works, and so does a new transaction.
    store.transact(|tx| tx.write_file("/d/after", b"ok")).unwrap();
    assert_eq!(store.read_file("/d/after").unwrap(), b"ok");
}

#[test]
fn memory_poisoned_transaction_refuses_further_work() {
    poisoned_transaction_refuses_further_work(kv::open("memory:").unwrap());
}

#[test]
fn rocksdb_poisoned_transaction_refuses_further_work() {
    let d = tempfile::tempdir().unwrap();
    poisoned_transaction_refuses_further_work(kv::open(d.path().to_str().unwrap()).unwrap());
}
