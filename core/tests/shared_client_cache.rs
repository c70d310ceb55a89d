//! A client process's read cache (kv/shared/client_cache.rs) never lies: what another process
//! committed is seen as soon as its commit returned, a transaction that read a cached value
//! the owner changed meanwhile conflicts, and a new owner (failover) empties it.
#![cfg(feature = "rocksdb")]

mod agent;

use agent::Agent;
use std::sync::Arc;
use txvfs::kv::{self, run_with_retries, Backend};
use txvfs::{ErrorKind, FileSystem};

#[test]
fn agent_main() {
    agent::agent_main();
}

const AGENT: &str = "agent_main";

/// This process as a client with a 1 MiB cache; the agent owns the store.
fn client_of(owner_dir: &std::path::Path) -> Arc<dyn Backend> {
    let b = kv::open(owner_dir.to_str().unwrap()).unwrap();
    assert!(!b.role().is_primary(), "the test process must be a client");
    b.read_cache().unwrap().set_capacity(1 << 20);
    b
}

fn get(b: &dyn Backend, k: &[u8]) -> Option<Vec<u8>> {
    run_with_retries(b, 20, false, |t| t.get(k)).unwrap()
}

fn hits(b: &dyn Backend) -> u64 {
    b.read_cache().unwrap().stats().map_or(0, |s| s.hits)
}

#[test]
fn every_commit_of_another_process_is_seen_once_it_returned() {
    let d = tempfile::tempdir().unwrap();
    let mut owner = Agent::start(d.path().to_str().unwrap(), AGENT);
    assert_eq!(owner.ask("set same s"), "ok");
    let b = client_of(d.path());
    let before = hits(&*b);
    for i in 0..300 {
        assert_eq!(owner.ask(&format!("set k {i}")), "ok");
        assert_eq!(get(&*b, b"k"), Some(i.to_string().into_bytes()), "round {i}");
        assert_eq!(get(&*b, b"same").as_deref(), Some(&b"s"[..]));
    }
    // The unchanged key came from the cache (else this test proves nothing about it).
    assert!(hits(&*b) - before >= 290, "hits: {}", hits(&*b) - before);
}

#[test]
fn a_commit_acknowledged_to_another_client_is_seen_too() {
    let d = tempfile::tempdir().unwrap();
    let uri = d.path().to_str().unwrap().to_string();
    let mut owner = Agent::start(&uri, AGENT);
    let mut other = Agent::start(&uri, AGENT);
    assert_eq!(other.role, "client");
    let b = client_of(d.path());
    for i in 0..200 {
        let who = if i % 2 == 0 { &mut other } else { &mut owner };
        assert_eq!(who.ask(&format!("set k {i}")), "ok");
        assert_eq!(get(&*b, b"k"), Some(i.to_string().into_bytes()), "round {i}");
    }
}

#[test]
fn a_cached_read_changed_by_another_process_makes_the_commit_conflict() {
    let d = tempfile::tempdir().unwrap();
    let mut owner = Agent::start(d.path().to_str().unwrap(), AGENT);
    assert_eq!(owner.ask("set k 1"), "ok");
    let b = client_of(d.path());
    assert_eq!(get(&*b, b"k").as_deref(), Some(&b"1"[..]));
    let before = hits(&*b);
    let mut t = b.begin().unwrap();
    assert_eq!(t.get(b"k").unwrap().as_deref(), Some(&b"1"[..]));
    assert_eq!(hits(&*b), before + 1, "the read must come from the cache");
    assert_eq!(owner.ask("set k 2"), "ok");
    t.set(b"x", b"from a stale read").unwrap();
    let e = t.commit(false).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Conflict, "{e}");
    assert_eq!(get(&*b, b"x"), None, "a failed commit changes nothing");
    assert_eq!(owner.ask("get x"), "none");
}

