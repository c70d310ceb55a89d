//! The change feed in one process: what it records, filters, waiting, cursors (resuming, bad
//! ones), retention, and that replaying it from an empty tree gives the store's tree.

mod feed_model;

use feed_model::{replay, tree_of, Tree};
use rand::{Rng, SeedableRng};
use std::time::Duration;
use txvfs::{
    ChangeKind, Cursor, ErrorKind, FileSystem, FileType, Retention, Store, WatchOptions, XattrFlags,
};

fn stores() -> Vec<(Store, Option<tempfile::TempDir>)> {
    let d = tempfile::tempdir().unwrap();
    let rocks = Store::open(d.path().join("s").to_str().unwrap()).unwrap();
    let mem = Store::open("memory:").unwrap();
    for s in [&mem, &rocks] {
        s.set_change_feed(true).unwrap();
    }
    vec![(mem, None), (rocks, Some(d))]
}

fn all() -> WatchOptions {
    WatchOptions::default()
}

fn kinds(batches: &[txvfs::Batch]) -> Vec<(ChangeKind, String)> {
    batches
        .iter()
        .flat_map(|b| &b.changes)
        .map(|c| (c.kind, String::from_utf8_lossy(&c.path).into_owned()))
        .collect()
}

/// A fresh store with the feed on in the FoundationDB cluster named by
/// `TXVFS_FDB_CLUSTER_FILE` (set by `tests/foundationdb/run`).
fn fdb_store(name: &str) -> Store {
    let cluster = std::env::var("TXVFS_FDB_CLUSTER_FILE")
        .expect("the FoundationDB tests need a cluster: run tests/foundationdb/run");
    let run =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos();
    let store = Store::open(&format!("fdb:{cluster}?prefix=watch-{name}-{run}")).unwrap();
    store.set_change_feed(true).unwrap();
    store
}

/// Each case as a test on the local backends (memory, RocksDB) and an `#[ignore]`d one on
/// FoundationDB (run by `tests/foundationdb/run`).
macro_rules! cases {
    ($($case:ident, $fdb:ident;)*) => {$(
        #[test]
        fn $case() {
            for (store, _d) in stores() {
                super::$case(&store);
            }
        }
        #[test]
        #[ignore = "needs a FoundationDB cluster: tests/foundationdb/run"]
        fn $fdb() {
            super::$case(&fdb_store(stringify!($case)));
        }
    )*};
}

mod on {
    use super::{fdb_store, stores};
    cases! {
        every_kind_of_change_is_recorded_in_commit_order, every_kind_foundationdb;
        a_transaction_is_one_batch_and_a_rollback_is_none, one_batch_foundationdb;
        filters_by_prefix_and_kind_before_the_caller_sees_anything, filters_foundationdb;
        wait_times_out_empty_and_wakes_for_a_commit, wait_foundationdb;
        resuming_from_a_cursor_loses_and_repeats_nothing, resuming_foundationdb;
        retention_drops_old_records_and_a_consumer_behind_them_must_rescan, retention_foundationdb;
        replaying_the_feed_from_an_empty_tree_gives_the_store, replaying_foundationdb;
    }

    #[test]
    fn bad_cursors_are_refused_and_change_nothing() {
        let (a, _d) = stores().pop().unwrap();
        super::bad_cursors_are_refused_and_change_nothing(&a);
    }

    #[test]
    #[ignore = "needs a FoundationDB cluster: tests/foundationdb/run"]
    fn bad_cursors_foundationdb() {
        super::bad_cursors_are_refused_and_change_nothing(&fdb_store("bad-cursors"));
    }
}

#[test]
fn off_by_default_and_watching_it_says_so() {
    let store = Store::open("memory:").unwrap();
    assert!(!store.change_feed());
    let e = store.watch(all()).err().unwrap();
    assert_eq!(e.kind(), ErrorKind::Invalid);
    assert!(e.message().contains("off"), "{e}");
}

