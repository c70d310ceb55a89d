//! The file layer across processes sharing one store (kv/shared, fs/handle_marks.rs): a file
//! unlinked in one process stays readable through a handle open in another, and is freed once
//! the last handle anywhere closes (or its process dies); a killed process's file locks are
//! released at once, and its orphans are reaped at the owner's next round (every few seconds).
#![cfg(feature = "rocksdb")]

mod agent;

use agent::Agent;
use std::time::{Duration, Instant};
use txvfs::kv::{self, Backend, Role};
use txvfs::{ErrorKind, FileSystem, FlockOp, OpenOptions, Store};

#[test]
fn agent_main() {
    agent::agent_main();
}

const AGENT: &str = "agent_main";

/// Inode records (`I` ino, no suffix) of file data still in the store for `ino`.
fn inode_exists(b: &dyn Backend, ino: u64) -> bool {
    let mut k = vec![b'I'];
    k.extend_from_slice(&ino.to_be_bytes());
    b.begin().unwrap().get(&k).unwrap().is_some()
}

/// Waits up to `limit` for `cond`, polling.
fn eventually(limit: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let end = Instant::now() + limit;
    while Instant::now() < end {
        if cond() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    cond()
}

#[test]
fn a_file_open_in_a_client_survives_an_unlink_by_the_owner_until_its_close() {
    let d = tempfile::tempdir().unwrap();
    let uri = d.path().to_str().unwrap().to_string();
    let store = Store::open(&uri).unwrap(); // this process owns the store
    store.write_file("/f", b"still here").unwrap();
    let ino = store.stat("/f").unwrap().ino;
    let mut client = Agent::start(&uri, AGENT);
    assert_eq!(client.role, "client");
    assert_eq!(client.ask("open /f"), "ok");
    store.unlink("/f").unwrap();
    assert!(!store.exists("/f").unwrap());
    assert_eq!(client.ask("hread"), "still here", "the client's handle must still read the data");
    let raw = kv::open(&uri).unwrap();
    assert!(inode_exists(&*raw, ino), "kept as an orphan while the client has it open");
    assert_eq!(client.ask("hclose"), "ok");
    assert!(
        eventually(Duration::from_secs(8), || !inode_exists(&*raw, ino)),
        "freed after the last close"
    );
}

#[test]
fn an_unlink_begun_alone_conflicts_with_a_client_that_connects_and_opens_the_file() {
    // The owner, alone on its store, skips reading the open marks of other processes; the
    // range must still be a read conflict, or a client that arrives meanwhile loses its file.
    let d = tempfile::tempdir().unwrap();
    let uri = d.path().to_str().unwrap().to_string();
    let store = Store::open(&uri).unwrap();
    store.write_file("/f", b"kept for the client").unwrap();
    let mut client = None;
    let mut attempts = 0;
    store
        .transact(|tx| {
            attempts += 1;
            tx.unlink("/f")?;
            if client.is_none() {
                let mut c = Agent::start(&uri, AGENT);
                assert_eq!(c.ask("open /f"), "ok");
                client = Some(c);
            }
            Ok(())
        })
        .unwrap();
    assert_eq!(attempts, 2, "the client's open must make the first attempt conflict");
    let mut client = client.unwrap();
    assert_eq!(client.ask("hread"), "kept for the client");
    assert_eq!(client.ask("hclose"), "ok");
}

#[test]
fn a_file_open_in_the_owner_survives_an_unlink_by_a_client() {
    let d = tempfile::tempdir().unwrap();
    let uri = d.path().to_str().unwrap().to_string();
    let store = Store::open(&uri).unwrap();
    store.write_file("/g", b"owner reads").unwrap();
    let ino = store.stat("/g").unwrap().ino;
    let f = store.open("/g", &OpenOptions::new().read(true)).unwrap();
    let mut client = Agent::start(&uri, AGENT);
    assert_eq!(client.ask("unlink /g"), "ok");
    let mut buf = [0u8; 64];
    let n = f.read_at(&mut buf, 0).unwrap();
    assert_eq!(&buf[..n], b"owner reads");
    drop(f);
    let raw = kv::open(&uri).unwrap();
    assert!(
        eventually(Duration::from_secs(8), || !inode_exists(&*raw, ino)),
        "freed once the owner's handle closed"
    );
}

#[test]
fn a_killed_client_releases_its_lock_at_once_and_its_orphan_soon_after() {
    let d = tempfile::tempdir().unwrap();
    let uri = d.path().to_str().unwrap().to_string();
    let store = Store::open(&uri).unwrap();
    store.write_file("/h", b"data").unwrap();
    store.write_file("/lockme", b"").unwrap();
    let ino = store.stat("/h").unwrap().ino;
    let mut client = Agent::start(&uri, AGENT);
    assert_eq!(client.ask("open /h"), "ok");
    assert_eq!(client.ask("flock /lockme"), "ok");
    let mine = store.open("/lockme", &OpenOptions::new().read(true)).unwrap();
    let e = mine.flock(FlockOp::Exclusive, false).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::WouldBlock, "{e}");
    store.unlink("/h").unwrap();
    let raw = kv::open(&uri).unwrap();
    assert!(inode_exists(&*raw, ino));
    client.kill();
    // The kernel dropped the client's liveness lock: no lease to wait for.
    mine.flock(FlockOp::Exclusive, false).unwrap();
    assert!(
        eventually(Duration::from_secs(8), || !inode_exists(&*raw, ino)),
        "the dead client's orphan is reaped"
    );
}

