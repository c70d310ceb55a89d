//! The FoundationDB backend (cargo feature `foundationdb`, client API 7.3).
//!
//! One cluster holds many stores: each store lives under its own subspace, the tuple
//! `("txvfs", NAME)` packed as a key prefix, so `fdb:?prefix=a` and `fdb:?prefix=ab` never
//! overlap. FoundationDB gives the same serializable, optimistic transactions as the other
//! backends, so this file only translates: keys get the prefix, futures are waited on, and
//! FoundationDB's error codes become [`ErrorKind`]s (retryable ones become `Conflict` or
//! `TooOld`, which `Store::transact` retries).
//!
//! The client's network thread is started once per process, on the first open, and stopped
//! when the process exits (an `atexit` hook), as FoundationDB requires.

use super::{Backend, KeyValue, Limits, Role, Sharing, Txn};
use crate::error::{Error, ErrorKind, Result};
use foundationdb::options::{MutationType, StreamingMode, TransactionOption};
use foundationdb::tuple::Subspace;
use foundationdb::{Database, FdbError, KeySelector, RangeOption};
use futures::executor::block_on;
use std::sync::{Arc, Mutex, OnceLock};

/// The store prefix used when the URI names none.
pub const DEFAULT_PREFIX: &str = "default";

/// FoundationDB's error codes that txvfs treats specially
/// (<https://apple.github.io/foundationdb/api-error-codes.html>).
mod code {
    pub const TRANSACTION_TOO_OLD: i32 = 1007;
    pub const NOT_COMMITTED: i32 = 1020;
    pub const COMMIT_UNKNOWN_RESULT: i32 = 1021;
    pub const TRANSACTION_TOO_LARGE: i32 = 2101;
    pub const KEY_TOO_LARGE: i32 = 2102;
    pub const VALUE_TOO_LARGE: i32 = 2103;
}

/// A store in a FoundationDB cluster.
pub struct FdbBackend {
    db: Database,
    prefix: Arc<[u8]>,
    uri: String,
}

/// The running network thread; dropped (stopped and joined) at process exit.
static NETWORK: Mutex<Option<foundationdb::api::NetworkAutoStop>> = Mutex::new(None);
static BOOT: OnceLock<std::result::Result<(), String>> = OnceLock::new();

extern "C" fn stop_network() {
    if let Ok(mut network) = NETWORK.lock() {
        drop(network.take());
    }
}

/// Starts FoundationDB's network thread the first time it is called in this process.
fn boot_network() -> Result<()> {
    let booted = BOOT.get_or_init(|| {
        let builder = foundationdb::api::FdbApiBuilder::default()
            .build()
            .map_err(|e| format!("cannot select FoundationDB API version: {e}"))?;
        // SAFETY: called once per process (OnceLock); the handle is kept until exit.
        let network = unsafe { builder.boot() }
            .map_err(|e| format!("cannot start FoundationDB's network thread: {e}"))?;
        *NETWORK.lock().map_err(|_| "network lock poisoned".to_string())? = Some(network);
        // SAFETY: registering a plain extern "C" function without captured state.
        unsafe { libc::atexit(stop_network) };
        Ok(())
    });
    booted.clone().map_err(|m| Error::new(ErrorKind::Backend, m))
}

/// The parts of an `fdb:` URI.
#[derive(Debug, PartialEq, Eq)]
pub struct FdbUri {
    /// The cluster file; `None` selects FoundationDB's default (`/etc/foundationdb/fdb.cluster`
    /// or `$FDB_CLUSTER_FILE`).
    pub cluster_file: Option<String>,
    /// The store's name inside the cluster.
    pub prefix: String,
}

