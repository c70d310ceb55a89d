//! Stores opened by the VFS, the canonical name of a database, and which store a bare name
//! (xAccess, xDelete: SQLite passes no URI parameters there) belongs to.

use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::{Arc, OnceLock, Weak};
use txvfs::{Result, Store};

/// Store used when a database URI has no `store=` parameter and `TXVFS_SQLITE_STORE` is unset:
/// a RocksDB store in the directory `txvfs-store` under the current directory.
pub const DEFAULT_STORE: &str = "txvfs-store";

/// An open store and its identity in this process: two URIs that reach one store (`/s` and
/// `rocksdb:/s/.`) have one identity; two `memory:` URIs are two stores.
pub struct OpenStore {
    /// The store.
    pub store: Store,
    /// Its identity.
    pub id: String,
    /// The URI it was opened with (to open it again once closed).
    pub uri: String,
}

/// A database file's hold on its store: the store stays open while one exists.
pub type StoreRef = Arc<OpenStore>;

/// How the registries below hold a store. A `memory:` store is kept for the life of the
/// process (it would vanish with its last database handle); any other store is held only by
/// its open database files, so that once the last closes, the store is closed and another
/// owner (Python, the C library, another process) may open it.
enum Held {
    Kept(StoreRef),
    WhileOpen(Weak<OpenStore>),
}

impl Held {
    fn of(r: &StoreRef) -> Held {
        if r.id.starts_with("memory:") {
            Held::Kept(r.clone())
        } else {
            Held::WhileOpen(Arc::downgrade(r))
        }
    }

    fn get(&self) -> Option<StoreRef> {
        match self {
            Held::Kept(r) => Some(r.clone()),
            Held::WhileOpen(w) => w.upgrade(),
        }
    }
}

type Registry = Mutex<HashMap<String, Held>>;

/// How many times opening a store is tried again after a retryable error (with the core's
/// backoff, at most 100 ms apart).
const OPEN_RETRIES: u32 = 100;

fn stores() -> &'static Registry {
    static S: OnceLock<Registry> = OnceLock::new();
    S.get_or_init(Default::default)
}

fn default_uri() -> String {
    std::env::var("TXVFS_SQLITE_STORE").unwrap_or_else(|_| DEFAULT_STORE.to_string())
}

/// Opens (or reuses) the store named by `uri`; `None` means the default store. A `memory:`
/// store stays open for the life of the process; any other closes with its last database
/// file (see `Held`).
pub fn open_store(uri: Option<&str>) -> Result<StoreRef> {
    let uri = match uri {
        Some(u) if !u.is_empty() => u.to_string(),
        _ => default_uri(),
    };
    let mut map = stores().lock();
    if let Some(s) = map.get(&uri).and_then(Held::get) {
        return Ok(s);
    }
    // Opening a shared store while the process serving it exits fails with a retryable
    // conflict ("lost contact ... retry it"): open again, as the error says.
    let store = txvfs::retry(OPEN_RETRIES, || Store::open(&uri))?;
    // A RocksDB store's description is its canonical directory, shared by every spelling of
    // it; each memory: URI names its own store here.
    let id = if uri.starts_with("memory:") { uri.clone() } else { store.describe() };
    let r = Arc::new(OpenStore { store, id, uri: uri.clone() });
    map.retain(|_, h| h.get().is_some());
    map.insert(uri, Held::of(&r));
    Ok(r)
}

/// The store a database name without URI parameters belongs to: the store from which this
/// process last opened a database of that name (opened again if it was closed since), else
/// the default store when it is configured (`TXVFS_SQLITE_STORE`) or already open.
/// `Ok(None)`: no store knows the name.
pub fn store_for_name(path: &str) -> Result<Option<StoreRef>> {
    let known = names().lock().get(path).cloned();
    if let Some(uri) = known {
        return open_store(Some(&uri)).map(Some);
    }
    let open = stores().lock().get(&default_uri()).and_then(Held::get);
    match open {
        Some(r) => Ok(Some(r)),
        None if std::env::var_os("TXVFS_SQLITE_STORE").is_some() => open_store(None).map(Some),
        None => Ok(None),
    }
}

/// Like [`store_for_name`], among the stores open now (never opens one).
pub fn known_store(path: &str) -> Option<StoreRef> {
    let uri = names().lock().get(path).cloned().unwrap_or_else(default_uri);
    stores().lock().get(&uri).and_then(Held::get)
}

/// Database path -> URI of the store it was last opened from.
fn names() -> &'static Mutex<HashMap<String, String>> {
    static S: OnceLock<Mutex<HashMap<String, String>>> = OnceLock::new();
    S.get_or_init(Default::default)
}

/// Records that database `path` was opened from `store` (for [`store_for_name`]).
pub fn remember_name(path: &str, store: &StoreRef) {
    names().lock().insert(path.to_string(), store.uri.clone());
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
