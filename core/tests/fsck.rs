//! The integrity check (`txvfs::fsck`): a clean store checks clean; each kind of damage,
//! written into the raw keys, is found with a message naming what is wrong; `repair` fixes
//! what it safely can and leaves the rest reported; the check renews its snapshot on a backend
//! with a time limit.

use std::collections::HashSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use txvfs::fsck::{self, CheckReport, ProblemKind as P};
use txvfs::kv::{self, Backend, Limits, Txn};
use txvfs::schema::{self, Block, Dentry, DirAttr, FileType, Inode, Meta, ROOT_INO};
use txvfs::{FileSystem, InodeFileSystem, Options, Store, XattrFlags};

/// Bytes of `/big`: more than a quarter of FoundationDB's transaction limit, so its blocks
/// are written ahead as chunks.
const BIG: usize = 4 << 20;

fn big_data() -> Vec<u8> {
    (0..BIG as u32).map(|i| (i % 251) as u8).collect()
}

/// A store with directories, inline and chunked files, a hard link, a symlink, an xattr, a
/// FIFO and an orphan-to-be (`/lost`).
fn populated() -> (Arc<dyn Backend>, Store) {
    let backend = kv::open("memory:?limits=foundationdb").unwrap();
    let store = Store::with_backend(
        backend.clone(),
        Options { block_size: 4096, ..Options::default() },
        None,
    )
    .unwrap();
    store.mkdir_all("/d/sub", 0o755).unwrap();
    store.write_file("/d/a", b"small").unwrap();
    store.link("/d/a", "/d/b").unwrap();
    store.symlink("a", "/d/s").unwrap();
    store.setxattr("/d/a", "user.k", b"v", XattrFlags::Any).unwrap();
    store.mknod("/d/fifo", FileType::Fifo, 0o644, 0).unwrap();
    let tx = store.begin().unwrap();
    let big = tx.create("/big").unwrap();
    big_data().chunks(1 << 20).for_each(|piece| assert_eq!(big.write(piece).unwrap(), piece.len()));
    big.close().unwrap();
    tx.commit().unwrap();
    store.write_file("/mid", &[9u8; 20_000]).unwrap();
    store.write_file("/victim", b"doomed").unwrap();
    store.write_file("/lost", b"nobody links me").unwrap();
    (backend, store)
}

fn ino(store: &Store, path: &str) -> u64 {
    store.lstat(path).unwrap().ino
}

fn check(backend: &Arc<dyn Backend>) -> CheckReport {
    fsck::check(&**backend, false, &mut |_| {}).unwrap()
}

fn repair(backend: &Arc<dyn Backend>) -> CheckReport {
    fsck::check(&**backend, true, &mut |_| {}).unwrap()
}

/// Writes damage straight into the backend.
fn damage(backend: &Arc<dyn Backend>, f: impl FnOnce(&mut dyn Txn)) {
    let mut tx = backend.begin().unwrap();
    f(&mut *tx);
    tx.commit(true).unwrap();
}

fn kinds(r: &CheckReport) -> HashSet<P> {
    r.problems.iter().map(|p| p.kind).collect()
}

/// The report's text, for `contains` checks.
fn text(r: &CheckReport) -> String {
    r.to_string()
}

#[test]
fn clean_store_checks_clean_and_reports_progress() {
    let (backend, _store) = populated();
    let mut tx = backend.begin().unwrap();
    let (start, end) = schema::scope_range(schema::Scope::Chunks);
    assert!(
        !tx.get_range(&start, &end, 1, false).unwrap().is_empty(),
        "the big file was written ahead as chunks"
    );
    drop(tx);
    let mut counts = Vec::new();
    let r = fsck::check(&*backend, false, &mut |n| counts.push(n)).unwrap();
    assert!(r.is_clean(), "{r}");
    assert_eq!(r.to_string(), "clean\n");
    assert_eq!((r.remaining(), r.repaired()), (0, 0));
    assert!(r.keys_read > BIG as u64 / 4096, "every block was read: {}", r.keys_read);
    assert!(counts.windows(2).all(|w| w[0] <= w[1]), "progress never goes back");
    assert_eq!(counts.last(), Some(&r.keys_read));
    // A repair of a clean store changes nothing.
    let r = repair(&backend);
    assert!(r.is_clean() && r.repaired() == 0, "{r}");
}

