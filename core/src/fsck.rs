//! The integrity check: the schema's invariants, checked on the raw keys of a store, without
//! opening it as a file system (opening reaps orphans and collects staged chunks first, which
//! would hide what the check is looking for). With `repair`, it applies the fixes that need no
//! guessing.
//!
//! Checks: the superblock and root decode; every entry's parent is a live directory and its
//! child a live inode of the entry's type; link counts match the entries (directories: 2 +
//! subdirectories); a directory's recorded parent is the directory its entry is in; every
//! inode is reachable or recorded as an orphan; orphan records, blocks
//! and xattrs belong to live inodes; no block lies beyond its file's size or in an inline
//! file; every chunk a block refers to exists; every chunk belongs to a block or a staging
//! record; staged-index entries (`U`) have their staging record (`T`); the inode and byte
//! counters match; every quota tree's usage counters match its inodes (`fsck/quota.rs`).
//!
//! The store is read in pages at one snapshot. On a backend whose transactions have a time
//! limit (FoundationDB: 5 s), the check moves to a fresh snapshot when half of it is spent:
//! there, it is exact only while no one writes to the store (as for any file system check).

use crate::error::{Error, Result};
use crate::kv::{self, Backend, Txn};
use crate::schema::{
    self, Block, Dentry, DirAttr, FileType, Inode, Meta, Scope, Superblock, ROOT_INO,
};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt;
use std::time::{Duration, Instant};

mod quota;

/// Keys read per backend call (block values can be a block size each).
const PAGE: usize = 1000;
/// Fixes written per backend transaction.
const FIX_BATCH: usize = 1000;

/// What kind of damage a [`Problem`] is.
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ProblemKind {
    /// The superblock is missing or does not decode.
    Superblock,
    /// The root directory is missing or not a directory.
    Root,
    /// A key does not parse, or a value (inode, entry, block, staging record) does not decode.
    Undecodable,
    /// An entry in something that is not a live directory, or naming a missing inode.
    DanglingEntry,
    /// An entry whose type differs from its inode's.
    EntryType,
    /// A link count that differs from the entries naming the inode.
    LinkCount,
    /// An inode in no directory and not recorded as an orphan.
    Unreachable,
    /// A directory named by more than one entry.
    DirectoryLinkedTwice,
    /// A directory whose recorded parent (its `p` key) is not the directory its entry is in.
    DirectoryParent,
    /// An orphan record of a missing inode.
    StrayOrphan,
    /// A block of a missing inode, of a non-file, of an inline file, or beyond the file's size.
    StrayBlock,
    /// A block that refers to a chunk that does not exist.
    MissingChunk,
    /// A chunk that no block or staging record refers to.
    StrayChunk,
    /// A staged-index entry without its staging record.
    StrayStagedIndex,
    /// An extended attribute of a missing inode.
    StrayXattr,
    /// An extended attribute of an inode marked as never having had one (its deletion would
    /// leave the attribute behind).
    UnmarkedXattr,
    /// The store's inode or byte counter differs from what the store holds.
    Counter,
    /// A quota tree's usage counters differ from what its inodes hold, or its allowances do
    /// not add up to its limit, or its record outlived its top directory, or an inode names a
    /// quota tree without a record (`fsck/quota.rs`).
    QuotaUsage,
}

/// A change that repairs a problem.
#[derive(Clone, Debug)]
enum Fix {
    Clear(Vec<u8>),
    Set(Vec<u8>, Vec<u8>),
}

/// One problem found.
#[derive(Clone, Debug)]
pub struct Problem {
    /// What kind of damage it is.
    pub kind: ProblemKind,
    /// What is wrong, naming the inodes, entries and blocks involved.
    pub message: String,
    /// True once the repair has been applied.
    pub repaired: bool,
    fixes: Vec<Fix>,
}

impl Problem {
    /// True if the check knows a safe fix (applied with `repair`).
    pub fn repairable(&self) -> bool {
        !self.fixes.is_empty()
    }
}

/// What the check found. Its `Display` is the report `txvfs fsck` prints: one line per
/// problem (followed by `  repaired` when it was), or `clean`.
#[derive(Clone, Debug, Default)]
pub struct CheckReport {
    /// Every problem found, in the order the scan met them.
    pub problems: Vec<Problem>,
    /// Keys read.
    pub keys_read: u64,
}

