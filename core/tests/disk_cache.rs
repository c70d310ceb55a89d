//! The local disk cache of chunks (`Options::disk_cache`), over a "remote" backend: the memory
//! backend behind `FaultyBackend`, which counts reads (and can delay them). Each test checks
//! what reaches the backend, never timings (a hang check waits for a result with a generous
//! limit instead).

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;
use txvfs::kv::{Backend, FaultPlan, FaultyBackend, Limits, MemoryBackend};
use txvfs::{FileSystem, OpenOptions, Options, Store};

const BLOCK: usize = 64 << 10;

/// A fresh remote: memory behind a fault wrapper.
fn remote() -> (Arc<dyn Backend>, Arc<FaultPlan>) {
    let (b, plan) = FaultyBackend::new(Arc::new(MemoryBackend::new(Limits::UNLIMITED)));
    (b, plan)
}

fn cached(dir: &Path, size: u64) -> Options {
    // Few retries: a chunk missing from both cache and backend fails fast.
    let o = Options { sync: false, max_retries: 2, ..Options::default() };
    Options { disk_cache: Some(dir.to_path_buf()), disk_cache_size: size, ..o }
}

fn data(seed: u8, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u32).wrapping_mul(2654435761).rotate_left(seed as u32) as u8 ^ seed)
        .collect()
}

/// Reads `p` whole and waits for the cache to write what the read queued.
fn read(store: &Store, p: &str) -> Vec<u8> {
    let v = store.read_file(p).unwrap();
    store.disk_cache_flush();
    v
}

/// pwrite(2) through a handle of `fs` (a store or a transaction).
fn write_at(fs: &impl FileSystem, p: &str, off: u64, data: &[u8]) {
    let f = fs.open(p, &OpenOptions::new().write(true)).unwrap();
    f.write_at(data, off).unwrap();
    f.close().unwrap();
}

/// Deletes every chunk from the backend behind the file system's back: a read that still
/// gives the data got every chunk from the cache.
fn delete_chunks_in_backend(b: &dyn Backend) {
    let mut tx = b.begin().unwrap();
    tx.clear_range(b"C", b"D").unwrap();
    tx.commit(false).unwrap();
}

#[test]
fn hits_are_never_stale() {
    let dir = tempfile::tempdir().unwrap();
    let (backend, _) = remote();
    let store = Store::with_backend(backend.clone(), cached(dir.path(), 64 << 20), None).unwrap();
    let a = data(1, 4 * BLOCK + 100);
    store.write_file("/f", &a).unwrap();
    assert_eq!(read(&store, "/f"), a);
    assert_eq!(read(&store, "/f"), a);
    assert!(store.disk_cache_stats().unwrap().hits >= 5, "{:?}", store.disk_cache_stats());
    // Overwrite whole, in part, truncate, extend: every read gives the new bytes.
    let b = data(2, 4 * BLOCK + 100);
    store.write_file("/f", &b).unwrap();
    assert_eq!(read(&store, "/f"), b);
    let mut c = b.clone();
    c[BLOCK - 10..BLOCK + 10].fill(7);
    write_at(&store, "/f", BLOCK as u64 - 10, &[7; 20]);
    assert_eq!(read(&store, "/f"), c);
    store.truncate("/f", 2 * BLOCK as u64 + 5).unwrap();
    c.truncate(2 * BLOCK + 5);
    assert_eq!(read(&store, "/f"), c);
    // Within one transaction: a block written, then written in part and truncated, is read back
    // before anything of it is committed.
    let tx = store.begin().unwrap();
    write_at(&tx, "/f", 0, &vec![9; BLOCK]);
    write_at(&tx, "/f", 10, b"abc");
    tx.truncate("/f", BLOCK as u64 - 1).unwrap();
    let mut d = vec![9; BLOCK - 1];
    d[10..13].copy_from_slice(b"abc");
    assert_eq!(tx.read_file("/f").unwrap(), d);
    tx.commit().unwrap();
    assert_eq!(read(&store, "/f"), d);
    assert_eq!(
        txvfs::fsck::check(&*store.backend(), false, &mut |_| {}).unwrap().problems.len(),
        0
    );
    // The read before was served by the cache: it still is with the chunks gone.
    delete_chunks_in_backend(&*backend);
    assert_eq!(read(&store, "/f"), d);
}

