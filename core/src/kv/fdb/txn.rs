//! One FoundationDB transaction behind the [`Txn`] trait: keys get the store's prefix,
//! futures are waited on (`fdb_future_block_until_ready`, bounded by the transaction's
//! `timeout` option: the store's deadline), errors are translated.

use super::ffi::{self, opt, Api, FdbErr, FutureP, KeyValue as RawKv, TxnP};
use super::{error, maybe_committed, network, receipts, timed_out, Database};

/// FoundationDB's `network_cannot_be_restarted`: returned once the exit hook stopped the network.
pub(super) const NETWORK_STOPPED: FdbErr = 2025;
use crate::error::Result;
use crate::kv::{KeyValue, Txn};
use std::ffi::c_int;
use std::sync::Arc;

/// A future of the library, destroyed when dropped.
struct Future {
    api: &'static Api,
    f: FutureP,
}

impl Future {
    /// Waits for the future; its error code if it failed.
    fn wait(api: &'static Api, f: FutureP) -> std::result::Result<Future, FdbErr> {
        let fut = Future { api, f };
        fut.ready()?;
        Ok(fut)
    }

    /// Waits until the future is ready; its error code if it failed.
    fn ready(&self) -> std::result::Result<(), FdbErr> {
        if network::stopped() {
            return Err(NETWORK_STOPPED);
        }
        // SAFETY: `f` is a live future returned by the library.
        let e = unsafe { (self.api.fdb_future_block_until_ready)(self.f) };
        if e != 0 {
            return Err(e);
        }
        // SAFETY: as above.
        match unsafe { (self.api.fdb_future_get_error)(self.f) } {
            0 => Ok(()),
            e => Err(e),
        }
    }
}

impl Drop for Future {
    fn drop(&mut self) {
        if network::stopped() {
            return; // the process is exiting: leave the library alone (see `network`)
        }
        // SAFETY: the future is live and destroyed once.
        unsafe { (self.api.fdb_future_destroy)(self.f) }
    }
}

/// A transaction of an `fdb:` store.
pub(super) struct FdbTxn {
    api: &'static Api,
    tr: TxnP,
    prefix: Arc<[u8]>,
    /// The prefixes given to `set_versionstamped_key` so far (see `stamp.rs`).
    pub(super) stamped: Vec<Vec<u8>>,
    // Keeps the database alive while the transaction is.
    _db: Arc<Database>,
    /// Something was written (the commit then writes a receipt, see `receipts`).
    mutated: bool,
}

// SAFETY: FoundationDB transactions may be used from any thread, one at a time (&mut self).
unsafe impl Send for FdbTxn {}

impl Drop for FdbTxn {
    fn drop(&mut self) {
        if network::stopped() {
            return; // the process is exiting: leave the library alone (see `network`)
        }
        // SAFETY: the transaction is live and destroyed once.
        unsafe { (self.api.fdb_transaction_destroy)(self.tr) }
    }
}

fn len(b: &[u8]) -> c_int {
    // Keys and values beyond 2 GiB are refused by FoundationDB long before this.
    c_int::try_from(b.len()).unwrap_or(c_int::MAX)
}

impl FdbTxn {
    /// Begins a transaction on `db` (with automatic idempotency ids, see the backend docs, and
    /// the store's deadline as FoundationDB's `timeout` option).
    pub(super) fn begin(api: &'static Api, db: &Arc<Database>, prefix: Arc<[u8]>) -> Result<Self> {
        if network::stopped() {
            return Err(error(api, NETWORK_STOPPED, "begin"));
        }
        let mut tr: TxnP = std::ptr::null_mut();
        // SAFETY: `db.0` is a live database.
        let e = unsafe { (api.fdb_database_create_transaction)(db.ptr, &mut tr) };
        if e != 0 {
            return Err(error(api, e, "begin"));
        }
        let mut txn =
            FdbTxn { api, tr, prefix, stamped: Vec::new(), _db: db.clone(), mutated: false };
        // SAFETY: a live transaction; this option takes no parameter.
        let e = unsafe {
            (api.fdb_transaction_set_option)(tr, opt::TR_AUTOMATIC_IDEMPOTENCY, std::ptr::null(), 0)
        };
        if e != 0 {
            return Err(error(api, e, "begin"));
        }
        txn.set_timeout(db.timeout.as_millis().try_into().unwrap_or(i64::MAX))?;
        Ok(txn)
    }

