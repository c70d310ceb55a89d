//! Path resolution and first-touch `stat` stay exact while the read cache answers them: the
//! dentries of every path component and the inodes that commits just wrote are served from
//! memory, and no change (rename of a directory, unlink and re-create, a commit from another
//! process on a shared store) may leave a stale answer. Run with a tiny cache that evicts on
//! nearly every fill, the default one, and none.
#![cfg(feature = "rocksdb")]

mod agent;

use agent::Agent;
use txvfs::{ErrorKind, FileSystem, Options, Store};

#[test]
fn agent_main() {
    agent::agent_main();
}

const AGENT: &str = "agent_main";

fn size(s: &Store, p: &str) -> Result<u64, ErrorKind> {
    s.stat(p).map(|st| st.size).map_err(|e| e.kind())
}

fn open(dir: &std::path::Path, cache_size: u64) -> Store {
    let o = Options { cache_size, ..Options::default() };
    Store::open_with(&format!("rocksdb:{}", dir.display()), o).unwrap()
}

/// The cache sizes the tests run with: tiny (evicts constantly), the default, off.
const CACHES: [u64; 3] = [16 << 10, 64 << 20, 0];

#[test]
fn rename_unlink_and_recreate_are_seen_by_the_next_stat() {
    for cache in CACHES {
        let d = tempfile::tempdir().unwrap();
        let s = open(d.path(), cache);
        s.mkdir("/w1", 0o755).unwrap();
        s.mkdir("/w1/d1", 0o755).unwrap();
        for i in 0..50 {
            s.write_file(format!("/w1/d1/f{i}"), &vec![1u8; i]).unwrap();
        }
        // First touch: each file once, right after the creates.
        for i in 0..50 {
            assert_eq!(size(&s, &format!("/w1/d1/f{i}")), Ok(i as u64), "cache {cache}");
        }
        s.rename("/w1/d1", "/w1/d2").unwrap();
        assert_eq!(size(&s, "/w1/d1/f7"), Err(ErrorKind::NotFound), "cache {cache}");
        assert_eq!(size(&s, "/w1/d2/f7"), Ok(7), "cache {cache}");
        s.unlink("/w1/d2/f7").unwrap();
        assert_eq!(size(&s, "/w1/d2/f7"), Err(ErrorKind::NotFound), "cache {cache}");
        s.write_file("/w1/d2/f7", b"recreated").unwrap();
        assert_eq!(size(&s, "/w1/d2/f7"), Ok(9), "cache {cache}");
        // A directory replaced by a file of the same name.
        s.mkdir("/w1/d3", 0o755).unwrap();
        s.write_file("/w1/d3/x", b"x").unwrap();
        assert_eq!(size(&s, "/w1/d3/x"), Ok(1));
        s.unlink("/w1/d3/x").unwrap();
        s.rmdir("/w1/d3").unwrap();
        s.write_file("/w1/d3", b"now a file").unwrap();
        assert_eq!(size(&s, "/w1/d3/x"), Err(ErrorKind::NotDir), "cache {cache}");
        assert_eq!(size(&s, "/w1/d3"), Ok(10), "cache {cache}");
    }
}

#[test]
fn a_commit_in_another_process_is_seen_by_the_next_stat() {
    for cache in CACHES {
        let d = tempfile::tempdir().unwrap();
        // This process owns the store (and its cache); the agent is a client.
        let s = open(d.path(), cache);
        s.mkdir("/w1", 0o755).unwrap();
        s.mkdir("/w1/d1", 0o755).unwrap();
        s.write_file("/w1/d1/f", b"abc").unwrap();
        assert_eq!(size(&s, "/w1/d1/f"), Ok(3));
        let uri = format!("rocksdb:{}", d.path().display());
        let mut other = Agent::start(&uri, AGENT);
        assert_eq!(other.role, "client");
        assert_eq!(other.ask("size /w1/d1/f"), "3");
        assert_eq!(other.ask("rename /w1/d1 /w1/d2"), "ok");
        assert_eq!(size(&s, "/w1/d1/f"), Err(ErrorKind::NotFound), "cache {cache}");
        assert_eq!(size(&s, "/w1/d2/f"), Ok(3), "cache {cache}");
        assert_eq!(other.ask("unlink /w1/d2/f"), "ok");
        assert_eq!(other.ask("write /w1/d2/f abcdef"), "ok");
        assert_eq!(size(&s, "/w1/d2/f"), Ok(6), "cache {cache}");
        // And the other way: the owner's changes, stat'ed by the client.
        s.rename("/w1/d2", "/w1/d3").unwrap();
        assert!(other.ask("size /w1/d2/f").starts_with("error"));
        assert_eq!(other.ask("size /w1/d3/f"), "6");
        assert_eq!(other.ask("mkdir /w1/d2"), "ok");
        assert_eq!(other.ask("write /w1/d2/f 1234"), "ok");
        assert_eq!(size(&s, "/w1/d2/f"), Ok(4), "cache {cache}");
    }
}
