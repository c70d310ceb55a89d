//! Files private to this process: rollback journals, super-journals and temp files. A txvfs
//! commit is atomic and the store never holds a page SQLite did not commit, so a journal is
//! never needed after the process ends (nothing to roll back). A file starts in memory; past
//! [`SPILL_AT`] bytes its contents move to an unlinked file in the temp directory (the host
//! kernel's page cache, not this process's memory: a `VACUUM`'s journal and temp database are
//! each as large as the database), and back to memory if that file fails.

use super::stats;
use parking_lot::Mutex;
use std::collections::HashMap;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::sync::atomic::Ordering;
use std::sync::{Arc, OnceLock};

/// The size past which a file's contents leave process memory.
pub const SPILL_AT: u64 = 1 << 20;

/// A process-private file.
#[derive(Default)]
pub struct MemFile {
    body: Mutex<Body>,
}

enum Body {
    Mem(Vec<u8>),
    /// An unlinked temp file holding `size` bytes.
    Disk(File, u64),
}

impl Default for Body {
    fn default() -> Body {
        Body::Mem(Vec::new())
    }
}

/// An unlinked file in the temp directory, or None where none can be made.
fn anonymous_file() -> Option<File> {
    let dir = std::env::temp_dir();
    for attempt in 0..16u32 {
        let name = dir.join(format!(
            ".txvfs-sqlite-{}-{:x}-{attempt}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos())
        ));
        let opened =
            std::fs::OpenOptions::new().read(true).write(true).create_new(true).open(&name);
        match opened {
            Ok(f) => {
                let _ = std::fs::remove_file(&name);
                return Some(f);
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(_) => return None,
        }
    }
    None
}

impl Body {
    /// Moves the contents to an unlinked file (stays in memory where that fails).
    fn spill(&mut self) {
        if let Body::Mem(v) = self {
            if let Some(f) = anonymous_file() {
                if f.write_all_at(v, 0).is_ok() {
                    *self = Body::Disk(f, v.len() as u64);
                }
            }
        }
    }

    /// Moves the contents back into memory (after the file failed).
    fn unspill(&mut self) -> std::io::Result<()> {
        if let Body::Disk(f, size) = self {
            let mut v = vec![0u8; *size as usize];
            f.read_exact_at(&mut v, 0)?;
            *self = Body::Mem(v);
        }
        Ok(())
    }
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
    pub fn read(&self, off: u64, buf: &mut [u8]) -> std::io::Result<usize> {
        let b = self.body.lock();
        let size = match &*b {
            Body::Mem(v) => v.len() as u64,
            Body::Disk(_, size) => *size,
        };
        let n = size.saturating_sub(off).min(buf.len() as u64) as usize;
        if n > 0 {
            match &*b {
                Body::Mem(v) => buf[..n].copy_from_slice(&v[off as usize..off as usize + n]),
                Body::Disk(f, _) => f.read_exact_at(&mut buf[..n], off)?,
            }
        }
        buf[n..].fill(0);
        Ok(n)
    }

    /// Writes at `off`, growing the file (zeros fill a gap).
    pub fn write(&self, off: u64, data: &[u8]) -> std::io::Result<()> {
        let mut b = self.body.lock();
        let end = off + data.len() as u64;
        if matches!(&*b, Body::Mem(_)) && end > SPILL_AT {
            b.spill();
        }
        if let Body::Disk(f, size) = &mut *b {
            match f.write_all_at(data, off) {
                Ok(()) => {
                    *size = (*size).max(end);
                    return Ok(());
                }
                // A full or failing temp directory: on in memory, as before the spill.
                Err(_) => b.unspill()?,
            }
        }
        let Body::Mem(v) = &mut *b else { unreachable!("unspilled above") };
        if (v.len() as u64) < end {
            v.resize(end as usize, 0);
        }
        v[off as usize..end as usize].copy_from_slice(data);
        Ok(())
    }

    /// Sets the size (an emptied file comes back to memory).
    pub fn truncate(&self, size: u64) -> std::io::Result<()> {
        let mut b = self.body.lock();
        if size == 0 {
            *b = Body::Mem(Vec::new());
            return Ok(());
        }
        match &mut *b {
            Body::Mem(v) => v.resize(size as usize, 0),
            Body::Disk(f, s) => {
                if size < *s {
                    f.set_len(size)?;
                } else {
                    // Zeros past the old end, as a memory file grows.
                    f.set_len(*s)?;
                    f.set_len(size)?;
                }
                *s = size;
            }
        }
        Ok(())
    }

    /// The size.
    pub fn size(&self) -> u64 {
        match &*self.body.lock() {
            Body::Mem(v) => v.len() as u64,
            Body::Disk(_, size) => *size,
        }
    }

    /// True once the contents live in a temp file.
    pub fn spilled(&self) -> bool {
        matches!(&*self.body.lock(), Body::Disk(..))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_large_file_leaves_memory_and_reads_back_the_same() {
        let f = MemFile::open("", None, false);
        let page: Vec<u8> = (0..4096u32).map(|i| (i % 251) as u8).collect();
        for i in 0..(SPILL_AT / 4096) {
            f.write(i * 4096, &page).unwrap();
        }
        assert!(!f.spilled(), "at SPILL_AT bytes the file is still in memory");
        f.write(SPILL_AT + 100, b"tail").unwrap(); // past the end: a gap of zeros
        assert!(f.spilled());
        assert_eq!(f.size(), SPILL_AT + 104);
        let mut buf = vec![0xffu8; 4096];
        assert_eq!(f.read(4096, &mut buf).unwrap(), 4096);
        assert_eq!(buf, page);
        let mut gap = [0xffu8; 104];
        assert_eq!(f.read(SPILL_AT, &mut gap).unwrap(), 104);
        assert_eq!(&gap[..100], &[0u8; 100][..]);
        assert_eq!(&gap[100..], b"tail");
        let mut past = [0xffu8; 8];
        assert_eq!(f.read(SPILL_AT + 100, &mut past).unwrap(), 4);
        assert_eq!(&past, b"tail\0\0\0\0");
        f.truncate(10).unwrap();
        f.truncate(20).unwrap();
        let mut head = [0xffu8; 20];
        assert_eq!(f.read(0, &mut head).unwrap(), 20);
        assert_eq!(&head[..10], &page[..10]);
        assert_eq!(&head[10..], &[0u8; 10][..]);
        f.truncate(0).unwrap();
        assert!(!f.spilled() && f.size() == 0);
    }
}