    /// Translates `e`, naming the store's deadline when it is the one that passed.
    fn fail(&self, e: FdbErr, what: &str) -> crate::error::Error {
        match e {
            super::code::TRANSACTION_TIMED_OUT => timed_out(what, self._db.timeout),
            _ => error(self.api, e, what),
        }
    }

    /// `key` with the store's prefix.
    pub(super) fn key(&self, key: &[u8]) -> Vec<u8> {
        let mut k = Vec::with_capacity(self.prefix.len() + key.len());
        k.extend_from_slice(&self.prefix);
        k.extend_from_slice(key);
        k
    }

    /// Sends the read of `key` (the library copies the key); its future.
    fn send_get(&self, key: &[u8], snapshot: bool) -> Future {
        let k = self.key(key);
        // SAFETY: a live transaction; the key outlives the call (the library copies it).
        let f = unsafe {
            (self.api.fdb_transaction_get)(self.tr, k.as_ptr(), len(&k), snapshot as c_int)
        };
        Future { api: self.api, f }
    }

    /// Waits for the read `fut`; the value it found (alive as long as `fut`), if any.
    fn value<'f>(&self, fut: &'f Future) -> Result<Option<&'f [u8]>> {
        fut.ready().map_err(|e| self.fail(e, "get"))?;
        let (mut present, mut p, mut n) = (0, std::ptr::null(), 0);
        // SAFETY: a ready value future; the value lives as long as `fut`.
        let e = unsafe { (self.api.fdb_future_get_value)(fut.f, &mut present, &mut p, &mut n) };
        if e != 0 {
            return Err(self.fail(e, "get"));
        }
        // SAFETY: as above.
        Ok((present != 0).then(|| unsafe { ffi::slice(p, n) }))
    }

    /// Reads `key`, lending its value to `read`; false when absent.
    fn read(&mut self, key: &[u8], snapshot: bool, read: &mut dyn FnMut(&[u8])) -> Result<bool> {
        let fut = self.send_get(key, snapshot);
        let Some(v) = self.value(&fut)? else { return Ok(false) };
        read(v);
        Ok(true)
    }

    /// Visits the pairs with `start <= key < end` (at most `limit`, 0: all), page by page.
    fn range(
        &mut self,
        start: &[u8],
        end: &[u8],
        limit: usize,
        reverse: bool,
        snapshot: bool,
        visit: &mut dyn FnMut(&[u8], &[u8]),
    ) -> Result<()> {
        if start >= end {
            return Ok(());
        }
        // Key selectors: begin is first_greater_or_equal(begin) (or_equal 0, offset 1) until
        // a page moves it to first_greater_than(last) (or_equal 1, offset 1); end is
        // first_greater_or_equal(end), moved to first_greater_or_equal(last) when reversed.
        let (mut begin, mut begin_eq) = (self.key(start), 0);
        let mut end = self.key(end);
        let mut remaining = limit;
        let plen = self.prefix.len();
        for iteration in 1.. {
            let page_limit = c_int::try_from(remaining).unwrap_or(c_int::MAX);
            // SAFETY: a live transaction; the keys outlive the call.
            let f = unsafe {
                (self.api.fdb_transaction_get_range)(
                    self.tr,
                    begin.as_ptr(),
                    len(&begin),
                    begin_eq,
                    1,
                    end.as_ptr(),
                    len(&end),
                    0,
                    1,
                    page_limit,
                    0,
                    opt::STREAMING_WANT_ALL,
                    iteration,
                    snapshot as c_int,
                    reverse as c_int,
                )
            };
            let fut = Future::wait(self.api, f).map_err(|e| self.fail(e, "get_range"))?;
            let (mut kvs, mut count, mut more): (*const RawKv, c_int, c_int) =
                (std::ptr::null(), 0, 0);
            // SAFETY: a ready range future; the array lives as long as `fut`.
            let e = unsafe {
                (self.api.fdb_future_get_keyvalue_array)(fut.f, &mut kvs, &mut count, &mut more)
            };
            if e != 0 {
                return Err(self.fail(e, "get_range"));
            }
            // The array comes from the library's arena and may not even be 4-byte aligned:
            // each element is copied out with an unaligned read.
            let count = if kvs.is_null() { 0 } else { count.max(0) as usize };
            // SAFETY: `count` elements, alive with `fut`, read without alignment.
            let page: Vec<RawKv> =
                (0..count).map(|i| unsafe { std::ptr::read_unaligned(kvs.add(i)) }).collect();
            for kv in &page {
                // SAFETY: alive with `fut`; every key carries the prefix asked for.
                let (k, v) = unsafe { (kv.key(), kv.value()) };
                visit(&k[plen..], v);
            }
            if limit > 0 {
                remaining -= page.len().min(remaining);
            }
            let Some(last) = page.last() else { break };
            if more == 0 || (limit > 0 && remaining == 0) {
                break;
            }
            // SAFETY: as above.
            let last = unsafe { last.key() }.to_vec();
            if reverse {
                end = last;
            } else {
                (begin, begin_eq) = (last, 1);
            }
        }
        Ok(())
    }

    fn collect(
        &mut self,
        start: &[u8],
        end: &[u8],
        limit: usize,
        reverse: bool,
        snapshot: bool,
    ) -> Result<Vec<KeyValue>> {
        let mut out = Vec::new();
        self.range(start, end, limit, reverse, snapshot, &mut |k, v| {
            out.push((k.to_vec(), v.to_vec()))
        })?;
        Ok(out)
    }

    fn atomic(&mut self, key: &[u8], param: [u8; 8], op: c_int) {
        self.mutated = true;
        let k = self.key(key);
        // SAFETY: a live transaction; the library copies key and parameter.
        unsafe {
            (self.api.fdb_transaction_atomic_op)(
                self.tr,
                k.as_ptr(),
                len(&k),
                param.as_ptr(),
                8,
                op,
            )
        }
    }
}

