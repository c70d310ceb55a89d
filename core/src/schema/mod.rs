//! Key and value encoding: the on-disk format of a store.
//!
//! Every key starts with a one-byte scope; numbers in keys are big-endian so that related keys
//! sort together and can be range-scanned. Values start with a format version byte.
//!
//! | scope | key | value |
//! | --- | --- | --- |
//! | `S` | `S` | superblock: format version, block size, inline limit, creation time |
//! | `I` | `I` ino | inode attributes, and the data of a small file, a symlink target or a device number inline |
//! | `I` | `I` ino `m`/`c`/`n` | a directory's hot attributes: mtime, ctime (atomic max), link-count delta (atomic add) |
//! | `D` | `D` parent-ino name | child ino and type: lookup is one get, readdir one range scan |
//! | `B` | `B` ino block-index | block bytes, or a reference to an immutable chunk; missing reads as zeros |
//! | `X` | `X` ino name | extended attribute value |
//! | `O` | `O` ino | inode unlinked while open; deleted at last close or at the next open |
//! | `C` | `C` ino block-index chunk-id | a block's data written ahead of its transaction's commit; the block's `B` key refers to it |
//! | `T` | `T` txid | a live transaction that writes blocks ahead (staging record: owner and lease) |
//! | `U` | `U` txid ino block-index chunk-id | the chunks staged by `txid`, to collect them if it never commits |
//! | `M` | `M` name | store-wide counters (atomic add), allocator high-water marks, the store's identity |
//! | `L` | `L` ino process owner | a lock holder's locks on a file and its lease expiry (shared backends only) |
//! | `H` | `H` ino process | the process has the file open (shared backends, processes other than the primary) |
//! | `P` | `P` process | the process is alive until the expiry in the value, ms since the epoch, u64 LE (shared backends) |
//! | `Q` | `Q` tree | a quota tree's record: limits, enclosing tree (`quota.rs`; the tree is its top directory's ino) |
//! | `Q` | `Q` tree `s` shard | one escrow shard: its usage and allowance, and the record's enclosing tree and flags |
//! | `W` | `W` versionstamp | the change feed: one record per committed transaction, in commit order (`changes.rs`) |
//! | `R` | `R` time process sequence (FoundationDB: `R` time random16) | a commit took effect (receipt, written with it; kept 10 minutes; shared RocksDB stores' client commits, every FoundationDB commit that writes; empty value: resolved as not applied) |
//!
//! A directory's mtime, ctime and link count change with every create and delete inside it.
//! They live in separate keys updated by atomic operations, which add no read conflict, so
//! concurrent creators in one directory do not conflict on the parent.

mod changes;
mod parse;
mod quota;
mod values;

pub use changes::*;
pub use parse::*;
pub use quota::*;
pub use values::*;

use crate::error::{Error, ErrorKind, Result};

/// The format this code writes. Readers accept every version up to it.
pub const FORMAT_VERSION: u8 = 1;
/// The root directory's inode number.
pub const ROOT_INO: u64 = 1;

/// The one-byte scope every key starts with (see the table above).
pub mod scope {
    /// The superblock.
    pub const SUPER: u8 = b'S';
    /// Inodes, and directories' hot attributes.
    pub const INODE: u8 = b'I';
    /// Directory entries.
    pub const DENTRY: u8 = b'D';
    /// Data blocks.
    pub const BLOCK: u8 = b'B';
    /// Extended attributes.
    pub const XATTR: u8 = b'X';
    /// Inodes unlinked while open.
    pub const ORPHAN: u8 = b'O';
    /// Chunks written ahead of their transaction.
    pub const CHUNK: u8 = b'C';
    /// Staging records of transactions that write ahead.
    pub const STAGE: u8 = b'T';
    /// The chunks each staging transaction wrote.
    pub const STAGED: u8 = b'U';
    /// Store-wide counters and marks.
    pub const META: u8 = b'M';
    /// Lock records (shared backends).
    pub const LOCK: u8 = b'L';
    /// Open-file marks (shared backends).
    pub const HANDLE: u8 = b'H';
    /// Liveness records (shared backends).
    pub const PROCESS: u8 = b'P';
    /// The change feed's records.
    pub const FEED: u8 = b'W';
    /// Receipts of commits: a shared RocksDB store's client commits (`kv/shared/receipts.rs`),
    /// FoundationDB commits that write (`kv/fdb/receipts.rs`).
    pub const RECEIPT: u8 = b'R';
    /// Quota trees: records and usage shards.
    pub const QUOTA: u8 = b'Q';
}
use scope::*;

