//! The options of [`Store::open_with`](crate::Store::open_with).

use super::types::Credential;
use crate::error::{Error, ErrorKind, Result};
use std::path::PathBuf;
use std::time::Duration;

/// The smallest default size of the read cache ([`Options::cache_size`]; see
/// [`default_cache_size`]).
pub const DEFAULT_CACHE_SIZE: u64 = 64 << 20;
/// The largest default size of the read cache.
pub const MAX_DEFAULT_CACHE_SIZE: u64 = 1 << 30;

/// The default size of the read cache: a sixteenth of the memory this process may use (the
/// machine's RAM, or its cgroup's limit where that is lower), at least [`DEFAULT_CACHE_SIZE`]
/// and at most [`MAX_DEFAULT_CACHE_SIZE`]. It holds file blocks as well as metadata (the
/// process's page cache), so a file that fits is read without the engine; the memory is
/// taken only as reads and writes fill it.
pub fn default_cache_size() -> u64 {
    let ram = {
        // SAFETY: sysconf has no preconditions.
        let (pages, page) =
            unsafe { (libc::sysconf(libc::_SC_PHYS_PAGES), libc::sysconf(libc::_SC_PAGESIZE)) };
        if pages > 0 && page > 0 {
            pages as u64 * page as u64
        } else {
            0
        }
    };
    let limit = cgroup_memory_limit().map_or(ram, |l| l.min(ram.max(1)));
    (limit / 16).clamp(DEFAULT_CACHE_SIZE, MAX_DEFAULT_CACHE_SIZE)
}

/// The memory limit of this process's cgroup (v2 `memory.max`, else v1's), if it has one.
fn cgroup_memory_limit() -> Option<u64> {
    let v2 = std::fs::read_to_string("/proc/self/cgroup").ok().and_then(|c| {
        let path = c.lines().find_map(|l| l.strip_prefix("0::"))?.to_string();
        std::fs::read_to_string(format!("/sys/fs/cgroup{path}/memory.max")).ok()
    });
    let raw =
        v2.or_else(|| std::fs::read_to_string("/sys/fs/cgroup/memory/memory.limit_in_bytes").ok())?;
    raw.trim().parse::<u64>().ok().filter(|&l| l > 0 && l < (1 << 60))
}

/// Options for opening a store.
#[derive(Clone, Debug)]
pub struct Options {
    /// Make each explicit commit durable before it returns (one fsync, shared by concurrent
    /// commits). Auto-commit calls are durable at the next `fsync`/`sync`. Default true.
    pub sync: bool,
    /// Block size for a new store (fixed at creation). Default 64 KiB.
    pub block_size: u32,
    /// Files up to this size keep their data in the inode (fixed at creation). Default 4 KiB.
    pub inline_limit: u32,
    /// Refuse every change with EROFS.
    pub read_only: bool,
    /// Check permissions as this user; `None` acts as the store's owner.
    pub credential: Option<Credential>,
    /// How often `transact` and auto-commit calls retry a conflict before giving up.
    pub max_retries: u32,
    /// Bytes of the in-process read cache of a local backend (RocksDB, memory): values that
    /// reads fetched, kept exactly consistent with transactions (see docs/design.md). 0 turns
    /// it off. The store is shared by every open in the process, so the first open sets it.
    /// It keeps file blocks too (a page cache in the process: a hot read copies once, from
    /// it into the caller's buffer), scan-resistant (a long scan does not evict the hot set).
    /// Default [`default_cache_size`]: a sixteenth of the machine's (or the cgroup's) memory,
    /// from 64 MiB to 1 GiB.
    pub cache_size: u64,
    /// A directory on local disk that keeps copies of the chunks read from the backend, for
    /// stores on a slow remote backend (FoundationDB, a client of a shared RocksDB store). Blocks
    /// written by this open are stored as chunks, so ordinary files are cached too. The URI
    /// query `disk_cache=DIR` sets it. Default `None` (no cache). If the directory cannot be
    /// used, the store opens without it ([`Store::disk_cache_stats`] says why). The first open
    /// of a store in a process decides: later opens share its cache (or its lack of one), and
    /// one asking for another cache is refused.
    ///
    /// [`Store::disk_cache_stats`]: crate::Store::disk_cache_stats
    pub disk_cache: Option<PathBuf>,
    /// Most bytes the disk cache keeps (URI `disk_cache_size=BYTES`). Default 1 GiB.
    pub disk_cache_size: u64,
    /// Longest a read waits for the cache disk before it reads the backend instead (and skips
    /// the cache for a second); opening the cache may take 100 times as long, then the store
    /// opens without it. Default 100 ms.
    pub disk_cache_deadline: Duration,
}