#[test]
fn repairable_damage_is_found_then_repaired() {
    let (backend, store) = populated();
    let (d, a, mid, sub) =
        (ino(&store, "/d"), ino(&store, "/d/a"), ino(&store, "/mid"), ino(&store, "/d/sub"));
    let (victim, lost) = (ino(&store, "/victim"), ino(&store, "/lost"));
    damage(&backend, |tx| {
        // An entry whose inode is gone; an entry inside a file.
        tx.clear(&schema::inode_key(victim)).unwrap();
        tx.set(
            &schema::dentry_key(mid, b"inside-a-file"),
            &Dentry { ino: a, kind: FileType::File }.encode(),
        )
        .unwrap();
        // An entry whose type is wrong (on the second link of /d/a).
        tx.set(&schema::dentry_key(d, b"b"), &Dentry { ino: a, kind: FileType::Symlink }.encode())
            .unwrap();
        // Wrong link counts: a file's, and a directory's hot delta.
        let mut inode = Inode::decode(&tx.get(&schema::inode_key(a)).unwrap().unwrap()).unwrap();
        inode.nlink = 5;
        tx.set(&schema::inode_key(a), &inode.encode()).unwrap();
        tx.atomic_add(&schema::dir_attr_key(d, DirAttr::Nlink), 3).unwrap();
        // A directory that records the wrong parent (/d/sub says /mid).
        tx.set(&schema::dir_attr_key(sub, DirAttr::Parent), &mid.to_le_bytes()).unwrap();
        // An inode in no directory.
        tx.clear(&schema::dentry_key(ROOT_INO, b"lost")).unwrap();
        // Records of inodes that do not exist, and a block beyond a file's size.
        tx.set(&schema::orphan_key(999_999), b"").unwrap();
        tx.set(&schema::block_key(777_777, 0), &Block::encode_data(b"stray")).unwrap();
        tx.set(&schema::block_key(mid, 1000), &Block::encode_data(b"stray")).unwrap();
        tx.set(&schema::chunk_key(999_999, 0, 1), b"stray").unwrap();
        tx.set(&schema::staged_key(12_345, mid, 0, 1), b"").unwrap();
        tx.set(&schema::xattr_key(888_888, b"user.x"), b"v").unwrap();
        // An attribute of a file marked as never having had one.
        tx.set(&schema::xattr_key(mid, b"user.unmarked"), b"v").unwrap();
        tx.atomic_add(&schema::meta_key(Meta::Inodes), 7).unwrap();
    });
    let r = check(&backend);
    let want: HashSet<P> = [
        P::DanglingEntry,
        P::EntryType,
        P::LinkCount,
        P::DirectoryParent,
        P::Unreachable,
        P::StrayOrphan,
        P::StrayBlock,
        P::StrayChunk,
        P::StrayStagedIndex,
        P::StrayXattr,
        P::UnmarkedXattr,
        P::Counter,
    ]
    .into();
    assert_eq!(kinds(&r), want, "{r}");
    assert!(r.problems.iter().all(|p| p.repairable() && !p.repaired), "{r}");
    assert_eq!(r.remaining(), r.problems.len());
    let t = text(&r);
    for needle in [
        format!("points to missing inode {victim}"),
        format!("entry \"inside-a-file\" in directory {mid}, which is not a live directory"),
        format!("entry \"b\" in directory {d} says Symlink, inode {a} is File"),
        format!("inode {a} has link count 5, but 2 entries"),
        format!("directory {d} has link count 6, its entries make 3"),
        format!("directory {sub} records parent {mid}, its entry is in directory {d}"),
        format!("inode {lost} (File) is in no directory and not an orphan"),
        "orphan record for missing inode 999999".into(),
        "block 0 of missing inode 777777".into(),
        format!("block 1000 of inode {mid} lies beyond its size 20000"),
        "chunk of inode 999999 that no block or staging record refers to".into(),
        "staged-index entry of transaction 12345, which has no staging record".into(),
        "xattr \"user.x\" of missing inode 888888".into(),
        format!("inode {mid} has extended attributes but is marked as having none"),
        "inode counter says".into(),
    ] {
        assert!(t.contains(&needle), "missing {needle:?} in:\n{t}");
    }
    assert!(!t.contains("repaired") && !t.contains("clean"), "{t}");

    let r = repair(&backend);
    assert_eq!(r.repaired(), r.problems.len(), "{r}");
    assert_eq!(r.to_string().matches("\n  repaired\n").count(), r.problems.len(), "{r}");
    let r = check(&backend);
    assert!(r.is_clean(), "after repair: {r}");

    // Reopened, the store reaps the unreachable inode (recorded as an orphan) and still checks
    // clean; the data of the files is untouched.
    drop(store);
    let store = Store::with_backend(backend.clone(), Options::default(), None).unwrap();
    assert!(
        backend.begin().unwrap().get(&schema::inode_key(lost)).unwrap().is_none(),
        "orphan reaped"
    );
    assert!(check(&backend).is_clean());
    assert_eq!(store.read_file("/big").unwrap(), big_data());
    assert_eq!(store.read_file("/mid").unwrap(), vec![9u8; 20_000]);
    assert_eq!(store.getxattr("/mid", "user.unmarked").unwrap(), b"v");
    assert_eq!(store.lstat("/d/b").unwrap().kind, FileType::File);
    assert_eq!(store.lstat("/d/a").unwrap().nlink, 2);
    assert_eq!(store.lstat("/d").unwrap().nlink, 3);
    // The repaired parent key is the one a rename walks up: /d cannot move below /d/sub.
    assert_eq!(store.rename("/d", "/d/sub/d").unwrap_err().kind(), txvfs::ErrorKind::Invalid);
    assert!(store.lstat("/victim").is_err());
}

