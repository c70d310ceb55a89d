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
pub use fs::{Batch, Cursor, Retention, WatchOptions, Watcher};
pub use fs::{
    Credential, DirEntry, DiskCacheStats, FallocateMode, File, FileSystem, FlockOp,
    InodeFileSystem, OpenOptions, Options, RangeLock, RangeLockKind, RenameFlags, SetAttr, SetTime,
    Stat, StatFs, Store, Transaction, XattrFlags,
};
pub use fsck::CheckReport;
/// The one backoff of the core's retry policy (for bindings whose retry loop must stay in their
/// own language, such as Python's `Store.transact`).
pub use kv::backoff;
pub use schema::{Change, ChangeKind, FileType};