fn every_kind_of_change_is_recorded_in_commit_order(store: &Store) {
    let mut w = store.watch(all()).unwrap();
    assert!(w.poll().unwrap().is_empty());
    store.mkdir("/d", 0o755).unwrap();
    store.write_file("/d/a", b"one").unwrap();
    store.write_file("/d/a", b"two").unwrap();
    store.truncate("/d/a", 1).unwrap();
    store.chmod("/d/a", 0o600).unwrap();
    store.setxattr("/d/a", "user.k", b"v", XattrFlags::Any).unwrap();
    store.link("/d/a", "/d/b").unwrap();
    store.symlink("a", "/d/s").unwrap();
    store.rename("/d/b", "/c").unwrap();
    store.unlink("/c").unwrap();
    let f = store.create("/d/h").unwrap();
    f.write(b"by handle").unwrap();
    f.close().unwrap();
    store.remove_all("/d").unwrap();
    let got = w.poll().unwrap();
    let expect = [
        (ChangeKind::Created, "/d"),
        (ChangeKind::Created, "/d/a"),
        (ChangeKind::Written, "/d/a"),
        (ChangeKind::Written, "/d/a"),
        (ChangeKind::Attrs, "/d/a"),
        (ChangeKind::Xattrs, "/d/a"),
        (ChangeKind::Linked, "/d/b"),
        (ChangeKind::Created, "/d/s"),
        (ChangeKind::Renamed, "/d/b"),
        (ChangeKind::Removed, "/c"),
        (ChangeKind::Created, "/d/h"),
        (ChangeKind::Written, "/d/h"),
        (ChangeKind::Removed, "/d"),
    ];
    let expect: Vec<_> = expect.iter().map(|(k, p)| (*k, p.to_string())).collect();
    assert_eq!(kinds(&got), expect, "{}", store.describe());
    let renamed = got.iter().flat_map(|b| &b.changes).find(|c| c.kind == ChangeKind::Renamed);
    assert_eq!(renamed.unwrap().to.as_deref(), Some(&b"/c"[..]));
    // One batch per transaction, cursors increasing, the last one is the watcher's.
    assert!(got.windows(2).all(|w| w[0].cursor < w[1].cursor));
    assert_eq!(w.cursor(), got.last().unwrap().cursor);
    let mut tree = Tree::new();
    replay(&mut tree, &got);
    assert_eq!(tree, tree_of(store));
}

fn a_transaction_is_one_batch_and_a_rollback_is_none(store: &Store) {
    let mut w = store.watch(all()).unwrap();
    let tx = store.begin().unwrap();
    tx.mkdir("/t", 0o755).unwrap();
    tx.write_file("/t/1", b"1").unwrap();
    tx.write_file("/t/2", b"2").unwrap();
    tx.rollback();
    store
        .transact(|tx| {
            tx.mkdir("/u", 0o755)?;
            tx.write_file("/u/1", b"1")?;
            tx.rename("/u/1", "/u/2")
        })
        .unwrap();
    let got = w.poll().unwrap();
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].changes.len(), 3);
    // A failed call inside a transaction records nothing.
    let tx = store.begin().unwrap();
    assert!(tx.unlink("/nope").is_err());
    tx.commit().unwrap();
    assert!(w.poll().unwrap().is_empty());
}

fn filters_by_prefix_and_kind_before_the_caller_sees_anything(store: &Store) {
    let by_prefix = WatchOptions { prefixes: vec![b"/keep".to_vec()], ..all() };
    let by_kind = WatchOptions { kinds: vec![ChangeKind::Removed], ..all() };
    let (mut p, mut k) = (store.watch(by_prefix).unwrap(), store.watch(by_kind).unwrap());
    store.mkdir("/keep", 0o755).unwrap();
    store.mkdir("/keeper", 0o755).unwrap(); // not under /keep
    store.write_file("/keep/a", b"x").unwrap();
    store.write_file("/other", b"x").unwrap();
    store.rename("/other", "/keep/moved").unwrap(); // in by its new path
    store.unlink("/keep/a").unwrap();
    let got = kinds(&p.poll().unwrap());
    let paths: Vec<&str> = got.iter().map(|(_, p)| p.as_str()).collect();
    assert_eq!(paths, ["/keep", "/keep/a", "/other", "/keep/a"]);
    assert_eq!(kinds(&k.poll().unwrap()), [(ChangeKind::Removed, "/keep/a".to_string())]);
    // Filtered-out commits still move the cursor: nothing comes twice.
    assert!(k.poll().unwrap().is_empty());
    assert_eq!(k.cursor(), p.cursor());
}

fn wait_times_out_empty_and_wakes_for_a_commit(store: &Store) {
    let mut w = store.watch(all()).unwrap();
    assert!(w.wait(Duration::from_millis(30)).unwrap().is_empty());
    let writer = store.clone();
    let t = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(50));
        writer.write_file("/late", b"x").unwrap();
    });
    let got = w.wait(Duration::from_secs(60)).unwrap();
    assert_eq!(kinds(&got), [(ChangeKind::Created, "/late".to_string())]);
    t.join().unwrap();
    // The iterator blocks for the next batch.
    store.mkdir("/next", 0o755).unwrap();
    let b = w.next().unwrap().unwrap();
    assert_eq!(b.changes[0].path, b"/next");
}