#[test]
fn restart_keeps_hits() {
    let dir = tempfile::tempdir().unwrap();
    let (backend, _) = remote();
    let a = data(3, 8 * BLOCK);
    {
        let store =
            Store::with_backend(backend.clone(), cached(dir.path(), 64 << 20), None).unwrap();
        store.write_file("/f", &a).unwrap();
        assert_eq!(read(&store, "/f"), a);
    }
    delete_chunks_in_backend(&*backend);
    let store = Store::with_backend(backend.clone(), cached(dir.path(), 64 << 20), None).unwrap();
    assert_eq!(read(&store, "/f"), a);
    let s = store.disk_cache_stats().unwrap();
    assert_eq!(
        (s.hits, s.misses, s.disabled.clone()),
        (8, 0, None),
        "after a restart every chunk is a hit: {s:?}"
    );
}

#[test]
fn size_bound_is_respected() {
    let dir = tempfile::tempdir().unwrap();
    let (backend, _) = remote();
    let cap = 5 * BLOCK as u64;
    let store = Store::with_backend(backend, cached(dir.path(), cap), None).unwrap();
    let a = data(4, 40 * BLOCK);
    store.write_file("/f", &a).unwrap();
    for _ in 0..2 {
        assert_eq!(read(&store, "/f"), a);
    }
    let s = store.disk_cache_stats().unwrap();
    let on_disk: u64 = std::fs::read_dir(dir.path().join("entries"))
        .unwrap()
        .map(|e| e.unwrap().metadata().unwrap().len())
        .sum();
    assert!(
        s.bytes <= cap && on_disk <= cap && s.evictions > 0,
        "{s:?}, {on_disk} bytes on disk, limit {cap}"
    );
    assert_eq!(on_disk, s.bytes);
    // A smaller limit at the next open trims what is there.
    drop(store);
    let (backend, _) = remote();
    let store = Store::with_backend(backend, cached(dir.path(), 2 * BLOCK as u64), None).unwrap();
    assert!(store.disk_cache_stats().unwrap().bytes <= 2 * BLOCK as u64);
}

#[test]
fn a_scan_does_not_evict_the_hot_set() {
    let dir = tempfile::tempdir().unwrap();
    let (backend, _) = remote();
    // Room for 16 chunks; the hot set is 6, the scan 64.
    let store =
        Store::with_backend(backend.clone(), cached(dir.path(), 16 * (BLOCK as u64 + 100)), None)
            .unwrap();
    let (hot, scan) = (data(5, 6 * BLOCK), data(6, 64 * BLOCK));
    store.write_file("/hot", &hot).unwrap();
    store.write_file("/scan", &scan).unwrap();
    assert_eq!(read(&store, "/hot"), hot);
    assert_eq!(read(&store, "/hot"), hot);
    assert_eq!(read(&store, "/scan"), scan);
    let before = store.disk_cache_stats().unwrap();
    delete_chunks_in_backend(&*backend);
    assert_eq!(read(&store, "/hot"), hot, "the hot set after a scan must come from the cache");
    let after = store.disk_cache_stats().unwrap();
    assert_eq!(after.hits - before.hits, 6, "the hot set after a scan: {after:?}");
}

