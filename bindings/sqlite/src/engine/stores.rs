//! Stores opened by the VFS, the canonical name of a database, and which store a bare name
//! (xAccess, xDelete: SQLite passes no URI parameters there) belongs to.

use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::OnceLock;
use txvfs::{Result, Store};

/// Store used when a database URI has no `store=` parameter and `TXVFS_SQLITE_STORE` is unset:
/// a RocksDB store in the directory `txvfs-store` under the current directory.
pub const DEFAULT_STORE: &str = "txvfs-store";

/// An open store and its identity in this process: two URIs that reach one store (`/s` and
/// `rocksdb:/s/.`) have one identity; two `memory:` URIs are two stores.
#[derive(Clone)]
pub struct StoreRef {
    /// The store.
    pub store: Store,
    /// Its identity.
    pub id: String,
}

fn stores() -> &'static Mutex<HashMap<String, StoreRef>> {
    static S: OnceLock<Mutex<HashMap<String, StoreRef>>> = OnceLock::new();
    S.get_or_init(Default::default)
}

fn default_uri() -> String {
    std::env::var("TXVFS_SQLITE_STORE").unwrap_or_else(|_| DEFAULT_STORE.to_string())
}

/// Opens (or reuses) the store named by `uri`; `None` means the default store. Stores stay
/// open for the life of the process (a `memory:` store would otherwise vanish with its last
/// database handle).
pub fn open_store(uri: Option<&str>) -> Result<StoreRef> {
    let uri = match uri {
        Some(u) if !u.is_empty() => u.to_string(),
        _ => default_uri(),
    };
    let mut map = stores().lock();
    if let Some(s) = map.get(&uri) {
        return Ok(s.clone());
    }
    let store = Store::open(&uri)?;
    // A RocksDB store's description is its canonical directory, shared by every spelling of
    // it; each memory: URI names its own store here.
    let id = if uri.starts_with("memory:") { uri.clone() } else { store.describe() };
    let r = StoreRef { store, id };
    map.insert(uri, r.clone());
    Ok(r)
}

/// The store a database name without URI parameters belongs to: the store in which this
/// process last opened a database of that name, else the default store when it is configured
/// (`TXVFS_SQLITE_STORE`) or already open. `None`: no store knows the name.
pub fn store_for_name(path: &str) -> Option<StoreRef> {
    if let Some(r) = names().lock().get(path) {
        return Some(r.clone());
    }
    let uri = default_uri();
    let open = stores().lock().get(&uri).cloned();
    match open {
        Some(r) => Some(r),
        None if std::env::var_os("TXVFS_SQLITE_STORE").is_some() => open_store(None).ok(),
        None => None,
    }
}

/// Like [`store_for_name`], without opening the default store.
pub fn known_store(path: &str) -> Option<StoreRef> {
    if let Some(r) = names().lock().get(path) {
        return Some(r.clone());
    }
    stores().lock().get(&default_uri()).cloned()
}

fn names() -> &'static Mutex<HashMap<String, StoreRef>> {
    static S: OnceLock<Mutex<HashMap<String, StoreRef>>> = OnceLock::new();
    S.get_or_init(Default::default)
}

/// Records that database `path` was opened from `store` (for [`store_for_name`]).
pub fn remember_name(path: &str, store: &StoreRef) {
    names().lock().insert(path.to_string(), store.clone());
}

/// The canonical store path of a database name as SQLite spells it: absolute (a relative name
/// is taken from the store's root), no empty or `.` components, `..` removed with the
/// component before it. Symlinks and hard links are not resolved here (xFullPathname has no
/// store): locks are keyed by inode, so every name of a file shares them.
pub fn canonical_path(name: &str) -> String {
    let mut parts: Vec<&str> = Vec::new();
    for c in name.split('/') {
        match c {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            c => parts.push(c),
        }
    }
    format!("/{}", parts.join("/"))
}

/// True for the names SQLite gives the files that accompany a database (rollback journal, WAL,
/// shared memory, super-journal): they live in process memory, never in the store.
pub fn is_side_file(name: &str) -> bool {
    if name.ends_with("-journal") || name.ends_with("-wal") || name.ends_with("-shm") {
        return true;
    }
    // Super-journal: "<db>-mjXXXXXX9XX" (hex digits).
    match name.rfind("-mj") {
        Some(i) => {
            let tail = &name[i + 3..];
            tail.len() == 9 && tail.bytes().all(|b| b.is_ascii_hexdigit())
        }
        None => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn canonical_names() {
        for (n, want) in [
            ("/x.db", "/x.db"),
            ("/./x.db", "/x.db"),
            ("//x.db", "/x.db"),
            ("/a/../x.db", "/x.db"),
            ("x.db", "/x.db"),
            ("./d//e/./x.db", "/d/e/x.db"),
            ("/../x.db", "/x.db"),
            ("/d/x.db/", "/d/x.db"),
        ] {
            assert_eq!(canonical_path(n), want, "{n}");
        }
    }

    #[test]
    fn side_files() {
        assert!(is_side_file("/x.db-journal"));
        assert!(is_side_file("/x.db-wal"));
        assert!(is_side_file("/x.db-mj0A1B2C9F3"));
        assert!(!is_side_file("/x.db"));
        assert!(!is_side_file("/x-mjnothex"));
    }
}