fn resuming_from_a_cursor_loses_and_repeats_nothing(store: &Store) {
    let mut w = store.watch(all()).unwrap();
    for i in 0..10 {
        store.write_file(format!("/f{i}"), b"x").unwrap();
    }
    let first = w.poll().unwrap();
    let saved = first[4].cursor.to_string();
    drop(w);
    let since = Some(Cursor::parse(&saved).unwrap());
    let mut again = store.watch(WatchOptions { since, ..all() }).unwrap();
    let rest = again.poll().unwrap();
    assert_eq!(rest, first[5..]);
}

fn bad_cursors_are_refused_and_change_nothing(a: &Store) {
    let b = Store::open("memory:").unwrap();
    b.set_change_feed(true).unwrap();
    a.write_file("/x", b"x").unwrap();
    let before = tree_of(a);
    for garbage in [
        "",
        "txvfs-c1-",
        "txvfs-c1-zz-00",
        "cursor",
        "txvfs-c2-00000000000000000000000000000000-00000000000000000000",
    ] {
        let e = Cursor::parse(garbage).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Invalid);
        assert!(e.message().contains("not a change feed cursor"), "{e}");
    }
    let theirs = b.watch(all()).unwrap().cursor();
    let e = a.watch(WatchOptions { since: Some(theirs), ..all() }).err().unwrap();
    assert!(e.message().contains("another store"), "{e}");
    let mine = a.watch(all()).unwrap().cursor().to_string();
    // The commit counter (the stamp's first 8 bytes) far beyond the newest commit's.
    let (head, stamp) = mine.split_at(mine.len() - 20);
    let counter = u64::from_str_radix(&stamp[..16], 16).unwrap() + (1 << 40);
    let future = format!("{head}{counter:016x}{}", &stamp[16..]);
    let e = a.watch(WatchOptions { since: Some(Cursor::parse(&future).unwrap()), ..all() });
    assert!(e.err().unwrap().message().contains("from the future"));
    assert_eq!(tree_of(a), before);
}

fn retention_drops_old_records_and_a_consumer_behind_them_must_rescan(store: &Store) {
    let old = store.watch(all()).unwrap().cursor();
    for i in 0..20 {
        store.write_file(format!("/f{i}"), b"x").unwrap();
    }
    store.set_change_feed_retention(Retention { max_records: 5, ..Retention::default() }).unwrap();
    assert!(store.trim_change_feed().unwrap() > 0);
    let e = store.watch(WatchOptions { since: Some(old), ..all() }).err().unwrap();
    assert_eq!(e.kind(), ErrorKind::NoData);
    assert!(e.message().contains("were dropped; rescan"), "{e}");
    // A watcher that falls behind while it runs gets the same error from poll.
    let mut w = store.watch(all()).unwrap();
    for i in 0..20 {
        store.write_file(format!("/g{i}"), b"x").unwrap();
    }
    store.trim_change_feed().unwrap();
    assert_eq!(w.poll().unwrap_err().kind(), ErrorKind::NoData);
}

fn replaying_the_feed_from_an_empty_tree_gives_the_store(store: &Store) {
    let mut w = store.watch(all()).unwrap();
    let mut rng = rand::rngs::SmallRng::seed_from_u64(31);
    let names = ["a", "b", "c", "d"];
    let pick = |rng: &mut rand::rngs::SmallRng| {
        let depth = rng.gen_range(1..=3);
        (0..depth).map(|_| format!("/{}", names[rng.gen_range(0..4)])).collect::<String>()
    };
    for _ in 0..600 {
        let (p, q) = (pick(&mut rng), pick(&mut rng));
        let _ = match rng.gen_range(0..20) {
            0..=4 => store.mkdir(&p, 0o755),
            5..=10 => store.write_file(&p, b"data"),
            11 | 12 => store.unlink(&p),
            13..=15 => store.rename(&p, &q),
            16 => store.remove_all(&p),
            _ => store.transact(|tx| {
                tx.mkdir(&p, 0o755)?;
                tx.write_file(format!("{p}/x"), b"1")?;
                tx.rename(format!("{p}/x"), &q)
            }),
        };
    }
    let mut tree = Tree::new();
    replay(&mut tree, &w.poll().unwrap());
    let real = tree_of(store);
    assert!(real.len() > 5);
    assert_eq!(tree, real);
    assert!(real.values().any(|t| *t == FileType::Dir));
}
