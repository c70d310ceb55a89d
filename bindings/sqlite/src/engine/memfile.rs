//! Files kept in process memory: rollback journals, super-journals and temp files. A txvfs
//! commit is atomic and the store never holds a page SQLite did not commit, so a journal is
//! never needed after the process ends (nothing to roll back).

use super::stats;
use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::{Arc, OnceLock};

/// A file in process memory.
#[derive(Default)]
pub struct MemFile {
    data: Mutex<Vec<u8>>,
}

/// Named memory files by (store identity, name): two stores may hold databases of one name,
/// each with its own journal. Names without a store (super-journals) use an empty identity.
type Key = (String, String);

fn mem_files() -> &'static Mutex<HashMap<Key, Arc<MemFile>>> {
    static S: OnceLock<Mutex<HashMap<Key, Arc<MemFile>>>> = OnceLock::new();
    S.get_or_init(Default::default)
}

fn key(store_id: &str, name: &str) -> Key {
    (store_id.to_string(), name.to_string())
}

impl MemFile {
    /// Opens (creating) the memory file `name` of store `store_id`, or an anonymous one for
    /// `None`.
    pub fn open(store_id: &str, name: Option<&str>, journal: bool) -> Arc<MemFile> {
        if journal {
            stats().journals.fetch_add(1, Ordering::Relaxed);
        }
        match name {
            None => Arc::new(MemFile::default()),
            Some(n) => mem_files().lock().entry(key(store_id, n)).or_default().clone(),
        }
    }

    /// True when the named memory file exists.
    pub fn exists(store_id: &str, name: &str) -> bool {
        mem_files().lock().contains_key(&key(store_id, name))
    }

    /// Deletes the named memory file; false if there was none.
    pub fn delete(store_id: &str, name: &str) -> bool {
        mem_files().lock().remove(&key(store_id, name)).is_some()
    }

    /// Reads at `off`; returns the bytes available (the rest of `buf` is zeroed).
    pub fn read(&self, off: u64, buf: &mut [u8]) -> usize {
        let d = self.data.lock();
        let n = (d.len() as u64).saturating_sub(off).min(buf.len() as u64) as usize;
        if n > 0 {
            buf[..n].copy_from_slice(&d[off as usize..off as usize + n]);
        }
        buf[n..].fill(0);
        n
    }

    /// Writes at `off`, growing the file.
    pub fn write(&self, off: u64, data: &[u8]) {
        let mut d = self.data.lock();
        let end = off as usize + data.len();
        if d.len() < end {
            d.resize(end, 0);
        }
        d[off as usize..end].copy_from_slice(data);
    }

    /// Sets the size.
    pub fn truncate(&self, size: u64) {
        self.data.lock().resize(size as usize, 0);
    }

    /// The size.
    pub fn size(&self) -> u64 {
        self.data.lock().len() as u64
    }
}