impl CheckReport {
    /// True if no problem was found.
    pub fn is_clean(&self) -> bool {
        self.problems.is_empty()
    }
    /// The problems not repaired (all of them without `repair`).
    pub fn remaining(&self) -> usize {
        self.problems.iter().filter(|p| !p.repaired).count()
    }
    /// The problems repaired.
    pub fn repaired(&self) -> usize {
        self.problems.len() - self.remaining()
    }

    fn problem(&mut self, kind: ProblemKind, message: String, fixes: Vec<Fix>) {
        self.problems.push(Problem { kind, message, repaired: false, fixes });
    }
}

impl fmt::Display for CheckReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_clean() {
            return writeln!(f, "clean");
        }
        for p in &self.problems {
            writeln!(f, "{}", p.message)?;
            if p.repaired {
                writeln!(f, "  repaired")?;
            }
        }
        Ok(())
    }
}

/// Checks the store at `uri` (as [`kv::open`] names it); see [`check`]. Where there is no
/// store, it fails with `NotFound` and creates nothing ([`kv::open_existing`]).
pub fn check_uri(uri: &str, repair: bool, progress: &mut dyn FnMut(u64)) -> Result<CheckReport> {
    check(&*kv::open_existing(uri)?, repair, progress)
}

/// Checks the store in `backend`; with `repair`, applies the safe fixes (each problem's
/// `repaired` says which). `progress` is called with the number of keys read so far.
pub fn check(
    backend: &dyn Backend,
    repair: bool,
    progress: &mut dyn FnMut(u64),
) -> Result<CheckReport> {
    let mut reader = Reader::new(backend, progress)?;
    let mut report = scan_store(&mut reader)?;
    report.keys_read = reader.keys_read;
    if repair {
        apply_fixes(backend, &mut report)?;
    }
    Ok(report)
}

/// Writes the fixes of every repairable problem, in bounded durable transactions.
fn apply_fixes(backend: &dyn Backend, report: &mut CheckReport) -> Result<()> {
    let fixes: Vec<&Fix> = report.problems.iter().flat_map(|p| &p.fixes).collect();
    for batch in fixes.chunks(FIX_BATCH) {
        let mut tx = backend.begin()?;
        for fix in batch {
            match fix {
                Fix::Clear(k) => tx.clear(k)?,
                Fix::Set(k, v) => tx.set(k, v)?,
            }
        }
        tx.commit(true)?;
    }
    for p in &mut report.problems {
        p.repaired = p.repairable();
    }
    Ok(())
}

/// Snapshot reads, page by page, renewing the backend transaction before its time limit.
struct Reader<'a> {
    backend: &'a dyn Backend,
    tx: Box<dyn Txn>,
    begun: Instant,
    renew_after: Option<Duration>,
    keys_read: u64,
    progress: &'a mut dyn FnMut(u64),
}

impl<'a> Reader<'a> {
    fn new(backend: &'a dyn Backend, progress: &'a mut dyn FnMut(u64)) -> Result<Reader<'a>> {
        let renew_after = backend.limits().max_txn_duration.map(|d| d / 2);
        Ok(Reader {
            backend,
            tx: backend.begin()?,
            begun: Instant::now(),
            renew_after,
            keys_read: 0,
            progress,
        })
    }

    fn txn(&mut self) -> Result<&mut dyn Txn> {
        if self.renew_after.is_some_and(|d| self.begun.elapsed() >= d) {
            self.tx = self.backend.begin()?;
            self.begun = Instant::now();
        }
        Ok(&mut *self.tx)
    }

    fn get(&mut self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.txn()?.snapshot_get(key)
    }

    /// Calls `each` with every pair of `scope`, in key order.
    fn scan(
        &mut self,
        scope: Scope,
        mut each: impl FnMut(&mut Self, Vec<u8>, Vec<u8>) -> Result<()>,
    ) -> Result<()> {
        let (mut from, end) = schema::scope_range(scope);
        loop {
            let page = self.txn()?.snapshot_get_range(&from, &end, PAGE, false)?;
            let done = page.len() < PAGE;
            self.keys_read += page.len() as u64;
            (self.progress)(self.keys_read);
            if let Some((k, _)) = page.last() {
                from = k.clone();
                from.push(0);
            }
            for (k, v) in page {
                each(self, k, v)?;
            }
            if done {
                return Ok(());
            }
        }
    }
}

/// What the check keeps of an inode (the rest is read again for a fix).
struct InodeSummary {
    kind: FileType,
    nlink: u32,
    size: u64,
    is_inline: bool,
    no_xattrs: bool,
    /// The file's block size (its own or the store's).
    block_size: u64,
    /// The innermost quota tree it is in (0: none).
    quota: u64,
}

