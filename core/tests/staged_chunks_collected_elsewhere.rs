//! A transaction whose written-ahead chunks were collected must not commit (issue 20, item 9).
//! Two stores over one backend data set (here: two wrappers around one memory backend, as a
//! wrapped or reopened backend gives) each believe they own it; the second one's open
//! collects the first one's live staging record. Before the fix the first store's commit did
//! not re-read its staging record on a non-shared backend, committed, and its file's blocks
//! pointed at deleted chunks.

use std::sync::Arc;
use txvfs::kv::{Backend, Limits, MemoryBackend, Txn};
use txvfs::{ErrorKind, FileSystem, Options, Result, Store};

/// Another handle on the same backend: a distinct `Arc`, so a distinct store instance.
struct Alias(Arc<MemoryBackend>);

impl Backend for Alias {
    fn begin(&self) -> Result<Box<dyn Txn>> {
        self.0.begin()
    }
    fn limits(&self) -> Limits {
        self.0.limits()
    }
    fn sync(&self) -> Result<()> {
        self.0.sync()
    }
    fn describe(&self) -> String {
        "alias".into()
    }
}

#[test]
fn a_commit_whose_chunks_were_collected_fails_and_changes_nothing() {
    let data = Arc::new(MemoryBackend::new(Limits::FOUNDATIONDB));
    let first =
        Store::with_backend(Arc::new(Alias(data.clone())), Options::default(), None).unwrap();
    let tx = first.begin().unwrap();
    // More than a quarter of FoundationDB's 10 MB: the later blocks are written ahead.
    let big: Vec<u8> = (0..4_000_000u32).map(|i| (i % 251) as u8).collect();
    tx.write_file("/big", &big).unwrap();
    // A second instance opens the same data: it collects every staging record it finds.
    let second = Store::with_backend(Arc::new(Alias(data)), Options::default(), None).unwrap();
    match tx.commit() {
        Err(e) => assert_eq!(e.kind(), ErrorKind::TooOld, "{e}"),
        Ok(()) => {
            let read = second.read_file("/big");
            panic!(
                "committed after its chunks were collected; reading it gives {:?}",
                read.map(|d| d == big)
            );
        }
    }
    assert!(!second.exists("/big").unwrap());
}