#[test]
fn a_read_only_transaction_never_mixes_two_snapshots() {
    let d = tempfile::tempdir().unwrap();
    let mut owner = Agent::start(d.path().to_str().unwrap(), AGENT);
    assert_eq!(owner.ask("set a 1"), "ok");
    let b = client_of(d.path());
    assert_eq!(get(&*b, b"a").as_deref(), Some(&b"1"[..]));
    let mut t = b.begin().unwrap();
    assert_eq!(t.get(b"a").unwrap().as_deref(), Some(&b"1"[..]));
    // After the read: a and then b change; b is not cached, so reading it reaches the owner,
    // which reads it at the transaction's snapshot (absent), or, if it no longer keeps that
    // snapshot, sees that a changed since and fails the transaction. Never b = 2.
    assert_eq!(owner.ask("set a 2"), "ok");
    assert_eq!(owner.ask("set b 2"), "ok");
    match t.get(b"b") {
        Err(e) => assert_eq!(e.kind(), ErrorKind::Conflict, "{e}"),
        Ok(None) => {}
        Ok(v) => panic!("read b = {v:?} after a = 1: two snapshots in one transaction"),
    }
    drop(t);
    // Snapshot reads add no conflict: they may mix, by definition.
    let mut t = b.begin().unwrap();
    assert_eq!(t.snapshot_get(b"a").unwrap().as_deref(), Some(&b"2"[..]));
    assert_eq!(t.get(b"b").unwrap().as_deref(), Some(&b"2"[..]));
}

#[test]
fn a_new_owner_empties_every_client_s_cache() {
    let d = tempfile::tempdir().unwrap();
    let uri = d.path().to_str().unwrap().to_string();
    let mut owner = Agent::start(&uri, AGENT);
    assert_eq!(owner.ask("set k 1"), "ok");
    let mut other = Agent::start(&uri, AGENT);
    assert_eq!(other.role, "client");
    let b = client_of(d.path());
    assert_eq!(get(&*b, b"k").as_deref(), Some(&b"1"[..]));
    assert_eq!(get(&*b, b"k").as_deref(), Some(&b"1"[..]));
    owner.kill();
    // The other client takes over (its versions start anew) and commits.
    let answer = (0..100)
        .map(|_| other.ask("set k 3"))
        .find(|a| a == "ok")
        .expect("the other client takes over and commits");
    assert_eq!(answer, "ok");
    assert_eq!(get(&*b, b"k").as_deref(), Some(&b"3"[..]));
}

#[test]
fn files_written_by_the_owner_read_fresh_through_the_file_system() {
    let d = tempfile::tempdir().unwrap();
    let uri = d.path().to_str().unwrap().to_string();
    let mut owner = Agent::start(&uri, AGENT);
    assert_eq!(owner.ask("mkdir /d"), "ok");
    assert_eq!(owner.ask("write /d/f v0"), "ok");
    let s = txvfs::Store::open(&uri).unwrap();
    for i in 1..100 {
        let data = format!("version{i}-{}", "x".repeat(i));
        assert_eq!(s.read_file("/d/f").unwrap().len(), s.stat("/d/f").unwrap().size as usize);
        assert_eq!(owner.ask(&format!("write /d/f {data}")), "ok");
        assert_eq!(s.stat("/d/f").unwrap().size, data.len() as u64, "round {i}");
        assert_eq!(s.read_file("/d/f").unwrap(), data.as_bytes(), "round {i}");
    }
    assert_eq!(owner.ask("unlink /d/f"), "ok");
    assert_eq!(s.stat("/d/f").unwrap_err().kind(), ErrorKind::NotFound);
    assert!(s.backend().read_cache().unwrap().stats().is_some_and(|c| c.hits > 0));
}

#[test]
fn a_client_reads_its_own_commits_from_its_cache() {
    let d = tempfile::tempdir().unwrap();
    let mut owner = Agent::start(d.path().to_str().unwrap(), AGENT);
    let b = client_of(d.path());
    for i in 0..50 {
        let v = format!("mine {i}");
        run_with_retries(&*b, 20, false, |t| {
            t.set(b"k", v.as_bytes())?;
            t.clear(b"gone")?;
            // Its own writes, read back in the transaction.
            assert_eq!(t.get(b"k")?.as_deref(), Some(v.as_bytes()));
            assert_eq!(t.get(b"gone")?, None);
            Ok(())
        })
        .unwrap();
        let before = hits(&*b);
        assert_eq!(get(&*b, b"k").as_deref(), Some(v.as_bytes()));
        assert_eq!(get(&*b, b"gone"), None);
        assert_eq!(hits(&*b), before + 2, "round {i}: what it committed comes from its cache");
        // A later commit of another process still wins.
        assert_eq!(owner.ask(&format!("set k theirs{i}")), "ok");
        assert_eq!(get(&*b, b"k"), Some(format!("theirs{i}").into_bytes()));
    }
}

