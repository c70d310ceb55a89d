//! A panic inside an operation poisons its explicit transaction, as an error does (issue 20,
//! item 8). Before the fix the bindings caught the panic and returned an error, and a later
//! commit committed the half-done operation.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use txvfs::kv::{Backend, KeyValue, Limits, MemoryBackend, Txn};
use txvfs::{FileSystem, Options, Result, Store};

/// A memory backend whose transactions panic on the first write after `armed` is set.
struct PanickyBackend {
    inner: Arc<dyn Backend>,
    armed: Arc<AtomicBool>,
}

struct PanickyTxn {
    inner: Box<dyn Txn>,
    armed: Arc<AtomicBool>,
}

impl Backend for PanickyBackend {
    fn begin(&self) -> Result<Box<dyn Txn>> {
        Ok(Box::new(PanickyTxn { inner: self.inner.begin()?, armed: self.armed.clone() }))
    }
    fn limits(&self) -> Limits {
        self.inner.limits()
    }
    fn sync(&self) -> Result<()> {
        self.inner.sync()
    }
    fn describe(&self) -> String {
        "panicky".into()
    }
}

impl Txn for PanickyTxn {
    fn get(&mut self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.inner.get(key)
    }
    fn snapshot_get(&mut self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.inner.snapshot_get(key)
    }
    fn get_range(&mut self, s: &[u8], e: &[u8], limit: usize, rev: bool) -> Result<Vec<KeyValue>> {
        self.inner.get_range(s, e, limit, rev)
    }
    fn snapshot_get_range(
        &mut self,
        s: &[u8],
        e: &[u8],
        limit: usize,
        rev: bool,
    ) -> Result<Vec<KeyValue>> {
        self.inner.snapshot_get_range(s, e, limit, rev)
    }
    fn set(&mut self, key: &[u8], value: &[u8]) -> Result<()> {
        let r = self.inner.set(key, value);
        if self.armed.swap(false, Ordering::SeqCst) {
            panic!("injected panic after a write");
        }
        r
    }
    fn clear(&mut self, key: &[u8]) -> Result<()> {
        self.inner.clear(key)
    }
    fn clear_range(&mut self, s: &[u8], e: &[u8]) -> Result<()> {
        self.inner.clear_range(s, e)
    }
    fn atomic_add(&mut self, key: &[u8], delta: i64) -> Result<()> {
        self.inner.atomic_add(key, delta)
    }
    fn atomic_max(&mut self, key: &[u8], value: u64) -> Result<()> {
        self.inner.atomic_max(key, value)
    }
    fn commit(self: Box<Self>, durable: bool) -> Result<()> {
        self.inner.commit(durable)
    }
}

#[test]
fn a_panic_mid_operation_poisons_the_transaction() {
    let armed = Arc::new(AtomicBool::new(false));
    let backend = Arc::new(PanickyBackend {
        inner: Arc::new(MemoryBackend::new(Limits::UNLIMITED)),
        armed: armed.clone(),
    });
    let store = Store::with_backend(backend, Options::default(), None).unwrap();
    let tx = store.begin().unwrap();
    tx.write_file("/whole", b"fine").unwrap();
    armed.store(true, Ordering::SeqCst);
    let panicked = catch_unwind(AssertUnwindSafe(|| tx.mkdir("/half", 0o755)));
    assert!(panicked.is_err(), "the injected panic did not happen");
    // Later calls and the commit fail: the transaction holds half an operation.
    let after = tx.write_file("/after", b"x");
    assert!(after.is_err(), "{after:?}");
    let e = tx.commit().unwrap_err();
    assert!(e.message().contains("panic"), "{e}");
    assert!(!store.exists("/whole").unwrap(), "a poisoned transaction committed");
    assert!(!store.exists("/half").unwrap());
}
