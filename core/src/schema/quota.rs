//! Quota trees (scope `Q`): each tree's record (limits, enclosing tree) and its usage, split in
//! [`QUOTA_SHARDS`] escrow shards so that writers far from the limit do not conflict (see
//! `fs/ops/quota.rs` and docs/design.md, "Quotas").

use super::values::{check_version, Reader};
use super::{be_u64_at, corrupt, key, FORMAT_VERSION, QUOTA};
use crate::error::Result;

/// Shards each tree's usage is split in.
pub const QUOTA_SHARDS: u8 = 16;
/// Shorter name used inside the crate.
pub(crate) const SHARDS: u8 = QUOTA_SHARDS;

/// One escrow shard of a tree's usage: its share of the usage and of the limits, and a copy
/// of what a change needs from the tree's record (its enclosing tree, which dimensions are
/// limited, whether it is dissolved), so that a change reads one key per tree. Every change
/// of the record rewrites every shard.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct QuotaShard {
    /// Bytes of regular files counted in this shard (may be negative: frees go to any shard).
    pub used_bytes: i64,
    /// Inodes counted in this shard.
    pub used_inodes: i64,
    /// The share of the byte limit this shard may use (while bytes are limited).
    pub allow_bytes: i64,
    /// The share of the inode limit.
    pub allow_inodes: i64,
    /// The enclosing quota tree (0: none), as in the record.
    pub parent: u64,
    /// Bytes are limited (the record's byte limit is set).
    pub bytes_limited: bool,
    /// Inodes are limited.
    pub inodes_limited: bool,
    /// The tree is dissolved (see [`QuotaRecord::dissolved`]).
    pub dissolved: bool,
}

impl QuotaShard {
    /// A tree's shards for `rec` holding `used_bytes` and `used_inodes`: all of it in shard 0,
    /// each limit spread evenly ([`quota_allowances`]).
    pub fn fresh(
        rec: &QuotaRecord,
        used_bytes: i64,
        used_inodes: i64,
    ) -> [QuotaShard; SHARDS as usize] {
        let limited = |limit: u64| limit != 0 && !rec.dissolved;
        let mut shards = [QuotaShard {
            parent: rec.parent,
            bytes_limited: limited(rec.bytes),
            inodes_limited: limited(rec.inodes),
            dissolved: rec.dissolved,
            ..QuotaShard::default()
        }; SHARDS as usize];
        shards[0].used_bytes = used_bytes;
        shards[0].used_inodes = used_inodes;
        let mut per = [0; SHARDS as usize];
        if limited(rec.bytes) {
            per[0] = used_bytes;
            for (sh, a) in shards.iter_mut().zip(quota_allowances(rec.bytes, per, 0)) {
                sh.allow_bytes = a;
            }
        }
        if limited(rec.inodes) {
            per[0] = used_inodes;
            for (sh, a) in shards.iter_mut().zip(quota_allowances(rec.inodes, per, 0)) {
                sh.allow_inodes = a;
            }
        }
        shards
    }

    /// Encodes the shard.
    pub fn encode(&self) -> Vec<u8> {
        let flags = self.bytes_limited as u8
            | (self.inodes_limited as u8) << 1
            | (self.dissolved as u8) << 2;
        let mut v = Vec::with_capacity(42);
        v.extend_from_slice(&[FORMAT_VERSION, flags]);
        for x in [self.used_bytes, self.used_inodes, self.allow_bytes, self.allow_inodes] {
            v.extend_from_slice(&x.to_le_bytes());
        }
        v.extend_from_slice(&self.parent.to_le_bytes());
        v
    }
    /// Decodes a shard.
    pub fn decode(v: &[u8]) -> Result<QuotaShard> {
        check_version(v, "quota shard")?;
        let mut r = Reader { buf: &v[1..], what: "quota shard" };
        let flags = r.u8()?;
        let mut n = || r.u64().map(|x| x as i64);
        let (used_bytes, used_inodes, allow_bytes, allow_inodes) = (n()?, n()?, n()?, n()?);
        Ok(QuotaShard {
            used_bytes,
            used_inodes,
            allow_bytes,
            allow_inodes,
            parent: r.u64()?,
            bytes_limited: flags & 1 != 0,
            inodes_limited: flags & 2 != 0,
            dissolved: flags & 4 != 0,
        })
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
/// Shard `shard` of `tree`.
pub fn quota_shard_key(tree: u64, shard: u8) -> Vec<u8> {
    key(QUOTA, tree, &[b's', shard])
}
/// Every shard of `tree`.
pub fn quota_shards_range(tree: u64) -> (Vec<u8>, Vec<u8>) {
    (key(QUOTA, tree, b"s"), key(QUOTA, tree, b"t"))
}
/// Every key of `tree` (record and shards).
pub fn quota_tree_range(tree: u64) -> (Vec<u8>, Vec<u8>) {
    (key(QUOTA, tree, &[]), key(QUOTA, tree + 1, &[]))
}
/// Parses a `Q` key: the tree, and the shard for a shard's key (`None`: the record).
pub fn parse_quota_key(k: &[u8]) -> Result<(u64, Option<u8>)> {
    let tree = be_u64_at(k, 1).ok_or_else(|| corrupt("quota key too short"))?;
    match k.len() {
        9 => Ok((tree, None)),
        11 if k[9] == b's' && k[10] < SHARDS => Ok((tree, Some(k[10]))),
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
        let sh = QuotaShard {
            used_bytes: -3,
            used_inodes: 4,
            allow_bytes: 5,
            allow_inodes: 0,
            parent: 7,
            bytes_limited: true,
            inodes_limited: false,
            dissolved: true,
        };
        assert_eq!(QuotaShard::decode(&sh.encode()).unwrap(), sh);
        assert_eq!(parse_quota_key(&quota_key(7)).unwrap(), (7, None));
        let k = quota_shard_key(7, 15);
        assert_eq!(parse_quota_key(&k).unwrap(), (7, Some(15)));
        let (s, e) = quota_shards_range(7);
        assert!(
            quota_key(7) < s && s < quota_shard_key(7, 0) && k < e && e < quota_tree_range(7).1
        );
        assert!(parse_quota_key(&quota_shard_key(7, 16)).is_err());
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