impl FdbUri {
    /// Parses `fdb:[CLUSTER-FILE][?prefix=NAME]`.
    pub fn parse(uri: &str) -> Result<FdbUri> {
        let bad = |why: &str| Error::new(ErrorKind::Invalid, format!("{uri}: {why}"));
        let rest = uri.strip_prefix("fdb:").ok_or_else(|| bad("not an fdb: URI"))?;
        let (cluster, query) = rest.split_once('?').unwrap_or((rest, ""));
        let mut prefix = DEFAULT_PREFIX.to_string();
        for param in query.split('&').filter(|p| !p.is_empty()) {
            match param.split_once('=') {
                Some(("prefix", name)) if !name.is_empty() && !name.contains('\0') => {
                    prefix = name.to_string()
                }
                Some(("prefix", _)) => return Err(bad("prefix must be a non-empty name")),
                _ => return Err(bad(&format!("unknown parameter {param:?} (known: prefix)"))),
            }
        }
        let cluster_file = (!cluster.is_empty()).then(|| cluster.to_string());
        Ok(FdbUri { cluster_file, prefix })
    }
}

impl FdbBackend {
    /// Connects to the cluster named by `uri` (`fdb:[CLUSTER-FILE][?prefix=NAME]`).
    pub fn open(uri: &str) -> Result<Arc<FdbBackend>> {
        let parsed = FdbUri::parse(uri)?;
        boot_network()?;
        let db = Database::new(parsed.cluster_file.as_deref())
            .map_err(|e| fdb_error(e, &format!("{uri}: cannot open the cluster")))?;
        let prefix = Subspace::all().subspace(&("txvfs", parsed.prefix.as_str())).bytes().to_vec();
        Ok(Arc::new(FdbBackend { db, prefix: prefix.into(), uri: uri.to_string() }))
    }
}

impl Backend for FdbBackend {
    fn begin(&self) -> Result<Box<dyn Txn>> {
        let trx = self.db.create_trx().map_err(|e| fdb_error(e, "begin"))?;
        // The cluster remembers the transaction's id, so FoundationDB's own retries of this
        // transaction's commit cannot apply it twice; a commit_unknown_result still surfaces
        // as ErrorKind::CommitUnknown, because `Store::transact` retries with a new one.
        trx.set_option(TransactionOption::AutomaticIdempotency)
            .map_err(|e| fdb_error(e, "begin"))?;
        Ok(Box::new(FdbTxn { trx, prefix: self.prefix.clone() }))
    }

    fn limits(&self) -> Limits {
        Limits::FOUNDATIONDB
    }

    /// FoundationDB commits are durable when they return: nothing to do.
    fn sync(&self) -> Result<()> {
        Ok(())
    }

    fn describe(&self) -> String {
        self.uri.clone()
    }

    fn sharing(&self) -> Option<&dyn Sharing> {
        Some(self)
    }
}

/// Many processes and machines share a cluster, with no primary among them.
impl Sharing for FdbBackend {
    fn role(&self) -> Role {
        Role::Peer
    }
}

struct FdbTxn {
    trx: foundationdb::Transaction,
    prefix: Arc<[u8]>,
}

impl FdbTxn {
    fn key(&self, key: &[u8]) -> Vec<u8> {
        let mut k = Vec::with_capacity(self.prefix.len() + key.len());
        k.extend_from_slice(&self.prefix);
        k.extend_from_slice(key);
        k
    }

    fn read(&mut self, key: &[u8], snapshot: bool) -> Result<Option<Vec<u8>>> {
        let value =
            block_on(self.trx.get(&self.key(key), snapshot)).map_err(|e| fdb_error(e, "get"))?;
        Ok(value.map(|v| v.to_vec()))
    }

    fn read_range(
        &mut self,
        start: &[u8],
        end: &[u8],
        limit: usize,
        reverse: bool,
        snapshot: bool,
    ) -> Result<Vec<KeyValue>> {
        let mut out = Vec::new();
        if start >= end {
            return Ok(out);
        }
        let mut opt = Some(RangeOption {
            begin: KeySelector::first_greater_or_equal(self.key(start)),
            end: KeySelector::first_greater_or_equal(self.key(end)),
            limit: (limit > 0).then_some(limit),
            reverse,
            mode: StreamingMode::WantAll,
            ..RangeOption::default()
        });
        let mut iteration = 1;
        while let Some(o) = opt {
            let kvs = block_on(self.trx.get_range(&o, iteration, snapshot))
                .map_err(|e| fdb_error(e, "get_range"))?;
            for kv in kvs.iter() {
                out.push((kv.key()[self.prefix.len()..].to_vec(), kv.value().to_vec()));
            }
            iteration += 1;
            opt = o.next_range(&kvs);
        }
        Ok(out)
    }
}

