//! A backend wrapper that fails reads or commits on command, for fault-injection tests, and
//! delays every read by a set latency (a "slow remote" backend, for the disk cache's tests
//! and benchmark).

use super::{Backend, KeyValue, Limits, ReadCacheControl, Sharing, SnapshotReader, Txn};
use crate::error::{Error, ErrorKind, Result};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Which operations fail next. Counters count down: `fail_commits(2)` fails the next two
/// commits, then commits work again. The `_after` forms first let `skip` operations of that
/// kind succeed, so a test can fail an operation at each of its steps in turn.
#[derive(Default)]
pub struct FaultPlan {
    commits: AtomicU64,
    reads: AtomicU64,
    writes: AtomicU64,
    skip_commits: AtomicU64,
    skip_reads: AtomicU64,
    skip_writes: AtomicU64,
    injected: AtomicU64,
    read_latency_us: AtomicU64,
    read_bytes_per_sec: AtomicU64,
    reads_done: AtomicU64,
    /// Requests a large read keeps in flight (0: 8 while a latency is set, else 1).
    parallel_reads: AtomicU64,
    in_flight: AtomicU64,
    max_in_flight: AtomicU64,
    syncs: AtomicU64,
    skip_syncs: AtomicU64,
    fail_syncs: AtomicU64,
}

impl FaultPlan {
    /// Fails the next `n` commits (after which nothing of theirs is applied).
    pub fn fail_commits(&self, n: u64) {
        self.fail_commits_after(0, n);
    }
    /// Fails the next `n` reads (get or range).
    pub fn fail_reads(&self, n: u64) {
        self.fail_reads_after(0, n);
    }
    /// Fails the next `n` writes with ENOSPC, as a full backend would.
    pub fn fail_writes_nospace(&self, n: u64) {
        self.fail_writes_nospace_after(0, n);
    }
    /// Lets the next `skip` commits succeed, then fails `n`.
    pub fn fail_commits_after(&self, skip: u64, n: u64) {
        self.skip_commits.store(skip, Ordering::SeqCst);
        self.commits.store(n, Ordering::SeqCst);
    }
    /// Lets the next `skip` reads succeed, then fails `n`.
    pub fn fail_reads_after(&self, skip: u64, n: u64) {
        self.skip_reads.store(skip, Ordering::SeqCst);
        self.reads.store(n, Ordering::SeqCst);
    }
    /// Lets the next `skip` writes succeed, then fails `n` with ENOSPC.
    pub fn fail_writes_nospace_after(&self, skip: u64, n: u64) {
        self.skip_writes.store(skip, Ordering::SeqCst);
        self.writes.store(n, Ordering::SeqCst);
    }
    /// Fails the next `n` syncs ([`Backend::sync`], [`Backend::sync_through`]) before they
    /// reach the wrapped backend, as a disk whose fsync fails.
    pub fn fail_syncs(&self, n: u64) {
        self.skip_syncs.store(0, Ordering::SeqCst);
        self.fail_syncs.store(n, Ordering::SeqCst);
    }
    /// How many syncs ([`Backend::sync`], [`Backend::sync_through`]) were asked for so far,
    /// failed ones included.
    pub fn syncs(&self) -> u64 {
        self.syncs.load(Ordering::SeqCst)
    }
    fn sync(&self, inner: impl FnOnce() -> Result<()>) -> Result<()> {
        self.syncs.fetch_add(1, Ordering::SeqCst);
        if self.take(&self.skip_syncs, &self.fail_syncs) {
            return Err(injected("fsync"));
        }
        inner()
    }
    /// Delays every later read (get or range) by `d`, as a remote backend's round trip would.
    pub fn set_read_latency(&self, d: std::time::Duration) {
        self.read_latency_us.store(d.as_micros() as u64, Ordering::SeqCst);
    }
    /// Also delays every later read by the time its bytes (keys and values) take at
    /// `bytes_per_sec` (0: no limit), as a remote backend's network would.
    pub fn set_read_bandwidth(&self, bytes_per_sec: u64) {
        self.read_bytes_per_sec.store(bytes_per_sec, Ordering::SeqCst);
    }
    /// Lets a large read keep `n` requests in flight at once (1: one at a time), as a remote
    /// that serves that many requests in parallel. The default: 8 while a read latency is
    /// set, else as the wrapped backend.
    pub fn set_parallel_reads(&self, n: u64) {
        self.parallel_reads.store(n, Ordering::SeqCst);
    }
    /// The most reads that were in flight at once so far.
    pub fn max_in_flight(&self) -> u64 {
        self.max_in_flight.load(Ordering::SeqCst)
    }
    /// Fails or delays a read as planned: the latency, then (once `result` is known) the
    /// transfer of its bytes; counts it in flight meanwhile.
    fn read<T>(&self, fetch: impl FnOnce() -> Result<T>, bytes: impl Fn(&T) -> usize) -> Result<T> {
        if self.take(&self.skip_reads, &self.reads) {
            return Err(injected("read"));
        }
        self.reads_done.fetch_add(1, Ordering::SeqCst);
        let now = self.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
        self.max_in_flight.fetch_max(now, Ordering::SeqCst);
        let us = self.read_latency_us.load(Ordering::SeqCst);
        if us > 0 {
            std::thread::sleep(std::time::Duration::from_micros(us));
        }
        let r = fetch();
        let bw = self.read_bytes_per_sec.load(Ordering::SeqCst);
        if let (Ok(v), true) = (&r, bw > 0) {
            std::thread::sleep(std::time::Duration::from_nanos(
                (bytes(v) as u128 * 1_000_000_000 / bw as u128) as u64,
            ));
        }
        self.in_flight.fetch_sub(1, Ordering::SeqCst);
        r
    }
    /// True while requests go out together: a set latency, or [`FaultPlan::set_parallel_reads`]
    /// above 1. A transaction's [`Txn::snapshot_get_many`] is then one read (one latency), as on a
    /// remote backend; else one read per key.
    fn batches(&self) -> bool {
        match self.parallel_reads.load(Ordering::SeqCst) {
            0 => self.read_latency_us.load(Ordering::SeqCst) > 0,
            n => n > 1,
        }
    }
    /// How many reads (get or range; a batch of [`Txn::snapshot_get_many`], one) have reached the
    /// backend so far.
    pub fn reads(&self) -> u64 {
        self.reads_done.load(Ordering::SeqCst)
    }
    /// How many faults have been injected so far, of every kind.
    pub fn injected(&self) -> u64 {
        self.injected.load(Ordering::SeqCst)
    }
    fn take(&self, skip: &AtomicU64, counter: &AtomicU64) -> bool {
        let dec = |n: u64| n.checked_sub(1);
        if counter.load(Ordering::SeqCst) == 0
            || skip.fetch_update(Ordering::SeqCst, Ordering::SeqCst, dec).is_ok()
            || counter.fetch_update(Ordering::SeqCst, Ordering::SeqCst, dec).is_err()
        {
            return false;
        }
        self.injected.fetch_add(1, Ordering::SeqCst);
        true
    }
}