#[test]
fn deleted_inodes_leave_no_extended_attributes() {
    // A deletion looks for attributes only where the inode says it ever had one: every way
    // of giving an inode attributes must say so (checked by fsck's stray-xattr scan).
    let (backend, store) = populated();
    store.write_file("/f", b"x").unwrap();
    store.setxattr("/f", "user.a", b"1", XattrFlags::Any).unwrap();
    store.mkdir("/dir", 0o755).unwrap();
    store.setxattr("/dir", "user.a", b"1", XattrFlags::Any).unwrap();
    // Removed again: the inode still looks at deletion (the flag is never set back).
    store.write_file("/g", b"x").unwrap();
    store.setxattr("/g", "user.a", b"1", XattrFlags::Any).unwrap();
    store.setxattr("/g", "user.b", b"2", XattrFlags::Any).unwrap();
    store.removexattr("/g", "user.a").unwrap();
    // By inode, through a handle, and in one transaction with the file's creation.
    store.write_file("/h", b"x").unwrap();
    let h = ino(&store, "/h");
    store.setxattr_ino(h, "user.a", b"1", XattrFlags::Any).unwrap();
    let tx = store.begin().unwrap();
    tx.create("/t").unwrap().close().unwrap();
    tx.setxattr("/t", "user.a", b"1", XattrFlags::Any).unwrap();
    tx.commit().unwrap();
    assert!(check(&backend).is_clean(), "{}", check(&backend));
    for p in ["/f", "/g", "/h", "/t", "/d/a", "/d/b"] {
        store.unlink(p).unwrap();
    }
    store.rmdir("/dir").unwrap();
    let r = check(&backend);
    assert!(r.is_clean(), "{r}");
}

