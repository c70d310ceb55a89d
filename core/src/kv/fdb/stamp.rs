//! Versionstamped keys on FoundationDB, and waking waiters when one commits (the change feed).
//!
//! `set_versionstamped_key(prefix, value)` is FoundationDB's `SET_VERSIONSTAMPED_KEY`: the key
//! is the store's prefix + `prefix` + a 10-byte placeholder, followed by the placeholder's
//! offset (4 bytes, little-endian); the cluster fills in the commit's versionstamp (8-byte
//! big-endian commit version, 2-byte big-endian order within the commit batch), which grows
//! with commit order across the cluster. Reading at any read version sees every stamp below
//! it, and a later commit gets a greater one, so a reader that resumes after the last stamp
//! it saw misses nothing. The stamp has no room for an index within the transaction: a second
//! versionstamped key under the same prefix in one transaction fails with `Invalid` (the
//! change feed writes one record per transaction).
//!
//! The same transaction sets the prefix's **notify key** (`\0txvfs.stamped.` + prefix, outside
//! the file system's scopes) to its stamp with `SET_VERSIONSTAMPED_VALUE`: it always holds
//! the newest stamp under the prefix. [`wake_on_stamped`] reads it and, unless it is already
//! newer than the waiter's position, sets a FoundationDB watch on it in that same transaction,
//! so a commit after that read fires the watch: waiters of every process and machine wake
//! without polling. The watch's callback runs on the network thread; it finds the waiter's
//! wake-up by number in a table, so a wake-up dropped first is never called.

use super::ffi::{opt, Api, FutureP};
use super::txn::FdbTxn;
use super::{network, Database};
use crate::error::{Error, ErrorKind, Result};
use crate::kv::{Txn, Wakeup};
use parking_lot::Mutex;
use std::collections::BTreeMap;
use std::ffi::c_void;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// The notify key of versionstamped keys under a prefix is this + the prefix.
const NOTIFY: &[u8] = b"\x00txvfs.stamped.";

/// The length of FoundationDB's versionstamp.
const STAMP: usize = 10;

impl FdbTxn {
    /// Writes `value` at `prefix` + this commit's versionstamp, and the stamp at the prefix's
    /// notify key (see the module docs).
    pub(super) fn set_stamped(&mut self, prefix: &[u8], value: &[u8]) -> Result<()> {
        if self.stamped.iter().any(|p| p == prefix) {
            return Err(Error::new(
                ErrorKind::Invalid,
                "foundationdb: one versionstamped key per prefix per transaction \
                 (the stamp has no index within a transaction)",
            ));
        }
        let mut key = self.key(prefix);
        let offset = u32::try_from(key.len()).unwrap_or(u32::MAX);
        key.extend_from_slice(&[0; STAMP]);
        key.extend_from_slice(&offset.to_le_bytes());
        self.mutate(&key, value, opt::MUTATION_SET_VERSIONSTAMPED_KEY);
        let notify = self.key(&[NOTIFY, prefix].concat());
        // The placeholder, then its offset: 0 (4 bytes, little-endian).
        let param = [0u8; STAMP + 4];
        self.mutate(&notify, &param, opt::MUTATION_SET_VERSIONSTAMPED_VALUE);
        self.stamped.push(prefix.to_vec());
        Ok(())
    }
}

/// Wake-ups of armed watches, by number (the watch callback's argument).
static WAKES: Mutex<BTreeMap<u64, Box<dyn FnOnce() + Send>>> = Mutex::new(BTreeMap::new());
static NEXT: AtomicU64 = AtomicU64::new(1);

/// The watch callback: calls the wake-up numbered `arg` if it is still armed.
unsafe extern "C" fn fired(_f: FutureP, arg: *mut c_void) {
    let wake = WAKES.lock().remove(&(arg as usize as u64));
    if let Some(wake) = wake {
        wake();
    }
}

/// An armed watch: dropping it forgets its wake-up and destroys (cancels) the watch.
struct Armed {
    api: &'static Api,
    f: FutureP,
    id: u64,
}

// SAFETY: FoundationDB futures may be destroyed from any thread.
unsafe impl Send for Armed {}

impl Drop for Armed {
    fn drop(&mut self) {
        WAKES.lock().remove(&self.id);
        if network::stopped() {
            return; // the process is exiting: leave the library alone (see `network`)
        }
        // SAFETY: the watch future is live and destroyed once.
        unsafe { (self.api.fdb_future_destroy)(self.f) }
    }
}

/// [`crate::kv::Backend::wake_on_stamped`] for FoundationDB: `wake` runs once a stamp under
/// `prefix` newer than `after` has committed (at once if one has; see the module docs).
pub(super) fn wake_on_stamped(
    api: &'static Api,
    db: &Arc<Database>,
    store_prefix: Arc<[u8]>,
    prefix: &[u8],
    after: &[u8],
    wake: Box<dyn FnOnce() + Send>,
) -> Result<Option<Wakeup>> {
    let mut tx = Box::new(FdbTxn::begin(api, db, store_prefix)?);
    let notify = [NOTIFY, prefix].concat();
    if tx.snapshot_get(&notify)?.is_some_and(|newest| newest.as_slice() > after) {
        wake();
        return Ok(Some(Box::new(())));
    }
    // The watch waits as long as it takes (its waiter chooses how long to wait for it), not
    // the store's deadline, which bounds waits on the cluster. FoundationDB 7.3 does not cancel
    // a committed transaction's watch at its timeout (test
    // a_watch_outlives_the_store_deadline_foundationdb); clearing the timeout keeps it so on
    // any version. The read above had the deadline.
    tx.set_timeout(0)?;
    let key = tx.key(&notify);
    let (_, tr) = tx.raw();
    // SAFETY: a live transaction; the library copies the key.
    let f = unsafe { (api.fdb_transaction_watch)(tr, key.as_ptr(), key.len() as _) };
    let id = NEXT.fetch_add(1, Ordering::Relaxed);
    WAKES.lock().insert(id, wake);
    let armed = Armed { api, f, id };
    // SAFETY: a live future; `fired` only reads its argument as a number. If the future is
    // ready already, the callback runs here, before this returns.
    let e = unsafe { (api.fdb_future_set_callback)(f, fired, id as usize as *mut c_void) };
    if e != 0 {
        return Err(super::error(api, e, "watch"));
    }
    // The watch is set once its transaction commits (a read-only commit: no round trip).
    tx.commit(false)?;
    Ok(Some(Box::new(armed)))
}
