//! Pages lent to SQLite instead of copied (`xFetch`/`xUnfetch`, with `PRAGMA mmap_size`): a
//! handle's lends, each a [`Lent`] buffer of the store's read cache held until SQLite gives
//! the page back, and the limit SQLite sets (`SQLITE_FCNTL_MMAP_SIZE`: pages past it, or all
//! pages when it is 0, are read with xRead). What may be lent is decided by [`super::Db`].

use super::stats;
use std::collections::HashMap;
use std::sync::atomic::Ordering;
use txvfs::Lent;

/// The largest limit kept, as SQLite's default `SQLITE_MAX_MMAP_SIZE` caps the unix VFS's.
pub const MAX_MMAP_SIZE: u64 = 0x7fff_0000;

/// One handle's outstanding lends, by the address SQLite was given.
#[derive(Default)]
pub struct Lends {
    limit: u64,
    /// Address → the buffer and how many times it is lent (two fetches of one page in one
    /// read transaction may get the same buffer).
    out: HashMap<usize, (Lent, usize)>,
}

impl Lends {
    /// The limit in bytes (0: nothing is lent).
    pub fn limit(&self) -> u64 {
        self.limit
    }

    /// Sets the limit (capped at [`MAX_MMAP_SIZE`]).
    pub fn set_limit(&mut self, bytes: u64) {
        self.limit = bytes.min(MAX_MMAP_SIZE);
    }

    /// True when `[off, off + len)` is within the limit.
    pub fn allows(&self, off: u64, len: usize) -> bool {
        len > 0 && off.checked_add(len as u64).is_some_and(|end| end <= self.limit)
    }

    /// Keeps `lent` until [`Lends::give_back`] of the address returned.
    pub fn keep(&mut self, lent: Lent) -> *const u8 {
        let p = lent.as_ptr();
        self.out.entry(p as usize).or_insert((lent, 0)).1 += 1;
        let s = stats();
        s.lends.fetch_add(1, Ordering::Relaxed);
        s.lent.fetch_add(1, Ordering::Relaxed);
        p
    }

    /// xUnfetch of address `p`: releases one lend of it. False when `p` was not lent.
    pub fn give_back(&mut self, p: *const u8) -> bool {
        let Some((_, n)) = self.out.get_mut(&(p as usize)) else { return false };
        *n -= 1;
        if *n == 0 {
            self.out.remove(&(p as usize));
        }
        stats().lent.fetch_sub(1, Ordering::Relaxed);
        true
    }

    /// How many lends are outstanding.
    pub fn outstanding(&self) -> usize {
        self.out.values().map(|(_, n)| n).sum()
    }
}

