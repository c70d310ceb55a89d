//! Real processes that use an `fdb:` store run to their exit: they must exit with their own
//! status, never die of a signal (FoundationDB's network thread is stopped at exit before its
//! library's static destructors run, also after a panic). And a missing or wrong client
//! library is a clear error, not a crash.
//!
//! Each child is this test binary started again, running only the `child` helper with the
//! environment variable `TXVFS_FDB_CHILD` saying what to do.

use std::os::unix::process::ExitStatusExt;
use std::process::{Command, Output};
use txvfs::{FileSystem, Store};

const CHILD: &str = "TXVFS_FDB_CHILD";

/// The child's side, run by the tests below in a process of its own; does nothing otherwise.
/// `TXVFS_FDB_CHILD` is `write URI`, `panic URI` (write, then panic) or `open URI` (print the
/// result of opening).
#[test]
#[ignore = "helper: run by the other tests in a child process"]
fn child() {
    let Ok(what) = std::env::var(CHILD) else { return };
    let (mode, uri) = what.split_once(' ').expect("MODE URI");
    if mode == "open" {
        match Store::open(uri) {
            Ok(_) => println!("CHILD-RESULT: opened"),
            Err(e) => println!("CHILD-RESULT: {e}"),
        }
        return;
    }
    let store = Store::open(uri).unwrap();
    store.write_file("/written", b"by the child").unwrap();
    assert_eq!(store.read_file("/written").unwrap(), b"by the child");
    if mode == "panic" {
        panic!("a deliberate panic after using an fdb: store");
    }
}

fn run_child(what: &str, env: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args(["--exact", "child", "--ignored", "--nocapture", "--test-threads=1"]);
    cmd.env(CHILD, what);
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().unwrap()
}

fn describe(out: &Output) -> String {
    format!(
        "status {:?} (signal {:?})\nstdout:\n{}\nstderr:\n{}",
        out.status.code(),
        out.status.signal(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

fn child_result(out: &Output) -> String {
    let stdout = String::from_utf8_lossy(&out.stdout);
    let line = stdout.lines().find_map(|l| l.split_once("CHILD-RESULT: ").map(|(_, r)| r));
    line.unwrap_or_else(|| panic!("no result from the child: {}", describe(out))).to_string()
}

fn cluster_uri(name: &str) -> String {
    let cluster = std::env::var("TXVFS_FDB_CLUSTER_FILE")
        .expect("the FoundationDB tests need a cluster: run tests/foundationdb/run");
    let run =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos();
    format!("fdb:{cluster}?prefix=process-{name}-{run}")
}

#[test]
#[ignore = "needs a FoundationDB cluster: tests/foundationdb/run"]
fn a_process_that_used_an_fdb_store_exits_cleanly() {
    let uri = cluster_uri("exit");
    for _ in 0..3 {
        let out = run_child(&format!("write {uri}"), &[]);
        assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    }
    // What the child wrote is there for another process.
    let store = Store::open(&uri).unwrap();
    assert_eq!(store.read_file("/written").unwrap(), b"by the child");
}

#[test]
#[ignore = "needs a FoundationDB cluster: tests/foundationdb/run"]
fn a_process_that_panicked_after_using_an_fdb_store_exits_with_its_status() {
    let uri = cluster_uri("panic");
    let out = run_child(&format!("panic {uri}"), &[]);
    assert_eq!(out.status.code(), Some(101), "{}", describe(&out));
    assert!(describe(&out).contains("a deliberate panic"), "{}", describe(&out));
}

#[test]
fn a_missing_client_library_is_a_clear_error() {
    let missing = "/nonexistent/dir/libfdb_c.so";
    let out = run_child("open fdb:?prefix=x", &[("TXVFS_FDB_LIB", missing)]);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let msg = child_result(&out);
    assert!(msg.contains(missing), "names what was searched: {msg}");
    assert!(msg.contains("client package"), "says how to install it: {msg}");
    assert!(msg.contains("TXVFS_FDB_LIB"), "names the variable: {msg}");
}

#[test]
fn a_library_that_is_not_foundationdb_is_a_clear_error() {
    // Any shared library without FoundationDB's functions: the C library this test links.
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
    let libc = maps
        .lines()
        .filter_map(|l| l.split_whitespace().nth(5))
        .find(|p| p.contains("/libc.so") || p.contains("/libc-"))
        .expect("libc in /proc/self/maps")
        .to_string();
    let out = run_child("open fdb:?prefix=x", &[("TXVFS_FDB_LIB", &libc)]);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let msg = child_result(&out);
    assert!(msg.contains("is not FoundationDB's client library"), "{msg}");
    assert!(msg.contains("fdb_select_api_version_impl"), "{msg}");
}
