//! A transaction's changes to many files become visible at once, or not at all; its reads see
//! its own writes; handles opened in it write into it and die with it.

use txvfs::{ErrorKind, FileSystem, OpenOptions, Store};

#[test]
fn nothing_visible_before_commit_then_everything() {
    let store = Store::open("memory:").unwrap();
    let tx = store.begin().unwrap();
    tx.mkdir("/d", 0o755).unwrap();
    tx.write_file("/d/a", b"A").unwrap();
    tx.write_file("/d/b", b"B").unwrap();
    tx.rename("/d/b", "/d/c").unwrap();
    // Read-your-writes inside.
    assert_eq!(tx.read_file("/d/c").unwrap(), b"B");
    assert!(!tx.exists("/d/b").unwrap());
    let names: Vec<_> = tx.readdir("/d", None, 0).unwrap().into_iter().map(|e| e.name).collect();
    assert_eq!(names, vec![b"a".to_vec(), b"c".to_vec()]);
    // Outside: nothing yet.
    assert!(!store.exists("/d").unwrap());
    tx.commit().unwrap();
    assert_eq!(store.read_file("/d/a").unwrap(), b"A");
    assert_eq!(store.read_file("/d/c").unwrap(), b"B");
}

#[test]
fn rollback_and_drop_discard_everything() {
    let store = Store::open("memory:").unwrap();
    store.write_file("/keep", b"old").unwrap();
    let tx = store.begin().unwrap();
    tx.write_file("/keep", b"new").unwrap();
    tx.write_file("/extra", b"x").unwrap();
    tx.rollback();
    {
        let tx = store.begin().unwrap();
        tx.unlink("/keep").unwrap();
    }
    assert_eq!(store.read_file("/keep").unwrap(), b"old");
    assert!(!store.exists("/extra").unwrap());
}

#[test]
fn conflicting_transactions_one_wins_and_transact_retries() {
    let store = Store::open("memory:").unwrap();
    store.write_file("/counter", b"0").unwrap();
    let t1 = store.begin().unwrap();
    let t2 = store.begin().unwrap();
    for t in [&t1, &t2] {
        let n: u32 = String::from_utf8(t.read_file("/counter").unwrap()).unwrap().parse().unwrap();
        t.write_file("/counter", (n + 1).to_string().as_bytes()).unwrap();
    }
    t1.commit().unwrap();
    let e = t2.commit().unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Conflict);
    assert_eq!(store.read_file("/counter").unwrap(), b"1");
    // transact retries until it commits on fresh data.
    let mut attempts = 0;
    store
        .transact(|tx| {
            attempts += 1;
            let n: u32 = String::from_utf8(tx.read_file("/counter")?).unwrap().parse().unwrap();
            if attempts == 1 {
                store.write_file("/counter", b"10")?;
            }
            tx.write_file("/counter", (n + 1).to_string().as_bytes())
        })
        .unwrap();
    assert_eq!(attempts, 2);
    assert_eq!(store.read_file("/counter").unwrap(), b"11");
    // Errors other than conflicts surface at once.
    let mut calls = 0;
    let e = store.transact(|tx| {
        calls += 1;
        tx.read_file("/missing")
    });
    assert_eq!(e.unwrap_err().kind(), ErrorKind::NotFound);
    assert_eq!(calls, 1);
}

#[test]
fn handles_in_a_transaction_write_into_it_and_end_with_it() {
    let store = Store::open("memory:").unwrap();
    let tx = store.begin().unwrap();
    let f = tx.open("/f", &OpenOptions::new().read(true).write(true).create(true)).unwrap();
    f.write(b"hello").unwrap();
    assert!(!store.exists("/f").unwrap());
    tx.commit().unwrap();
    assert_eq!(store.read_file("/f").unwrap(), b"hello");
    let e = f.write(b"more").unwrap_err();
    assert_eq!(e.kind(), ErrorKind::BadHandle);
    // A committed transaction object is consumed; a finished one refuses work through handles.
    assert_eq!(f.stat().unwrap_err().kind(), ErrorKind::BadHandle);
}

#[test]
fn committed_transaction_survives_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let uri = format!("rocksdb:{}", dir.path().display());
    {
        let store = Store::open(&uri).unwrap();
        store
            .transact(|tx| {
                tx.write_file("/a", &vec![1; 100_000])?;
                tx.write_file("/b", b"small")
            })
            .unwrap();
    }
    let store = Store::open(&uri).unwrap();
    assert_eq!(store.read_file("/a").unwrap(), vec![1; 100_000]);
    assert_eq!(store.read_file("/b").unwrap(), b"small");
}

#[test]
fn commit_through_a_shared_reference_once() {
    let store = Store::open("memory:").unwrap();
    let tx = std::sync::Arc::new(store.begin().unwrap());
    let other = tx.clone();
    std::thread::spawn(move || other.write_file("/from-thread", b"t").unwrap()).join().unwrap();
    tx.commit().unwrap();
    assert_eq!(store.read_file("/from-thread").unwrap(), b"t");
    let again = tx.commit().unwrap_err();
    assert_eq!(again.kind(), ErrorKind::Invalid);
    assert!(again.message().contains("already committed or rolled back"), "{again}");
    assert_eq!(tx.write_file("/late", b"x").unwrap_err().kind(), ErrorKind::Invalid);
    tx.rollback();
    assert!(!store.exists("/late").unwrap());

    let rolled = store.begin().unwrap();
    rolled.write_file("/gone", b"g").unwrap();
    rolled.rollback();
    assert_eq!(rolled.commit_durable(true).unwrap_err().kind(), ErrorKind::Invalid);
    assert!(!store.exists("/gone").unwrap());
}
