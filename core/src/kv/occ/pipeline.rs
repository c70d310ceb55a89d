//! The commit pipeline: commits that passed the resolver are applied to the engine in version
//! order, several at a time by whichever committer finds the next version ready (the leader),
//! and each becomes visible only with every earlier one.

use super::txn::{apply_atomic, AtomicOp};
use super::{Engine, Mutation, OccStore};
use crate::error::Result;
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::Ordering;

/// A commit that passed the resolver, waiting to be applied in version order.
pub(super) struct Staged {
    pub(super) batch: Vec<Mutation>,
    /// Atomic operations, resolved against the latest state when the batch is applied.
    pub(super) atomics: Vec<(Vec<u8>, Vec<AtomicOp>)>,
    /// Versionstamped writes (key prefix with room for the stamp, value), stamped when the
    /// batch is applied.
    pub(super) stamped: Vec<(Vec<u8>, Vec<u8>)>,
}

/// The length of a versionstamp: an 8-byte big-endian commit counter, then a 2-byte index.
pub(crate) const STAMP_LEN: usize = 10;

/// The engine key of the persisted versionstamp counter (u64 LE): a bound no stamp given so
/// far exceeds. Outside every key scope of the file layer.
pub(crate) const STAMP_KEY: &[u8] = b"\x00txvfs.versionstamp";

/// Stamps are reserved this many at a time: the counter is persisted (raised to the last
/// stamp of the new block, in the same atomic batch as the stamped keys) only when a commit's
/// stamp passes the bound, not by every stamped commit (a RocksDB key per commit was two
/// fifths of the change feed's instructions in `txvfs-bench-watch`). An owner that opens the
/// store continues above the persisted bound, so stamps still grow across restarts, crashes
/// and failovers; the rest of an earlier owner's block is skipped.
pub(crate) const STAMP_BLOCK: u64 = 1 << 12;

/// Commits between the resolver and the engine.
#[derive(Default)]
pub(super) struct Pipeline {
    /// The last version applied (or failed to apply).
    applied: u64,
    staged: BTreeMap<u64, Staged>,
    /// Outcomes of applied commits not yet collected by their committer.
    done: HashMap<u64, Result<()>>,
    /// A committer is applying a group.
    leading: bool,
}

impl<E: Engine> OccStore<E> {
    /// Applies commit `version` once every earlier one is, and returns its outcome. The
    /// committer that finds the next version ready applies every consecutive ready commit
    /// (its own and others'), so the engine sees them in order and one at a time.
    pub(super) fn publish(&self, version: u64, staged: Staged) -> Result<()> {
        let mut p = self.pipeline.lock();
        p.staged.insert(version, staged);
        loop {
            if let Some(r) = p.done.remove(&version) {
                return r;
            }
            let next = p.applied + 1;
            if !p.leading && p.staged.contains_key(&next) {
                p.leading = true;
                let mut group = Vec::new();
                let mut v = next;
                while let Some(s) = p.staged.remove(&v) {
                    group.push((v, s));
                    v += 1;
                }
                drop(p);
                let outcomes = self.apply_group(group);
                p = self.pipeline.lock();
                for (v, r) in outcomes {
                    p.done.insert(v, r);
                    p.applied = v;
                }
                p.leading = false;
                self.pipeline_moved.notify_all();
                continue;
            }
            self.pipeline_moved.wait(&mut p);
        }
    }

