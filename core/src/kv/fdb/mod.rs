//! The FoundationDB backend (`fdb:` URIs, client API 7.3).
//!
//! FoundationDB's client library is loaded at run time ([`ffi`]), so every build opens `fdb:`
//! stores wherever `libfdb_c.so` is installed, and fails with a clear error where it is not.
//!
//! One cluster holds many stores: each store lives under its own subspace, the tuple
//! `("txvfs", NAME)` packed as a key prefix, so `fdb:?prefix=a` and `fdb:?prefix=ab` never
//! overlap. FoundationDB gives the same serializable, optimistic transactions as the other
//! backends, so this module only translates: keys get the prefix, futures are waited on, and
//! FoundationDB's error codes become [`ErrorKind`]s (retryable ones become `Conflict` or
//! `TooOld`, which `Store::transact` retries).
//!
//! No wait is unbounded: every transaction gets FoundationDB's `timeout` option (the URI's
//! `timeout=SECONDS`, 30 s by default), so a cluster that does not answer makes the call fail
//! with `Busy` ("retry later", nothing was changed) once the deadline has passed; a commit that
//! was in flight then is resolved through its receipt (`receipts.rs`) within one more
//! deadline, or fails with `CommitUnknown`.
//!
//! The client's network thread is started once per process, on the first open, and stopped
//! when the process exits ([`network`]).

mod ffi;
mod network;
mod receipts;
mod stamp;
mod txn;
mod uri;

#[cfg(feature = "testing")]
#[doc(hidden)]
pub use receipts::fault::Fault as CommitFault;
pub use uri::FdbUri;

use super::{Backend, Limits, Role, Sharing, Txn, Wakeup};
use crate::error::{Error, ErrorKind, Result};
use ffi::{Api, DatabaseP, FdbErr};
use std::ffi::CString;
use std::sync::Arc;

/// FoundationDB's error codes that txvfs treats specially
/// (<https://apple.github.io/foundationdb/api-error-codes.html>).
mod code {
    pub const TRANSACTION_TOO_OLD: i32 = 1007;
    pub const NOT_COMMITTED: i32 = 1020;
    pub const COMMIT_UNKNOWN_RESULT: i32 = 1021;
    pub const TRANSACTION_TIMED_OUT: i32 = 1031;
    pub const TRANSACTION_TOO_LARGE: i32 = 2101;
    pub const KEY_TOO_LARGE: i32 = 2102;
    pub const VALUE_TOO_LARGE: i32 = 2103;
}

/// An open `FDBDatabase`, destroyed when the last store and transaction using it are gone.
struct Database {
    api: &'static Api,
    ptr: DatabaseP,
    /// The deadline of each transaction (the URI's `timeout`).
    timeout: std::time::Duration,
}

// SAFETY: FoundationDB database handles are thread-safe.
unsafe impl Send for Database {}
// SAFETY: as above.
unsafe impl Sync for Database {}

impl Drop for Database {
    fn drop(&mut self) {
        if network::stopped() {
            return; // the process is exiting: leave the library alone (see `network`)
        }
        // SAFETY: the handle is live and destroyed once.
        unsafe { (self.api.fdb_database_destroy)(self.ptr) }
    }
}

/// A store in a FoundationDB cluster.
pub struct FdbBackend {
    api: &'static Api,
    db: Arc<Database>,
    prefix: Arc<[u8]>,
    uri: String,
}

impl FdbBackend {
    /// Connects to the cluster named by `uri` (`fdb:[CLUSTER-FILE][?prefix=NAME][&timeout=S]`), loading
    /// FoundationDB's client library first if this process has not yet (see the `ffi` module).
    pub fn open(uri: &str) -> Result<Arc<FdbBackend>> {
        let parsed = FdbUri::parse(uri)?;
        let api =
            network::start().map_err(|m| Error::new(ErrorKind::Backend, format!("{uri}: {m}")))?;
        let cluster =
            parsed.cluster_file.as_deref().map(CString::new).transpose().map_err(|_| {
                Error::new(ErrorKind::Invalid, format!("{uri}: cluster file contains NUL"))
            })?;
        let mut ptr: DatabaseP = std::ptr::null_mut();
        let path = cluster.as_ref().map_or(std::ptr::null(), |c| c.as_ptr());
        // SAFETY: the network runs; `path` is null or NUL-terminated and outlives the call.
        let e = unsafe { (api.fdb_create_database)(path, &mut ptr) };
        if e != 0 {
            return Err(error(api, e, &format!("{uri}: cannot open the cluster")));
        }
        let db = Arc::new(Database { api, ptr, timeout: parsed.timeout });
        // The network thread has run once its answer is in: only then may the exit hook be
        // registered (see `network`).
        txn::ping(api, &db).map_err(|e| Error::new(e.kind(), format!("{uri}: {}", e.message())))?;
        network::register_stop_hook();
        let prefix = parsed.key_prefix().into();
        Ok(Arc::new(FdbBackend { api, db, prefix, uri: uri.to_string() }))
    }

