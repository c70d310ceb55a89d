//! The VFS logic, free of SQLite types (the shape of mvsqlite's `mvfs`): stores and canonical
//! names ([`stores`]), SQLite's five lock levels keyed by inode ([`locks`]) and between
//! processes ([`lockbytes`]), database files whose writes stay in an overlay ([`overlay`],
//! [`db`]) until SQLite commits, pages lent to SQLite instead of copied ([`lends`]), commits
//! of one or several databases as one txvfs transaction ([`commit`]), the snapshots read
//! transactions read ([`snapshot`]), in-memory journal and temp files ([`memfile`]), and
//! `PRAGMA journal_mode` WAL and OFF ([`wal`]). `ffi` translates SQLite's callbacks into calls
//! on these types.

pub mod commit;
pub mod db;
pub mod lends;
pub mod lockbytes;
pub mod locks;
pub mod memfile;
pub mod overlay;
pub mod snapshot;
pub mod stores;
pub mod wal;

pub use db::Db;
pub use locks::{Level, LockResult};
pub use memfile::MemFile;
pub use overlay::Overlay;
pub use stores::{
    canonical_path, is_side_file, known_store, open_store, store_for_name, StoreRef, DEFAULT_STORE,
};

use std::sync::atomic::AtomicU64;
use std::sync::OnceLock;

/// Process-wide counters, readable with `PRAGMA txvfs_stats`.
#[derive(Default)]
pub struct Stats {
    /// txvfs transactions committed for SQLite write transactions.
    pub commits: AtomicU64,
    /// ... of which were durable (synchronous != OFF).
    pub durable: AtomicU64,
    /// ... of which came from SQLITE_FCNTL_COMMIT_ATOMIC_WRITE (batch atomic writes).
    pub batch: AtomicU64,
    /// ... of which committed more than one database (commit groups, super-journals).
    pub grouped: AtomicU64,
    /// Rollback journals opened (kept in memory).
    pub journals: AtomicU64,
    /// Pages lent to SQLite from the store's read cache instead of copied (xFetch).
    pub lends: AtomicU64,
    /// ... of which SQLite has not given back yet (xUnfetch), nor their handle closed.
    pub lent: AtomicU64,
}

/// The process's counters.
pub fn stats() -> &'static Stats {
    static S: OnceLock<Stats> = OnceLock::new();
    S.get_or_init(Stats::default)
}

#[cfg(test)]
mod tests {
    use super::*;
    use txvfs::FileSystem;

    #[test]
    fn readers_read_a_snapshot_and_do_not_block_writers() {
        let store = open_store(Some("memory:")).unwrap();
        let mut a = Db::open(store.clone(), "/locks.db", true, false, None).unwrap();
        let mut b = Db::open(store, "/locks.db", true, false, None).unwrap();
        assert_eq!(a.lock(Level::Shared), LockResult::Ok);
        assert_eq!(b.lock(Level::Shared), LockResult::Ok);
        assert_eq!(a.lock(Level::Reserved), LockResult::Ok);
        assert!(b.reserved_by_anyone());
        assert_eq!(b.lock(Level::Reserved), LockResult::Busy, "writers exclude each other");
        assert_eq!(a.lock(Level::Exclusive), LockResult::Ok, "b's read does not block a");
        a.write(0, b"hello").unwrap();
        a.commit().unwrap();
        a.unlock(Level::Shared).unwrap();
        let mut buf = [0u8; 5];
        b.read(0, &mut buf).unwrap();
        assert_eq!((&buf, b.size().unwrap()), (&[0u8; 5], 0), "b still reads its snapshot");
        a.read(0, &mut buf).unwrap();
        assert_eq!((&buf, a.size().unwrap()), (b"hello", 5), "a reads what it committed");
        a.unlock(Level::None).unwrap();
        assert_eq!(b.lock(Level::Reserved), LockResult::BusySnapshot, "b's snapshot is stale");
        assert_eq!(b.level(), Level::Shared);
        b.unlock(Level::None).unwrap();
        assert_eq!(b.lock(Level::Shared), LockResult::Ok);
        buf = [0; 5];
        b.read(0, &mut buf).unwrap();
        assert_eq!(&buf, b"hello");
        assert_eq!(b.lock(Level::Reserved), LockResult::Ok, "a new snapshot may write");
        a.close().unwrap();
        b.close().unwrap();
    }

