//! Store URIs: which backend a URI names, and opening it.

use super::FdbBackend;
use super::{layered, Backend, Limits, MemoryBackend};
#[cfg(feature = "rocksdb")]
use super::{rocks_named, RocksBackend, SharedBackend};
use crate::error::{Error, ErrorKind, Result};
use std::sync::Arc;

/// Opens a backend by URI: `memory:` (options `?limits=foundationdb` and `capacity=BYTES`, as
/// in `memory:?limits=foundationdb&capacity=1000000`), `rocksdb:/path[?mode=shared|exclusive]`,
/// a bare path (RocksDB, shared), or `fdb:[CLUSTER-FILE][?prefix=NAME]` (FoundationDB: its client
/// library is loaded at the first such open). Opening the same RocksDB directory twice in one process
/// returns the same instance; `pack:/path/image` opens a read-only pack image (see
/// [`crate::pack`]). Several processes may open one RocksDB store at once (see
/// [`SharedBackend`]); `mode=exclusive` refuses every other process instead, and
/// `owner_timeout=SECONDS` bounds every wait on the process that owns the store (30 s by
/// default; then the call fails with EBUSY naming that process and why it did not answer).
///
/// `rocksdb:/path?snapshot=NAME` (or the snapshot's own directory, `/path/snapshots/NAME`)
/// opens a named snapshot, read-only. A store made a clone by [`create_clone`](crate::kv::create_clone) opens as the
/// clone, its lower layer opened by the URI it recorded.
pub fn open(uri: &str) -> Result<Arc<dyn Backend>> {
    if let Some(path) = uri.strip_prefix("pack:") {
        return Ok(crate::pack::PackBackend::open(std::path::Path::new(path))?);
    }
    let backend = open_raw(uri)?;
    if uri.starts_with("memory:") {
        return Ok(backend);
    }
    layered::open_if_clone(backend)
}

/// `uri` with a RocksDB path made absolute (other URIs as they are), to be recorded.
pub(crate) fn absolute_uri(uri: &str) -> Result<String> {
    let scheme = uri
        .split_once(':')
        .map(|(s, _)| s)
        .filter(|s| !s.is_empty() && s.bytes().all(|b| b.is_ascii_alphanumeric()));
    if scheme.is_some_and(|s| s != "rocksdb") {
        return Ok(uri.to_string());
    }
    let RocksUri { path, snapshot, .. } = rocksdb_uri(uri)?;
    let abs = std::path::absolute(path)
        .map_err(|e| Error::new(ErrorKind::Invalid, format!("{uri}: {e}")))?;
    let abs = abs
        .to_str()
        .ok_or_else(|| Error::new(ErrorKind::Invalid, format!("{uri}: path is not UTF-8")))?;
    Ok(match snapshot {
        Some(name) => format!("rocksdb:{abs}?snapshot={name}"),
        None => format!("rocksdb:{abs}"),
    })
}

/// [`open`] without opening a clone over the store: a clone's upper layer opens as it is
/// stored, with its own keys (for tools and tests that inspect it).
pub fn open_raw(uri: &str) -> Result<Arc<dyn Backend>> {
    if let Some(rest) = uri.strip_prefix("memory:") {
        let bad = |why: &str| Error::new(ErrorKind::Invalid, format!("{uri}: {why}"));
        let query = match rest {
            "" => "",
            _ => rest.strip_prefix('?').ok_or_else(|| bad("expected memory:?options"))?,
        };
        let (mut limits, mut capacity) = (Limits::UNLIMITED, None);
        for param in query.split('&').filter(|p| !p.is_empty()) {
            match param.split_once('=') {
                Some(("limits", "foundationdb")) => limits = Limits::FOUNDATIONDB,
                Some(("capacity", n)) => {
                    capacity =
                        Some(n.parse().map_err(|_| bad("capacity must be a number of bytes"))?)
                }
                _ => {
                    return Err(bad(&format!(
                    "unknown memory option {param:?} (known: limits=foundationdb, capacity=BYTES)"
                )))
                }
            }
        }
        return Ok(Arc::new(MemoryBackend::with_capacity(limits, capacity)));
    }
    if uri.starts_with("fdb:") {
        return Ok(FdbBackend::open(uri)?);
    }
    let RocksUri { path, exclusive, snapshot, owner_timeout } = rocksdb_uri(uri)?;
    if path.is_empty() {
        return Err(Error::new(ErrorKind::Invalid, "empty store URI"));
    }
    #[cfg(feature = "rocksdb")]
    {
        let dir = std::path::Path::new(path);
        if let Some(name) = snapshot {
            return rocks_named::open_named(dir, name);
        }
        if rocks_named::is_snapshot_dir(dir) {
            return rocks_named::open_dir(dir, format!("rocksdb:{path}"));
        }
        let canon = RocksBackend::prepare_dir(dir)?;
        Ok(SharedBackend::open_with(&canon, exclusive, owner_timeout)?)
    }
    #[cfg(not(feature = "rocksdb"))]
    {
        let _ = (exclusive, snapshot, owner_timeout);
        Err(Error::new(ErrorKind::Invalid, format!("{uri}: this build has no RocksDB backend")))
    }
}

