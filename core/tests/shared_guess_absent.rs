//! A client of a shared store takes a name it creates as absent without asking the owner
//! (`Txn::assume_absent`, `op::EXPECT_ABSENT`): a create of a new name is one round trip.
//! A guess that was wrong never shows: the owner's check fails the commit and the call runs
//! again reading the name, and a call that failed after a guess is run again the same way;
//! guesses stop while they are often wrong.
#![cfg(feature = "rocksdb")]

mod agent;

use agent::Agent;
use txvfs::{ErrorKind, FileSystem, OpenOptions, Options, Store};

#[test]
fn agent_main() {
    agent::agent_main();
}

const AGENT: &str = "agent_main";

/// The counters these tests read are the process's: one test at a time.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

/// Names taken as absent (or read instead) that were absent, and that were not.
fn guesses() -> (u64, u64) {
    txvfs::kv::guess_counts()
}

/// A store in a new directory, owned by an agent that first writes each `PATH DATA` of
/// `files` (so this process, opening it next, is a client that never read them).
fn owner_writing(files: impl IntoIterator<Item = String>) -> (tempfile::TempDir, Agent) {
    let d = tempfile::tempdir().unwrap();
    let mut owner = Agent::start(d.path().to_str().unwrap(), AGENT);
    for f in files {
        assert_eq!(owner.ask(&format!("write {f}")), "ok");
    }
    (d, owner)
}

/// This process as a client of the store the agent owns.
fn client(dir: &std::path::Path, options: Options) -> Store {
    let store = Store::open_with(dir.to_str().unwrap(), options).unwrap();
    assert!(!store.backend().role().is_primary(), "the test process must be a client");
    store
}

fn trips() -> u64 {
    txvfs::kv::round_trips()
}

fn clean(store: &Store) {
    let report = txvfs::fsck::check(&*store.backend(), false, &mut |_| {}).unwrap();
    assert!(report.is_clean(), "{report}");
}

#[test]
fn a_client_creates_a_new_name_in_one_round_trip() {
    let _serial = serial();
    let (d, mut owner) = owner_writing(["/seed x".to_string()]);
    let store = client(d.path(), Options::default());
    store.mkdir("/d", 0o755).unwrap();
    store.write_file("/d/warm", b"w").unwrap();
    for i in 0..50 {
        let before = trips();
        store.write_file(format!("/d/f{i}"), format!("data {i}").as_bytes()).unwrap();
        // The first few also read what the cache does not hold yet (the quota shards).
        if i >= 5 {
            assert_eq!(trips() - before, 1, "write_file of a new name, round {i}");
        }
    }
    let before = trips();
    store.mkdir("/d/sub", 0o755).unwrap();
    let f = store.open("/d/sub/g", &OpenOptions::new().write(true).create_new(true)).unwrap();
    f.close().unwrap();
    assert!(trips() - before <= 3, "mkdir and create_new: {} round trips", trips() - before);
    for i in [0, 17, 49] {
        assert_eq!(owner.ask(&format!("read /d/f{i}")), format!("data {i}"));
    }
    assert_eq!(store.readdir("/d", None, 0).unwrap().len(), 52);
    clean(&store);
}

#[test]
fn a_name_taken_as_absent_that_exists_is_found() {
    let _serial = serial();
    // write_file, create_new, mkdir and rename onto a name the client never read.
    let (d, mut owner) =
        owner_writing(["old", "excl", "dir"].map(|f| format!("/{f} from-the-owner")));
    let store = client(d.path(), Options::default());
    store.write_file("/warm", b"w").unwrap();
    // None of these names is in the client's cache: each is taken as absent, wrongly.
    store.write_file("/old", b"new").unwrap();
    assert_eq!(owner.ask("read /old"), "new");
    let e = store.open("/excl", &OpenOptions::new().write(true).create_new(true)).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Exists, "{e}");
    assert_eq!(store.mkdir("/dir", 0o755).unwrap_err().kind(), ErrorKind::Exists);
    assert_eq!(owner.ask("read /excl"), "from-the-owner");
    // A rename onto a name that exists replaces it.
    assert_eq!(owner.ask("write /target replaced"), "ok");
    store.rename("/dir", "/target").unwrap();
    assert_eq!(owner.ask("read /target"), "from-the-owner");
    let names: Vec<_> =
        store.readdir("/", None, 0).unwrap().into_iter().map(|e| e.name.into_vec()).collect();
    assert_eq!(names.len(), 4, "one entry per name: {names:?}");
    clean(&store);
}