    /// Gets a read version from the cluster (FoundationDB's cheapest round trip, for
    /// benchmarks that compare txvfs's operations with the cluster's own).
    pub fn read_version(&self) -> Result<i64> {
        let tx = txn::FdbTxn::begin(self.api, &self.db, self.prefix.clone())?;
        tx.read_version()
    }

    /// Fault injection for tests: the next commits that write, made by the calling thread in
    /// any `fdb:` store, answer `commit_unknown_result` (or another error code: `Code`) as
    /// `faults` say, in order.
    #[cfg(feature = "testing")]
    #[doc(hidden)]
    pub fn inject_commit_unknown(faults: &[CommitFault]) {
        receipts::fault::inject(faults);
    }
}

impl Backend for FdbBackend {
    fn begin(&self) -> Result<Box<dyn Txn>> {
        // The cluster remembers the transaction's id, so FoundationDB's own retries of this
        // transaction's commit cannot apply it twice; a commit_unknown_result still surfaces
        // as ErrorKind::CommitUnknown, because `Store::transact` retries with a new one.
        Ok(Box::new(txn::FdbTxn::begin(self.api, &self.db, self.prefix.clone())?))
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

    /// A FoundationDB watch on the prefix's notify key (see `stamp.rs`).
    fn wake_on_stamped(
        &self,
        prefix: &[u8],
        after: &[u8],
        wake: Box<dyn FnOnce() + Send>,
    ) -> Result<Option<Wakeup>> {
        stamp::wake_on_stamped(self.api, &self.db, self.prefix.clone(), prefix, after, wake)
    }
}

/// Many processes and machines share a cluster, with no primary among them.
impl Sharing for FdbBackend {
    fn role(&self) -> Role {
        Role::Peer
    }
}

/// True for the errors after which a commit may or may not have been applied: FoundationDB's
/// `maybe_committed` ones (`commit_unknown_result`, `cluster_version_changed`) and the
/// transaction's own deadline passing while the commit was in flight.
fn maybe_committed(api: &Api, e: FdbErr) -> bool {
    e == code::COMMIT_UNKNOWN_RESULT
        || e == code::TRANSACTION_TIMED_OUT
        // SAFETY: a plain predicate on an error code.
        || unsafe { (api.fdb_error_predicate)(ffi::opt::PREDICATE_MAYBE_COMMITTED, e) != 0 }
}

/// The error of a transaction whose deadline (`timeout`) passed before the cluster answered:
/// `Busy`, nothing was changed, retry later.
fn timed_out(what: &str, timeout: std::time::Duration) -> Error {
    Error::new(
        ErrorKind::Busy,
        format!(
            "foundationdb {what}: the cluster did not answer within {} s (the store's deadline, \
             timeout=SECONDS in its fdb: URI): nothing was changed; retry later (error {})",
            timeout.as_secs_f64(),
            code::TRANSACTION_TIMED_OUT
        ),
    )
}

/// Translates a FoundationDB error: retryable ones become `Conflict`/`TooOld` (retried by
/// `Store::transact`), size limits `TooLarge`, a passed deadline `Busy`, the rest `Backend`
/// with FoundationDB's code.
fn error(api: &Api, e: FdbErr, what: &str) -> Error {
    // Writing commits resolve the maybe-committed errors first (`FdbTxn::commit`), so any
    // retryable error that gets here left nothing applied: FoundationDB's `retryable` (which
    // includes `cluster_version_changed` of a read or a read-only commit).
    // SAFETY: a plain predicate on an error code.
    let retryable = || unsafe { (api.fdb_error_predicate)(ffi::opt::PREDICATE_RETRYABLE, e) != 0 };
    let kind = match e {
        code::NOT_COMMITTED => ErrorKind::Conflict,
        code::TRANSACTION_TOO_OLD => ErrorKind::TooOld,
        // Not retried: a retry is a new transaction with a new idempotency id, so it could
        // apply twice. The caller learns that the outcome is unknown.
        code::COMMIT_UNKNOWN_RESULT => ErrorKind::CommitUnknown,
        code::TRANSACTION_TIMED_OUT => ErrorKind::Busy,
        code::TRANSACTION_TOO_LARGE | code::KEY_TOO_LARGE | code::VALUE_TOO_LARGE => {
            ErrorKind::TooLarge
        }
        _ if retryable() => ErrorKind::Conflict,
        _ => ErrorKind::Backend,
    };
    let message = match e {
        txn::NETWORK_STOPPED if network::stopped() => {
            "the network was stopped: the process is exiting".to_string()
        }
        _ => api.message(e),
    };
    Error::new(kind, format!("foundationdb {what}: {message} (error {e})"))
}