impl Txn for FdbTxn {
    fn get(&mut self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.read(key, false)
    }

    fn snapshot_get(&mut self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.read(key, true)
    }

    fn get_range(
        &mut self,
        start: &[u8],
        end: &[u8],
        limit: usize,
        reverse: bool,
    ) -> Result<Vec<KeyValue>> {
        self.read_range(start, end, limit, reverse, false)
    }

    fn snapshot_get_range(
        &mut self,
        start: &[u8],
        end: &[u8],
        limit: usize,
        reverse: bool,
    ) -> Result<Vec<KeyValue>> {
        self.read_range(start, end, limit, reverse, true)
    }

    fn set(&mut self, key: &[u8], value: &[u8]) -> Result<()> {
        self.trx.set(&self.key(key), value);
        Ok(())
    }

    fn clear(&mut self, key: &[u8]) -> Result<()> {
        self.trx.clear(&self.key(key));
        Ok(())
    }

    fn clear_range(&mut self, start: &[u8], end: &[u8]) -> Result<()> {
        if start < end {
            self.trx.clear_range(&self.key(start), &self.key(end));
        }
        Ok(())
    }

    /// FoundationDB's `ADD` is little-endian and wraps, so a two's-complement delta subtracts.
    fn atomic_add(&mut self, key: &[u8], delta: i64) -> Result<()> {
        self.trx.atomic_op(&self.key(key), &delta.to_le_bytes(), MutationType::Add);
        Ok(())
    }

    fn atomic_max(&mut self, key: &[u8], value: u64) -> Result<()> {
        self.trx.atomic_op(&self.key(key), &value.to_le_bytes(), MutationType::Max);
        Ok(())
    }

    /// Every FoundationDB commit is durable once it returns, so `durable` changes nothing.
    fn commit(self: Box<Self>, _durable: bool) -> Result<()> {
        block_on(self.trx.commit()).map(|_| ()).map_err(|e| fdb_error(*e, "commit"))
    }
}

/// Translates a FoundationDB error: retryable ones become `Conflict`/`TooOld` (retried by
/// `Store::transact`), size limits `TooLarge`, the rest `Backend` with FoundationDB's code.
fn fdb_error(e: FdbError, what: &str) -> Error {
    let kind = match e.code() {
        code::NOT_COMMITTED => ErrorKind::Conflict,
        code::TRANSACTION_TOO_OLD => ErrorKind::TooOld,
        // Not retried: a retry is a new transaction with a new idempotency id, so it could
        // apply twice. The caller learns that the outcome is unknown.
        code::COMMIT_UNKNOWN_RESULT => ErrorKind::CommitUnknown,
        code::TRANSACTION_TOO_LARGE | code::KEY_TOO_LARGE | code::VALUE_TOO_LARGE => {
            ErrorKind::TooLarge
        }
        _ if e.is_retryable_not_committed() => ErrorKind::Conflict,
        _ => ErrorKind::Backend,
    };
    Error::new(kind, format!("foundationdb {what}: {} (error {})", e.message(), e.code()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uris() {
        let u = FdbUri::parse("fdb:").unwrap();
        assert_eq!(u, FdbUri { cluster_file: None, prefix: DEFAULT_PREFIX.into() });
        let u = FdbUri::parse("fdb:/etc/fdb.cluster?prefix=app").unwrap();
        assert_eq!(
            u,
            FdbUri { cluster_file: Some("/etc/fdb.cluster".into()), prefix: "app".into() }
        );
        for bad in ["fdb:?prefix=", "fdb:?color=red", "fdb:?prefix"] {
            assert_eq!(FdbUri::parse(bad).unwrap_err().kind(), ErrorKind::Invalid, "{bad}");
        }
    }
}