    #[test]
    fn a_snapshot_outliving_the_time_limit_goes_on_or_ends_retryably() {
        // FoundationDB's 5 s limit: the snapshot's transaction is renewed by replaying its
        // reads; a page changed meanwhile ends the read transaction (SQLITE_BUSY_SNAPSHOT).
        let store = open_store(Some("memory:?limits=foundationdb")).unwrap();
        let mut a = Db::open(store.clone(), "/limit.db", true, false, None).unwrap();
        let mut b = Db::open(store, "/limit.db", true, false, None).unwrap();
        for level in [Level::Shared, Level::Reserved, Level::Exclusive] {
            assert_eq!(b.lock(level), LockResult::Ok);
        }
        b.write(0, &[1; 4096]).unwrap();
        b.commit().unwrap();
        b.unlock(Level::None).unwrap();
        assert_eq!(a.lock(Level::Shared), LockResult::Ok);
        let mut buf = [0u8; 4096];
        assert_eq!(a.size().unwrap(), 4096);
        a.read(0, &mut buf).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(5500));
        a.read(0, &mut buf).unwrap();
        assert_eq!(buf, [1; 4096], "nothing changed: the snapshot goes on past the limit");
        for level in [Level::Shared, Level::Reserved, Level::Exclusive] {
            assert_eq!(b.lock(level), LockResult::Ok);
        }
        b.write(0, &[2; 4096]).unwrap();
        b.commit().unwrap();
        b.unlock(Level::None).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(5500));
        let e = a.read(0, &mut buf).unwrap_err();
        assert!(e.is_retryable(), "a changed page ends the read transaction: {e}");
        a.unlock(Level::None).unwrap();
        assert_eq!(a.lock(Level::Shared), LockResult::Ok);
        a.read(0, &mut buf).unwrap();
        assert_eq!(buf, [2; 4096]);
        a.close().unwrap();
        b.close().unwrap();
    }

    #[test]
    fn the_snapshot_after_a_commit_is_of_that_commit_or_none() {
        // Without a transaction pinned at the commit, one taken later must still show the
        // commit's version: after another writer's commit it does not, and there is none.
        let store = open_store(Some("memory:")).unwrap();
        let st = &store.store;
        st.write_file("/after.db", b"mine").unwrap();
        let s = st.stat("/after.db").unwrap();
        let mine = (s.mtime_ns, s.size);
        let snap = snapshot::Snapshot::after_commit(st, "/after.db", None, mine).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(2));
        st.write_file("/after.db", b"theirs").unwrap();
        assert_eq!(snap.size().unwrap(), 4, "it reads the commit's state");
        let e = snapshot::Snapshot::after_commit(st, "/after.db", None, mine).err().unwrap();
        assert!(e.is_retryable(), "another writer committed since: {e}");
        // A transaction pinned at the commit is read, whatever came later.
        let tx = st.begin().unwrap();
        let pinned = snapshot::Snapshot::after_commit(st, "/after.db", Some(tx), mine);
        assert!(pinned.is_err(), "the version is checked in the pinned transaction too");
    }

    #[test]
    fn exclusive_locking_mode_waits_for_readers_and_keeps_them_out() {
        let store = open_store(Some("memory:")).unwrap();
        let mut a = Db::open(store.clone(), "/x.db", true, false, None).unwrap();
        let mut b = Db::open(store, "/x.db", true, false, None).unwrap();
        a.set_exclusive_mode(true);
        assert_eq!(b.lock(Level::Shared), LockResult::Ok);
        assert_eq!(a.lock(Level::Shared), LockResult::Ok);
        assert_eq!(a.lock(Level::Exclusive), LockResult::Busy, "b still reads");
        b.unlock(Level::None).unwrap();
        assert_eq!(b.lock(Level::Shared), LockResult::Busy, "a is on its way to EXCLUSIVE");
        assert_eq!(a.lock(Level::Exclusive), LockResult::Ok);
        a.unlock(Level::Shared).unwrap();
        // a keeps SHARED (and its cache) across transactions: b may not commit past it.
        assert_eq!(b.lock(Level::Shared), LockResult::Ok);
        assert_eq!(b.lock(Level::Reserved), LockResult::Ok);
        assert_eq!(b.lock(Level::Exclusive), LockResult::Busy, "a is a pinned reader");
        a.close().unwrap();
        assert_eq!(b.lock(Level::Exclusive), LockResult::Ok);
        b.close().unwrap();
    }

    #[test]
    fn hard_link_shares_the_lock_and_other_stores_do_not() {
        let store = open_store(Some("memory:?limits=foundationdb")).unwrap();
        store.store.write_file("/h.db", b"").unwrap();
        store.store.link("/h.db", "/h2.db").unwrap();
        let mut a = Db::open(store.clone(), "/h.db", false, false, None).unwrap();
        let mut b = Db::open(store, "/h2.db", false, false, None).unwrap();
        assert_eq!(a.lock(Level::Reserved), LockResult::Ok);
        assert_eq!(b.lock(Level::Reserved), LockResult::Busy);
        let other = open_store(Some("memory:?capacity=1000000000")).unwrap();
        let mut c = Db::open(other, "/h.db", true, false, None).unwrap();
        assert_eq!(
            c.lock(Level::Reserved),
            LockResult::Ok,
            "another store's /h.db is another file"
        );
        for d in [a, b, c] {
            d.close().unwrap();
        }
    }

    #[test]
    fn abandoned_write_transaction_reaches_nothing() {
        let store = open_store(Some("memory:")).unwrap();
        let mut a = Db::open(store.clone(), "/abandon.db", true, false, None).unwrap();
        a.lock(Level::Shared);
        a.lock(Level::Reserved);
        a.lock(Level::Exclusive);
        a.write(0, b"never committed").unwrap();
        a.sync().unwrap();
        a.unlock(Level::Shared).unwrap();
        a.close().unwrap();
        assert_eq!(store.store.read_file("/abandon.db").unwrap(), b"");
    }
}