impl Txn for FdbTxn {
    fn get(&mut self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        let mut out = None;
        self.read(key, false, &mut |v| out = Some(v.to_vec()))?;
        Ok(out)
    }

    fn snapshot_get(&mut self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        let mut out = None;
        self.read(key, true, &mut |v| out = Some(v.to_vec()))?;
        Ok(out)
    }

    fn get_with(&mut self, key: &[u8], read: &mut dyn FnMut(&[u8])) -> Result<bool> {
        self.read(key, false, read)
    }

    /// Every read is sent before the first is waited for: one round trip for all of them
    /// (after the transaction's read version, which they share).
    fn snapshot_get_many(
        &mut self,
        keys: &[&[u8]],
        read: &mut dyn FnMut(usize, Option<&[u8]>),
    ) -> Result<()> {
        let futures: Vec<Future> = keys.iter().map(|k| self.send_get(k, true)).collect();
        for (i, fut) in futures.iter().enumerate() {
            read(i, self.value(fut)?);
        }
        Ok(())
    }

    /// The key's read-conflict range, added without a request: the snapshot read it
    /// completes was at this transaction's read version.
    fn note_read(&mut self, key: &[u8], _value: Option<&[u8]>) -> Result<()> {
        self.add_read_conflict_range(key, &[key, &[0]].concat())
    }

    fn batches_reads(&self) -> bool {
        true
    }

    fn get_range(
        &mut self,
        start: &[u8],
        end: &[u8],
        limit: usize,
        reverse: bool,
    ) -> Result<Vec<KeyValue>> {
        self.collect(start, end, limit, reverse, false)
    }

    /// FoundationDB records the conflict range without reading it.
    fn add_read_conflict_range(&mut self, start: &[u8], end: &[u8]) -> Result<()> {
        if start >= end {
            return Ok(());
        }
        let (s, e) = (self.key(start), self.key(end));
        // SAFETY: a live transaction; the library copies the keys.
        let code = unsafe {
            (self.api.fdb_transaction_add_conflict_range)(
                self.tr,
                s.as_ptr(),
                len(&s),
                e.as_ptr(),
                len(&e),
                opt::CONFLICT_RANGE_READ,
            )
        };
        match code {
            0 => Ok(()),
            c => Err(self.fail(c, "add_read_conflict_range")),
        }
    }

    fn visit_range(
        &mut self,
        start: &[u8],
        end: &[u8],
        visit: &mut dyn FnMut(&[u8], &[u8]),
    ) -> Result<()> {
        self.range(start, end, 0, false, false, visit)
    }

    fn snapshot_get_range(
        &mut self,
        start: &[u8],
        end: &[u8],
        limit: usize,
        reverse: bool,
    ) -> Result<Vec<KeyValue>> {
        self.collect(start, end, limit, reverse, true)
    }

    fn set(&mut self, key: &[u8], value: &[u8]) -> Result<()> {
        self.mutated = true;
        let k = self.key(key);
        // SAFETY: a live transaction; the library copies key and value.
        unsafe {
            (self.api.fdb_transaction_set)(self.tr, k.as_ptr(), len(&k), value.as_ptr(), len(value))
        };
        Ok(())
    }

