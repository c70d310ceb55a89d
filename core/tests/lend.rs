//! `File::lend`: bytes lent from the read cache instead of copied (what the SQLite VFS gives
//! SQLite for `xFetch`) are exactly what `read_at` reads at that moment, in a transaction's
//! snapshot as outside one, and never change while held, whatever commits meanwhile; where
//! that cannot be had, `lend` answers `None`. Run against RocksDB and memory.

use txvfs::{FileSystem, OpenOptions, Options, Store};

const BLOCK: usize = 64 << 10;

fn stores(dir: &std::path::Path) -> Vec<(&'static str, Store)> {
    let o = Options { cache_size: 64 << 20, ..Options::default() };
    let uri = format!("rocksdb:{}", dir.join("rocks").display());
    vec![
        ("rocksdb", Store::open_with(&uri, o.clone()).unwrap()),
        ("memory", Store::open_with("memory:", o).unwrap()),
    ]
}

fn read(f: &txvfs::File, off: u64, len: usize) -> Vec<u8> {
    let mut buf = vec![0; len];
    assert_eq!(f.read_at(&mut buf, off).unwrap(), len);
    buf
}

/// Four blocks, each byte a function of its offset and `g`.
fn content(g: u8) -> Vec<u8> {
    (0..4 * BLOCK).map(|i| (i / 4096) as u8 ^ g).collect()
}

#[test]
fn lent_bytes_are_what_a_read_gives_and_outlive_later_commits() {
    let dir = tempfile::tempdir().unwrap();
    for (name, store) in stores(dir.path()) {
        store.write_file("/f", &content(0)).unwrap();
        let f = store.open("/f", &OpenOptions::new().read(true)).unwrap();
        let off = (BLOCK + 8192) as u64;
        let lent = f.lend(off, 4096).unwrap().unwrap_or_else(|| panic!("{name}: not lent"));
        assert_eq!(&*lent, &read(&f, off, 4096)[..], "{name}");
        let before = lent.to_vec();
        // Another handle commits over the lent bytes: the lent bytes stay, a new lend sees it.
        store.write_file("/f", &content(1)).unwrap();
        assert_eq!(&*lent, &before[..], "{name}: lent bytes changed under their holder");
        let again = f.lend(off, 4096).unwrap().expect("lent again");
        assert_eq!(&*again, &read(&f, off, 4096)[..], "{name}");
        assert_ne!(&*again, &before[..], "{name}: the new lend shows the commit");

        // What cannot be lent exactly is not lent.
        assert!(f.lend(BLOCK as u64 - 10, 20).unwrap().is_none(), "{name}: across two blocks");
        assert!(f.lend((4 * BLOCK - 10) as u64, 20).unwrap().is_none(), "{name}: past the end");
        assert!(f.lend(0, 0).unwrap().is_none(), "{name}: nothing");
        store.write_file("/small", b"inline data").unwrap();
        let s = store.open("/small", &OpenOptions::new().read(true)).unwrap();
        assert!(s.lend(0, 4).unwrap().is_none(), "{name}: an inline file has no block");
        // A hole reads as zeros but has no stored block.
        let h =
            store.open("/hole", &OpenOptions::new().read(true).write(true).create(true)).unwrap();
        h.write_at(b"end", 3 * BLOCK as u64).unwrap();
        assert!(h.lend(0, 4096).unwrap().is_none(), "{name}: a hole");

        // In a transaction: its snapshot, and never its own writes.
        let tx = store.begin().unwrap();
        let t = tx.open("/f", &OpenOptions::new().read(true).write(true)).unwrap();
        let seen = read(&t, off, 4096);
        store.write_file("/f", &content(2)).unwrap();
        if let Some(l) = t.lend(off, 4096).unwrap() {
            assert_eq!(&*l, &seen[..], "{name}: a lend in a transaction reads its snapshot");
        }
        t.write_at(&[9; 10], 100).unwrap();
        assert!(t.lend(0, 4096).unwrap().is_none(), "{name}: the transaction wrote the block");
        drop(t);
        drop(tx);
    }
}

#[test]
fn lends_in_snapshots_are_exact_while_another_thread_commits() {
    let seed: u64 = 0x1e4d_2024;
    println!("seed {seed:#x}");
    let dir = tempfile::tempdir().unwrap();
    for (name, store) in stores(dir.path()) {
        store.write_file("/f", &content(0)).unwrap();
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let writer = {
            let (store, stop) = (store.clone(), stop.clone());
            std::thread::spawn(move || {
                let f = store.open("/f", &OpenOptions::new().write(true)).unwrap();
                let mut g = 1u8;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    let off = (g as usize * 4096 * 7) % (4 * BLOCK - 4096);
                    f.write_at(&[g; 4096], off as u64).unwrap();
                    g = g.wrapping_add(1);
                }
            })
        };
        let mut rng = seed;
        let mut next = || {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng
        };
        let (mut lends, mut held) = (0, Vec::new());
        for _ in 0..2000 {
            let tx = store.begin().unwrap();
            let t = tx.open("/f", &OpenOptions::new().read(true)).unwrap();
            let off = next() % (4 * BLOCK as u64 - 4096);
            let off = off - off % 512;
            let len = 512 * (1 + (next() % 8) as usize);
            let len = len.min(BLOCK - (off as usize % BLOCK));
            // Read first and let the writer commit: the lend must still give the snapshot.
            let seen = read(&t, off, len);
            std::thread::yield_now();
            if let Some(l) = t.lend(off, len).unwrap() {
                assert_eq!(&*l, &seen[..], "{name}: lend at {off}+{len}");
                lends += 1;
                held.push((l.to_vec(), l));
            }
            drop(t);
            drop(tx);
        }
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        writer.join().unwrap();
        println!("{name}: {lends} of 2000 reads lent");
        assert!(lends > 100, "{name}: only {lends} of 2000 reads were lent");
        for (copy, l) in &held {
            assert_eq!(&copy[..], &**l, "{name}: lent bytes changed while held");
        }
    }
}
