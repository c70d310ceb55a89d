//! txvfs: an embeddable, transactional virtual file system.
//!
//! A POSIX-like file tree (inodes, directories, data blocks, open file handles) lives in a
//! key-value store, and every change is a transaction. Several files can change in one
//! [`Transaction`]: all or nothing, isolated from other writers, durable once committed.
//!
//! ```
//! use txvfs::{FileSystem, Store};
//! let store = Store::open("memory:").unwrap();
//! store.transact(|tx| {
//!     tx.mkdir("/docs", 0o755)?;
//!     tx.write_file("/docs/a.txt", b"part one")?;
//!     tx.write_file("/docs/b.txt", b"part two")
//! }).unwrap();
//! assert_eq!(store.read_file("/docs/b.txt").unwrap(), b"part two");
//! ```
//!
//! Layers, in one direction only: [`fs`] (paths, inodes, handles, transactions, locks) over
//! [`schema`] (key and value encoding) over [`kv`] (the backend trait and its backends).
//!
//! # Cargo features
//!
//! - `rocksdb` (default): the embedded RocksDB backend (`PATH` and `rocksdb:PATH` URIs).
//!   RocksDB is compiled from source on the first build (about 15 minutes on 2 cores).
//! - `testing`: fault-injection backends (`kv::FaultyBackend`, `kv::FaultPlan`) for tests.
//!
//! The `memory:` backend is always there, and so is the FoundationDB backend (`fdb:` URIs):
//! it loads FoundationDB's client library (`libfdb_c.so`, 7.3 or newer) at the first `fdb:`
//! open, so no build option is needed.
#![warn(missing_docs)]

mod clock;
pub mod error;
pub mod fs;
pub mod fsck;
pub mod kv;
pub mod pack;
pub mod schema;

pub use error::{Error, ErrorKind, Result};
#[doc(hidden)]
pub use fs::Published;
pub use fs::{Batch, Cursor, Retention, WatchOptions, Watcher};
pub use fs::{
    Credential, DirEntry, DiskCacheStats, FallocateMode, File, FileSystem, FlockOp,
    InodeFileSystem, Lent, Name, OpenOptions, Options, Quota, QuotaLimits, RangeLock,
    RangeLockKind, RenameFlags, SetAttr, SetTime, Stat, StatFs, Store, Transaction, XattrFlags,
    MAX_QUOTA_WALK,
};
pub use fsck::CheckReport;
/// The one backoff of the core's retry policy (for bindings whose retry loop must stay in their
/// own language, such as Python's `Store.transact`).
pub use kv::backoff;
/// The core's retry policy for work outside [`Store::transact`] (opening a store, a
/// transaction a binding keeps): bindings use this, never `kv`.
pub use kv::retry;
/// Round trips this process made as a client of shared stores (for measurements and tests).
pub use kv::round_trips;
pub use schema::{Change, ChangeKind, FileType};

/// The code blocks of the README and the book (`docs/`), compiled and run as doc tests with
/// rustdoc's own attributes (`no_run`, `ignore`). `tests/docs/blocks.py` checks that every
/// chapter is listed here and runs the blocks of the other languages.
#[cfg(doctest)]
mod book {
    #[doc = include_str!("../../README.md")]
    mod readme {}
    #[doc = include_str!("../../docs/benchmarks.md")]
    mod benchmarks {}
    #[doc = include_str!("../../docs/c-cpp.md")]
    mod c_cpp {}
    #[doc = include_str!("../../docs/changes.md")]
    mod changes {}
    #[doc = include_str!("../../docs/cli.md")]
    mod cli {}
    #[doc = include_str!("../../docs/concepts.md")]
    mod concepts {}
    #[doc = include_str!("../../docs/design.md")]
    mod design {}
    #[doc = include_str!("../../docs/disk-cache.md")]
    mod disk_cache {}
    #[doc = include_str!("../../docs/foundationdb.md")]
    mod foundationdb {}
    #[doc = include_str!("../../docs/fuse.md")]
    mod fuse {}
    #[doc = include_str!("../../docs/index.md")]
    mod index {}
    #[doc = include_str!("../../docs/limits.md")]
    mod limits {}
    #[doc = include_str!("../../docs/python.md")]
    mod python {}
    #[doc = include_str!("../../docs/quotas.md")]
    mod quotas {}
    #[doc = include_str!("../../docs/rust.md")]
    mod rust {}
    #[doc = include_str!("../../docs/sharing.md")]
    mod sharing {}
    #[doc = include_str!("../../docs/snapshots.md")]
    mod snapshots {}
    #[doc = include_str!("../../docs/sqlite.md")]
    mod sqlite {}
    #[doc = include_str!("../../docs/testing.md")]
    mod testing {}
}