#[test]
fn damaged_cache_files_are_misses_not_data() {
    let dir = tempfile::tempdir().unwrap();
    let (backend, _) = remote();
    let a = data(7, 4 * BLOCK);
    {
        let store =
            Store::with_backend(backend.clone(), cached(dir.path(), 64 << 20), None).unwrap();
        store.write_file("/f", &a).unwrap();
        assert_eq!(read(&store, "/f"), a);
    }
    let mut files: Vec<_> =
        std::fs::read_dir(dir.path().join("entries")).unwrap().map(|e| e.unwrap().path()).collect();
    files.sort();
    assert_eq!(files.len(), 4);
    // Torn (cut short), a flipped byte in the data, another entry's file under this name, and
    // one emptied: each must read as a miss.
    let f0 = std::fs::read(&files[0]).unwrap();
    std::fs::write(&files[0], &f0[..f0.len() / 2]).unwrap();
    let mut f1 = std::fs::read(&files[1]).unwrap();
    let n = f1.len();
    f1[n - 5] ^= 1;
    std::fs::write(&files[1], &f1).unwrap();
    std::fs::copy(&files[3], &files[2]).unwrap();
    std::fs::write(&files[3], b"").unwrap();
    std::fs::write(dir.path().join("index"), b"garbage").unwrap();
    let store = Store::with_backend(backend, cached(dir.path(), 64 << 20), None).unwrap();
    assert_eq!(read(&store, "/f"), a);
    let s = store.disk_cache_stats().unwrap();
    assert_eq!((s.hits, s.errors), (0, 4), "{s:?}");
    // The damaged entries were replaced: the next read hits.
    assert_eq!(read(&store, "/f"), a);
    assert_eq!(store.disk_cache_stats().unwrap().hits, 4);
}

#[test]
fn stores_never_share_entries() {
    // Two stores with the same inode numbers and chunk ids, one cache directory in turn.
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (data(8, 2 * BLOCK), data(9, 2 * BLOCK));
    for content in [&a, &b, &a] {
        let (backend, _) = remote();
        let store = Store::with_backend(backend, cached(dir.path(), 64 << 20), None).unwrap();
        store.write_file("/f", content).unwrap();
        for _ in 0..2 {
            assert_eq!(&read(&store, "/f"), content);
        }
    }
}

#[test]
fn an_unusable_cache_dir_leaves_the_backend() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("file");
    std::fs::write(&file, b"").unwrap();
    let (backend, _) = remote();
    let store = Store::with_backend(backend, cached(&file.join("cache"), 1 << 20), None).unwrap();
    let a = data(10, 3 * BLOCK);
    store.write_file("/f", &a).unwrap();
    assert_eq!(read(&store, "/f"), a);
    let s = store.disk_cache_stats().unwrap();
    assert!(s.disabled.as_deref().is_some_and(|w| w.contains("file/cache")), "{s:?}");
    // One directory serves one open store at a time: a second one reads without it.
    let (b2, _) = remote();
    let first = Store::with_backend(b2, cached(dir.path(), 1 << 20), None).unwrap();
    let (b3, _) = remote();
    let second = Store::with_backend(b3, cached(dir.path(), 1 << 20), None).unwrap();
    assert!(first.disk_cache_stats().unwrap().disabled.is_none());
    assert!(second.disk_cache_stats().unwrap().disabled.is_some());
}

#[test]
fn a_slow_or_failing_cache_disk_falls_back_to_the_backend() {
    let dir = tempfile::tempdir().unwrap();
    let (backend, _) = remote();
    let options =
        Options { disk_cache_deadline: Duration::from_millis(20), ..cached(dir.path(), 64 << 20) };
    let store = Store::with_backend(backend, options, None).unwrap();
    let a = data(11, 4 * BLOCK);
    store.write_file("/f", &a).unwrap();
    assert_eq!(read(&store, "/f"), a);
    // Failing: every cached entry is an error, and the data still comes (from the backend).
    store.disk_cache_faults().unwrap().set_failing(true);
    assert_eq!(store.read_file("/f").unwrap(), a);
    assert!(store.disk_cache_stats().unwrap().errors >= 1);
    store.disk_cache_faults().unwrap().set_failing(false);
    assert_eq!(read(&store, "/f"), a);
    assert_eq!(read(&store, "/f"), a);
    // Hung: a read waits for the deadline, not for the disk (60 s here).
    store.disk_cache_faults().unwrap().set_delay(Duration::from_secs(60));
    let (tx, rx) = std::sync::mpsc::channel();
    let s2 = store.clone();
    std::thread::spawn(move || tx.send(s2.read_file("/f").unwrap()).unwrap());
    let got = rx.recv_timeout(Duration::from_secs(30)).expect("a read hung on the cache disk");
    assert_eq!(got, a);
    assert!(store.disk_cache_stats().unwrap().timeouts >= 1);
}