/// The stored inode `ino`, with `change` applied, encoded: for fixes.
fn changed_inode(r: &mut Reader, ino: u64, change: impl FnOnce(&mut Inode)) -> Result<Vec<u8>> {
    let v = r.get(&schema::inode_key(ino))?.ok_or_else(|| {
        Error::new(crate::ErrorKind::Conflict, format!("inode {ino} vanished during the check"))
    })?;
    let mut inode = Inode::decode(&v)?;
    change(&mut inode);
    Ok(inode.encode())
}

fn malformed(r: &mut CheckReport, what: &str, key: &[u8], err: Error) {
    r.problem(ProblemKind::Undecodable, format!("{what} key {key:02x?}: {err}"), vec![]);
}

fn scan_store(rd: &mut Reader) -> Result<CheckReport> {
    use ProblemKind as P;
    let mut r = CheckReport::default();
    let superblock = rd.get(&schema::super_key())?;
    match superblock.as_deref().map(Superblock::decode) {
        None => r.problem(P::Superblock, "no superblock".into(), vec![]),
        Some(Err(e)) => r.problem(P::Superblock, format!("superblock: {e}"), vec![]),
        Some(Ok(_)) => {}
    }
    let block_size =
        superblock.and_then(|v| Superblock::decode(&v).ok()).map_or(65536, |s| s.block_size as u64);

    // Inodes and directories' hot attributes.
    let mut inodes: BTreeMap<u64, InodeSummary> = BTreeMap::new();
    let mut nlink_delta: HashMap<u64, u64> = HashMap::new();
    let mut recorded_parent: HashMap<u64, u64> = HashMap::new();
    rd.scan(Scope::Inodes, |_, k, v| {
        match schema::parse_inode_key(&k) {
            Ok((ino, None)) => match Inode::decode(&v) {
                Ok(i) => {
                    inodes.insert(
                        ino,
                        InodeSummary {
                            kind: i.kind,
                            nlink: i.nlink,
                            size: i.size,
                            is_inline: i.is_inline,
                            no_xattrs: i.no_xattrs,
                            block_size: i.block_size(block_size as u32),
                            quota: i.quota,
                        },
                    );
                }
                Err(err) => r.problem(P::Undecodable, format!("inode {ino}: {err}"), vec![]),
            },
            Ok((ino, Some(DirAttr::Nlink))) => {
                nlink_delta.insert(ino, kv::decode_counter(Some(&v)));
            }
            Ok((ino, Some(DirAttr::Parent))) => {
                recorded_parent.insert(ino, kv::decode_counter(Some(&v)));
            }
            Ok(_) => {}
            Err(err) => malformed(&mut r, "inode", &k, err),
        }
        Ok(())
    })?;
    match inodes.get(&ROOT_INO) {
        Some(i) if i.kind == FileType::Dir => {}
        _ => r.problem(
            P::Root,
            "the root directory (inode 1) is missing or not a directory".into(),
            vec![],
        ),
    }
    // Orphan records.
    let mut orphans = HashSet::new();
    rd.scan(Scope::Orphans, |_, k, _| {
        let ino = schema::orphan_ino(&k)?;
        if inodes.contains_key(&ino) {
            orphans.insert(ino);
        } else {
            r.problem(
                P::StrayOrphan,
                format!("orphan record for missing inode {ino}"),
                vec![Fix::Clear(k)],
            );
        }
        Ok(())
    })?;
    // Directory entries.
    let mut refs: HashMap<u64, u64> = HashMap::new();
    let mut subdirs: HashMap<u64, u64> = HashMap::new();
    // The directory each directory's (last) entry is in.
    let mut entry_parent: HashMap<u64, u64> = HashMap::new();
    rd.scan(Scope::Dentries, |_, k, v| {
        let (parent, name) = match schema::parse_dentry_key(&k) {
            Ok((parent, name)) => (parent, String::from_utf8_lossy(name).into_owned()),
            Err(err) => {
                malformed(&mut r, "directory entry", &k, err);
                return Ok(());
            }
        };
        let d = match Dentry::decode(&v) {
            Ok(d) => d,
            Err(err) => {
                r.problem(
                    P::Undecodable,
                    format!("entry {name:?} in directory {parent}: {err}"),
                    vec![],
                );
                return Ok(());
            }
        };
        if !inodes.get(&parent).is_some_and(|i| i.kind == FileType::Dir) {
            let msg =
                format!("entry {name:?} in directory {parent}, which is not a live directory");
            r.problem(P::DanglingEntry, msg, vec![Fix::Clear(k)]);
            return Ok(());
        }
        let Some(child) = inodes.get(&d.ino) else {
            let msg =
                format!("entry {name:?} in directory {parent} points to missing inode {}", d.ino);
            r.problem(P::DanglingEntry, msg, vec![Fix::Clear(k)]);
            return Ok(());
        };
        if child.kind != d.kind {
            let fixed = Dentry { ino: d.ino, kind: child.kind };
            r.problem(
                P::EntryType,
                format!(
                    "entry {name:?} in directory {parent} says {:?}, inode {} is {:?}",
                    d.kind, d.ino, child.kind
                ),
                vec![Fix::Set(k, fixed.encode())],
            );
        }
        *refs.entry(d.ino).or_default() += 1;
        if child.kind == FileType::Dir {
            *subdirs.entry(parent).or_default() += 1;
            entry_parent.insert(d.ino, parent);
        }
        Ok(())
    })?;
    // Link counts and reachability.
    for (&ino, i) in &inodes {
        let n = refs.get(&ino).copied().unwrap_or(0);
        if ino != ROOT_INO && n == 0 && !orphans.contains(&ino) {
            // The next open deletes orphans: files once their link count is 0, directories
            // as detached trees.
            let mut fixes = vec![Fix::Set(schema::orphan_key(ino), vec![])];
            if i.kind != FileType::Dir {
                fixes.push(Fix::Set(
                    schema::inode_key(ino),
                    changed_inode(rd, ino, |i| i.nlink = 0)?,
                ));
            }
            r.problem(
                P::Unreachable,
                format!("inode {ino} ({:?}) is in no directory and not an orphan: marked orphan (deleted at next open)", i.kind),
                fixes,
            );
            continue;
        }
        if i.kind == FileType::Dir {
            let want = 2 + subdirs.get(&ino).copied().unwrap_or(0);
            let have = (i.nlink as u64).wrapping_add(nlink_delta.get(&ino).copied().unwrap_or(0));
            if have != want && (n > 0 || ino == ROOT_INO) {
                let delta = want.wrapping_sub(i.nlink as u64);
                r.problem(
                    P::LinkCount,
                    format!("directory {ino} has link count {have}, its entries make {want}"),
                    vec![Fix::Set(
                        schema::dir_attr_key(ino, DirAttr::Nlink),
                        delta.to_le_bytes().to_vec(),
                    )],
                );
            }
            if n > 1 {
                r.problem(
                    P::DirectoryLinkedTwice,
                    format!("directory {ino} is in {n} directories"),
                    vec![],
                );
            }
            // Stores from before parent keys have none: only a wrong one is a problem.
            if let (1, Some(&recorded), Some(&actual)) =
                (n, recorded_parent.get(&ino), entry_parent.get(&ino))
            {
                if recorded != actual {
                    r.problem(
                        P::DirectoryParent,
                        format!("directory {ino} records parent {recorded}, its entry is in directory {actual}"),
                        vec![Fix::Set(schema::dir_attr_key(ino, DirAttr::Parent), actual.to_le_bytes().to_vec())],
                    );
                }
            }
        } else if n > 0 && i.nlink as u64 != n {
            let fixed = changed_inode(rd, ino, |i| i.nlink = n as u32)?;
            r.problem(
                P::LinkCount,
                format!("inode {ino} has link count {}, but {n} entries", i.nlink),
                vec![Fix::Set(schema::inode_key(ino), fixed)],
            );
        }
    }
    // Staging records and their index.
    let mut stages = HashSet::new();
    rd.scan(Scope::Stages, |_, k, v| {
        match schema::stage_txid(&k) {
            Ok(txid) => {
                if let Err(err) = schema::StageRecord::decode(&v) {
                    r.problem(P::Undecodable, format!("staging record {txid}: {err}"), vec![]);
                }
                stages.insert(txid);
            }
            Err(err) => malformed(&mut r, "staging", &k, err),
        }
        Ok(())
    })?;
    let mut staged_chunks = HashSet::new();
    rd.scan(Scope::Staged, |_, k, _| {
        match schema::staged_txid(&k).and_then(|txid| Ok((txid, schema::staged_chunk(&k)?))) {
            Ok((txid, chunk)) if stages.contains(&txid) => {
                staged_chunks.insert(chunk);
            }
            Ok((txid, _)) => r.problem(
                P::StrayStagedIndex,
                format!("staged-index entry of transaction {txid}, which has no staging record"),
                vec![Fix::Clear(k)],
            ),
            Err(err) => malformed(&mut r, "staged-index", &k, err),
        }
        Ok(())
    })?;
    // Blocks.
    let mut used_chunks = HashSet::new();
    rd.scan(Scope::Blocks, |rd, k, v| {
        let (ino, idx) = match schema::parse_block_key(&k) {
            Ok(parsed) => parsed,
            Err(err) => {
                malformed(&mut r, "block", &k, err);
                return Ok(());
            }
        };
        let block = Block::decode(&v);
        let chunk = match &block {
            Ok(Block::Chunk { id, .. }) => Some(schema::chunk_key(ino, idx, *id)),
            _ => None,
        };
        let mut clear = vec![Fix::Clear(k)];
        clear.extend(chunk.clone().map(Fix::Clear));
        match inodes.get(&ino) {
            None => r.problem(P::StrayBlock, format!("block {idx} of missing inode {ino}"), clear),
            Some(i) if i.kind != FileType::File => r.problem(
                P::StrayBlock,
                format!("block {idx} of inode {ino}, a {:?}", i.kind),
                clear,
            ),
            Some(i) if i.is_inline => r.problem(
                P::StrayBlock,
                format!("block {idx} of inode {ino}, whose data is inline"),
                clear,
            ),
            Some(i) if idx.saturating_mul(i.block_size) >= i.size => r.problem(
                P::StrayBlock,
                format!("block {idx} of inode {ino} lies beyond its size {}", i.size),
                clear,
            ),
            Some(_) => {
                if let Err(err) = &block {
                    r.problem(P::Undecodable, format!("block {idx} of inode {ino}: {err}"), vec![]);
                }
                if let Some(c) = chunk {
                    if rd.get(&c)?.is_none() {
                        r.problem(
                            P::MissingChunk,
                            format!("block {idx} of inode {ino} refers to a missing chunk"),
                            vec![],
                        );
                    }
                    used_chunks.insert(c);
                }
            }
        }
        Ok(())
    })?;
    // Chunks.
    rd.scan(Scope::Chunks, |_, k, _| {
        if !used_chunks.contains(&k) && !staged_chunks.contains(&k) {
            match schema::parse_chunk_key(&k) {
                Ok((ino, _, _)) => r.problem(
                    P::StrayChunk,
                    format!("chunk of inode {ino} that no block or staging record refers to"),
                    vec![Fix::Clear(k)],
                ),
                Err(err) => malformed(&mut r, "chunk", &k, err),
            }
        }
        Ok(())
    })?;
    // Extended attributes.
    let mut unmarked = std::collections::BTreeSet::new();
    rd.scan(Scope::Xattrs, |_, k, _| {
        match schema::parse_xattr_key(&k) {
            Ok((ino, _)) if inodes.get(&ino).is_some_and(|i| i.no_xattrs) => {
                unmarked.insert(ino);
            }
            Ok((ino, _)) if inodes.contains_key(&ino) => {}
            Ok((ino, name)) => {
                let msg =
                    format!("xattr {:?} of missing inode {ino}", String::from_utf8_lossy(name));
                r.problem(P::StrayXattr, msg, vec![Fix::Clear(k)]);
            }
            Err(err) => malformed(&mut r, "xattr", &k, err),
        }
        Ok(())
    })?;
    for ino in unmarked {
        let msg = format!("inode {ino} has extended attributes but is marked as having none");
        let fixed = changed_inode(rd, ino, |i| i.no_xattrs = false)?;
        r.problem(P::UnmarkedXattr, msg, vec![Fix::Set(schema::inode_key(ino), fixed)]);
    }
    // Counters: the store's count the inodes outside every quota tree (fs/ops/quota.rs).
    let outside = || inodes.values().filter(|i| i.quota == 0);
    let outside_inodes = outside().count() as u64;
    let outside_bytes = outside().filter(|i| i.kind == FileType::File).map(|i| i.size).sum::<u64>();
    for (meta, what, want) in
        [(Meta::Inodes, "inode", outside_inodes), (Meta::Bytes, "byte", outside_bytes)]
    {
        let key = schema::meta_key(meta);
        let have = kv::decode_counter(rd.get(&key)?.as_deref());
        if have != want {
            let msg = format!("{what} counter says {have}, the store holds {want}");
            r.problem(P::Counter, msg, vec![Fix::Set(key, want.to_le_bytes().to_vec())]);
        }
    }
    quota::check_quotas(rd, &inodes, &mut r)?;
    Ok(r)
}
