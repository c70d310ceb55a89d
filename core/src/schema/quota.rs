//! Quota trees (scope `Q`): each tree's record (limits, enclosing tree) and its usage, split in
//! [`SHARDS`] escrow shards so that writers far from the limit do not conflict (see
//! `fs/ops/quota.rs` and docs/design.md, "Quotas").

use super::values::{check_version, Reader};
use super::{be_u64_at, corrupt, key, FORMAT_VERSION, QUOTA};
use crate::error::Result;

/// Shards each tree's usage is split in.
pub const QUOTA_SHARDS: u8 = 16;
/// Shorter name used inside the crate.
pub(crate) const SHARDS: u8 = QUOTA_SHARDS;

/// One counter of a shard (8 bytes, little-endian, two's complement; atomic add).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum QuotaField {
    /// Bytes of regular files counted in this shard (may be negative: frees go to any shard).
    UsedBytes = b'b',
    /// Inodes counted in this shard.
    UsedInodes = b'n',
    /// The share of the byte limit this shard may use (only while bytes are limited).
    AllowBytes = b'B',
    /// The share of the inode limit.
    AllowInodes = b'N',
}

impl QuotaField {
    /// Every field.
    pub const ALL: [QuotaField; 4] = [
        QuotaField::UsedBytes,
        QuotaField::UsedInodes,
        QuotaField::AllowBytes,
        QuotaField::AllowInodes,
    ];
    fn from_u8(b: u8) -> Option<QuotaField> {
        QuotaField::ALL.into_iter().find(|f| *f as u8 == b)
    }
}

/// A quota tree's record: its limits and the tree that encloses it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QuotaRecord {
    /// Byte limit (0: bytes are counted, not limited).
    pub bytes: u64,
    /// Inode limit (0: not limited).
    pub inodes: u64,
    /// The enclosing quota tree (0: none).
    pub parent: u64,
    /// The tree's quota was removed or its top directory deleted while inodes stamped with it
    /// remained (files open after their unlink, a tree being removed in batches): it keeps
    /// counting them, without limits, and disappears when its usage reaches zero.
    pub dissolved: bool,
}

impl QuotaRecord {
    /// Encodes the record.
    pub fn encode(&self) -> Vec<u8> {
        let mut v = vec![FORMAT_VERSION, self.dissolved as u8];
        for x in [self.bytes, self.inodes, self.parent] {
            v.extend_from_slice(&x.to_le_bytes());
        }
        v
    }
    /// Decodes a record.
    pub fn decode(v: &[u8]) -> Result<QuotaRecord> {
        check_version(v, "quota record")?;
        let mut r = Reader { buf: &v[1..], what: "quota record" };
        let dissolved = r.u8()? & 1 != 0;
        Ok(QuotaRecord { bytes: r.u64()?, inodes: r.u64()?, parent: r.u64()?, dissolved })
    }
}

/// Each shard's allowance for `limit`: its usage plus an even share of what is spare (the
/// remainder to shard `extra`). The allowances add up to the limit while the usage is within
/// it, and no shard's is below its usage.
pub fn quota_allowances(
    limit: u64,
    used: [i64; SHARDS as usize],
    extra: u8,
) -> [i64; SHARDS as usize] {
    let spare = (limit as i64 - used.iter().sum::<i64>()).max(0);
    let n = SHARDS as i64;
    std::array::from_fn(|s| used[s] + spare / n + if s as u8 == extra { spare % n } else { 0 })
}

/// The record of quota tree `tree` (the inode number of its top directory).
pub fn quota_key(tree: u64) -> Vec<u8> {
    key(QUOTA, tree, &[])
}
/// One counter of one shard of `tree`.
pub fn quota_shard_key(tree: u64, shard: u8, field: QuotaField) -> Vec<u8> {
    key(QUOTA, tree, &[b's', shard, field as u8])
}
/// The counters of one shard.
pub fn quota_shard_range(tree: u64, shard: u8) -> (Vec<u8>, Vec<u8>) {
    (key(QUOTA, tree, &[b's', shard]), key(QUOTA, tree, &[b's', shard + 1]))
}
/// The counters of every shard of `tree`.
pub fn quota_shards_range(tree: u64) -> (Vec<u8>, Vec<u8>) {
    (key(QUOTA, tree, b"s"), key(QUOTA, tree, b"t"))
}
/// Every key of `tree` (record and shards).
pub fn quota_tree_range(tree: u64) -> (Vec<u8>, Vec<u8>) {
    (key(QUOTA, tree, &[]), key(QUOTA, tree + 1, &[]))
}
/// Parses a `Q` key: the tree, and the shard and field for a counter (`None`: the record).
pub fn parse_quota_key(k: &[u8]) -> Result<(u64, Option<(u8, QuotaField)>)> {
    let tree = be_u64_at(k, 1).ok_or_else(|| corrupt("quota key too short"))?;
    match k.len() {
        9 => Ok((tree, None)),
        12 if k[9] == b's' && k[10] < SHARDS => QuotaField::from_u8(k[11])
            .map(|f| (tree, Some((k[10], f))))
            .ok_or_else(|| corrupt("unknown quota counter")),
        _ => Err(corrupt("quota key of the wrong shape")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quota_keys_and_records_round_trip() {
        let r = QuotaRecord { bytes: 5, inodes: 0, parent: 9, dissolved: true };
        assert_eq!(QuotaRecord::decode(&r.encode()).unwrap(), r);
        assert_eq!(parse_quota_key(&quota_key(7)).unwrap(), (7, None));
        let k = quota_shard_key(7, 15, QuotaField::AllowInodes);
        assert_eq!(parse_quota_key(&k).unwrap(), (7, Some((15, QuotaField::AllowInodes))));
        let (s, e) = quota_shard_range(7, 3);
        assert!(
            s < quota_shard_key(7, 3, QuotaField::UsedBytes)
                && quota_shard_key(7, 3, QuotaField::AllowBytes) < e
        );
        let (s, e) = quota_shards_range(7);
        assert!(quota_key(7) < s && s < k && k < e && e < quota_tree_range(7).1);
        assert!(parse_quota_key(&quota_shard_key(7, 16, QuotaField::UsedBytes)).is_err());
    }

    #[test]
    fn allowances_add_up_to_the_limit() {
        let mut used = [0i64; SHARDS as usize];
        used[3] = 40;
        used[5] = -7;
        let a = quota_allowances(100, used, 3);
        assert_eq!(a.iter().sum::<i64>(), 100);
        assert!(a.iter().zip(used).all(|(a, u)| *a >= u));
        assert_eq!(a[3] - used[3], 67 / 16 + 67 % 16);
    }
}
