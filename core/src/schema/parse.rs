//! Keys parsed back into their parts, for whole-store scans (the integrity check, `fsck`).
//! A key that does not parse gives a `Corrupt` error rather than a panic.

use super::{
    be_u64_at, block_index, corrupt, DirAttr, BLOCK, CHUNK, DENTRY, INODE, ORPHAN, STAGE, STAGED,
    XATTR,
};
use crate::error::Result;

/// Every key of one scope: all inodes (`I`), entries (`D`), blocks (`B`), extended attributes
/// (`X`), chunks (`C`) or staged-index entries (`U`), for a whole-store scan.
pub fn scope_range(scope: Scope) -> (Vec<u8>, Vec<u8>) {
    let s = scope as u8;
    (vec![s], vec![s + 1])
}

/// The scopes a whole-store scan walks (see [`scope_range`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Scope {
    /// Inodes and directories' hot attributes.
    Inodes = INODE,
    /// Directory entries.
    Dentries = DENTRY,
    /// Data blocks.
    Blocks = BLOCK,
    /// Extended attributes.
    Xattrs = XATTR,
    /// Orphan records.
    Orphans = ORPHAN,
    /// Chunks written ahead.
    Chunks = CHUNK,
    /// Staging records.
    Stages = STAGE,
    /// Staged-index entries.
    Staged = STAGED,
    /// Quota records and usage shards.
    Quotas = super::QUOTA,
}

/// The number after the scope byte of a per-inode key (the inode, a directory entry's
/// parent, or a staging key's transaction).
fn key_number(key: &[u8], what: &str) -> Result<u64> {
    be_u64_at(key, 1).ok_or_else(|| corrupt(&format!("{what} key too short")))
}
/// Parses an `I` key: the inode, and which hot attribute the key holds (`None`: the inode's
/// attributes themselves).
pub fn parse_inode_key(key: &[u8]) -> Result<(u64, Option<DirAttr>)> {
    let ino = key_number(key, "inode")?;
    match key.len() {
        9 => Ok((ino, None)),
        10 => DirAttr::from_u8(key[9])
            .map(|a| (ino, Some(a)))
            .ok_or_else(|| corrupt("unknown inode key suffix")),
        _ => Err(corrupt("inode key of the wrong length")),
    }
}
/// Parses a `D` key: the parent directory and the name.
pub fn parse_dentry_key(key: &[u8]) -> Result<(u64, &[u8])> {
    Ok((key_number(key, "directory entry")?, &key[9..]))
}
/// Parses a `B` key: the inode and the block index.
pub fn parse_block_key(key: &[u8]) -> Result<(u64, u64)> {
    Ok((key_number(key, "block")?, block_index(key)?))
}
/// Parses an `X` key: the inode and the attribute's name.
pub fn parse_xattr_key(key: &[u8]) -> Result<(u64, &[u8])> {
    Ok((key_number(key, "xattr")?, &key[9..]))
}
/// Parses a `C` key: the inode, the block index and the chunk id.
pub fn parse_chunk_key(key: &[u8]) -> Result<(u64, u64, u64)> {
    match (be_u64_at(key, 1), be_u64_at(key, 9), be_u64_at(key, 17)) {
        (Some(ino), Some(idx), Some(id)) if key.len() == 25 => Ok((ino, idx, id)),
        _ => Err(corrupt("chunk key of the wrong length")),
    }
}
/// The transaction of a staged-index (`U`) key.
pub fn staged_txid(key: &[u8]) -> Result<u64> {
    key_number(key, "staged-index")
}

impl DirAttr {
    /// The attribute a key suffix byte names.
    pub fn from_u8(b: u8) -> Option<DirAttr> {
        DirAttr::ALL.into_iter().find(|a| *a as u8 == b)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::{
        block_key, chunk_key, dentry_key, dir_attr_key, inode_key, staged_key, xattr_key,
    };

    #[test]
    fn keys_parse_back() {
        assert!(matches!(parse_inode_key(&inode_key(7)).unwrap(), (7, None)));
        assert!(matches!(
            parse_inode_key(&dir_attr_key(7, DirAttr::Nlink)).unwrap(),
            (7, Some(DirAttr::Nlink))
        ));
        for attr in [DirAttr::Mtime, DirAttr::Ctime, DirAttr::Nlink, DirAttr::Parent] {
            assert_eq!(DirAttr::from_u8(attr as u8).map(|a| a as u8), Some(attr as u8));
        }
        assert_eq!(parse_dentry_key(&dentry_key(3, b"name")).unwrap(), (3, &b"name"[..]));
        assert_eq!(parse_block_key(&block_key(4, 9)).unwrap(), (4, 9));
        assert_eq!(parse_xattr_key(&xattr_key(5, b"user.a")).unwrap(), (5, &b"user.a"[..]));
        assert_eq!(parse_chunk_key(&chunk_key(6, 2, 77)).unwrap(), (6, 2, 77));
        assert_eq!(staged_txid(&staged_key(8, 6, 2, 77)).unwrap(), 8);
        for bad in [&b"I"[..], b"I1234567", b"D12", b"B123456789"] {
            let parsed = [
                parse_inode_key(bad).is_err(),
                parse_dentry_key(bad).is_err(),
                parse_block_key(bad).is_err(),
            ];
            assert!(parsed.iter().any(|e| *e), "{bad:?}");
        }
        assert!(parse_inode_key(&[b'I', 0, 0, 0, 0, 0, 0, 0, 1, b'z']).is_err());
        assert!(parse_chunk_key(&chunk_key(6, 2, 77)[..24]).is_err());
        let (start, end) = scope_range(Scope::Blocks);
        assert!(start <= block_key(0, 0) && block_key(u64::MAX, u64::MAX) < end);
    }
}
