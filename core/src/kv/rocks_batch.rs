//! The RocksDB write batch a store keeps from one commit to the next.
//!
//! `rocksdb::WriteBatch` is consumed by each write, so every commit allocated its batch anew: a
//! commit of 1 MiB allocated a fresh 1 MiB (above malloc's mmap threshold, so new pages every
//! time), and the page faults of filling it were a quarter of a sequential write's profile.
//! Kept, a batch is cleared after each write and keeps its buffer, up to [`KEEP_MAX`]; larger
//! ones are let go, so one huge commit does not pin its memory. Callers hold the engine's lock
//! on it: RocksDB's batch is not for two threads at once.

use librocksdb_sys as ffi;
use rocksdb::{AsColumnFamilyRef, AsRawPtr, ColumnFamily, DB};
use std::ffi::{c_char, CStr};

/// The largest buffer kept for the next commit.
const KEEP_MAX: usize = 4 << 20;

/// A write batch and the options of its writes (not synced: `sync` makes commits durable).
pub(crate) struct KeptBatch {
    raw: *mut ffi::rocksdb_writebatch_t,
    options: *mut ffi::rocksdb_writeoptions_t,
}

// SAFETY: the batch and the options are plain heap objects of RocksDB's, used by one thread at
// a time (the engine keeps the batch under a mutex).
unsafe impl Send for KeptBatch {}

fn cf_ptr(cf: Option<&ColumnFamily>) -> Option<*mut ffi::rocksdb_column_family_handle_t> {
    cf.map(|cf| cf.inner())
}

impl KeptBatch {
    pub(crate) fn new() -> KeptBatch {
        // SAFETY: plain constructors; the pointers are owned until `drop`.
        unsafe {
            let options = ffi::rocksdb_writeoptions_create();
            ffi::rocksdb_writeoptions_set_sync(options, 0);
            KeptBatch { raw: ffi::rocksdb_writebatch_create(), options }
        }
    }

    /// Adds a write of `key` (in family `cf`, or the default one).
    pub(crate) fn put(&mut self, cf: Option<&ColumnFamily>, key: &[u8], value: &[u8]) {
        let (k, kl, v, vl) = (key.as_ptr().cast(), key.len(), value.as_ptr().cast(), value.len());
        // SAFETY: RocksDB copies the slices into the batch.
        unsafe {
            match cf_ptr(cf) {
                Some(cf) => ffi::rocksdb_writebatch_put_cf(self.raw, cf, k, kl, v, vl),
                None => ffi::rocksdb_writebatch_put(self.raw, k, kl, v, vl),
            }
        }
    }

    /// Adds the deletion of `key`.
    pub(crate) fn delete(&mut self, cf: Option<&ColumnFamily>, key: &[u8]) {
        let (k, kl) = (key.as_ptr().cast(), key.len());
        // SAFETY: as in `put`.
        unsafe {
            match cf_ptr(cf) {
                Some(cf) => ffi::rocksdb_writebatch_delete_cf(self.raw, cf, k, kl),
                None => ffi::rocksdb_writebatch_delete(self.raw, k, kl),
            }
        }
    }

    /// Adds the deletion of every key in `[start, end)`.
    pub(crate) fn delete_range(&mut self, cf: Option<&ColumnFamily>, start: &[u8], end: &[u8]) {
        let (s, sl, e, el) = (start.as_ptr().cast(), start.len(), end.as_ptr().cast(), end.len());
        // SAFETY: as in `put`.
        unsafe {
            match cf_ptr(cf) {
                Some(cf) => ffi::rocksdb_writebatch_delete_range_cf(self.raw, cf, s, sl, e, el),
                None => ffi::rocksdb_writebatch_delete_range(self.raw, s, sl, e, el),
            }
        }
    }

