//! The change feed's records (scope `W`): one per committed transaction that changed the tree
//! while the feed was on, at the key `W` + the commit's 10-byte versionstamp (see
//! [`crate::kv::Txn::set_versionstamped_key`]), so the records sort in commit order. The value
//! lists the transaction's changes, compactly: a format byte, the commit time (ms since the
//! epoch, varint), the number of changes (varint), then per change its kind and file type
//! (a byte each), inode (varint), path (varint length, bytes) and, for a rename, the new path.
//!
//! The feed's settings live in `M f` ([`FeedConfig`]); `M w` is the counter part of the last
//! dropped record's stamp (atomic max), so a consumer behind it learns that it missed changes;
//! `M z` is the bytes the records hold (atomic add), for retention by size.

use super::{corrupt, FileType, Meta, FORMAT_VERSION};
use crate::error::Result;

/// The length of a versionstamp (8-byte big-endian commit counter, 2-byte index).
pub const STAMP_LEN: usize = 10;

/// The prefix of every feed record key.
pub fn feed_prefix() -> Vec<u8> {
    vec![super::scope::FEED]
}
/// The feed record key of `stamp`.
pub fn feed_key(stamp: &[u8; STAMP_LEN]) -> Vec<u8> {
    [&[super::scope::FEED][..], stamp].concat()
}
/// Every feed record.
pub fn feed_range() -> (Vec<u8>, Vec<u8>) {
    (vec![super::scope::FEED], vec![super::scope::FEED + 1])
}
/// The stamp of a feed record key.
pub fn feed_stamp(key: &[u8]) -> Result<[u8; STAMP_LEN]> {
    key.get(1..1 + STAMP_LEN)
        .and_then(|s| s.try_into().ok())
        .ok_or_else(|| corrupt("change feed key of the wrong length"))
}
/// The key of the feed's settings.
pub fn feed_config_key() -> Vec<u8> {
    super::meta_key(Meta::Feed)
}

/// What happened to a path.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ChangeKind {
    /// A file, directory, symlink or special file was created.
    Created,
    /// A file's data changed (written or truncated).
    Written,
    /// A name was removed (a directory's whole subtree with it, for a tree removal).
    Removed,
    /// A name was moved to [`Change::to`] (replacing what was there).
    Renamed,
    /// Attributes changed (mode, owner, times).
    Attrs,
    /// Extended attributes changed.
    Xattrs,
    /// A hard link was added at the path.
    Linked,
}

impl ChangeKind {
    /// Every kind.
    pub const ALL: [ChangeKind; 7] = [
        ChangeKind::Created,
        ChangeKind::Written,
        ChangeKind::Removed,
        ChangeKind::Renamed,
        ChangeKind::Attrs,
        ChangeKind::Xattrs,
        ChangeKind::Linked,
    ];
    /// The kind's name: `created`, `written`, `removed`, `renamed`, `attrs`, `xattrs`, `linked`.
    pub fn name(self) -> &'static str {
        match self {
            ChangeKind::Created => "created",
            ChangeKind::Written => "written",
            ChangeKind::Removed => "removed",
            ChangeKind::Renamed => "renamed",
            ChangeKind::Attrs => "attrs",
            ChangeKind::Xattrs => "xattrs",
            ChangeKind::Linked => "linked",
        }
    }
    /// The kind named `name` (see [`ChangeKind::name`]).
    pub fn from_name(name: &str) -> Option<ChangeKind> {
        ChangeKind::ALL.into_iter().find(|k| k.name() == name)
    }
    fn to_u8(self) -> u8 {
        self as u8 + 1
    }
    fn from_u8(b: u8) -> Result<ChangeKind> {
        ChangeKind::ALL
            .get((b as usize).wrapping_sub(1))
            .copied()
            .ok_or_else(|| corrupt("unknown change kind in the change feed"))
    }
}

/// One change of a committed transaction.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Change {
    /// What happened.
    pub kind: ChangeKind,
    /// The inode changed (for a removal, the inode the name referred to).
    pub ino: u64,
    /// The file's type.
    pub file_type: FileType,
    /// The path (for a rename, the old one). A handle's writes carry the path it was opened
    /// at, which a later rename may have changed.
    pub path: Vec<u8>,
    /// A rename's new path.
    pub to: Option<Vec<u8>>,
}

fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push(v as u8 | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn get_varint(b: &[u8], at: &mut usize) -> Result<u64> {
    let mut v = 0u64;
    for shift in (0..64).step_by(7) {
        let byte = *b.get(*at).ok_or_else(|| corrupt("change feed record too short"))?;
        *at += 1;
        v |= ((byte & 0x7f) as u64) << shift;
        if byte < 0x80 {
            return Ok(v);
        }
    }
    Err(corrupt("change feed varint too long"))
}

fn get_bytes<'a>(b: &'a [u8], at: &mut usize) -> Result<&'a [u8]> {
    let len = get_varint(b, at)? as usize;
    let s = b
        .get(*at..at.saturating_add(len))
        .ok_or_else(|| corrupt("change feed record too short"))?;
    *at += len;
    Ok(s)
}