#[test]
fn writes_from_a_client_are_files_for_everyone() {
    let d = tempfile::tempdir().unwrap();
    let uri = d.path().to_str().unwrap().to_string();
    let mut owner = Agent::start(&uri, AGENT);
    assert_eq!(owner.role, "owner");
    let store = Store::open(&uri).unwrap(); // a client
    store.mkdir_all("/dir", 0o755).unwrap();
    store
        .transact(|tx| {
            tx.write_file("/dir/a", b"A")?;
            tx.write_file("/dir/b", b"B")
        })
        .unwrap();
    assert_eq!(owner.ask("read /dir/b"), "B");
    assert_eq!(owner.ask("write /dir/c C"), "ok");
    assert_eq!(store.read_file("/dir/c").unwrap(), b"C");
    let names: Vec<_> =
        store.readdir("/dir", None, 0).unwrap().into_iter().map(|e| e.name).collect();
    assert_eq!(names.len(), 3, "{names:?}");
    // The owner dies; this process takes over with everything.
    owner.kill();
    assert_eq!(store.read_file("/dir/c").unwrap(), b"C");
    store.write_file("/dir/d", b"D").unwrap();
    let report = txvfs::fsck::check_uri(&uri, false, &mut |_| {}).unwrap();
    assert!(report.is_clean(), "{report:?}");
}

/// A process alone on its store keeps its locks to itself (no writes); they go into the store
/// when the first other process connects, before it is served.
#[test]
fn locks_taken_while_alone_hold_against_a_process_that_arrives_later() {
    let d = tempfile::tempdir().unwrap();
    let uri = d.path().to_str().unwrap().to_string();
    let store = Store::open(&uri).unwrap();
    store.write_file("/l", b"").unwrap();
    let f = store.open("/l", &OpenOptions::new().read(true)).unwrap();
    f.flock(FlockOp::Exclusive, false).unwrap();
    let lock_records =
        |b: &dyn Backend| b.begin().unwrap().get_range(b"L", b"M", 0, false).unwrap().len();
    let raw = kv::open(&uri).unwrap();
    assert_eq!(lock_records(&*raw), 0, "alone: nothing written for a lock");
    let mut client = Agent::start(&uri, AGENT);
    assert_eq!(client.role, "client");
    let answer = client.ask("flock /l");
    assert!(answer.starts_with("error"), "the client got a lock the owner holds: {answer}");
    assert_eq!(lock_records(&*raw), 1, "published when the client arrived");
    drop(f);
    assert_eq!(client.ask("flock /l"), "ok");
}

