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

#[test]
fn watch_json_keeps_names_that_are_not_utf8() {
    // Issue 37: a name with a byte that is not UTF-8 (0xE9, "é" in Latin-1) came out as U+FFFD,
    // so a sync tool could not act on it. It comes as `path_b64` (the bytes in base64) instead
    // of `path`; a name that is UTF-8 (quotes, backslash, a newline) stays a JSON string.
    use std::ffi::OsStr;
    use std::os::unix::ffi::OsStrExt;
    let d = tempfile::tempdir().unwrap();
    let store = d.path().join("st");
    ok(&store, &["init"]);
    let start = ok(&store, &["feed", "on"]);
    let latin1 = OsStr::from_bytes(b"/caf\xe9");
    let odd = "/a \"b\"\\c\nd";
    for args in [vec![OsStr::new("mkdir"), latin1], vec![OsStr::new("mv"), latin1, OsStr::new(odd)]]
    {
        let o = Command::new(BIN)
            .env_remove("TXVFS_STORE")
            .arg("--store")
            .arg(&store)
            .args(&args)
            .output()
            .unwrap();
        assert!(o.status.success(), "{args:?}: {}", String::from_utf8_lossy(&o.stderr));
    }
    let out = ok(&store, &["watch", "--since", start.trim(), "--json", "--count", "2"]);
    let lines: Vec<serde_json::Value> =
        out.lines().map(|l| serde_json::from_str(l).expect(l)).collect();
    assert_eq!(lines.len(), 2, "{out}");
    let (created, renamed) = (&lines[0], &lines[1]);
    assert_eq!(created["kind"], "created", "{out}");
    assert_eq!(created.get("path"), None, "{out}");
    assert_eq!(created["path_b64"], "L2NhZuk=", "{out}");
    assert_eq!(created["to"], serde_json::Value::Null, "{out}");
    assert_eq!(renamed["kind"], "renamed", "{out}");
    assert_eq!(renamed["path_b64"], "L2NhZuk=", "{out}");
    assert_eq!(renamed["to"], odd, "{out}");
    assert_eq!(renamed.get("to_b64"), None, "{out}");
    assert!(renamed["ino"].as_u64().is_some_and(|i| i > 0), "{out}");
    assert!(renamed["cursor"].as_str().is_some_and(|c| c.starts_with("txvfs-c1-")), "{out}");
}
