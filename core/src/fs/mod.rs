//! The file system: a store of files, directories and symlinks over a kv backend, where every
//! call is a transaction and an explicit [`Transaction`] groups any number of calls on any
//! number of files into one atomic, isolated, durable change.

mod block_table;
mod disk_cache;
mod feed;
mod file;
mod filesystem;
mod format;
mod handle_marks;
mod inodes;
mod joined;
pub mod leases;
mod locks;
mod name;
mod open_files;
mod ops;
mod options;
pub(crate) mod path;
mod scope;
mod staging;
mod state;
mod store;
mod transaction;
mod types;
mod watch;

#[cfg(feature = "testing")]
pub use disk_cache::DiskCacheFaults;
pub use disk_cache::DiskCacheStats;
pub use feed::Retention;
pub use file::File;
pub use filesystem::FileSystem;
pub use inodes::{InodeFileSystem, SetAttr};
#[doc(hidden)]
pub use joined::Published;
pub use locks::{FlockOp, RangeLock, RangeLockKind};
pub use name::Name;
pub use ops::{MAX_FILE_SIZE, MAX_QUOTA_WALK, XATTR_NAME_MAX, XATTR_SIZE_MAX};
pub use options::{default_cache_size, Options, DEFAULT_CACHE_SIZE, MAX_DEFAULT_CACHE_SIZE};
pub use path::{check_name, NAME_MAX, PATH_MAX, SYMLINK_MAX};
#[doc(hidden)]
pub use scope::CallScope;
pub use store::Store;
pub use transaction::Transaction;
#[doc(hidden)]
pub use transaction::TxShared;
pub use types::*;
pub use watch::{Batch, Cursor, WatchOptions, Watcher};

/// Entries deleted per transaction by [`Store::remove_all`] and the orphan reaper: about
/// 200 bytes of writes each, so a batch stays far below FoundationDB's 10 MB and 5 s.
pub const REMOVE_BATCH: usize = 1000;