#[test]
fn large_range_replies_in_reused_memory_are_exact() {
    // Replies up to 2 MiB come in the connection's reply area (kv/shared/area.rs), larger
    // ones through the socket into the memory of the last one (protocol::read_frame_into, the
    // server's spare buffer): each must carry its own bytes, whatever came before it.
    let d = tempfile::tempdir().unwrap();
    let owner = Agent::start(d.path().to_str().unwrap(), AGENT);
    let b = client_of(d.path());
    for (round, (n, len)) in
        [(40usize, 60_000usize), (3, 100), (17, 70_000), (40, 1_000)].into_iter().enumerate()
    {
        let value = |i: usize| vec![(round * 50 + i) as u8; len + i];
        run_with_retries(&*b, 20, false, |t| {
            t.clear_range(b"r", b"s")?;
            for i in 0..n {
                t.set(format!("r{i:03}").as_bytes(), &value(i))?;
            }
            Ok(())
        })
        .unwrap();
        let pairs =
            run_with_retries(&*b, 20, false, |t| t.get_range(b"r", b"s", 0, false)).unwrap();
        assert_eq!(pairs.len(), n, "round {round}");
        for (i, (k, v)) in pairs.iter().enumerate() {
            assert_eq!(k, format!("r{i:03}").as_bytes());
            assert!(*v == value(i), "round {round}, value {i}");
        }
        assert_eq!(get(&*b, b"r000"), Some(value(0)));
    }
    // The large ones came through the reply area this process passed to the owner.
    let maps = std::fs::read_to_string(format!("/proc/{}/maps", owner.pid())).unwrap();
    assert!(maps.contains("txvfs-reply-area"), "the owner maps no reply area");
}

#[test]
fn a_client_s_cached_blocks_follow_the_owner_s_writes() {
    // A file of several 64 KiB blocks: a client's read fills its cache with them (from the
    // owner's range reply), its next read copies them from there, and every write of the
    // owner's is seen whole by the next read.
    let d = tempfile::tempdir().unwrap();
    let uri = d.path().to_str().unwrap().to_string();
    let mut owner = Agent::start(&uri, AGENT);
    let s = txvfs::Store::open(&uri).unwrap();
    let mut hits_seen = 0;
    for round in 0..30usize {
        let c = (b'a' + (round % 26) as u8) as char;
        let n = 200_000 + 7_919 * round;
        assert_eq!(owner.ask(&format!("fill /big {c} {n}")), "ok");
        for pass in 0..2 {
            let before = s.backend().read_cache().unwrap().stats().unwrap().hits;
            let data = s.read_file("/big").unwrap();
            assert_eq!(data.len(), n, "round {round} pass {pass}");
            assert!(data.iter().all(|&b| b == c as u8), "round {round} pass {pass}: stale bytes");
            let after = s.backend().read_cache().unwrap().stats().unwrap().hits;
            if pass == 1 {
                hits_seen += after - before;
            }
        }
    }
    assert!(hits_seen >= 30 * 4, "the second reads came from the cache ({hits_seen} hits)");
}

/// The names a client lists in `/d`, and whether the listing crossed the socket.
fn listing(s: &txvfs::Store) -> (Vec<String>, bool) {
    let before = kv::round_trips();
    let names = s
        .readdir("/d", None, 0)
        .unwrap()
        .into_iter()
        .map(|e| String::from_utf8(e.name.into_vec()).unwrap())
        .collect();
    (names, kv::round_trips() != before)
}