/// A RocksDB URI's parts.
struct RocksUri<'a> {
    path: &'a str,
    /// `mode=exclusive`.
    exclusive: bool,
    /// `snapshot=NAME`.
    snapshot: Option<&'a str>,
    /// `owner_timeout=SECONDS`.
    #[cfg_attr(not(feature = "rocksdb"), allow(dead_code))]
    owner_timeout: Option<std::time::Duration>,
}

/// Splits a RocksDB URI into its path and options: `mode=shared` (the default),
/// `mode=exclusive`, `snapshot=NAME`, `owner_timeout=SECONDS`. A bare path takes them too when
/// every parameter after its last `?` is one of them (else the `?` is part of the path).
fn rocksdb_uri(uri: &str) -> Result<RocksUri<'_>> {
    let (rest, explicit) = match uri.strip_prefix("rocksdb:") {
        Some(rest) => (rest, true),
        None => (uri, false),
    };
    let plain = RocksUri { path: rest, exclusive: false, snapshot: None, owner_timeout: None };
    let Some((path, query)) = rest.rsplit_once('?') else { return Ok(plain) };
    let mut parsed = RocksUri { path, ..plain };
    for param in query.split('&').filter(|p| !p.is_empty()) {
        match param.split_once('=') {
            Some(("mode", "exclusive")) => parsed.exclusive = true,
            Some(("mode", "shared")) => parsed.exclusive = false,
            Some(("snapshot", name)) => parsed.snapshot = Some(name),
            Some(("owner_timeout", v)) => {
                parsed.owner_timeout = Some(parse_owner_timeout(uri, v)?);
            }
            _ if !explicit => return Ok(RocksUri { path: rest, ..plain }),
            _ => {
                return Err(Error::new(
                    ErrorKind::Invalid,
                    format!("{uri}: unknown rocksdb option {param:?} (known: mode=shared, mode=exclusive, snapshot=NAME, owner_timeout=SECONDS)"),
                ))
            }
        }
    }
    Ok(parsed)
}

/// Parses `owner_timeout` (seconds, fractions allowed).
fn parse_owner_timeout(uri: &str, value: &str) -> Result<std::time::Duration> {
    match value.parse::<f64>() {
        Ok(s) if s.is_finite() && (0.0..=1e9).contains(&s) => {
            Ok(std::time::Duration::from_secs_f64(s))
        }
        _ => Err(Error::new(
            ErrorKind::Invalid,
            format!("{uri}: owner_timeout must be a number of seconds (0 or more), not {value:?}"),
        )),
    }
}

/// Opens a backend by URI like [`open`], but only one that already has data: a RocksDB path
/// without a database gives [`ErrorKind::NotFound`] and creates nothing. (`memory:` always
/// opens an empty backend, and FoundationDB creates nothing at open.)
pub fn open_existing(uri: &str) -> Result<Arc<dyn Backend>> {
    #[cfg(feature = "rocksdb")]
    if !uri.starts_with("memory:") && !uri.starts_with("fdb:") && !uri.starts_with("pack:") {
        let path = std::path::Path::new(rocksdb_uri(uri)?.path);
        if !path.as_os_str().is_empty() && !RocksBackend::exists(path) {
            return Err(Error::new(ErrorKind::NotFound, format!("{uri}: no store there")));
        }
    }
    open(uri)
}