/// Wraps a backend and injects the failures its [`FaultPlan`] asks for.
pub struct FaultyBackend {
    inner: Arc<dyn Backend>,
    plan: Arc<FaultPlan>,
}

impl FaultyBackend {
    /// Wraps `inner`; returns the backend and the plan that controls it.
    pub fn new(inner: Arc<dyn Backend>) -> (Arc<FaultyBackend>, Arc<FaultPlan>) {
        let plan = Arc::new(FaultPlan::default());
        (Arc::new(FaultyBackend { inner, plan: plan.clone() }), plan)
    }
}

fn injected(what: &str) -> Error {
    Error::new(ErrorKind::Backend, format!("injected fault: {what} failed"))
}

/// A [`SnapshotReader`] whose every read is delayed (and failed) as the plan says.
struct FaultyReader {
    inner: Arc<dyn SnapshotReader>,
    plan: Arc<FaultPlan>,
}

impl SnapshotReader for FaultyReader {
    fn visit_range(
        &self,
        start: &[u8],
        end: &[u8],
        visit: &mut dyn FnMut(&[u8], &[u8]),
    ) -> Result<()> {
        let fetch = || {
            let mut bytes = 0;
            self.inner.visit_range(start, end, &mut |k, v| {
                bytes += k.len() + v.len();
                visit(k, v)
            })?;
            Ok(bytes)
        };
        self.plan.read(fetch, |&bytes| bytes).map(|_| ())
    }
    fn in_flight(&self) -> usize {
        match self.plan.parallel_reads.load(Ordering::SeqCst) {
            0 if self.plan.read_latency_us.load(Ordering::SeqCst) > 0 => 8,
            0 => self.inner.in_flight(),
            n => n as usize,
        }
    }
}

struct FaultyTxn {
    inner: Box<dyn Txn>,
    plan: Arc<FaultPlan>,
}

impl FaultyTxn {
    fn read_fault(&self) -> Result<()> {
        self.plan.read(|| Ok(()), |_| 0)
    }
    fn got(
        &mut self,
        f: impl FnOnce(&mut dyn Txn) -> Result<Option<Vec<u8>>>,
    ) -> Result<Option<Vec<u8>>> {
        let (plan, inner) = (&self.plan, &mut self.inner);
        plan.read(|| f(&mut **inner), |v| v.as_ref().map_or(0, Vec::len))
    }
    fn got_range(
        &mut self,
        f: impl FnOnce(&mut dyn Txn) -> Result<Vec<KeyValue>>,
    ) -> Result<Vec<KeyValue>> {
        let (plan, inner) = (&self.plan, &mut self.inner);
        plan.read(|| f(&mut **inner), |kvs| kvs.iter().map(|(k, v)| k.len() + v.len()).sum())
    }
    fn write_fault(&self) -> Result<()> {
        if self.plan.take(&self.plan.skip_writes, &self.plan.writes) {
            return Err(Error::new(ErrorKind::NoSpace, "injected fault: backend is full"));
        }
        Ok(())
    }
}