    fn clear(&mut self, key: &[u8]) -> Result<()> {
        self.mutated = true;
        let k = self.key(key);
        // SAFETY: a live transaction; the library copies the key.
        unsafe { (self.api.fdb_transaction_clear)(self.tr, k.as_ptr(), len(&k)) };
        Ok(())
    }

    fn clear_range(&mut self, start: &[u8], end: &[u8]) -> Result<()> {
        if start < end {
            self.mutated = true;
            let (s, e) = (self.key(start), self.key(end));
            // SAFETY: a live transaction; the library copies the keys.
            unsafe {
                (self.api.fdb_transaction_clear_range)(
                    self.tr,
                    s.as_ptr(),
                    len(&s),
                    e.as_ptr(),
                    len(&e),
                )
            };
        }
        Ok(())
    }

    /// FoundationDB's `ADD` is little-endian and wraps, so a two's-complement delta subtracts.
    fn atomic_add(&mut self, key: &[u8], delta: i64) -> Result<()> {
        self.atomic(key, delta.to_le_bytes(), opt::MUTATION_ADD);
        Ok(())
    }

    fn atomic_max(&mut self, key: &[u8], value: u64) -> Result<()> {
        self.atomic(key, value.to_le_bytes(), opt::MUTATION_MAX);
        Ok(())
    }

    /// FoundationDB's `SET_VERSIONSTAMPED_KEY`, one per prefix per transaction (`stamp.rs`).
    fn set_versionstamped_key(&mut self, prefix: &[u8], value: &[u8]) -> Result<()> {
        self.set_stamped(prefix, value)
    }

    /// Every FoundationDB commit is durable once it returns, so `durable` changes nothing.
    fn commit(mut self: Box<Self>, _durable: bool) -> Result<()> {
        if !self.mutated {
            return self.commit_raw().map_err(|e| self.fail(e, "commit"));
        }
        // The commit's receipt (see `receipts`): written with it, and in its read-conflict set,
        // so that a resolution that marks it aborted makes this commit fail if still in flight.
        let id = receipts::new_id();
        let end = [&id[..], &[0]].concat();
        self.add_read_conflict_range(&id, &end)?;
        self.set(&id, &receipts::applied_value())?;
        #[allow(unused_mut)]
        let mut answer = None;
        #[cfg(feature = "testing")]
        if let Some(fault) = receipts::fault::take() {
            use receipts::fault::Fault;
            if let Fault::Code(code) = fault {
                answer = Some(Err(code)); // not sent: answered `code` as the cluster would
            } else {
                if fault == Fault::Applied {
                    self.commit_raw().map_err(|e| self.fail(e, "commit"))?;
                }
                let outcome = self.resolve(&id, super::code::COMMIT_UNKNOWN_RESULT);
                if fault == Fault::Late {
                    let _ = self.commit_raw(); // must fail: the resolution wrote the receipt
                }
                return outcome;
            }
        }
        match answer.unwrap_or_else(|| self.commit_raw()) {
            Ok(()) => {
                self.collect_receipts();
                Ok(())
            }
            Err(e) if maybe_committed(self.api, e) => self.resolve(&id, e),
            Err(e) => Err(self.fail(e, "commit")),
        }
    }
}

impl FdbTxn {
    /// After a commit answered `cause`, one of the errors after which it may or may not have
    /// been applied (`maybe_committed`): whether the commit with receipt `id` was applied
    /// (`Ok`) or definitely not (a retryable `Conflict`), found in a new transaction that reads
    /// the receipt and, if absent, writes it as aborted (see `receipts`). Bounded: a few
    /// attempts within one deadline of the store, then `CommitUnknown`.
    fn resolve(&self, id: &[u8], cause: FdbErr) -> Result<()> {
        let budget = self._db.timeout;
        let start = std::time::Instant::now();
        let mut last = String::new();
        let mut attempts = 0;
        while attempts < receipts::RESOLVE_ATTEMPTS {
            if attempts > 0 {
                std::thread::sleep(std::time::Duration::from_millis(10 << attempts.min(6)));
            }
            let left = budget.saturating_sub(start.elapsed());
            if attempts > 0 && left.is_zero() {
                break;
            }
            attempts += 1;
            let limit = (left.as_millis() as i64).clamp(1, receipts::RESOLVE_TIMEOUT);
            let r = FdbTxn::begin(self.api, &self._db, self.prefix.clone()).and_then(|mut t| {
                t.set_timeout(limit)?;
                if let Some(v) = t.get(id)? {
                    return Ok(receipts::outcome(&v));
                }
                t.set(id, &[])?;
                t.commit_raw().map_err(|e| t.fail(e, "commit (resolving a receipt)"))?;
                Ok(Err(receipts::not_applied()))
            });
            match r {
                Ok(outcome) => return outcome,
                Err(e) if e.kind() == crate::error::ErrorKind::Busy => {
                    last = "the cluster did not answer".into()
                }
                Err(e) => last = e.to_string(),
            }
        }
        let why = match cause {
            super::code::TRANSACTION_TIMED_OUT => format!(
                "the cluster did not answer within {} s (the store's deadline) while the commit \
                 was in flight",
                budget.as_secs_f64()
            ),
            _ => format!("{} (error {cause})", self.api.message(cause)),
        };
        Err(crate::error::Error::new(
            crate::error::ErrorKind::CommitUnknown,
            format!(
                "foundationdb commit: {why}, and its receipt could not be read within another \
                 {} s ({attempts} attempt{}; the last: {last}): the commit may or may not have \
                 been applied",
                budget.as_secs_f64(),
                if attempts == 1 { "" } else { "s" }
            ),
        ))
    }