#[test]
fn unrepairable_damage_stays_reported() {
    let (backend, store) = populated();
    let (d, big, mid, a) =
        (ino(&store, "/d"), ino(&store, "/big"), ino(&store, "/mid"), ino(&store, "/d/a"));
    damage(&backend, |tx| {
        // A chunk a block refers to is lost: nothing can restore it.
        let (start, end) = schema::scope_range(schema::Scope::Chunks);
        let (k, _) = tx.get_range(&start, &end, 1, false).unwrap().remove(0);
        assert_eq!(schema::parse_chunk_key(&k).unwrap().0, big);
        tx.clear(&k).unwrap();
        // A directory in two directories.
        tx.set(
            &schema::dentry_key(ROOT_INO, b"again"),
            &Dentry { ino: d, kind: FileType::Dir }.encode(),
        )
        .unwrap();
        // Values and keys that do not decode.
        tx.set(&schema::inode_key(a), &[1]).unwrap();
        tx.set(&schema::block_key(mid, 0), &[9, 9]).unwrap();
        tx.set(b"Dshort", b"").unwrap();
    });
    let r = check(&backend);
    let k = kinds(&r);
    for want in [P::MissingChunk, P::DirectoryLinkedTwice, P::Undecodable] {
        assert!(k.contains(&want), "{want:?} not found in:\n{r}");
    }
    let t = text(&r);
    assert!(t.contains(&format!("of inode {big} refers to a missing chunk")), "{t}");
    assert!(t.contains(&format!("directory {d} is in 2 directories")), "{t}");
    assert!(t.contains(&format!("inode {a}: corrupt store")), "{t}");
    assert!(
        t.contains(&format!("block 0 of inode {mid}: corrupt store: unknown block tag")),
        "{t}"
    );
    assert!(t.contains("directory entry key"), "{t}");

    let r = repair(&backend);
    let left: Vec<_> = r.problems.iter().filter(|p| !p.repaired).collect();
    assert!(!left.is_empty() && left.iter().all(|p| !p.repairable()), "{r}");
    let again = check(&backend);
    assert_eq!(again.remaining(), left.len(), "what cannot be repaired stays: {again}");
    for want in [P::MissingChunk, P::DirectoryLinkedTwice, P::Undecodable] {
        assert!(kinds(&again).contains(&want), "{again}");
    }
}

#[test]
fn missing_superblock_and_root() {
    let backend = kv::open("memory:").unwrap();
    drop(Store::with_backend(backend.clone(), Options::default(), None).unwrap());
    assert!(check(&backend).is_clean());
    damage(&backend, |tx| tx.set(&schema::super_key(), &[99]).unwrap());
    let r = check(&backend);
    assert_eq!(kinds(&r), [P::Superblock].into(), "{r}");
    assert!(text(&r).starts_with("superblock: "), "{r}");
    damage(&backend, |tx| {
        tx.clear(&schema::super_key()).unwrap();
        tx.clear(&schema::inode_key(ROOT_INO)).unwrap();
    });
    let r = repair(&backend);
    assert!(kinds(&r).is_superset(&[P::Superblock, P::Root].into()), "{r}");
    assert!(
        text(&r).contains("no superblock")
            && text(&r).contains("the root directory (inode 1) is missing"),
        "{r}"
    );
    assert!(
        r.problems
            .iter()
            .filter(|p| matches!(p.kind, P::Superblock | P::Root))
            .all(|p| !p.repaired),
        "{r}"
    );
}

/// A memory backend that reports the time limit `limit` (without enforcing it) and counts
/// the transactions begun.
struct Counted {
    inner: Arc<dyn Backend>,
    limit: Option<Duration>,
    begun: AtomicU64,
}

impl Backend for Counted {
    fn begin(&self) -> txvfs::Result<Box<dyn Txn>> {
        self.begun.fetch_add(1, Ordering::Relaxed);
        self.inner.begin()
    }
    fn limits(&self) -> Limits {
        Limits { max_txn_duration: self.limit, ..Limits::UNLIMITED }
    }
    fn sync(&self) -> txvfs::Result<()> {
        self.inner.sync()
    }
    fn describe(&self) -> String {
        "counted".into()
    }
}

#[test]
fn time_limited_backend_gets_fresh_snapshots() {
    let (backend, store) = populated();
    store
        .transact(|tx| (0..2500).try_for_each(|i| tx.write_file(format!("/d/sub/f{i}"), b"x")))
        .unwrap();
    let counted = |limit| Counted { inner: backend.clone(), limit, begun: AtomicU64::new(0) };
    // A limit of zero: every read must take a fresh snapshot.
    let limited = counted(Some(Duration::ZERO));
    let r = fsck::check(&limited, false, &mut |_| {}).unwrap();
    assert!(r.is_clean(), "{r}");
    let begun = limited.begun.load(Ordering::Relaxed);
    assert!(begun > 8, "one transaction per read, not one for the whole check: {begun}");
    // Without a limit, the whole check reads at one snapshot.
    let unlimited = counted(None);
    let again = fsck::check(&unlimited, false, &mut |_| {}).unwrap();
    assert!(again.is_clean(), "{again}");
    assert_eq!(unlimited.begun.load(Ordering::Relaxed), 1);
    assert_eq!(again.keys_read, r.keys_read);
}