fn key(scope: u8, ino: u64, rest: &[u8]) -> Vec<u8> {
    let mut k = Vec::with_capacity(9 + rest.len());
    k.push(scope);
    k.extend_from_slice(&ino.to_be_bytes());
    k.extend_from_slice(rest);
    k
}

/// The superblock key.
pub fn super_key() -> Vec<u8> {
    vec![SUPER]
}
/// An inode's attribute key.
pub fn inode_key(ino: u64) -> Vec<u8> {
    key(INODE, ino, &[])
}
/// A directory's attribute key (`m` mtime, `c` ctime, `n` link-count delta, `p` parent).
pub fn dir_attr_key(ino: u64, attr: DirAttr) -> Vec<u8> {
    key(INODE, ino, &[attr as u8])
}
/// Which hot attribute a key of [`inode_range`] holds: `None` for the inode's own key (or an
/// unknown attribute byte).
pub fn dir_attr_of(key: &[u8]) -> Option<DirAttr> {
    key.get(9).copied().and_then(DirAttr::from_u8)
}
/// All keys of one inode (attributes and hot attributes).
pub fn inode_range(ino: u64) -> (Vec<u8>, Vec<u8>) {
    (key(INODE, ino, &[]), key(INODE, ino + 1, &[]))
}
/// A directory entry's key.
pub fn dentry_key(parent: u64, name: &[u8]) -> Vec<u8> {
    key(DENTRY, parent, name)
}
/// All entries of a directory.
pub fn dentry_range(parent: u64) -> (Vec<u8>, Vec<u8>) {
    (key(DENTRY, parent, &[]), key(DENTRY, parent + 1, &[]))
}
/// The name part of a dentry key.
pub fn dentry_name(key: &[u8]) -> &[u8] {
    &key[9..]
}
/// A data block's key.
pub fn block_key(ino: u64, index: u64) -> Vec<u8> {
    key(BLOCK, ino, &index.to_be_bytes())
}
/// All blocks of an inode from `first` on.
pub fn block_range(ino: u64, first: u64) -> (Vec<u8>, Vec<u8>) {
    (block_key(ino, first), key(BLOCK, ino + 1, &[]))
}
/// The block index of a block key.
pub fn block_index(key: &[u8]) -> Result<u64> {
    be_u64_at(key, 9).ok_or_else(|| corrupt("block key too short"))
}
/// An extended attribute's key.
pub fn xattr_key(ino: u64, name: &[u8]) -> Vec<u8> {
    key(XATTR, ino, name)
}
/// All extended attributes of an inode.
pub fn xattr_range(ino: u64) -> (Vec<u8>, Vec<u8>) {
    (key(XATTR, ino, &[]), key(XATTR, ino + 1, &[]))
}
/// The name part of an xattr key.
pub fn xattr_name(key: &[u8]) -> &[u8] {
    &key[9..]
}
/// An orphan record's key.
pub fn orphan_key(ino: u64) -> Vec<u8> {
    key(ORPHAN, ino, &[])
}
/// All orphan records.
pub fn orphan_range() -> (Vec<u8>, Vec<u8>) {
    (vec![ORPHAN], vec![ORPHAN + 1])
}
/// The inode number of an orphan key.
pub fn orphan_ino(key: &[u8]) -> Result<u64> {
    be_u64_at(key, 1).ok_or_else(|| corrupt("orphan key too short"))
}
/// The big-endian number at byte `at` of a key, if the key is long enough.
fn be_u64_at(key: &[u8], at: usize) -> Option<u64> {
    key.get(at..at + 8).map(|b| u64::from_be_bytes(b.try_into().unwrap()))
}
fn nums<const N: usize>(ns: [u64; N]) -> Vec<u8> {
    ns.iter().flat_map(|n| n.to_be_bytes()).collect()
}
/// The chunk `chunk_id` holding block `idx` of `ino`, written ahead by a transaction. Chunk ids
/// are `txid << CHUNK_SEQ_BITS | seq`, unique per staged write.
pub fn chunk_key(ino: u64, idx: u64, chunk_id: u64) -> Vec<u8> {
    key(CHUNK, ino, &nums([idx, chunk_id]))
}
/// Bits of a chunk id that number the chunks of one transaction.
pub const CHUNK_SEQ_BITS: u32 = 24;
/// The staging record of transaction `txid`.
pub fn stage_key(txid: u64) -> Vec<u8> {
    key(STAGE, txid, &[])
}
/// All staging records.
pub fn stage_range() -> (Vec<u8>, Vec<u8>) {
    (vec![STAGE], vec![STAGE + 1])
}
/// The transaction of a staging key.
pub fn stage_txid(key: &[u8]) -> Result<u64> {
    be_u64_at(key, 1).ok_or_else(|| corrupt("staging key too short"))
}
/// The index entry for chunk `chunk_id` (block `idx` of `ino`) staged by `txid`.
pub fn staged_key(txid: u64, ino: u64, idx: u64, chunk_id: u64) -> Vec<u8> {
    key(STAGED, txid, &nums([ino, idx, chunk_id]))
}
/// Every index entry of `txid`.
pub fn staged_range(txid: u64) -> (Vec<u8>, Vec<u8>) {
    (key(STAGED, txid, &[]), key(STAGED, txid + 1, &[]))
}
/// The chunk key named by a staged-index key.
pub fn staged_chunk(key: &[u8]) -> Result<Vec<u8>> {
    match (be_u64_at(key, 9), be_u64_at(key, 17), be_u64_at(key, 25)) {
        (Some(ino), Some(idx), Some(id)) => Ok(chunk_key(ino, idx, id)),
        _ => Err(corrupt("staged-index key too short")),
    }
}

