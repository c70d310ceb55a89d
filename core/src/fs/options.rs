//! The options of [`Store::open_with`](crate::Store::open_with).

use super::types::Credential;

/// The default size of the read cache ([`Options::cache_size`]).
pub const DEFAULT_CACHE_SIZE: u64 = 64 << 20;

/// Options for opening a store.
#[derive(Clone, Debug)]
pub struct Options {
    /// Make each explicit commit durable before it returns (one fsync, shared by concurrent
    /// commits). Auto-commit calls are durable at the next `fsync`/`sync`. Default true.
    pub sync: bool,
    /// Block size for a new store (fixed at creation). Default 64 KiB.
    pub block_size: u32,
    /// Files up to this size keep their data in the inode (fixed at creation). Default 4 KiB.
    pub inline_limit: u32,
    /// Refuse every change with EROFS.
    pub read_only: bool,
    /// Check permissions as this user; `None` acts as the store's owner.
    pub credential: Option<Credential>,
    /// How often `transact` and auto-commit calls retry a conflict before giving up.
    pub max_retries: u32,
    /// Bytes of the in-process read cache of a local backend (RocksDB, memory): values that
    /// reads fetched, kept exactly consistent with transactions (see docs/design.md). 0 turns
    /// it off. The store is shared by every open in the process, so the first open sets it.
    /// Default 64 MiB.
    pub cache_size: u64,
}

/// The options that belong to one open of a store rather than to the store: two opens of
/// one store in this process share everything else, and each keeps these.
#[derive(Clone, Copy, Debug)]
pub(crate) struct PerOpen {
    pub(crate) read_only: bool,
    pub(crate) sync: bool,
    pub(crate) max_retries: u32,
}

impl PerOpen {
    pub(crate) fn of(o: &Options) -> PerOpen {
        PerOpen { read_only: o.read_only, sync: o.sync, max_retries: o.max_retries }
    }
}

impl Default for Options {
    fn default() -> Self {
        Options {
            sync: true,
            block_size: 64 << 10,
            inline_limit: 4 << 10,
            read_only: false,
            credential: None,
            max_retries: 100,
            cache_size: DEFAULT_CACHE_SIZE,
        }
    }
}
