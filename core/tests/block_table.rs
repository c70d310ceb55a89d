//! A file handle's table of blocks (`fs/block_table.rs`: a hot `pread` outside a transaction
//! served from blocks the read cache lent, checked by one atomic load) never serves a stale
//! block: a write through the same handle, another handle, another thread, another `Store` of
//! the same backend, another process, a truncate, and a transaction's commit are all seen by
//! the next read; a transaction's own handle reads its writes and snapshot, not the table's.
//! Each test first checks that the table answers (repeated reads leave the read cache's hit
//! count alone), so that it proves something about the table.
#![cfg(feature = "rocksdb")]

mod agent;

use agent::Agent;
use txvfs::{FileSystem, OpenOptions, Options, Store};

#[test]
fn agent_main() {
    agent::agent_main();
}

/// Bytes of the test file: five 64 KiB blocks.
const LEN: usize = 5 << 16;

fn options() -> Options {
    Options { cache_size: 64 << 20, ..Options::default() }
}

/// A RocksDB store (shared, the default) and a memory store, each with a 64 MiB cache.
fn stores(dir: &std::path::Path) -> Vec<(&'static str, Store)> {
    let uri = format!("rocksdb:{}", dir.join("store").display());
    vec![
        ("rocksdb", Store::open_with(&uri, options()).unwrap()),
        ("memory", Store::open_with("memory:", options()).unwrap()),
    ]
}

fn hits(store: &Store) -> u64 {
    store.backend().read_cache().unwrap().stats().unwrap().hits
}

fn rw() -> OpenOptions {
    OpenOptions::new().read(true).write(true).create(true)
}

/// Reads `len` bytes at `off` through `f` (fewer at the end of the file).
fn pread(f: &txvfs::File, off: u64, len: usize) -> Vec<u8> {
    let mut buf = vec![0xeeu8; len];
    let n = f.read_at(&mut buf, off).unwrap();
    buf.truncate(n);
    buf
}

/// Checks that `got` is `want`, naming the first byte that differs.
#[track_caller]
fn expect(got: Vec<u8>, want: &[u8], what: &str) {
    if got != want {
        let at =
            got.iter().zip(want).position(|(a, b)| a != b).unwrap_or(got.len().min(want.len()));
        panic!(
            "{what}: read {} bytes, expected {}; first difference at {at}: {:?} instead of {:?}",
            got.len(),
            want.len(),
            got.get(at),
            want.get(at)
        );
    }
}

/// Reads every 4 KiB of the file through `f` twice and checks that the second pass was
/// answered by the handle's table (the read cache saw no hit).
fn warm(name: &str, store: &Store, f: &txvfs::File) {
    for _ in 0..2 {
        let before = hits(store);
        for off in (0..LEN as u64).step_by(4096) {
            pread(f, off, 4096);
        }
        if hits(store) == before {
            return;
        }
    }
    panic!("{name}: repeated reads were not answered by the handle's table");
}

#[test]
fn a_write_through_any_handle_or_thread_is_read_next() {
    let dir = tempfile::tempdir().unwrap();
    for (name, store) in stores(dir.path()) {
        store.write_file("/f", &[1u8; LEN]).unwrap();
        let reader = store.open("/f", &rw()).unwrap();
        let other = store.open("/f", &rw()).unwrap();
        warm(name, &store, &reader);
        // Another handle.
        other.write_at(&[2u8; 100], 3 << 16).unwrap();
        expect(pread(&reader, 3 << 16, 100), &[2u8; 100], &format!("{name}: another handle"));
        expect(pread(&reader, (3 << 16) + 100, 4), &[1u8; 4], name);
        // The handle itself.
        warm(name, &store, &reader);
        reader.write_at(&[3u8; 10], 5).unwrap();
        expect(
            pread(&reader, 0, 16),
            &[[1u8; 5], [3; 5], [3; 5], [1; 5]].concat()[..16],
            &format!("{name}: this handle"),
        );
        // Another thread, replacing the whole file (same inode) with a shorter one.
        warm(name, &store, &reader);
        let s = store.clone();
        std::thread::spawn(move || s.write_file("/f", &[4u8; 70_000]).unwrap()).join().unwrap();
        expect(pread(&reader, 0, 4096), &[4u8; 4096], &format!("{name}: another thread"));
        expect(pread(&reader, 69_000, 4096), &[4u8; 1000], &format!("{name}: the new size"));
        expect(pread(&reader, 3 << 16, 4096), &Vec::<u8>::new(), &format!("{name}: past the end"));
        // Unrelated commits move the version; the table's blocks stay right.
        store.write_file("/g", b"x").unwrap();
        expect(
            pread(&reader, 65_536, 8192),
            &[4u8; 70_000 - 65_536],
            &format!("{name}: after another commit"),
        );
    }
}