/// The lock record of `owner` (a handle) of `process` on file `ino`.
pub fn lock_key(ino: u64, process: u64, owner: u64) -> Vec<u8> {
    let mut rest = [0u8; 16];
    rest[..8].copy_from_slice(&process.to_be_bytes());
    rest[8..].copy_from_slice(&owner.to_be_bytes());
    key(LOCK, ino, &rest)
}
/// All lock records of one file.
pub fn lock_range(ino: u64) -> (Vec<u8>, Vec<u8>) {
    (key(LOCK, ino, &[]), key(LOCK, ino + 1, &[]))
}
/// The process and owner of a lock key.
pub fn lock_holder(key: &[u8]) -> Result<(u64, u64)> {
    be_u64_at(key, 9).zip(be_u64_at(key, 17)).ok_or_else(|| corrupt("lock key too short"))
}

/// The mark of `process` having file `ino` open (fs/handle_marks.rs).
pub fn handle_key(ino: u64, process: u64) -> Vec<u8> {
    key(HANDLE, ino, &process.to_be_bytes())
}
/// All open marks of one file.
pub fn handle_range(ino: u64) -> (Vec<u8>, Vec<u8>) {
    (key(HANDLE, ino, &[]), key(HANDLE, ino + 1, &[]))
}
/// The process of an open mark's key.
pub fn handle_process(key: &[u8]) -> Result<u64> {
    be_u64_at(key, 9).ok_or_else(|| corrupt("open-mark key too short"))
}
/// The liveness record of `process`.
pub fn process_key(process: u64) -> Vec<u8> {
    key(PROCESS, process, &[])
}
/// All liveness records.
pub fn process_range() -> (Vec<u8>, Vec<u8>) {
    (vec![PROCESS], vec![PROCESS + 1])
}

/// A store-wide counter or allocator key.
pub fn meta_key(name: Meta) -> Vec<u8> {
    vec![META, name as u8]
}

/// Store-wide counters and allocators.
#[derive(Clone, Copy, Debug)]
#[repr(u8)]
pub enum Meta {
    /// Next unreserved inode number (reserved a range at a time).
    NextIno = b'i',
    /// Number of live inodes (atomic add).
    Inodes = b'n',
    /// Bytes of file data (sum of file sizes; atomic add).
    Bytes = b'b',
    /// Next transaction id for staging blocks ahead (and for ids of chunks written in place).
    NextTxn = b't',
    /// The store's random identity (16 bytes), written by the first open with a disk cache:
    /// what the cache's entries belong to (`fs/ops/chunks.rs`).
    StoreId = b'u',
    /// The change feed's settings ([`FeedConfig`]).
    Feed = b'f',
    /// The counter of the newest change feed record dropped by retention (atomic max).
    FeedDropped = b'w',
    /// Bytes of change feed records (atomic add).
    FeedBytes = b'z',
}