    /// Writes the batch to `db` (its log and memtable, not synced), then empties it for the
    /// next commit, whether the write succeeded or not. Returns RocksDB's message on failure.
    pub(crate) fn write(&mut self, db: &DB) -> std::result::Result<(), String> {
        let mut err: *mut c_char = std::ptr::null_mut();
        // SAFETY: `db` is open for the call; RocksDB sets `err` to a string it allocated.
        let result = unsafe {
            ffi::rocksdb_write(db.as_raw_ptr(), self.options, self.raw, &mut err);
            if err.is_null() {
                Ok(())
            } else {
                let msg = CStr::from_ptr(err).to_string_lossy().into_owned();
                ffi::rocksdb_free(err.cast());
                Err(msg)
            }
        };
        self.reset();
        result
    }

    /// Empties the batch, keeping its buffer unless it grew beyond [`KEEP_MAX`].
    fn reset(&mut self) {
        let mut size = 0;
        // SAFETY: the batch is ours; `data` only reads its size.
        unsafe {
            ffi::rocksdb_writebatch_data(self.raw, &mut size);
            if size > KEEP_MAX {
                ffi::rocksdb_writebatch_destroy(self.raw);
                self.raw = ffi::rocksdb_writebatch_create();
            } else {
                ffi::rocksdb_writebatch_clear(self.raw);
            }
        }
    }
}

impl Drop for KeptBatch {
    fn drop(&mut self) {
        // SAFETY: both were created in `new` (or `reset`) and are not used again.
        unsafe {
            ffi::rocksdb_writebatch_destroy(self.raw);
            ffi::rocksdb_writeoptions_destroy(self.options);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rocksdb::Options;

    fn open(dir: &std::path::Path) -> DB {
        let mut o = Options::default();
        o.create_if_missing(true);
        o.create_missing_column_families(true);
        DB::open_cf(&o, dir, ["feed"]).unwrap()
    }

    #[test]
    fn a_kept_batch_writes_each_commit_once_in_its_family_even_after_a_failed_write() {
        let dir = tempfile::tempdir().unwrap();
        let db = open(dir.path());
        let feed = db.cf_handle("feed").unwrap();
        let mut wb = KeptBatch::new();
        wb.put(None, b"a", b"1");
        wb.put(None, b"b", b"2");
        wb.put(Some(feed), b"f", b"3");
        wb.write(&db).unwrap();
        wb.delete(None, b"a");
        wb.delete_range(None, b"b", b"c");
        wb.delete_range(Some(feed), b"f", b"g");
        wb.put(None, b"c", b"4");
        wb.write(&db).unwrap();
        assert_eq!(db.get(b"a").unwrap(), None);
        assert_eq!(db.get(b"b").unwrap(), None);
        assert_eq!(db.get(b"c").unwrap(), Some(b"4".to_vec()));
        assert_eq!(db.get_cf(feed, b"f").unwrap(), None);
        drop(db);

        // A write that fails (a read-only open) empties the batch too: its mutations must not
        // ride along with the next commit.
        let ro =
            DB::open_cf_for_read_only(&Options::default(), dir.path(), ["feed"], false).unwrap();
        wb.put(None, b"lost", b"x");
        assert!(wb.write(&ro).is_err());
        drop(ro);
        let db = open(dir.path());
        wb.put(None, b"kept", b"y");
        wb.write(&db).unwrap();
        assert_eq!(db.get(b"lost").unwrap(), None);
        assert_eq!(db.get(b"kept").unwrap(), Some(b"y".to_vec()));

        // A batch beyond KEEP_MAX is let go and a new one starts empty.
        let big = vec![7u8; KEEP_MAX + 1];
        wb.put(None, b"big", &big);
        wb.write(&db).unwrap();
        wb.put(None, b"after", b"z");
        wb.write(&db).unwrap();
        assert_eq!(db.get(b"big").unwrap().map(|v| v.len()), Some(KEEP_MAX + 1));
        assert_eq!(db.get(b"after").unwrap(), Some(b"z".to_vec()));
    }
}
