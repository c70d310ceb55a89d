//! A backend wrapper that fails reads or commits on command, for fault-injection tests.

use super::{Backend, KeyValue, Limits, Txn};
use crate::error::{Error, ErrorKind, Result};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Which operations fail next. Counters count down: `fail_commits(2)` fails the next two
/// commits, then commits work again.
#[derive(Default)]
pub struct FaultPlan {
    commits: AtomicU64,
    reads: AtomicU64,
    writes: AtomicU64,
}

impl FaultPlan {
    /// Fails the next `n` commits (after which nothing of theirs is applied).
    pub fn fail_commits(&self, n: u64) {
        self.commits.store(n, Ordering::SeqCst);
    }
    /// Fails the next `n` reads (get or range).
    pub fn fail_reads(&self, n: u64) {
        self.reads.store(n, Ordering::SeqCst);
    }
    /// Fails the next `n` writes with ENOSPC, as a full backend would.
    pub fn fail_writes_nospace(&self, n: u64) {
        self.writes.store(n, Ordering::SeqCst);
    }
    fn take(counter: &AtomicU64) -> bool {
        counter.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1)).is_ok()
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

struct FaultyTxn {
    inner: Box<dyn Txn>,
    plan: Arc<FaultPlan>,
}

impl FaultyTxn {
    fn read_fault(&self) -> Result<()> {
        if FaultPlan::take(&self.plan.reads) {
            return Err(injected("read"));
        }
        Ok(())
    }
    fn write_fault(&self) -> Result<()> {
        if FaultPlan::take(&self.plan.writes) {
            return Err(Error::new(ErrorKind::NoSpace, "injected fault: backend is full"));
        }
        Ok(())
    }
}

impl Txn for FaultyTxn {
    fn get(&mut self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.read_fault()?;
        self.inner.get(key)
    }
    fn snapshot_get(&mut self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.read_fault()?;
        self.inner.snapshot_get(key)
    }
    fn get_range(&mut self, s: &[u8], e: &[u8], l: usize, r: bool) -> Result<Vec<KeyValue>> {
        self.read_fault()?;
        self.inner.get_range(s, e, l, r)
    }
    fn snapshot_get_range(&mut self, s: &[u8], e: &[u8], l: usize, r: bool) -> Result<Vec<KeyValue>> {
        self.read_fault()?;
        self.inner.snapshot_get_range(s, e, l, r)
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
    fn commit(self: Box<Self>, durable: bool) -> Result<()> {
        if FaultPlan::take(&self.plan.commits) {
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
        self.inner.sync()
    }
    fn describe(&self) -> String {
        format!("faulty({})", self.inner.describe())
    }
}