/// A directory's hot attributes, kept out of the inode value.
#[derive(Clone, Copy, Debug)]
#[repr(u8)]
pub enum DirAttr {
    /// Modification time in ns (atomic max; `utimens` sets it).
    Mtime = b'm',
    /// Change time in ns (atomic max).
    Ctime = b'c',
    /// Link count minus the stored base (atomic add).
    Nlink = b'n',
    /// The parent directory's inode number (8 bytes, little-endian), so that a rename can
    /// walk up from its destination and refuse to move a directory below itself. Stores made
    /// before it have none; the root has none.
    Parent = b'p',
}

impl DirAttr {
    /// Every attribute a directory may have.
    pub const ALL: [DirAttr; 4] = [DirAttr::Mtime, DirAttr::Ctime, DirAttr::Nlink, DirAttr::Parent];
}

pub(crate) fn corrupt(what: &str) -> Error {
    Error::new(ErrorKind::Corrupt, format!("corrupt store: {what}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_round_trip() {
        let ino = Inode {
            kind: FileType::File,
            perm: 0o644,
            uid: 1,
            gid: 2,
            nlink: 1,
            size: 3,
            atime: -5,
            mtime: 6,
            ctime: 7,
            is_inline: true,
            has_chunks: true,
            block_shift: 0,
            no_xattrs: false,
            quota: 0,
            inline: b"abc".to_vec(),
        };
        assert_eq!(Inode::decode(&ino.encode()).unwrap(), ino);
        // A quota tree's number follows the flags (and the block shift), only where set.
        let stamped = Inode { quota: 42, block_shift: 12, ..ino.clone() };
        assert_eq!(Inode::decode(&stamped.encode()).unwrap(), stamped);
        assert_eq!(stamped.encode().len(), ino.encode().len() + 9);
        // A file with its own block size keeps it; an inode without one is encoded as before.
        let marked = Inode { no_xattrs: true, ..ino.clone() };
        assert_eq!(Inode::decode(&marked.encode()).unwrap(), marked);
        let own = Inode { block_shift: 12, ..ino.clone() };
        assert_eq!(Inode::decode(&own.encode()).unwrap(), own);
        assert_eq!(own.encode().len(), ino.encode().len() + 1);
        let mut bad = own.encode();
        bad[51] = 30; // after version, kind, 4 u32s, size, 3 times and the flags
        assert_eq!(Inode::decode(&bad).unwrap_err().kind(), crate::ErrorKind::Corrupt);
        let d = Dentry { ino: 42, kind: FileType::Dir };
        assert_eq!(Dentry::decode(&d.encode()).unwrap(), d);
        for b in [Block::Data(vec![1, 2]), Block::Chunk { id: 9, offset: 3, len: 4 }] {
            assert_eq!(Block::decode(&b.encode()).unwrap(), b);
        }
        let sb = Superblock { version: 1, block_size: 65536, inline_limit: 4096, created_ns: 1 };
        assert_eq!(Superblock::decode(&sb.encode()).unwrap(), sb);
    }

    #[test]
    fn newer_format_is_refused() {
        let mut v = Dentry { ino: 1, kind: FileType::File }.encode();
        v[0] = FORMAT_VERSION + 1;
        assert_eq!(Dentry::decode(&v).unwrap_err().kind(), ErrorKind::Corrupt);
    }

    #[test]
    fn keys_sort_by_number() {
        assert!(block_key(1, 255) < block_key(1, 256));
        assert!(block_key(1, u64::MAX) < block_range(1, 0).1);
        assert!(dentry_key(1, b"zzz") < dentry_range(1).1);
        assert!(dir_attr_key(7, DirAttr::Mtime) < inode_range(7).1);
    }

    #[test]
    fn dir_attr_keys_parse_back() {
        for a in [DirAttr::Mtime, DirAttr::Ctime, DirAttr::Nlink, DirAttr::Parent] {
            assert_eq!(dir_attr_of(&dir_attr_key(7, a)).map(|b| b as u8), Some(a as u8));
        }
        assert!(dir_attr_of(&inode_key(7)).is_none());
    }
}