/// A client process of a shared store with a local disk cache (`?disk_cache=DIR` in its URI):
/// its reads of chunks become hits, and what the owner process writes is what it reads next
/// (the cache holds immutable chunks only, so it is never stale across processes).
#[test]
fn a_client_with_a_disk_cache_reads_hits_and_never_stale_data() {
    let d = tempfile::tempdir().unwrap();
    let uri = d.path().join("db").to_str().unwrap().to_string();
    let mut owner = Agent::start(&uri, AGENT);
    assert_eq!(owner.role, "owner");
    let client =
        Store::open(&format!("{uri}?disk_cache={}", d.path().join("cache").display())).unwrap();
    assert!(client.backend().role() == Role::Secondary, "the test process must be a client");
    let big: Vec<u8> = (0..3 * 65536 + 10).map(|i| b'a' + (i / 1000 % 26) as u8).collect();
    client.write_file("/f", &big).unwrap();
    assert_eq!(client.read_file("/f").unwrap(), big);
    client.disk_cache_flush();
    assert_eq!(client.read_file("/f").unwrap(), big);
    assert_eq!(client.disk_cache_stats().unwrap().hits, 4, "{:?}", client.disk_cache_stats());
    // The owner reads the client's chunked blocks, then overwrites the file.
    assert_eq!(owner.ask("read /f").as_bytes(), &big[..]);
    assert_eq!(owner.ask("write /f fresh"), "ok");
    assert_eq!(client.read_file("/f").unwrap(), b"fresh");
    client.write_file("/f", &big[..65536 * 2]).unwrap();
    assert_eq!(client.read_file("/f").unwrap(), &big[..65536 * 2]);
}

/// A client's handle opened and closed inside an explicit transaction leaves no open mark
/// (`H`) behind once the transaction commits: the owner then frees the file at its unlink, as
/// it would after an auto-commit handle's close. (The close used to clear the mark in a
/// commit of its own, before the transaction's commit wrote it back.)
#[test]
fn a_client_transaction_handle_leaves_no_open_mark() {
    let d = tempfile::tempdir().unwrap();
    let uri = d.path().to_str().unwrap().to_string();
    let mut owner = Agent::start(&uri, AGENT);
    assert_eq!(owner.role, "owner");
    let store = Store::open(&uri).unwrap();
    assert!(store.backend().role() == Role::Secondary, "the test process must be a client");
    store.write_file("/m", b"x").unwrap();
    let ino = store.stat("/m").unwrap().ino;
    let raw = kv::open(&uri).unwrap();
    let marks = || raw.begin().unwrap().get_range(b"H", b"I", 0, false).unwrap().len();
    let tx = store.begin().unwrap();
    let f = tx.open("/m", &OpenOptions::new().read(true)).unwrap();
    f.close().unwrap();
    tx.commit().unwrap();
    assert_eq!(marks(), 0, "the transaction's closed handle left its mark");
    assert_eq!(owner.ask("unlink /m"), "ok");
    assert!(
        eventually(Duration::from_secs(8), || !inode_exists(&*raw, ino)),
        "the unlinked file is freed: no handle holds it"
    );
}

#[test]
fn a_clients_lock_change_is_one_round_trip_to_the_owner() {
    // The owner runs it on the lock records (a transaction of the client's own would read
    // them in one round trip and commit in another). Each count is the least of three tries:
    // the lease renewal thread makes round trips of its own now and then.
    let d = tempfile::tempdir().unwrap();
    let uri = d.path().to_str().unwrap().to_string();
    let mut owner = Agent::start(&uri, AGENT);
    assert_eq!(owner.role, "owner");
    let mut client = Agent::start(&uri, AGENT);
    assert_eq!(client.role, "client");
    assert_eq!(client.ask("write /f data"), "ok");
    assert_eq!(client.ask("rwopen /f"), "ok");
    let mut trips = |cmd: &str| {
        let before: u64 = client.ask("trips").parse().unwrap();
        assert_eq!(client.ask(cmd), "ok", "{cmd}");
        client.ask("trips").parse::<u64>().unwrap() - before
    };
    let (mut lock, mut unlock) = (u64::MAX, u64::MAX);
    for _ in 0..3 {
        lock = lock.min(trips("hlock 0 2"));
        unlock = unlock.min(trips("hunlock 0 2"));
    }
    assert_eq!((lock, unlock), (1, 1), "round trips of a lock and of its release");
    assert_eq!(client.ask("hlock 0 2"), "ok");
    let taken = owner.ask("lockrange /f 1 1");
    assert!(taken.contains("locked"), "the client's lock holds in the owner: {taken}");
    assert_eq!(client.ask("hunlock 0 2"), "ok");
    assert_eq!(owner.ask("lockrange /f 1 1"), "ok");
}