#[test]
fn a_write_followed_by_more_commits_than_the_cache_remembers_is_read_next() {
    let dir = tempfile::tempdir().unwrap();
    for (name, store) in stores(dir.path()) {
        store.write_file("/f", &[1u8; LEN]).unwrap();
        let reader = store.open("/f", &OpenOptions::new().read(true)).unwrap();
        let writer = store.open("/f", &rw()).unwrap();
        warm(name, &store, &reader);
        writer.write_at(&[2u8; 4], 2 << 16).unwrap();
        // The cache keeps the write sets of the last 128 commits (kv/cache.rs, RECENT).
        for i in 0..300u32 {
            store.write_file("/g", &i.to_le_bytes()).unwrap();
        }
        expect(pread(&reader, 2 << 16, 8), &[2, 2, 2, 2, 1, 1, 1, 1], name);
    }
}

#[test]
fn a_truncate_then_an_extension_reads_zeros_not_the_old_blocks() {
    let dir = tempfile::tempdir().unwrap();
    for (name, store) in stores(dir.path()) {
        store.write_file("/f", &[7u8; LEN]).unwrap();
        let reader = store.open("/f", &OpenOptions::new().read(true)).unwrap();
        let writer = store.open("/f", &rw()).unwrap();
        warm(name, &store, &reader);
        writer.set_len(100_000).unwrap();
        expect(pread(&reader, 98_000, 4096), &[7u8; 2000], &format!("{name}: truncated"));
        expect(pread(&reader, 200_000, 4096), &Vec::<u8>::new(), &format!("{name}: past the end"));
        writer.set_len(LEN as u64).unwrap();
        expect(
            pread(&reader, 98_000, 4096),
            &[vec![7u8; 2000], vec![0; 2096]].concat(),
            &format!("{name}: extended"),
        );
        for off in [131_072u64, 200_000, (LEN - 4096) as u64] {
            expect(pread(&reader, off, 4096), &[0u8; 4096], &format!("{name}: hole at {off}"));
        }
    }
}

#[test]
fn a_transaction_reads_its_own_writes_and_others_read_its_commit() {
    let dir = tempfile::tempdir().unwrap();
    for (name, store) in stores(dir.path()) {
        store.write_file("/f", &[1u8; LEN]).unwrap();
        let reader = store.open("/f", &OpenOptions::new().read(true)).unwrap();
        warm(name, &store, &reader);
        let tx = store.begin().unwrap();
        let in_tx = tx.open("/f", &rw()).unwrap();
        expect(pread(&in_tx, 1 << 16, 8), &[1u8; 8], name);
        in_tx.write_at(&[9u8; 8], 1 << 16).unwrap();
        expect(pread(&in_tx, 1 << 16, 8), &[9u8; 8], &format!("{name}: its own write"));
        expect(pread(&reader, 1 << 16, 8), &[1u8; 8], &format!("{name}: not committed yet"));
        // A commit from outside after the transaction began: its snapshot keeps the old data.
        store.write_file("/g", b"x").unwrap();
        let other = store.open("/f", &rw()).unwrap();
        warm(name, &store, &reader);
        drop(in_tx);
        tx.commit().unwrap();
        expect(pread(&reader, 1 << 16, 8), &[9u8; 8], &format!("{name}: its commit"));
        warm(name, &store, &reader);
        other.write_at(&[5u8; 8], 2 << 16).unwrap();
        let tx = store.begin().unwrap();
        let in_tx = tx.open("/f", &OpenOptions::new().read(true)).unwrap();
        other.write_at(&[6u8; 8], 2 << 16).unwrap();
        expect(pread(&in_tx, 2 << 16, 8), &[5u8; 8], &format!("{name}: the snapshot"));
        expect(pread(&reader, 2 << 16, 8), &[6u8; 8], &format!("{name}: the latest"));
        drop(in_tx);
        tx.rollback();
    }
}

