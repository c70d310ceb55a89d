//! Reads answered from the read cache alone (`Backend::begin_cached`: a hot `stat`, `pread`
//! or `read_file` with no transaction) are exact: each call sees one committed state, never a
//! size from one commit and data from another, and never a state older than a commit that
//! returned before the call began. Run against RocksDB and memory, with a cache large enough
//! to hold everything and one so small that it evicts on nearly every fill.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use txvfs::{FileSystem, OpenOptions, Options, Store};

fn stores(dir: &std::path::Path) -> Vec<(String, Store)> {
    let mut out = Vec::new();
    for (name, cache) in [("large", 256u64 << 20), ("tiny", 2 << 10)] {
        let o = Options { cache_size: cache, ..Options::default() };
        let path = dir.join(name);
        let uri = format!("rocksdb:{}", path.display());
        out.push((format!("rocksdb, {name} cache"), Store::open_with(&uri, o.clone()).unwrap()));
        out.push((format!("memory, {name} cache"), Store::open_with("memory:", o).unwrap()));
    }
    out
}

/// Generation `g` of the file: `len(g)` bytes, each `g % 251`, over several 64 KiB blocks.
fn content(g: u64) -> Vec<u8> {
    let len = 1 + (g * 7919 % 200_000) as usize;
    vec![(g % 251) as u8; len]
}

fn check(what: &str, data: &[u8]) -> u64 {
    assert!(!data.is_empty(), "{what}: empty file");
    let b = data[0];
    assert!(data.iter().all(|&x| x == b), "{what}: bytes of two generations in one read");
    // The length must be one of this byte's generations.
    let g = (0..2000u64).find(|&g| g % 251 == b as u64 && content(g).len() == data.len());
    g.unwrap_or_else(|| panic!("{what}: {} bytes of {b}: no generation has that", data.len()))
}

#[test]
fn a_cached_read_sees_one_whole_commit_and_every_commit_before_it() {
    let dir = tempfile::tempdir().unwrap();
    for (name, store) in stores(dir.path()) {
        store.write_file("/f", &content(0)).unwrap();
        let done = Arc::new(AtomicBool::new(false));
        // The last generation whose write returned: a read that begins after must see it or
        // a later one.
        let acked = Arc::new(AtomicU64::new(0));
        let writer = {
            let (store, done, acked) = (store.clone(), done.clone(), acked.clone());
            std::thread::spawn(move || {
                for g in 1..1500u64 {
                    store.write_file("/f", &content(g)).unwrap();
                    acked.store(g, Ordering::SeqCst);
                }
                done.store(true, Ordering::SeqCst);
            })
        };
        let readers: Vec<_> = (0..2)
            .map(|_| {
                let (store, done, acked, name) =
                    (store.clone(), done.clone(), acked.clone(), name.clone());
                std::thread::spawn(move || {
                    let mut reads = 0u64;
                    let f = store.open("/f", &OpenOptions::new().read(true)).unwrap();
                    while !done.load(Ordering::SeqCst) {
                        let before = acked.load(Ordering::SeqCst);
                        let data = store.read_file("/f").unwrap();
                        let g = check(&format!("{name}: read_file"), &data);
                        assert!(g >= before, "{name}: read generation {g} after {before} returned");
                        // A handle opened before every write reads the newest data too.
                        let st = store.stat("/f").unwrap();
                        let mut buf = vec![0u8; 300_000];
                        let n = f.read_at(&mut buf, 0).unwrap();
                        let g2 = check(&format!("{name}: pread"), &buf[..n]);
                        assert!(g2 >= g && st.size as usize >= 1, "{name}: went back in time");
                        reads += 1;
                    }
                    reads
                })
            })
            .collect();
        writer.join().unwrap();
        let reads: u64 = readers.into_iter().map(|r| r.join().unwrap()).sum();
        assert!(reads > 10, "{name}: the readers ran ({reads})");
        assert_eq!(check(&name, &store.read_file("/f").unwrap()), 1499);
    }
}

#[test]
fn a_cached_stat_follows_renames_and_deletes_at_once() {
    let dir = tempfile::tempdir().unwrap();
    for (name, store) in stores(dir.path()) {
        store.mkdir("/d", 0o755).unwrap();
        for i in 0..300u64 {
            let (a, b) = (format!("/d/a{i}"), format!("/d/b{i}"));
            store.write_file(&a, &i.to_le_bytes()).unwrap();
            assert_eq!(store.stat(&a).unwrap().size, 8, "{name}");
            assert_eq!(store.read_file(&a).unwrap(), i.to_le_bytes(), "{name}");
            store.rename(&a, &b).unwrap();
            assert!(!store.exists(&a).unwrap(), "{name}: {a} after its rename");
            assert_eq!(store.read_file(&b).unwrap(), i.to_le_bytes(), "{name}");
            store.unlink(&b).unwrap();
            assert!(!store.exists(&b).unwrap(), "{name}: {b} after its unlink");
            assert!(store.read_file(&b).is_err(), "{name}: {b} read after its unlink");
        }
    }
}
