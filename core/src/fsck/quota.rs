//! The quota checks of fsck: every quota tree's usage, recounted from the inodes stamped with
//! it and with the trees nested in it, equals the sum of its shards' usage; each limited
//! dimension's allowances add up to the limit and cover each shard's usage; every shard
//! mirrors the record (enclosing tree, limited dimensions, dissolved); a tree's record belongs
//! to a live top directory (or is dissolved and still counts something); every inode's tree
//! has a record. A repair rewrites a tree's shards from the recount.

use super::{CheckReport, Fix, InodeSummary, ProblemKind as P, Reader};
use crate::error::Result;
use crate::schema::{self, FileType, QuotaRecord, QuotaShard, Scope, SHARDS};
use std::collections::BTreeMap;

/// One tree's stored shards (`None`: missing or undecodable), and every shard key seen.
#[derive(Default)]
struct Shards {
    shards: [Option<QuotaShard>; SHARDS as usize],
    keys: Vec<Vec<u8>>,
}

/// The fixes that give tree `t` the record `rec` and fresh shards for `used` (bytes, inodes).
fn rewrite(t: u64, rec: &QuotaRecord, c: &Shards, used: [i64; 2]) -> Vec<Fix> {
    let mut fixes: Vec<Fix> = c.keys.iter().cloned().map(Fix::Clear).collect();
    fixes.push(Fix::Set(schema::quota_key(t), rec.encode()));
    for (s, sh) in QuotaShard::fresh(rec, used[0], used[1]).iter().enumerate() {
        fixes.push(Fix::Set(schema::quota_shard_key(t, s as u8), sh.encode()));
    }
    fixes
}

/// What is wrong with tree `t`'s shards, given its record and the recount `used`.
fn shards_problem(t: u64, rec: &QuotaRecord, c: &Shards, used: [i64; 2]) -> Option<String> {
    let Some(shards) = c.shards.iter().copied().collect::<Option<Vec<QuotaShard>>>() else {
        return Some(format!("quota tree {t} lacks a shard"));
    };
    let have = shards.iter().fold([0, 0], |a, s| [a[0] + s.used_bytes, a[1] + s.used_inodes]);
    if have != used {
        return Some(format!(
            "quota tree {t} counts {} bytes and {} inodes, its inodes hold {} and {}",
            have[0], have[1], used[0], used[1]
        ));
    }
    let want = QuotaShard::fresh(rec, 0, 0)[0];
    let mirrors = |s: &QuotaShard| {
        (s.parent, s.bytes_limited, s.inodes_limited, s.dissolved)
            == (want.parent, want.bytes_limited, want.inodes_limited, want.dissolved)
    };
    if !shards.iter().all(mirrors) {
        return Some(format!("quota tree {t}: a shard disagrees with the tree's record"));
    }
    // Each limited dimension: (limit, what, each shard's usage and allowance).
    let dims = [
        (
            want.bytes_limited,
            rec.bytes,
            "byte",
            shards.iter().map(|s| (s.used_bytes, s.allow_bytes)).collect::<Vec<_>>(),
        ),
        (
            want.inodes_limited,
            rec.inodes,
            "inode",
            shards.iter().map(|s| (s.used_inodes, s.allow_inodes)).collect(),
        ),
    ];
    for (limited, limit, what, per) in dims {
        let total: i64 = per.iter().map(|p| p.1).sum();
        let covered = per.iter().all(|p| p.0 <= p.1);
        if limited && (total != limit as i64 || !covered) {
            return Some(format!(
                "quota tree {t}: its {what} allowances add up to {total} for a limit of \
                 {limit}{}",
                if covered { "" } else { ", or one is below its shard's usage" }
            ));
        }
    }
    None
}

pub(super) fn check_quotas(
    rd: &mut Reader,
    inodes: &BTreeMap<u64, InodeSummary>,
    r: &mut CheckReport,
) -> Result<()> {
    let mut records: BTreeMap<u64, QuotaRecord> = BTreeMap::new();
    let mut stored: BTreeMap<u64, Shards> = BTreeMap::new();
    rd.scan(Scope::Quotas, |_, k, v| {
        match schema::parse_quota_key(&k) {
            Ok((t, None)) => match QuotaRecord::decode(&v) {
                Ok(rec) => {
                    records.insert(t, rec);
                }
                Err(err) => r.problem(P::Undecodable, format!("quota tree {t}: {err}"), vec![]),
            },
            Ok((t, Some(shard))) => {
                let c = stored.entry(t).or_default();
                c.shards[shard as usize] = QuotaShard::decode(&v).ok();
                c.keys.push(k);
            }
            Err(err) => super::malformed(r, "quota", &k, err),
        }
        Ok(())
    })?;
    // The recount: each inode counts toward its tree and every tree enclosing it.
    let mut want: BTreeMap<u64, [i64; 2]> = records.keys().map(|t| (*t, [0, 0])).collect();
    for (&ino, i) in inodes.iter().filter(|(_, i)| i.quota != 0) {
        if !records.contains_key(&i.quota) {
            let msg = format!("inode {ino} is in quota tree {}, which has no record", i.quota);
            r.problem(P::QuotaUsage, msg, vec![]);
            continue;
        }
        let bytes = if i.kind == FileType::File { i.size as i64 } else { 0 };
        let mut t = i.quota;
        for _ in 0..=crate::fs::PATH_MAX / 2 {
            let (Some(rec), Some(w)) = (records.get(&t), want.get_mut(&t)) else { break };
            w[0] += bytes;
            w[1] += 1;
            t = rec.parent;
        }
    }
    let empty = Shards::default();
    for (t, c) in stored.iter().filter(|(t, _)| !records.contains_key(t)) {
        let fixes = c.keys.iter().cloned().map(Fix::Clear).collect();
        r.problem(P::QuotaUsage, format!("quota tree {t} has shards but no record"), fixes);
    }
    for (&t, rec) in &records {
        let c = stored.get(&t).unwrap_or(&empty);
        let used = want[&t];
        let top_live = inodes.get(&t).is_some_and(|i| i.kind == FileType::Dir && i.quota == t);
        if used == [0, 0] && (rec.dissolved || !top_live) {
            let mut fixes: Vec<Fix> = c.keys.iter().cloned().map(Fix::Clear).collect();
            fixes.push(Fix::Clear(schema::quota_key(t)));
            let msg = format!("quota tree {t} has no top directory and counts nothing");
            r.problem(P::QuotaUsage, msg, fixes);
        } else if !rec.dissolved && !top_live {
            let dissolved = QuotaRecord { bytes: 0, inodes: 0, dissolved: true, ..*rec };
            let msg = format!("quota tree {t} has no top directory but is not dissolved");
            r.problem(P::QuotaUsage, msg, rewrite(t, &dissolved, c, used));
        } else if let Some(msg) = shards_problem(t, rec, c, used) {
            r.problem(P::QuotaUsage, msg, rewrite(t, rec, c, used));
        }
    }
    Ok(())
}