#[test]
fn uri_options_open_a_cache() {
    let dir = tempfile::tempdir().unwrap();
    let uri = format!("memory:?disk_cache={}&disk_cache_size=1000000", dir.path().display());
    let store = Store::open(&uri).unwrap();
    store.write_file("/f", &data(12, 2 * BLOCK)).unwrap();
    read(&store, "/f");
    assert_eq!(store.disk_cache_stats().unwrap().entries, 2);
    assert!(Store::open("memory:?disk_cache_size=lots").is_err());
    assert!(Store::open("memory:").unwrap().disk_cache_stats().is_none());
    // A second open of an open store shares its cache; asking for another one is refused.
    let (backend, _) = remote();
    let first =
        Store::with_backend(backend.clone(), cached(&dir.path().join("a"), 1 << 20), None).unwrap();
    let other = Store::with_backend(backend.clone(), cached(&dir.path().join("b"), 1 << 20), None);
    assert_eq!(other.unwrap_err().kind(), txvfs::ErrorKind::Invalid);
    let same = Store::with_backend(backend.clone(), Options::default(), None).unwrap();
    assert_eq!(same.disk_cache_stats(), first.disk_cache_stats());
}

/// Copies the directory tree `from` to `to`.
#[cfg(feature = "rocksdb")]
fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &to.join(e.file_name()));
        } else {
            std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
        }
    }
}

/// A store whose files are restored from a backup hands out the same chunk ids again, for
/// other data: what the cache kept of the lost history must not be served. (Also after a
/// crash, when the cache had no chance to record anything at close.)
#[cfg(feature = "rocksdb")]
#[test]
fn a_store_restored_from_a_backup_gets_no_stale_hits() {
    let dir = tempfile::tempdir().unwrap();
    let (db, backup, cache) =
        (dir.path().join("db"), dir.path().join("backup"), dir.path().join("cache"));
    let uri = format!("rocksdb:{}?mode=exclusive", db.display());
    let open = || Store::open_with(&uri, cached(&cache, 64 << 20)).unwrap();
    open().write_file("/a", b"first").unwrap();
    copy_dir(&db, &backup);
    let cache_files_before = dir.path().join("cache-before");
    copy_dir(&cache, &cache_files_before);
    let (x, y) = (data(13, 3 * BLOCK), data(14, 3 * BLOCK));
    {
        let store = open();
        store.write_file("/f", &x).unwrap();
        assert_eq!(read(&store, "/f"), x);
        assert_eq!(read(&store, "/f"), x);
    }
    // As after a crash: the entries were written, the cache's own files not updated since.
    for f in ["store", "index"] {
        let _ = std::fs::copy(cache_files_before.join(f), cache.join(f));
    }
    std::fs::remove_dir_all(&db).unwrap();
    copy_dir(&backup, &db);
    let store = open();
    store.write_file("/f", &y).unwrap();
    assert!(read(&store, "/f") == y, "stale data from the cache after a restore");
}

