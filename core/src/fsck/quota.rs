//! The quota checks of fsck: every quota tree's usage, recounted from the inodes stamped with
//! it and with the trees nested in it, equals the sum of its shard counters; each limited
//! dimension's allowances add up to the limit and cover each shard's usage; a tree's record
//! belongs to a live top directory (or is dissolved and still counts something); every inode's
//! tree has a record. A repair rewrites a tree's counters from the recount.

use super::{CheckReport, Fix, InodeSummary, ProblemKind as P, Reader};
use crate::error::Result;
use crate::schema::{self, quota_allowances, FileType, QuotaField as F, QuotaRecord, Scope};
use crate::schema::{QUOTA_SHARDS, SHARDS};
use std::collections::BTreeMap;

/// One tree's stored counters: (used bytes, used inodes, allowed bytes, allowed inodes) per
/// shard, and every counter key seen.
#[derive(Default)]
struct Counters {
    per_shard: [[i64; 4]; SHARDS as usize],
    keys: Vec<Vec<u8>>,
}

fn field_index(f: F) -> usize {
    match f {
        F::UsedBytes => 0,
        F::UsedInodes => 1,
        F::AllowBytes => 2,
        F::AllowInodes => 3,
    }
}

/// The fixes that give tree `t` the record `rec` and counters for `used` (bytes, inodes).
fn rewrite(t: u64, rec: &QuotaRecord, c: &Counters, used: [i64; 2]) -> Vec<Fix> {
    let mut fixes: Vec<Fix> = c.keys.iter().cloned().map(Fix::Clear).collect();
    fixes.push(Fix::Set(schema::quota_key(t), rec.encode()));
    for (i, f) in [F::UsedBytes, F::UsedInodes].into_iter().enumerate() {
        fixes.push(Fix::Set(schema::quota_shard_key(t, 0, f), used[i].to_le_bytes().into()));
    }
    for (i, (limit, f)) in
        [(rec.bytes, F::AllowBytes), (rec.inodes, F::AllowInodes)].into_iter().enumerate()
    {
        if limit != 0 && !rec.dissolved {
            let mut per = [0; QUOTA_SHARDS as usize];
            per[0] = used[i];
            for (s, a) in quota_allowances(limit, per, 0).into_iter().enumerate() {
                fixes
                    .push(Fix::Set(schema::quota_shard_key(t, s as u8, f), a.to_le_bytes().into()));
            }
        }
    }
    fixes
}

pub(super) fn check_quotas(
    rd: &mut Reader,
    inodes: &BTreeMap<u64, InodeSummary>,
    r: &mut CheckReport,
) -> Result<()> {
    let mut records: BTreeMap<u64, QuotaRecord> = BTreeMap::new();
    let mut counters: BTreeMap<u64, Counters> = BTreeMap::new();
    rd.scan(Scope::Quotas, |_, k, v| {
        match schema::parse_quota_key(&k) {
            Ok((t, None)) => match QuotaRecord::decode(&v) {
                Ok(rec) => {
                    records.insert(t, rec);
                }
                Err(err) => r.problem(P::Undecodable, format!("quota tree {t}: {err}"), vec![]),
            },
            Ok((t, Some((shard, f)))) => {
                let c = counters.entry(t).or_default();
                c.per_shard[shard as usize][field_index(f)] =
                    crate::kv::decode_counter(Some(&v)) as i64;
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
    let empty = Counters::default();
    for (&t, rec) in &records {
        let c = counters.get(&t).unwrap_or(&empty);
        let used = want[&t];
        let have = c.per_shard.iter().fold([0, 0], |a, s| [a[0] + s[0], a[1] + s[1]]);
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
        } else if have != used {
            let msg = format!(
                "quota tree {t} counts {} bytes and {} inodes, its inodes hold {} and {}",
                have[0], have[1], used[0], used[1]
            );
            r.problem(P::QuotaUsage, msg, rewrite(t, rec, c, used));
        } else if !rec.dissolved {
            for (limit, u, a, what) in [(rec.bytes, 0, 2, "byte"), (rec.inodes, 1, 3, "inode")] {
                let total: i64 = c.per_shard.iter().map(|s| s[a]).sum();
                let covered = c.per_shard.iter().all(|s| s[u] <= s[a]);
                if limit != 0 && (total != limit as i64 || !covered) {
                    let msg = format!(
                        "quota tree {t}: its {what} allowances add up to {total} for a limit of \
                         {limit}{}",
                        if covered { "" } else { ", or one is below its shard's usage" }
                    );
                    r.problem(P::QuotaUsage, msg, rewrite(t, rec, c, used));
                    break;
                }
            }
        }
    }
    Ok(())
}