#[test]
fn a_write_through_another_store_of_the_process_is_read_next() {
    let dir = tempfile::tempdir().unwrap();
    let uri = format!("rocksdb:{}", dir.path().join("store").display());
    let store = Store::open_with(&uri, options()).unwrap();
    let second = Store::open_with(&uri, options()).unwrap();
    store.write_file("/f", &[1u8; LEN]).unwrap();
    let reader = store.open("/f", &OpenOptions::new().read(true)).unwrap();
    for round in 0..20u8 {
        warm("rocksdb", &store, &reader);
        let off = (round as u64 % 5) << 16;
        second.open("/f", &rw()).unwrap().write_at(&[round + 10; 64], off + 512).unwrap();
        expect(pread(&reader, off + 512, 64), &[round + 10; 64], &format!("round {round}"));
    }
}

#[test]
fn a_write_of_another_process_is_read_next() {
    let dir = tempfile::tempdir().unwrap();
    let uri = dir.path().join("store").display().to_string();
    // This process owns the store (its handles have tables); the agent is a client.
    let store = Store::open_with(&uri, options()).unwrap();
    let mut client = Agent::start(&uri, "agent_main");
    assert_eq!(client.role, "client");
    store.write_file("/f", &[b'a'; LEN]).unwrap();
    let reader = store.open("/f", &OpenOptions::new().read(true)).unwrap();
    for (round, c) in ['b', 'c', 'd', 'e'].into_iter().enumerate() {
        warm("rocksdb", &store, &reader);
        let len = LEN - round * 50_000;
        assert_eq!(client.ask(&format!("fill /f {c} {len}")), "ok");
        expect(pread(&reader, 0, 4096), &[c as u8; 4096], &format!("round {round}"));
        let last = (len - 100) as u64;
        expect(pread(&reader, last, 4096), &[c as u8; 100], &format!("round {round}"));
    }
}

#[test]
fn a_tiny_cache_lends_little_and_reads_stay_exact() {
    let o = Options { cache_size: 100 << 10, ..Options::default() };
    let store = Store::open_with("memory:", o).unwrap();
    store.write_file("/f", &[1u8; LEN]).unwrap();
    let reader = store.open("/f", &OpenOptions::new().read(true)).unwrap();
    let writer = store.open("/f", &rw()).unwrap();
    for round in 0..30u8 {
        for off in (0..LEN as u64).step_by(20_000) {
            assert_eq!(pread(&reader, off, 100)[0], if round == 0 { 1 } else { round + 1 });
        }
        writer.write_at(&[round + 2; LEN], 0).unwrap();
    }
}

/// How many of one read per 64 KiB block of the first `blocks` blocks the handle's table
/// answered (the read cache saw no hit), after a first pass that fills the table.
fn answered_by_table(store: &Store, f: &txvfs::File, blocks: u64) -> usize {
    for off in (0..blocks).map(|b| b << 16) {
        pread(f, off, 4096);
    }
    (0..blocks)
        .filter(|b| {
            let before = hits(store);
            pread(f, b << 16, 4096);
            hits(store) == before
        })
        .count()
}

#[test]
fn handles_hold_at_most_half_the_cache_and_give_it_back_when_closed() {
    let o = Options { cache_size: 1 << 20, ..Options::default() };
    let store = Store::open_with("memory:", o).unwrap();
    // 12 blocks: the cache (1 MiB) holds them all, the tables (512 KiB) not.
    store.write_file("/f", &[1u8; 12 << 16]).unwrap();
    let first = store.open("/f", &OpenOptions::new().read(true)).unwrap();
    let n = answered_by_table(&store, &first, 12);
    assert!(n > 0 && n < 12, "the first handle's table answered {n} of 12 reads");
    let second = store.open("/f", &OpenOptions::new().read(true)).unwrap();
    assert_eq!(answered_by_table(&store, &second, 12), 0, "the budget is the first's");
    drop(first);
    assert_eq!(answered_by_table(&store, &second, 12), n, "the first's share came back");
}
