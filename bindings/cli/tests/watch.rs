//! `txvfs feed on` and `txvfs watch [PATH] [--since CURSOR] [--json]` against a RocksDB store.

use std::process::{Command, Output};

const BIN: &str = env!("CARGO_BIN_EXE_txvfs");

fn run(store: &std::path::Path, args: &[&str]) -> Output {
    Command::new(BIN)
        .env_remove("TXVFS_STORE")
        .arg("--store")
        .arg(store)
        .args(args)
        .output()
        .unwrap()
}

fn ok(store: &std::path::Path, args: &[&str]) -> String {
    let o = run(store, args);
    assert!(o.status.success(), "txvfs {args:?}: {}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8(o.stdout).unwrap()
}

#[test]
fn watch_prints_one_line_per_change_from_a_cursor() {
    let d = tempfile::tempdir().unwrap();
    let store = d.path().join("st");
    ok(&store, &["init"]);
    let start = ok(&store, &["feed", "on"]);
    let start = start.trim();
    assert!(start.starts_with("txvfs-c1-"), "{start}");
    ok(&store, &["mkdir", "/d"]);
    let host = d.path().join("f");
    std::fs::write(&host, b"data").unwrap();
    ok(&store, &["put", host.to_str().unwrap(), "/d/f"]);
    ok(&store, &["mv", "/d/f", "/g"]);
    let all = ok(&store, &["watch", "--since", start, "--count", "4"]);
    let lines: Vec<Vec<&str>> = all.lines().map(|l| l.split(' ').skip(1).collect()).collect();
    assert_eq!(
        lines,
        [
            vec!["created", "/d"],
            vec!["created", "/d/f"],
            vec!["written", "/d/f"],
            vec!["renamed", "/d/f", "->", "/g"]
        ]
    );
    // Resuming from a line's cursor (its transaction's) gives what the next ones did, once.
    let second = all.lines().nth(1).unwrap().split(' ').next().unwrap();
    let rest = ok(&store, &["watch", "--since", second, "--idle", "0.3"]);
    assert_eq!(rest.lines().count(), 1, "{rest}");
    // A path filter and JSON.
    let json = ok(&store, &["watch", "/g", "--since", start, "--json", "--idle", "0.3"]);
    assert_eq!(json.lines().count(), 1, "{json}");
    assert!(json.contains("\"kind\":\"renamed\",\"path\":\"/d/f\",\"to\":\"/g\""), "{json}");
    // A bad cursor: one clear line, nothing printed.
    let o = run(&store, &["watch", "--since", "yesterday"]);
    assert!(!o.status.success() && o.stdout.is_empty());
    let err = String::from_utf8(o.stderr).unwrap();
    assert!(err.starts_with("txvfs: not a change feed cursor"), "{err}");
}