impl Drop for Lends {
    /// A handle that closes releases what SQLite did not give back.
    fn drop(&mut self) {
        stats().lent.fetch_sub(self.outstanding() as u64, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::super::{open_store, Db, Level, LockResult};

    fn page(p: *const u8) -> Vec<u8> {
        // SAFETY: a lent address holds 4096 bytes until it is given back.
        unsafe { std::slice::from_raw_parts(p, 4096) }.to_vec()
    }

    fn write_pages(db: &mut Db, fill: u8) {
        for level in [Level::Shared, Level::Reserved, Level::Exclusive] {
            assert_eq!(db.lock(level), LockResult::Ok);
        }
        for i in 0..4u8 {
            db.write(i as u64 * 4096, &[fill + i; 4096]).unwrap();
        }
        db.commit().unwrap();
        db.unlock(Level::None).unwrap();
    }

    #[test]
    fn a_database_cut_then_extended_in_one_transaction_commits_zeros_between() {
        // (An overlay test, here for the engine's test helpers.) Four pages, then one
        // transaction cuts the file to one page and writes the fourth again: pages 2 and 3
        // must read as zeros, before and after the commit (they kept their old bytes).
        let store = open_store(Some("memory:")).unwrap();
        let mut db = Db::open(store.clone(), "/cut.db", true, false, None).unwrap();
        write_pages(&mut db, 10);
        for level in [Level::Shared, Level::Reserved, Level::Exclusive] {
            assert_eq!(db.lock(level), LockResult::Ok);
        }
        db.truncate(4096).unwrap();
        db.write(3 * 4096, &[42; 4096]).unwrap();
        let mut buf = vec![1; 4096];
        db.read(4096, &mut buf).unwrap();
        assert_eq!(buf, vec![0; 4096], "a cut page read back its old bytes");
        db.commit().unwrap();
        db.unlock(Level::None).unwrap();
        let on_disk = txvfs::FileSystem::read_file(&store.store, "/cut.db").unwrap();
        assert_eq!(on_disk.len(), 4 * 4096);
        assert_eq!(&on_disk[..4096], &[10; 4096]);
        assert!(on_disk[4096..3 * 4096].iter().all(|&b| b == 0), "the commit kept old bytes");
        assert_eq!(&on_disk[3 * 4096..], &[42; 4096]);
    }

    #[test]
    fn lent_pages_are_the_snapshot_and_outlive_commits_and_the_handle() {
        let store = open_store(Some("memory:")).unwrap();
        let mut a = Db::open(store.clone(), "/lend.db", true, false, None).unwrap();
        let mut b = Db::open(store, "/lend.db", true, false, None).unwrap();
        write_pages(&mut b, 10);
        assert_eq!(a.lock(Level::Shared), LockResult::Ok);
        assert_eq!(a.fetch(4096, 4096), None, "mmap_size 0: nothing is lent");
        assert_eq!(a.mmap_limit(Some(1 << 20)), 0);
        let p = a.fetch(4096, 4096).expect("a cached page is lent");
        let mut buf = vec![0; 4096];
        a.read(4096, &mut buf).unwrap();
        assert_eq!(page(p), buf);
        assert_eq!(a.fetch(12288, 8192), None, "past the end of the file");
        // b commits over the page while a reads its snapshot: the lent page does not change,
        // and a new fetch in a's snapshot gives the same page.
        write_pages(&mut b, 20);
        assert_eq!(page(p), vec![11; 4096]);
        let q = a.fetch(4096, 4096).expect("lent again");
        assert_eq!(q, p, "the snapshot lends the page it lent before");
        assert_eq!(a.lent_out(), 2);
        assert!(a.unfetch(q));
        a.unlock(Level::None).unwrap();
        assert_eq!(page(p), vec![11; 4096], "valid until xUnfetch, past the transaction");
        assert!(a.unfetch(p));
        assert!(!a.unfetch(p), "given back once");
        // A new read transaction lends the new pages; within a write transaction, never a
        // page the overlay holds.
        for level in [Level::Shared, Level::Reserved, Level::Exclusive] {
            assert_eq!(a.lock(level), LockResult::Ok);
        }
        let p2 = a.fetch(8192, 4096).expect("lent in a write transaction");
        assert_eq!(page(p2), vec![22; 4096]);
        a.write(4096, &[1; 4096]).unwrap();
        assert_eq!(a.fetch(4096, 4096), None, "the overlay holds the page");
        a.truncate(8192).unwrap();
        assert_eq!(a.fetch(8192, 4096), None, "the overlay cut the file short");
        assert_eq!(a.lent_out(), 1);
        assert_eq!(a.mmap_limit(Some(0)), 1 << 20);
        assert_eq!(a.mmap_limit(None), 1 << 20, "no change while a page is lent (as unix)");
        assert_eq!(page(p2), vec![22; 4096]);
        let before = super::stats().lent.load(std::sync::atomic::Ordering::Relaxed);
        a.close().unwrap();
        let after = super::stats().lent.load(std::sync::atomic::Ordering::Relaxed);
        assert_eq!(before - after, 1, "closing the handle released its lend");
        b.close().unwrap();
    }
}