/// Files written with the cache on (blocks as chunks) read the same through a store opened
/// without it, and through a pack image built from the store.
#[test]
fn chunked_files_read_the_same_everywhere() {
    let dir = tempfile::tempdir().unwrap();
    let data_store = Arc::new(MemoryBackend::new(Limits::UNLIMITED));
    let (with_cache, _) = FaultyBackend::new(data_store.clone());
    let store =
        Store::with_backend(with_cache, cached(&dir.path().join("cache"), 64 << 20), None).unwrap();
    let a = data(15, 5 * BLOCK + 7);
    store.write_file("/f", &a).unwrap();
    let (plain, _) = FaultyBackend::new(data_store.clone());
    let other = Store::with_backend(plain, Options::default(), None).unwrap();
    assert!(other.disk_cache_stats().is_none());
    assert!(other.read_file("/f").unwrap() == a, "read without the cache");
    let image = dir.path().join("image");
    txvfs::pack::pack_backend(&*data_store, &image, &mut |_| {}).unwrap();
    let packed = Store::open(&format!("pack:{}", image.display())).unwrap();
    assert!(packed.read_file("/f").unwrap() == a, "read from a pack");
}

/// Opening the store does not hang on a cache directory that does not answer (here its lock
/// file is a FIFO, whose open(2) waits forever): it opens without the cache after 100 deadlines.
#[test]
fn a_hung_cache_dir_does_not_hang_the_open() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = std::ffi::CString::new(dir.path().join("lock").to_str().unwrap()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o600) }, 0);
    let options =
        Options { disk_cache_deadline: Duration::from_millis(10), ..cached(dir.path(), 1 << 20) };
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let (backend, _) = remote();
        let store = Store::with_backend(backend, options, None).unwrap();
        store.write_file("/f", b"data").unwrap();
        tx.send((store.read_file("/f").unwrap(), store.disk_cache_stats().unwrap().disabled))
            .unwrap();
    });
    let (got, disabled) =
        rx.recv_timeout(Duration::from_secs(30)).expect("the open hung on the cache directory");
    assert_eq!(got, b"data");
    assert!(disabled.is_some_and(|why| why.contains("did not answer")));
}

/// A clone of a named snapshot inherits the store's identity record (`M u`) and its counters,
/// so after the snapshot both hand out the same chunk ids for the same inode, for other data:
/// the two must not share cache entries.
#[cfg(feature = "rocksdb")]
#[test]
fn a_clone_and_its_store_never_share_entries() {
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("cache");
    let live_uri = format!("rocksdb:{}", dir.path().join("db").display());
    let (w, x, y) = (data(16, 3 * BLOCK), data(17, 3 * BLOCK), data(18, 3 * BLOCK));
    let snapshot_uri = {
        let live = Store::open_with(&live_uri, cached(&cache, 64 << 20)).unwrap();
        live.write_file("/f", &w).unwrap();
        live.create_named_snapshot("s").unwrap();
        live.named_snapshot_uri("s").unwrap()
    };
    // The store, opened again, overwrites /f: new chunk ids from the counter after the snapshot.
    {
        let live = Store::open_with(&live_uri, cached(&cache, 64 << 20)).unwrap();
        live.write_file("/f", &x).unwrap();
        assert_eq!(read(&live, "/f"), x);
        assert_eq!(read(&live, "/f"), x);
    }
    // The clone does the same from the same counter (the same ids, other data), with a cache
    // of its own; then it opens with the store's cache directory.
    let clone_dir = dir.path().join("clone");
    drop(
        Store::create_clone(&snapshot_uri, clone_dir.to_str().unwrap(), Options::default())
            .unwrap(),
    );
    let clone =
        Store::open_with(clone_dir.to_str().unwrap(), cached(&dir.path().join("own"), 64 << 20))
            .unwrap();
    clone.write_file("/f", &y).unwrap();
    drop(clone);
    let clone = Store::open_with(clone_dir.to_str().unwrap(), cached(&cache, 64 << 20)).unwrap();
    assert!(read(&clone, "/f") == y, "the clone read its store's cached chunks");
}