#[test]
fn a_client_s_hot_listing_comes_from_its_cache_and_follows_every_change() {
    // A directory a client listed is kept whole in its cache (kv/shared/client_cache.rs):
    // the next listing crosses no socket, and each change another process commits (a create,
    // an unlink, a rename in or out) is in the next listing.
    let d = tempfile::tempdir().unwrap();
    let uri = d.path().to_str().unwrap().to_string();
    let mut owner = Agent::start(&uri, AGENT);
    let mut other = Agent::start(&uri, AGENT);
    assert_eq!(other.role, "client");
    assert_eq!(owner.ask("mkdir /d"), "ok");
    for i in 0..50 {
        assert_eq!(owner.ask(&format!("write /d/f{i:02} x")), "ok");
    }
    let s = txvfs::Store::open(&uri).unwrap();
    assert!(!s.backend().role().is_primary());
    let mut want: Vec<String> = (0..50).map(|i| format!("f{i:02}")).collect();
    assert_eq!(listing(&s).0, want);
    assert_hot(&s, &want, "the first listing");
    let changes = [
        ("write /d/new x", "new", true),
        ("unlink /d/f07", "f07", false),
        ("rename /d/f08 /elsewhere", "f08", false),
        ("rename /d/new /d/renamed", "new", false),
    ];
    for (round, (cmd, name, added)) in changes.into_iter().enumerate() {
        let who = if round % 2 == 0 { &mut owner } else { &mut other };
        assert_eq!(who.ask(cmd), "ok", "{cmd}");
        if added {
            want.push(name.to_string());
        } else {
            want.retain(|n| n != name);
        }
        if cmd.ends_with("/d/renamed") {
            want.push("renamed".to_string());
        }
        want.sort();
        assert_eq!(listing(&s).0, want, "after {cmd}");
        assert_hot(&s, &want, cmd);
    }
}

/// Lists `/d` again until a listing crosses no socket (a background commit of another process,
/// such as a liveness record, may make the cache ask once more): each must be `want`, and
/// one of five must come from the cache.
fn assert_hot(s: &txvfs::Store, want: &[String], after: &str) {
    for _ in 0..5 {
        let (names, crossed) = listing(s);
        assert_eq!(names, want, "after {after}, listed again");
        if !crossed {
            return;
        }
    }
    panic!("after {after}: five listings in a row crossed the socket");
}

#[test]
fn a_transaction_that_listed_from_the_cache_conflicts_with_a_change_to_the_listing() {
    // A listing read from the cache joins the transaction's reads like a key does: when the
    // transaction reaches the owner (BEGIN_AT), a commit that changed the directory since
    // makes it fail, as it would had the listing come from the owner.
    let d = tempfile::tempdir().unwrap();
    let uri = d.path().to_str().unwrap().to_string();
    let mut owner = Agent::start(&uri, AGENT);
    assert_eq!(owner.ask("mkdir /d"), "ok");
    assert_eq!(owner.ask("write /d/a x"), "ok");
    let s = txvfs::Store::open(&uri).unwrap();
    assert_eq!(listing(&s).0, ["a"]);
    // A transaction whose listing came from the cache (a background commit of another
    // process may make one ask the owner: then another try).
    let mut tries = 0;
    let tx = loop {
        let tx = s.begin().unwrap();
        let before = kv::round_trips();
        let names: Vec<_> =
            tx.readdir("/d", None, 0).unwrap().into_iter().map(|e| e.name).collect();
        assert_eq!(names, ["a"]);
        if kv::round_trips() == before {
            break tx;
        }
        tries += 1;
        assert!(tries < 5, "five listings in a row crossed the socket");
    };
    assert_eq!(owner.ask("write /d/b x"), "ok");
    // BEGIN_AT goes with the first write: the conflict shows there, or at the commit.
    let e = match tx.write_file("/count", b"1") {
        Err(e) => e,
        Ok(()) => tx.commit().unwrap_err(),
    };
    assert_eq!(e.kind(), ErrorKind::Conflict, "{e}");
    assert_eq!(owner.ask("read /count"), "error /count: no such file or directory");
}