#[test]
fn a_call_that_failed_after_a_guess_runs_again_reading_the_name() {
    let _serial = serial();
    // On a read-only open, opening an existing file with O_CREAT succeeds; creating fails.
    let (d, _owner) = owner_writing(["/there present".to_string()]);
    let store = client(d.path(), Options { read_only: true, ..Options::default() });
    store.stat("/").unwrap();
    let f = store.open("/there", &OpenOptions::new().read(true).create(true)).unwrap();
    let mut buf = [0u8; 16];
    let n = f.read_at(&mut buf, 0).unwrap();
    assert_eq!(&buf[..n], b"present");
    f.close().unwrap();
    let e = store.open("/absent", &OpenOptions::new().read(true).create(true)).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::ReadOnly, "{e}");
}

#[test]
fn guesses_stop_while_names_are_overwritten_and_start_again_for_new_ones() {
    let _serial = serial();
    let (d, mut owner) = owner_writing((0..40).map(|i| format!("/o{i} old")));
    let store = client(d.path(), Options::default());
    store.write_file("/warm", b"w").unwrap();
    // Names the client never read, overwritten: 3 round trips each (the name, the file's
    // inode, the commit); a wrong guess adds one (the commit that found the name). Guesses
    // stop after two such (always guessing: 40 wrong, 160 round trips).
    let (before, (_, wrong)) = (trips(), guesses());
    for i in 0..40 {
        store.write_file(format!("/o{i}"), b"new").unwrap();
    }
    let overwrites = trips() - before;
    assert_eq!(guesses().1 - wrong, 40, "each name read or guessed was there");
    assert!(overwrites <= 3 * 40 + 4, "{overwrites} round trips for 40 overwrites");
    // New names again: reads of names that turn out absent bring the guesses back.
    for i in 0..10 {
        store.write_file(format!("/n{i}"), b"new").unwrap();
    }
    let (before, (right, wrong)) = (trips(), guesses());
    for i in 10..30 {
        store.write_file(format!("/n{i}"), b"new").unwrap();
    }
    assert_eq!(trips() - before, 20, "new names once guesses came back");
    assert_eq!(guesses(), (right + 20, wrong));
    assert_eq!(owner.ask("read /o39"), "new");
    clean(&store);
}

#[test]
fn clients_racing_to_create_the_same_names_make_each_once() {
    // Four threads (each on its own connection) take the same new names as absent at once:
    // one commit per name wins, the others conflict, run again, and find it.
    let _serial = serial();
    let (d, mut owner) = owner_writing(["/seed x".to_string()]);
    let store = std::sync::Arc::new(client(d.path(), Options::default()));
    store.mkdir("/w", 0o755).unwrap();
    store.mkdir("/x", 0o755).unwrap();
    let (names, threads) = (100, 4);
    let go = std::sync::Arc::new(std::sync::Barrier::new(threads));
    let racers: Vec<_> = (0..threads)
        .map(|t| {
            let (store, go) = (store.clone(), go.clone());
            std::thread::spawn(move || {
                go.wait();
                let mut made = 0;
                for i in 0..names {
                    store.write_file(format!("/w/n{i}"), format!("from {t}").as_bytes()).unwrap();
                    let new = OpenOptions::new().write(true).create_new(true);
                    match store.open(format!("/x/n{i}"), &new) {
                        Ok(f) => {
                            f.close().unwrap();
                            made += 1;
                        }
                        Err(e) => assert_eq!(e.kind(), ErrorKind::Exists, "{e}"),
                    }
                }
                made
            })
        })
        .collect();
    let made: usize = racers.into_iter().map(|r| r.join().unwrap()).sum();
    assert_eq!(made, names, "each create_new name made exactly once");
    assert_eq!(store.readdir("/w", None, 0).unwrap().len(), names);
    assert_eq!(store.readdir("/x", None, 0).unwrap().len(), names);
    let data = owner.ask("read /w/n7");
    assert!(data.starts_with("from "), "{data}");
    clean(&store);
}