/// Encodes one transaction's changes, committed at `time_ms`.
pub fn encode_record(time_ms: u64, changes: &[Change]) -> Vec<u8> {
    let size: usize =
        changes.iter().map(|c| 16 + c.path.len() + c.to.as_ref().map_or(0, |t| t.len())).sum();
    let mut out = Vec::with_capacity(12 + size);
    out.push(FORMAT_VERSION);
    put_varint(&mut out, time_ms);
    put_varint(&mut out, changes.len() as u64);
    for c in changes {
        out.push(c.kind.to_u8());
        out.push(c.file_type.to_u8());
        put_varint(&mut out, c.ino);
        put_varint(&mut out, c.path.len() as u64);
        out.extend_from_slice(&c.path);
        if c.kind == ChangeKind::Renamed {
            let to = c.to.as_deref().unwrap_or_default();
            put_varint(&mut out, to.len() as u64);
            out.extend_from_slice(to);
        }
    }
    out
}

/// Decodes a record: its commit time (ms since the epoch) and changes.
pub fn decode_record(b: &[u8]) -> Result<(u64, Vec<Change>)> {
    match b.first() {
        Some(&v) if v != 0 && v <= FORMAT_VERSION => {}
        _ => return Err(corrupt("change feed record of an unknown format")),
    }
    let mut at = 1;
    let time = get_varint(b, &mut at)?;
    let n = get_varint(b, &mut at)?;
    let mut changes = Vec::with_capacity(n.min(1 << 16) as usize);
    for _ in 0..n {
        let head = b.get(at..at + 2).ok_or_else(|| corrupt("change feed record too short"))?;
        let (kind, file_type) = (ChangeKind::from_u8(head[0])?, FileType::from_u8(head[1])?);
        at += 2;
        let ino = get_varint(b, &mut at)?;
        let path = get_bytes(b, &mut at)?.to_vec();
        let to = match kind {
            ChangeKind::Renamed => Some(get_bytes(b, &mut at)?.to_vec()),
            _ => None,
        };
        changes.push(Change { kind, ino, file_type, path, to });
    }
    if at != b.len() {
        return Err(corrupt("trailing bytes in a change feed record"));
    }
    Ok((time, changes))
}

/// The change feed's settings, kept in the store (`M f`), so every process writing to it
/// agrees. Limits of 0 mean unlimited.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FeedConfig {
    /// Writers record their changes.
    pub on: bool,
    /// Keep at most this many records.
    pub max_records: u64,
    /// Keep records at most this old, in ms.
    pub max_age_ms: u64,
    /// Keep at most this many bytes of records.
    pub max_bytes: u64,
}

impl FeedConfig {
    /// The stored form.
    pub fn encode(&self) -> Vec<u8> {
        let mut v = vec![FORMAT_VERSION, self.on as u8];
        for n in [self.max_records, self.max_age_ms, self.max_bytes] {
            v.extend_from_slice(&n.to_le_bytes());
        }
        v
    }
    /// Parses the stored form.
    pub fn decode(b: &[u8]) -> Result<FeedConfig> {
        if b.len() != 26 || b[0] == 0 || b[0] > FORMAT_VERSION {
            return Err(corrupt("change feed settings of an unknown format"));
        }
        let n = |i: usize| u64::from_le_bytes(b[2 + 8 * i..10 + 8 * i].try_into().unwrap());
        Ok(FeedConfig { on: b[1] != 0, max_records: n(0), max_age_ms: n(1), max_bytes: n(2) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_round_trip() {
        let changes = vec![
            Change {
                kind: ChangeKind::Created,
                ino: 300,
                file_type: FileType::Dir,
                path: b"/a".to_vec(),
                to: None,
            },
            Change {
                kind: ChangeKind::Renamed,
                ino: 1 << 40,
                file_type: FileType::File,
                path: b"/a/x".to_vec(),
                to: Some(b"/b/y".to_vec()),
            },
        ];
        let v = encode_record(1_700_000_000_000, &changes);
        assert_eq!(decode_record(&v).unwrap(), (1_700_000_000_000, changes));
        assert!(decode_record(&v[..v.len() - 1]).is_err());
        let c = FeedConfig { on: true, max_records: 5, max_age_ms: 6, max_bytes: 7 };
        assert_eq!(FeedConfig::decode(&c.encode()).unwrap(), c);
    }
}