/// The options that belong to one open of a store rather than to the store: two opens of
/// one store in this process share everything else, and each keeps these.
#[derive(Clone, Copy, Debug)]
pub(crate) struct PerOpen {
    pub(crate) read_only: bool,
    pub(crate) sync: bool,
    pub(crate) max_retries: u32,
}

impl PerOpen {
    pub(crate) fn of(o: &Options) -> PerOpen {
        PerOpen { read_only: o.read_only, sync: o.sync, max_retries: o.max_retries }
    }
}

impl Default for Options {
    fn default() -> Self {
        Options {
            sync: true,
            block_size: 64 << 10,
            inline_limit: 4 << 10,
            read_only: false,
            credential: None,
            max_retries: 100,
            cache_size: default_cache_size(),
            disk_cache: None,
            disk_cache_size: 1 << 30,
            disk_cache_deadline: Duration::from_millis(100),
        }
    }
}

/// Takes the store options a URI's query may carry (`disk_cache=DIR`, `disk_cache_size=BYTES`)
/// into `options`; returns the URI without them, for the backend.
pub(crate) fn take_uri_options(uri: &str, options: &mut Options) -> Result<String> {
    let Some((base, query)) = uri.rsplit_once('?') else { return Ok(uri.to_string()) };
    let (mut rest, mut taken) = (Vec::new(), false);
    for param in query.split('&') {
        taken |= param.starts_with("disk_cache");
        match param.split_once('=') {
            Some(("disk_cache", dir)) if !dir.is_empty() => {
                options.disk_cache = Some(PathBuf::from(dir))
            }
            Some(("disk_cache_size", n)) => {
                options.disk_cache_size = n.parse().map_err(|_| {
                    Error::new(
                        ErrorKind::Invalid,
                        format!("{uri}: disk_cache_size must be a number of bytes"),
                    )
                })?
            }
            Some(("disk_cache", _)) => {
                return Err(Error::new(
                    ErrorKind::Invalid,
                    format!("{uri}: disk_cache needs a directory"),
                ))
            }
            _ => rest.push(param),
        }
    }
    Ok(match (taken, rest.iter().all(|p| p.is_empty())) {
        (false, _) => uri.to_string(),
        (true, true) => base.to_string(),
        (true, false) => format!("{base}?{}", rest.join("&")),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uri_options_are_taken_and_the_rest_kept() {
        let mut o = Options::default();
        assert_eq!(
            take_uri_options("fdb:?prefix=a&disk_cache=/c&disk_cache_size=5", &mut o).unwrap(),
            "fdb:?prefix=a"
        );
        assert_eq!(
            (o.disk_cache.as_deref(), o.disk_cache_size),
            (Some(std::path::Path::new("/c")), 5)
        );
        assert_eq!(take_uri_options("memory:?disk_cache=/c", &mut o).unwrap(), "memory:");
        assert_eq!(take_uri_options("/a/b", &mut o).unwrap(), "/a/b");
        assert_eq!(take_uri_options("/a/b?", &mut o).unwrap(), "/a/b?");
        assert!(take_uri_options("memory:?disk_cache_size=big", &mut o).is_err());
        assert!(take_uri_options("memory:?disk_cache=", &mut o).is_err());
    }
}