    /// Applies consecutive commits in order, each made visible (with the cache updated) as it
    /// lands. A commit that fails to apply changed nothing; later ones still apply (they were
    /// checked against its write set, which only makes them more cautious).
    fn apply_group(&self, group: Vec<(u64, Staged)>) -> Vec<(u64, Result<()>)> {
        let mut out = Vec::with_capacity(group.len());
        for (version, staged) in group {
            let mut vis = self.visible.write();
            let oldest = self.live.lock().keys().next().copied().unwrap_or(version);
            let oldest = self.pinned.lock().keys().next().map_or(oldest, |&p| p.min(oldest));
            let mut batch = staged.batch;
            let mut r = Ok(());
            let mut stamp = None;
            for (k, ops) in staged.atomics {
                // The counters atomics change (a directory's times, the store's usage) are
                // hot in the read cache, which holds the latest applied value: no engine read
                // inside the critical section that applies commits.
                let base = match self.cache.lock().latest(&k) {
                    Some(v) => Ok(v.map(|v| v.to_vec())),
                    None => self.engine.get_latest(&k),
                };
                match base {
                    Ok(base) => batch.push(Mutation::Set(k, apply_atomic(base.as_deref(), &ops))),
                    Err(e) => {
                        r = Err(e);
                        break;
                    }
                }
            }
            // The stamped keys (and the counter, when it moves) go last in the batch; the cache
            // does not fill them.
            let mut stamped = 0;
            if r.is_ok() && !staged.stamped.is_empty() {
                // No stamp after a failed fsync of a bound (`sync_stamp_bound`).
                match self.check_healthy().and_then(|()| self.next_stamp()) {
                    Ok((n, bound, moved)) => {
                        let first = batch.len();
                        for (i, (mut k, value)) in staged.stamped.into_iter().enumerate() {
                            // Built with room for the stamp (`set_versionstamped_key_vec`).
                            k.extend_from_slice(&n.to_be_bytes());
                            k.extend_from_slice(&(i as u16).to_be_bytes());
                            batch.push(Mutation::Set(k, value));
                        }
                        if moved {
                            let b = bound.to_le_bytes().to_vec();
                            batch.push(Mutation::Set(STAMP_KEY.to_vec(), b));
                        }
                        stamped = batch.len() - first;
                        stamp = Some((n, bound, moved));
                    }
                    Err(e) => r = Err(e),
                }
            }
            if r.is_ok() {
                r = self.engine.apply(&batch, version, oldest);
            }
            if let (Some((n, bound, moved)), true) = (stamp, r.is_ok()) {
                if moved {
                    self.sync_stamp_bound();
                }
                *self.stamp.lock() = Some((n, bound));
            }
            self.cache.lock().applied_stamped(version, r.is_ok().then_some(&batch[..]), stamped);
            // No transaction begins at an older version from now on: the shared snapshot of
            // one goes (it would keep what this commit deleted alive in the engine).
            let old = self.latest.lock().take_if(|(v, _)| *v != version);
            drop(old);
            self.keep_snapshot(version);
            if let Some(observe) = &mut *self.observer.lock() {
                observe(version, r.is_ok().then_some(&batch[..]));
            }
            *vis = version;
            self.visible_now.store(version, Ordering::SeqCst);
            self.update_oldest(&self.live.lock());
            drop(vis);
            out.push((version, r));
        }
        out
    }

    /// Makes a new stamp bound durable before the first stamp of its block is visible (even
    /// in a commit that is not durable): consumers may see a commit that a power cut then
    /// loses, and an owner that gave its stamp again would make them skip the commit that
    /// got it. A failed fsync stops the store as in [`OccStore::sync_to`]: no transaction
    /// begins or commits after it, and no stamped commit already in the pipeline applies.
    fn sync_stamp_bound(&self) {
        if let Err(e) = self.engine.sync() {
            self.stop(e.message());
        }
    }

    /// The stamp counter for the next stamped commit, the persisted bound once it commits, and
    /// whether the commit must persist that bound: it does when the stamp passes the bound
    /// (the new bound is the last stamp of a new block, [`STAMP_BLOCK`]). The first stamp
    /// after opening is the persisted bound plus one. Called by the pipeline's leader only, so
    /// stamps follow version order.
    fn next_stamp(&self) -> Result<(u64, u64, bool)> {
        let (last, bound) = match *self.stamp.lock() {
            Some(s) => s,
            None => {
                let b = crate::kv::decode_counter(self.engine.get_latest(STAMP_KEY)?.as_deref());
                (b, b)
            }
        };
        let n = last + 1;
        Ok(if n > bound { (n, n + STAMP_BLOCK - 1, true) } else { (n, bound, false) })
    }
}