    /// Clears the receipts old enough, at most once a minute per process; best effort.
    fn collect_receipts(&self) {
        if let Some((start, end)) = receipts::due_collection() {
            let _ = FdbTxn::begin(self.api, &self._db, self.prefix.clone()).and_then(|mut t| {
                t.clear_range(&start, &end)?;
                t.commit_raw().map_err(|e| self.fail(e, "commit"))
            });
        }
    }

    /// Makes the transaction fail (`transaction_timed_out`) `ms` milliseconds after it began
    /// (0: never).
    pub(super) fn set_timeout(&mut self, ms: i64) -> Result<()> {
        let v = ms.to_le_bytes();
        // SAFETY: a live transaction; the library copies the 8-byte parameter.
        let e = unsafe {
            (self.api.fdb_transaction_set_option)(self.tr, opt::TR_TIMEOUT, v.as_ptr(), 8)
        };
        match e {
            0 => Ok(()),
            e => Err(self.fail(e, "set_option timeout")),
        }
    }

    /// Commits, answering FoundationDB's error code.
    fn commit_raw(&self) -> std::result::Result<(), FdbErr> {
        // SAFETY: a live transaction.
        let f = unsafe { (self.api.fdb_transaction_commit)(self.tr) };
        Future::wait(self.api, f).map(|_| ())
    }

    /// The library and the raw transaction, for the operations of `stamp.rs`.
    pub(super) fn raw(&self) -> (&'static Api, TxnP) {
        (self.api, self.tr)
    }

    /// Applies FoundationDB's atomic operation `op` to `full_key` (prefixed already) with
    /// `param`, which the library copies.
    pub(super) fn mutate(&mut self, full_key: &[u8], param: &[u8], op: c_int) {
        // A write: the commit then carries a receipt.
        self.mutated = true;
        // SAFETY: a live transaction; the library copies key and parameter.
        unsafe {
            (self.api.fdb_transaction_atomic_op)(
                self.tr,
                full_key.as_ptr(),
                len(full_key),
                param.as_ptr(),
                len(param),
                op,
            )
        }
    }

    /// The transaction's read version (one round trip to the cluster).
    pub(super) fn read_version(&self) -> Result<i64> {
        // SAFETY: a live transaction.
        let f = unsafe { (self.api.fdb_transaction_get_read_version)(self.tr) };
        let fut = Future::wait(self.api, f).map_err(|e| self.fail(e, "get_read_version"))?;
        let mut v = 0;
        // SAFETY: a ready int64 future.
        match unsafe { (self.api.fdb_future_get_int64)(fut.f, &mut v) } {
            0 => Ok(v),
            e => Err(self.fail(e, "get_read_version")),
        }
    }
}

/// Waits until the network thread has answered a request that needs no cluster (the backoff
/// of a retry, a few milliseconds): from then on, it is running (see `network`).
pub(super) fn ping(api: &'static Api, db: &Arc<Database>) -> Result<()> {
    let tx = FdbTxn::begin(api, db, Arc::from(&b""[..]))?;
    // 1020 (not_committed): on_error answers after a short backoff, from the network thread.
    // SAFETY: a live transaction.
    let f = unsafe { (api.fdb_transaction_on_error)(tx.tr, 1020) };
    Future::wait(api, f).map(|_| ()).map_err(|e| error(api, e, "starting the network"))
}