impl Txn for FaultyTxn {
    fn read_version(&self) -> Option<u64> {
        self.inner.read_version()
    }
    fn get(&mut self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.got(|t| t.get(key))
    }
    fn snapshot_get(&mut self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.got(|t| t.snapshot_get(key))
    }
    fn snapshot_get_many(
        &mut self,
        keys: &[&[u8]],
        read: &mut dyn FnMut(usize, Option<&[u8]>),
    ) -> Result<()> {
        if !self.plan.batches() {
            for (i, k) in keys.iter().enumerate() {
                read(i, self.snapshot_get(k)?.as_deref());
            }
            return Ok(());
        }
        let (plan, inner) = (&self.plan, &mut self.inner);
        let fetch = || {
            let mut bytes = 0;
            inner.snapshot_get_many(keys, &mut |i, v| {
                bytes += v.map_or(0, <[u8]>::len);
                read(i, v)
            })?;
            Ok(bytes)
        };
        plan.read(fetch, |&bytes| bytes).map(|_| ())
    }
    /// No request: the read was made by the batch (as FoundationDB adds a conflict range).
    fn note_read(&mut self, key: &[u8], value: Option<&[u8]>) -> Result<()> {
        self.inner.note_read(key, value)
    }
    fn batches_reads(&self) -> bool {
        self.plan.batches()
    }
    fn get_range(&mut self, s: &[u8], e: &[u8], l: usize, r: bool) -> Result<Vec<KeyValue>> {
        self.got_range(|t| t.get_range(s, e, l, r))
    }
    fn parallel_reader(&mut self, s: &[u8], e: &[u8]) -> Result<Option<Arc<dyn SnapshotReader>>> {
        let Some(inner) = self.inner.parallel_reader(s, e)? else { return Ok(None) };
        Ok(Some(Arc::new(FaultyReader { inner, plan: self.plan.clone() })))
    }
    fn add_read_conflict_range(&mut self, s: &[u8], e: &[u8]) -> Result<()> {
        self.read_fault()?;
        self.inner.add_read_conflict_range(s, e)
    }
    fn snapshot_get_range(
        &mut self,
        s: &[u8],
        e: &[u8],
        l: usize,
        r: bool,
    ) -> Result<Vec<KeyValue>> {
        self.got_range(|t| t.snapshot_get_range(s, e, l, r))
    }
    fn set(&mut self, key: &[u8], value: &[u8]) -> Result<()> {
        self.write_fault()?;
        self.inner.set(key, value)
    }
    fn clear(&mut self, key: &[u8]) -> Result<()> {
        self.write_fault()?;
        self.inner.clear(key)
    }
    fn clear_range(&mut self, s: &[u8], e: &[u8]) -> Result<()> {
        self.write_fault()?;
        self.inner.clear_range(s, e)
    }
    fn atomic_add(&mut self, key: &[u8], delta: i64) -> Result<()> {
        self.write_fault()?;
        self.inner.atomic_add(key, delta)
    }
    fn atomic_max(&mut self, key: &[u8], value: u64) -> Result<()> {
        self.write_fault()?;
        self.inner.atomic_max(key, value)
    }
    fn set_versionstamped_key(&mut self, prefix: &[u8], value: &[u8]) -> Result<()> {
        self.write_fault()?;
        self.inner.set_versionstamped_key(prefix, value)
    }
    fn commit(self: Box<Self>, durable: bool) -> Result<()> {
        if self.plan.take(&self.plan.skip_commits, &self.plan.commits) {
            return Err(injected("commit"));
        }
        self.inner.commit(durable)
    }
}

impl Backend for FaultyBackend {
    fn begin(&self) -> Result<Box<dyn Txn>> {
        Ok(Box::new(FaultyTxn { inner: self.inner.begin()?, plan: self.plan.clone() }))
    }
    fn limits(&self) -> Limits {
        self.inner.limits()
    }
    fn sync(&self) -> Result<()> {
        self.plan.sync(|| self.inner.sync())
    }
    fn sync_through(&self, read_version: Option<u64>) -> Result<()> {
        self.plan.sync(|| self.inner.sync_through(read_version))
    }
    fn describe(&self) -> String {
        format!("faulty({})", self.inner.describe())
    }
    fn sharing(&self) -> Option<&dyn Sharing> {
        self.inner.sharing()
    }
    fn disk_space(&self) -> Option<(u64, u64)> {
        self.inner.disk_space()
    }
    fn read_cache(&self) -> Option<&dyn ReadCacheControl> {
        self.inner.read_cache()
    }
    fn wake_on_stamped(
        &self,
        prefix: &[u8],
        after: &[u8],
        wake: Box<dyn FnOnce() + Send>,
    ) -> Result<Option<super::Wakeup>> {
        self.inner.wake_on_stamped(prefix, after, wake)
    }
    fn announce_stamped(&self, prefix: &[u8]) {
        self.inner.announce_stamped(prefix)
    }
}
