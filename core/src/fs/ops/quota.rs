//! Quotas: limits on the bytes and inodes of a directory tree, checked in the very commit that
//! changes the usage (docs/design.md, "Quotas").
//!
//! Every inode carries the number of the innermost quota tree it is in ([`Inode::quota`],
//! inherited from the parent directory at creation); a tree's record names the tree that
//! encloses it, so a change counts toward every enclosing tree. A tree's usage is split in
//! [`SHARDS`] escrow shards, each one key with its own usage and allowance; the allowances add
//! up to the limit, and no shard's usage exceeds its allowance, so neither does the sum. A
//! change reads one shard (this thread's, moved after a conflict) with a conflicting read,
//! checks it, and writes it back, so two writers conflict only when they share a shard. When
//! the shard's allowance is too small, the commit reads every shard and spreads the spare
//! allowance again (a rebalance, which conflicts with every writer of the tree: only near the
//! limit), or fails with EDQUOT when the tree as a whole cannot take the change. All of it is
//! plain serializable reads and writes, exact on every backend.
//!
//! A change first reads and checks every tree it counts toward, then writes: a failure leaves
//! the operation without writes, so an explicit transaction stays usable after EDQUOT.
//!
//! The store counts each inode's usage once ([`Operation::count`]): outside every quota tree
//! in the store's counters, inside one in its trees' shards only, so that a create in a tree
//! writes one counter, as a create outside does; `statfs` adds the outermost trees' usage to
//! the counters.

use super::Operation;
use crate::error::{Error, ErrorKind, Result};
use crate::fs::path::show;
use crate::fs::types::{Quota, QuotaLimits};
use crate::schema::{self, quota_allowances as allowances, Dentry, FileType, Inode, Meta};
use crate::schema::{QuotaRecord, QuotaShard, SHARDS};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};

/// Inodes that setting or removing a quota walks at most, in its one transaction: it rewrites
/// each inode (with a small file's data), which must stay well inside FoundationDB's 10 MB.
pub const MAX_QUOTA_WALK: usize = 10_000;

/// Usage, or a change of it.
#[derive(Clone, Copy, Default, Debug, PartialEq, Eq)]
pub(crate) struct Usage {
    pub bytes: i64,
    pub inodes: i64,
}

impl Usage {
    /// The change of creating or deleting (`sign` -1) an inode of `kind` with `size` bytes:
    /// only regular files count bytes, as the store's byte counter does.
    pub(crate) fn of(kind: FileType, size: u64, sign: i64) -> Usage {
        let bytes = if kind == FileType::File { size as i64 } else { 0 };
        Usage { bytes: sign * bytes, inodes: sign }
    }
    fn add(self, o: Usage) -> Usage {
        Usage { bytes: self.bytes + o.bytes, inodes: self.inodes + o.inodes }
    }
    fn is_zero(self) -> bool {
        self == Usage::default()
    }
}

/// A write planned by a charge, applied once every tree has been checked.
enum Write {
    /// One shard written back by the fast path (kept for later charges of the operation).
    Shard(u64, u8, QuotaShard),
    /// Every shard rewritten by a rebalance.
    Set(Vec<u8>, Vec<u8>),
    ClearTree(u64),
}

/// A charge's planned writes, inline: most changes count toward one tree, and a create should
/// not allocate for them.
type Writes = smallvec::SmallVec<[Write; 2]>;

/// This thread's shard: threads of one process start on different shards, processes at
/// different offsets, and a thread moves to the next shard after each retried conflict.
fn this_shard() -> u8 {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    thread_local! {
        static SEED: u64 = NEXT.fetch_add(1, Ordering::Relaxed) + std::process::id() as u64 * 7;
    }
    let seed = SEED.with(|s| *s);
    ((seed + crate::kv::retries_on_this_thread()) % SHARDS as u64) as u8
}

fn used(s: &QuotaShard) -> Usage {
    Usage { bytes: s.used_bytes, inodes: s.used_inodes }
}

