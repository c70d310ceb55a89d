//! The `txvfs` command on a store that a library process holds open (issue 15): this test
//! process opens the store through the core (so it owns the files and serves the socket) and
//! the commands run as clients; each side sees the other's commits, and `fsck` is clean while
//! the library keeps committing.

use std::io::Write;
use std::process::{Command, Output, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use txvfs::{FileSystem, Store};

const BIN: &str = env!("CARGO_BIN_EXE_txvfs");

fn txvfs(store: &std::path::Path, args: &[&str], stdin: Option<&[u8]>) -> Output {
    let mut c = Command::new(BIN);
    c.env_remove("TXVFS_STORE").arg("--store").arg(store).args(args);
    c.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped());
    let mut child = c.spawn().unwrap();
    let mut input = child.stdin.take().unwrap();
    if let Some(data) = stdin {
        input.write_all(data).unwrap();
    }
    drop(input);
    child.wait_with_output().unwrap()
}

fn ok(store: &std::path::Path, args: &[&str]) -> String {
    let o = txvfs(store, args, None);
    assert!(
        o.status.success(),
        "txvfs {args:?}: {}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8(o.stdout).unwrap()
}

#[test]
fn commands_share_a_store_a_library_process_holds() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("st");
    let uri = path.to_str().unwrap();
    let store = Store::open(uri).unwrap();
    store.mkdir_all("/lib", 0o755).unwrap();
    store.write_file("/lib/a", b"from the library\n").unwrap();

    // The command sees the library's commit, and the library sees the command's.
    assert_eq!(ok(&path, &["ls", "/lib"]), "a\n");
    assert_eq!(ok(&path, &["cat", "/lib/a"]), "from the library\n");
    let o = txvfs(&path, &["put", "-", "/from-cli"], Some(b"from the command\n"));
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(store.read_file("/from-cli").unwrap(), b"from the command\n");
    store.write_file("/lib/b", b"later\n").unwrap();
    assert_eq!(ok(&path, &["ls", "/lib"]), "a\nb\n");

    // fsck reads the whole store at one snapshot while the library keeps committing (files
    // created, rewritten with data in chunks, renamed, removed): every run is clean.
    let stop = Arc::new(AtomicBool::new(false));
    let rounds = Arc::new(AtomicU64::new(0));
    let writer = {
        let (store, stop, rounds) = (store.clone(), stop.clone(), rounds.clone());
        std::thread::spawn(move || {
            let big: Vec<u8> = (0..200_000u32).map(|i| (i % 251) as u8).collect();
            let mut i = 0u64;
            while !stop.load(Ordering::Relaxed) {
                store
                    .write_file(format!("/lib/f{}", i % 20), &big[..(i as usize * 997) % big.len()])
                    .unwrap();
                store.rename(format!("/lib/f{}", i % 20), format!("/lib/g{}", i % 7)).unwrap();
                if i % 3 == 0 {
                    let _ = store.unlink(format!("/lib/g{}", i % 5));
                }
                i += 1;
                rounds.store(i, Ordering::Relaxed);
            }
        })
    };
    for _ in 0..5 {
        let before = rounds.load(Ordering::Relaxed);
        assert_eq!(ok(&path, &["fsck"]), "clean\n");
        while rounds.load(Ordering::Relaxed) < before + 3 {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
    }
    stop.store(true, Ordering::Relaxed);
    writer.join().unwrap();
    assert_eq!(ok(&path, &["fsck"]), "clean\n");
    drop(store);
    // Alone again, the command owns the store itself and finds everything.
    assert_eq!(ok(&path, &["cat", "/from-cli"]), "from the command\n");
    assert_eq!(ok(&path, &["fsck"]), "clean\n");
}

#[test]
fn a_command_opening_the_store_keeps_a_file_the_library_holds_open_after_unlink() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("st");
    let store = Store::open(path.to_str().unwrap()).unwrap();
    store.write_file("/x", &vec![5u8; 100_000]).unwrap();
    let f = store.open("/x", &txvfs::OpenOptions::new().read(true)).unwrap();
    store.unlink("/x").unwrap();
    assert_eq!(ok(&path, &["ls", "/"]), "");
    let mut buf = vec![0u8; 100_000];
    assert_eq!(f.read_at(&mut buf, 0).unwrap(), 100_000);
    assert!(buf.iter().all(|&b| b == 5));
    f.close().unwrap();
}

#[test]
fn a_command_creates_lists_and_deletes_snapshots_of_a_store_a_library_process_holds() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("st");
    let store = Store::open(path.to_str().unwrap()).unwrap();
    store.write_file("/a", b"v1").unwrap();

    // The command is a client of this process: the owner creates the snapshot for it.
    let uri = ok(&path, &["snapshot", "create", "v1"]);
    let uri = uri.trim();
    assert!(uri.ends_with("?snapshot=v1"), "{uri}");
    store.write_file("/a", b"v2").unwrap();
    assert_eq!(ok(&path, &["snapshot", "list"]), format!("v1\t{uri}\n"));
    assert_eq!(store.named_snapshots().unwrap(), ["v1"]);
    let snap = Store::open(uri).unwrap();
    assert_eq!(snap.read_file("/a").unwrap(), b"v1");
    drop(snap);
    let o = txvfs(&path, &["snapshot", "create", "v1"], None);
    assert_eq!(o.status.code(), Some(libc::EEXIST), "{}", String::from_utf8_lossy(&o.stderr));
    let o = txvfs(&path, &["snapshot", "create", "no/slash"], None);
    assert_eq!(o.status.code(), Some(libc::EINVAL), "{}", String::from_utf8_lossy(&o.stderr));
    ok(&path, &["snapshot", "delete", "v1"]);
    assert_eq!(ok(&path, &["snapshot", "list"]), "");
    assert_eq!(store.read_file("/a").unwrap(), b"v2");
}