fn check_limits(p: &[u8], l: QuotaLimits) -> Result<()> {
    let invalid = |m: String| Err(Error::new(ErrorKind::Invalid, format!("{}: {m}", show(p))));
    if l.bytes.is_none() && l.inodes.is_none() {
        return invalid("a quota needs a byte limit or an inode limit".into());
    }
    for (what, v) in [("byte", l.bytes), ("inode", l.inodes)] {
        match v {
            Some(0) => return invalid(format!("the {what} limit must be positive")),
            Some(v) if v > i64::MAX as u64 => {
                return invalid(format!("the {what} limit {v} is above the largest, {}", i64::MAX))
            }
            _ => {}
        }
    }
    Ok(())
}

impl Operation<'_> {
    /// The quota tree's record, read so that a change of it conflicts.
    fn quota_record(&mut self, tree: u64) -> Result<Option<QuotaRecord>> {
        self.tx.get(&schema::quota_key(tree))?.map(|v| QuotaRecord::decode(&v)).transpose()
    }

    /// Shard `shard` of `tree`, read so that any change of it conflicts (or as this operation
    /// last wrote it).
    fn read_shard(&mut self, tree: u64, shard: u8) -> Result<Option<QuotaShard>> {
        if let Some((_, _, sh)) = self.quota_shards.iter().find(|c| (c.0, c.1) == (tree, shard)) {
            return Ok(Some(*sh));
        }
        let v = self.tx.get(&schema::quota_shard_key(tree, shard))?;
        v.map(|v| QuotaShard::decode(&v)).transpose()
    }

    /// Every shard of `tree` (one range read: it conflicts with every change of the tree).
    fn read_shards(&mut self, tree: u64) -> Result<[QuotaShard; SHARDS as usize]> {
        let (s, e) = schema::quota_shards_range(tree);
        let mut out = [QuotaShard::default(); SHARDS as usize];
        for (k, v) in self.tx.get_range(&s, &e, 0, false)? {
            if let (_, Some(shard)) = schema::parse_quota_key(&k)? {
                out[shard as usize] = QuotaShard::decode(&v)?;
            }
        }
        Ok(out)
    }

    fn total_used(&mut self, tree: u64) -> Result<Usage> {
        Ok(self.read_shards(tree)?.iter().fold(Usage::default(), |a, s| a.add(used(s))))
    }

    /// Counts a change `d` of the usage of an inode in quota tree `tree` (0: none): toward the
    /// tree and every tree enclosing it (EDQUOT before anything is written if a limit would
    /// be passed), or, outside every tree, in the store's counters.
    pub(crate) fn count(&mut self, tree: u64, d: Usage) -> Result<()> {
        if tree != 0 {
            return self.charge(tree, d);
        }
        self.count_outside(d)
    }

    /// Adds `d` to the store's counters (the usage outside every quota tree).
    fn count_outside(&mut self, d: Usage) -> Result<()> {
        if d.inodes != 0 {
            self.atomic_add(&schema::meta_key(Meta::Inodes), d.inodes)?;
        }
        if d.bytes != 0 {
            self.atomic_add(&schema::meta_key(Meta::Bytes), d.bytes)?;
        }
        Ok(())
    }

    /// The usage that quota trees hold of the store's total: the sum of the outermost trees'
    /// (read without a conflict, as `statfs` reads the store's counters).
    pub(super) fn usage_in_trees(&mut self) -> Result<Usage> {
        let (s, e) = schema::scope_range(schema::Scope::Quotas);
        let mut total = Usage::default();
        for (k, v) in self.tx.snapshot_get_range(&s, &e, 0, false)? {
            if let (_, Some(_)) = schema::parse_quota_key(&k)? {
                let sh = QuotaShard::decode(&v)?;
                if sh.parent == 0 {
                    total = total.add(used(&sh));
                }
            }
        }
        Ok(total)
    }

    /// Counts `delta` toward quota tree `tree` (0: none) and every tree enclosing it; fails
    /// with EDQUOT, before writing anything, if a limit would be passed. Far from the limits
    /// this reads and writes one shard per tree.
    pub(crate) fn charge(&mut self, tree: u64, delta: Usage) -> Result<()> {
        if tree == 0 || delta.is_zero() {
            return Ok(());
        }
        self.writable()?;
        let mut writes = Writes::new();
        let mut t = tree;
        // More levels than a path can have means a loop of records: stop (fsck reports it).
        for _ in 0..=crate::fs::PATH_MAX / 2 {
            match self.plan_charge(t, delta, &mut writes)? {
                Some(parent) if parent != 0 => t = parent,
                _ => break,
            }
        }
        for w in writes {
            match w {
                Write::Shard(t, s, sh) => {
                    self.set(&schema::quota_shard_key(t, s), &sh.encode())?;
                    self.quota_shards.retain(|c| (c.0, c.1) != (t, s));
                    self.quota_shards.push((t, s, sh));
                }
                Write::Set(k, v) => {
                    self.quota_shards.clear();
                    self.set(&k, &v)?
                }
                Write::ClearTree(t) => {
                    self.quota_shards.clear();
                    self.clear_range(schema::quota_tree_range(t))?
                }
            }
        }
        Ok(())
    }

    /// Plans charging `d` to tree `t`; returns the enclosing tree (`None`: `t` has no shards,
    /// which fsck reports).
    fn plan_charge(&mut self, t: u64, d: Usage, w: &mut Writes) -> Result<Option<u64>> {
        let shard = this_shard();
        let Some(mut sh) = self.read_shard(t, shard)? else { return Ok(None) };
        let parent = sh.parent;
        let need_b = d.bytes > 0 && sh.bytes_limited && !sh.dissolved;
        let need_i = d.inodes > 0 && sh.inodes_limited && !sh.dissolved;
        if sh.dissolved && (d.bytes < 0 || d.inodes < 0) {
            // A dissolved tree goes once nothing counts toward it any more.
            if self.total_used(t)?.add(d).is_zero() {
                w.push(Write::ClearTree(t));
                return Ok(Some(parent));
            }
        } else if need_b && sh.used_bytes + d.bytes > sh.allow_bytes
            || need_i && sh.used_inodes + d.inodes > sh.allow_inodes
        {
            self.plan_rebalance(t, shard, d, w)?;
            return Ok(Some(parent));
        }
        sh.used_bytes += d.bytes;
        sh.used_inodes += d.inodes;
        w.push(Write::Shard(t, shard, sh));
        Ok(Some(parent))
    }

    /// Reads every shard of `t`, charges `d` to `shard` and spreads what the limits leave
    /// spare evenly again; EDQUOT if a limit cannot take `d`.
    fn plan_rebalance(&mut self, t: u64, shard: u8, d: Usage, w: &mut Writes) -> Result<()> {
        let rec = self.quota_record(t)?.ok_or_else(|| {
            Error::new(ErrorKind::Corrupt, format!("corrupt store: quota tree {t} has no record"))
        })?;
        let mut shards = self.read_shards(t)?;
        shards[shard as usize].used_bytes += d.bytes;
        shards[shard as usize].used_inodes += d.inodes;
        let dims = [(rec.bytes, d.bytes, true, "bytes"), (rec.inodes, d.inodes, false, "inodes")];
        for (limit, delta, bytes, what) in dims {
            if limit == 0 {
                continue;
            }
            let used: [i64; SHARDS as usize] = std::array::from_fn(|i| {
                if bytes {
                    shards[i].used_bytes
                } else {
                    shards[i].used_inodes
                }
            });
            let total: i64 = used.iter().sum();
            if delta > 0 && total > limit as i64 {
                let tree = self.dir_path(t)?.map_or(format!("inode {t}"), |p| show(&p));
                let had = total - delta;
                return Err(Error::new(
                    ErrorKind::QuotaExceeded,
                    format!(
                        "{tree}: disk quota exceeded: the quota tree holds {had} of its \
                         {limit} {what}, this change needs {delta} more"
                    ),
                ));
            }
            for (s, a) in allowances(limit, used, shard).into_iter().enumerate() {
                if bytes {
                    shards[s].allow_bytes = a;
                } else {
                    shards[s].allow_inodes = a;
                }
            }
        }
        for (s, sh) in shards.iter().enumerate() {
            w.push(Write::Set(schema::quota_shard_key(t, s as u8), sh.encode()));
        }
        Ok(())
    }

    /// Writes tree `t`'s shards afresh for `rec`: `used` in shard 0, the limits spread evenly.
    fn reset_shards(&mut self, t: u64, rec: &QuotaRecord, used: Usage) -> Result<()> {
        self.quota_shards.clear();
        for (s, sh) in QuotaShard::fresh(rec, used.bytes, used.inodes).iter().enumerate() {
            self.set(&schema::quota_shard_key(t, s as u8), &sh.encode())?;
        }
        Ok(())
    }

    /// Makes `parent` tree `t`'s enclosing tree, in its record and every shard.
    fn reparent(&mut self, t: u64, rec: &mut QuotaRecord, parent: u64) -> Result<()> {
        self.quota_shards.clear();
        rec.parent = parent;
        self.set(&schema::quota_key(t), &rec.encode())?;
        for (s, mut sh) in self.read_shards(t)?.into_iter().enumerate() {
            sh.parent = parent;
            self.set(&schema::quota_shard_key(t, s as u8), &sh.encode())?;
        }
        Ok(())
    }

    /// Accounts for deleting inode `ino`: it stops counting toward its trees, and a quota
    /// tree's top directory dissolves its tree (gone at once if nothing else counts in it).
    pub(crate) fn uncharge_deleted(&mut self, ino: u64, inode: &Inode) -> Result<()> {
        let d = Usage::of(inode.kind, inode.size, -1);
        if inode.kind != FileType::Dir || inode.quota != ino {
            return self.count(inode.quota, d);
        }
        let Some(mut rec) = self.quota_record(ino)? else { return Ok(()) };
        self.charge(rec.parent, d)?;
        self.dissolve(ino, &mut rec, d)
    }

    /// Ends tree `t` after `d` (already counted in its enclosing trees): its records go if no
    /// usage is left, else it stays dissolved and counts what is left.
    fn dissolve(&mut self, t: u64, rec: &mut QuotaRecord, d: Usage) -> Result<()> {
        self.quota_shards.clear();
        let left = self.total_used(t)?.add(d);
        if left.is_zero() {
            return self.clear_range(schema::quota_tree_range(t));
        }
        *rec = QuotaRecord { bytes: 0, inodes: 0, dissolved: true, ..*rec };
        self.set(&schema::quota_key(t), &rec.encode())?;
        self.reset_shards(t, rec, left)
    }

    /// Fails with EXDEV unless directories `a` and `b` lie in the same innermost quota tree
    /// (`qa`, `qb` where the caller read them: a rename's resolution reads each directory's
    /// inode before its lookup): a name moves only within one tree (as with XFS project
    /// quotas).
    pub(super) fn same_quota_tree(
        &mut self,
        (a, qa): (u64, Option<u64>),
        (b, qb): (u64, Option<u64>),
        from: &[u8],
        to: &[u8],
    ) -> Result<()> {
        if a == b || self.dir_quota(a, qa)? == self.dir_quota(b, qb)? {
            return Ok(());
        }
        Err(Error::new(
            ErrorKind::CrossDevice,
            format!(
                "{} -> {}: crosses a quota tree's boundary (copy and delete instead)",
                show(from),
                show(to)
            ),
        ))
    }

    /// The quota tree of directory `dir`: `known` if the caller read it, else read now.
    pub(super) fn dir_quota(&mut self, dir: u64, known: Option<u64>) -> Result<u64> {
        match known {
            Some(q) => Ok(q),
            None => Ok(self.inode_meta(dir)?.quota),
        }
    }

    /// Fails with EXDEV unless `inode` is in the quota tree of directory `dir` (`quota`, if the
    /// caller read it), where a hard link to it is to be made.
    pub(super) fn link_in_quota_tree(
        &mut self,
        inode: &Inode,
        (dir, quota): (u64, Option<u64>),
        from: &[u8],
    ) -> Result<()> {
        if inode.quota == self.dir_quota(dir, quota)? {
            return Ok(());
        }
        Err(Error::new(
            ErrorKind::CrossDevice,
            format!("{}: a hard link cannot cross a quota tree's boundary", show(from)),
        ))
    }

    fn quota_admin(&self, p: &[u8]) -> Result<()> {
        self.writable()?;
        if self.cred.is_some_and(|c| c.uid != 0) {
            return Err(Error::new(
                ErrorKind::NotPermitted,
                format!("{}: only root sets or removes quotas", show(p)),
            ));
        }
        Ok(())
    }

    fn quota_dir(&mut self, p: &[u8]) -> Result<(u64, Inode)> {
        let (ino, inode) = self.existing(p, true)?;
        if inode.kind != FileType::Dir {
            return Err(Error::at(ErrorKind::NotDir, p));
        }
        Ok((ino, inode))
    }

    /// Sets the limits of the quota tree at directory `p`: a new tree counts what is already
    /// there (walking it: at most [`MAX_QUOTA_WALK`] inodes), an existing one gets new limits.
    /// EDQUOT if the tree already holds more than a limit.
    pub fn set_quota(&mut self, p: &[u8], limits: QuotaLimits) -> Result<()> {
        check_limits(p, limits)?;
        self.quota_admin(p)?;
        let (ino, inode) = self.quota_dir(p)?;
        let old = self.quota_record(ino)?;
        if old.is_some_and(|r| r.dissolved) {
            return Err(Error::new(
                ErrorKind::Busy,
                format!("{}: files of an earlier quota tree here are still open", show(p)),
            ));
        }
        let (parent, used) = match old {
            Some(r) if inode.quota == ino => (r.parent, self.total_used(ino)?),
            _ => {
                let (direct, used) = self.restamp(ino, inode.quota, ino, p)?;
                if inode.quota == 0 {
                    // The new tree counts them now, no longer the store's counters.
                    self.count_outside(Usage { bytes: -direct.bytes, inodes: -direct.inodes })?;
                }
                (inode.quota, used)
            }
        };
        let rec = QuotaRecord {
            bytes: limits.bytes.unwrap_or(0),
            inodes: limits.inodes.unwrap_or(0),
            parent,
            dissolved: false,
        };
        for (limit, n, what) in
            [(rec.bytes, used.bytes, "bytes"), (rec.inodes, used.inodes, "inodes")]
        {
            if limit != 0 && n > limit as i64 {
                return Err(Error::new(
                    ErrorKind::QuotaExceeded,
                    format!("{}: the tree already holds {n} {what}, more than {limit}", show(p)),
                ));
            }
        }
        self.set(&schema::quota_key(ino), &rec.encode())?;
        self.reset_shards(ino, &rec, used)
    }

    /// Removes the quota of the tree whose top directory is `p` (ENOENT if it has none): its
    /// inodes count toward the enclosing tree only.
    pub fn remove_quota(&mut self, p: &[u8]) -> Result<()> {
        self.quota_admin(p)?;
        let (ino, inode) = self.quota_dir(p)?;
        let rec = self.quota_record(ino)?.filter(|r| inode.quota == ino && !r.dissolved);
        let Some(mut rec) = rec else {
            return Err(Error::new(
                ErrorKind::NotFound,
                format!("{}: no quota is set on this directory", show(p)),
            ));
        };
        let (direct, walked) = self.restamp(ino, ino, rec.parent, p)?;
        if rec.parent == 0 {
            self.count_outside(direct)?;
        }
        let d = Usage { bytes: -walked.bytes, inodes: -walked.inodes };
        self.dissolve(ino, &mut rec, d)
    }

    /// Moves every inode of the subtree at `top` stamped `from` to tree `to`, and nested
    /// trees under `to`; returns the usage of the inodes it moved, and that with the nested
    /// trees' usage.
    fn restamp(&mut self, top: u64, from: u64, to: u64, p: &[u8]) -> Result<(Usage, Usage)> {
        let (mut direct, mut nested) = (Usage::default(), Usage::default());
        // Files with several links: the links found, to count each file once and find links
        // from outside the tree.
        let mut links: HashMap<u64, u32> = HashMap::new();
        let mut pending = vec![top];
        let mut walked = 0;
        let mut first = Some(top);
        while let Some(dir) = pending.pop() {
            let mut children = Vec::new();
            if let Some(t) = first.take() {
                children.push(Dentry { ino: t, kind: FileType::Dir });
            } else {
                let (s, e) = schema::dentry_range(dir);
                for (_, v) in self.tx.get_range(&s, &e, 0, false)? {
                    children.push(Dentry::decode(&v)?);
                }
            }
            for d in children {
                walked += 1;
                if walked > MAX_QUOTA_WALK {
                    return Err(Error::new(
                        ErrorKind::TooLarge,
                        format!(
                            "{}: more than {MAX_QUOTA_WALK} inodes to walk in one transaction; \
                             set the quota on a smaller or an empty tree",
                            show(p)
                        ),
                    ));
                }
                let mut inode = self.inode(d.ino)?;
                if d.ino != top && inode.kind == FileType::Dir && inode.quota == d.ino {
                    // A nested tree: it moves under `to` as a whole.
                    if let Some(mut rec) = self.quota_record(d.ino)? {
                        self.reparent(d.ino, &mut rec, to)?;
                        nested = nested.add(self.total_used(d.ino)?);
                        continue;
                    }
                }
                if inode.kind != FileType::Dir && inode.nlink > 1 {
                    let n = links.entry(d.ino).or_default();
                    *n += 1;
                    if *n > 1 {
                        continue;
                    }
                }
                if inode.quota != from {
                    return Err(Error::new(
                        ErrorKind::Corrupt,
                        format!(
                            "corrupt store: inode {} is in quota tree {}, not {from}",
                            d.ino, inode.quota
                        ),
                    ));
                }
                direct = direct.add(Usage::of(inode.kind, inode.size, 1));
                inode.quota = to;
                self.store_inode(d.ino, &inode)?;
                if inode.kind == FileType::Dir {
                    pending.push(d.ino);
                }
            }
        }
        for (ino, found) in links {
            if found < self.inode_meta(ino)?.nlink {
                return Err(Error::new(
                    ErrorKind::CrossDevice,
                    format!(
                        "{}: inode {ino} in the tree has hard links outside it; a quota tree \
                         cannot share files with the rest of the store",
                        show(p)
                    ),
                ));
            }
        }
        Ok((direct, direct.add(nested)))
    }

    /// The innermost quota tree that `p` (followed if a symbolic link) is in, if any.
    pub fn quota(&mut self, p: &[u8]) -> Result<Option<Quota>> {
        let (_, inode) = self.existing(p, true)?;
        self.quota_of_tree(inode.quota)
    }

    /// The innermost quota tree that inode `ino` is in, if any.
    pub fn quota_ino(&mut self, ino: u64) -> Result<Option<Quota>> {
        let tree = self.inode_meta(ino)?.quota;
        self.quota_of_tree(tree)
    }

    fn quota_of_tree(&mut self, mut t: u64) -> Result<Option<Quota>> {
        for _ in 0..=crate::fs::PATH_MAX / 2 {
            let Some(rec) = self.quota_record(t)? else { return Ok(None) };
            if rec.dissolved {
                t = rec.parent;
                continue;
            }
            let used = self.total_used(t)?;
            let limit = |n: u64| (n != 0).then_some(n);
            return Ok(Some(Quota {
                tree: t,
                path: self.dir_path(t)?.unwrap_or_default(),
                limits: QuotaLimits { bytes: limit(rec.bytes), inodes: limit(rec.inodes) },
                bytes_used: used.bytes.max(0) as u64,
                inodes_used: used.inodes.max(0) as u64,
                parent: (rec.parent != 0).then_some(rec.parent),
            }));
        }
        Ok(None)
    }
}
