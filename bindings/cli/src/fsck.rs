//! `fsck`: checks the schema's invariants on the raw keys of a store (see `txvfs::schema`),
//! without opening it as a file system (which would reap orphans and collect staged chunks
//! first). With `--repair` it fixes what it can without guessing and prints each fix.
//!
//! Checks: the superblock and root decode; every entry's parent is a live directory and its
//! child a live inode of the entry's type; link counts match the entries (directories: 2 +
//! subdirectories); every inode is reachable or recorded as an orphan; orphan records, blocks
//! and xattrs belong to live inodes; no block lies beyond its file's size or in an inline
//! file; every chunk a block refers to exists; every chunk belongs to a block or a staging
//! record; staged-index entries (`U`) have their staging record (`T`); the inode and byte
//! counters match.

use crate::cmds::Res;
use crate::fail::Fail;
use crate::progress::Progress;
use std::collections::{BTreeMap, HashMap, HashSet};
use txvfs::kv::{self, Backend, KeyValue, Txn};
use txvfs::schema::{self, Block, Dentry, DirAttr, FileType, Inode, Meta, Superblock, ROOT_INO};

/// A change that repairs a problem.
enum Fix {
    Clear(Vec<u8>),
    Set(Vec<u8>, Vec<u8>),
}

/// What fsck found: problems and their fixes (if any is safe).
#[derive(Default)]
struct Report {
    problems: Vec<(String, Vec<Fix>)>,
}

impl Report {
    fn problem(&mut self, msg: String, fixes: Vec<Fix>) {
        self.problems.push((msg, fixes));
    }
}

fn be(b: &[u8]) -> u64 {
    u64::from_be_bytes(b[..8].try_into().unwrap())
}

/// Every pair in `[start, end)`, read page by page at one snapshot.
fn scan(tx: &mut dyn Txn, start: &[u8], end: &[u8], progress: &mut Progress) -> Res<Vec<KeyValue>> {
    let mut out: Vec<KeyValue> = Vec::new();
    let mut from = start.to_vec();
    loop {
        let page = tx.snapshot_get_range(&from, end, 10_000, false)?;
        let done = page.len() < 10_000;
        progress.add(page.len() as u64);
        if let Some((k, _)) = page.last() {
            from = k.clone();
            from.push(0);
        }
        out.extend(page);
        if done {
            return Ok(out);
        }
    }
}

fn range(scope: u8) -> (Vec<u8>, Vec<u8>) {
    (vec![scope], vec![scope + 1])
}

/// Checks the store at `uri`; with `repair`, applies the safe fixes. Exits non-zero while
/// problems remain.
pub fn run(uri: &str, repair: bool) -> Res {
    let backend = kv::open(uri)?;
    let report = check(&*backend)?;
    let mut remaining = 0;
    let mut fixes = Vec::new();
    for (msg, f) in report.problems {
        println!("{msg}");
        if f.is_empty() || !repair {
            remaining += 1;
        } else {
            println!("  repaired");
            fixes.extend(f);
        }
    }
    for batch in fixes.chunks(1000) {
        let mut tx = backend.begin()?;
        for f in batch {
            match f {
                Fix::Clear(k) => tx.clear(k)?,
                Fix::Set(k, v) => tx.set(k, v)?,
            }
        }
        tx.commit(true)?;
    }
    if remaining > 0 {
        let hint = if repair { " that cannot be repaired safely" } else { " (run fsck --repair)" };
        return Err(Fail { msg: format!("{remaining} problem(s) found{hint}"), code: 0 });
    }
    if fixes.is_empty() {
        println!("clean");
    }
    Ok(())
}

fn check(backend: &dyn Backend) -> Res<Report> {
    let mut r = Report::default();
    let mut progress = Progress::new("fsck: keys read", 0);
    let mut tx = backend.begin()?;
    let tx = &mut *tx;
    match tx.snapshot_get(&schema::super_key())? {
        None => r.problem("no superblock".into(), vec![]),
        Some(v) => {
            if let Err(e) = Superblock::decode(&v) {
                r.problem(format!("superblock: {e}"), vec![]);
            }
        }
    }
    let block_size = tx
        .snapshot_get(&schema::super_key())?
        .and_then(|v| Superblock::decode(&v).ok())
        .map_or(65536, |s| s.block_size as u64);

    // Inodes and directories' hot attributes.
    let (s, e) = range(b'I');
    let mut inodes: BTreeMap<u64, Inode> = BTreeMap::new();
    let mut nlink_delta: HashMap<u64, u64> = HashMap::new();
    for (k, v) in scan(tx, &s, &e, &mut progress)? {
        match k.len() {
            9 => match Inode::decode(&v) {
                Ok(i) => {
                    inodes.insert(be(&k[1..]), i);
                }
                Err(err) => r.problem(format!("inode {}: {err}", be(&k[1..])), vec![]),
            },
            10 if k[9] == DirAttr::Nlink as u8 => {
                nlink_delta.insert(be(&k[1..]), kv::decode_counter(Some(&v)));
            }
            _ => {}
        }
    }
    match inodes.get(&ROOT_INO) {
        Some(i) if i.kind == FileType::Dir => {}
        _ => r.problem("the root directory (inode 1) is missing or not a directory".into(), vec![]),
    }
    // Orphan records.
    let (s, e) = schema::orphan_range();
    let mut orphans = HashSet::new();
    for (k, _) in scan(tx, &s, &e, &mut progress)? {
        let ino = schema::orphan_ino(&k)?;
        if inodes.contains_key(&ino) {
            orphans.insert(ino);
        } else {
            r.problem(format!("orphan record for missing inode {ino}"), vec![Fix::Clear(k)]);
        }
    }
    // Directory entries.
    let (s, e) = range(b'D');
    let mut refs: HashMap<u64, u64> = HashMap::new();
    let mut subdirs: HashMap<u64, u64> = HashMap::new();
    for (k, v) in scan(tx, &s, &e, &mut progress)? {
        let parent = be(&k[1..]);
        let name = String::from_utf8_lossy(schema::dentry_name(&k)).into_owned();
        let d = match Dentry::decode(&v) {
            Ok(d) => d,
            Err(err) => {
                r.problem(format!("entry {name:?} in directory {parent}: {err}"), vec![]);
                continue;
            }
        };
        if !inodes.get(&parent).is_some_and(|i| i.kind == FileType::Dir) {
            r.problem(format!("entry {name:?} in directory {parent}, which is not a live directory"), vec![Fix::Clear(k)]);
            continue;
        }
        let Some(child) = inodes.get(&d.ino) else {
            r.problem(format!("entry {name:?} in directory {parent} points to missing inode {}", d.ino), vec![Fix::Clear(k)]);
            continue;
        };
        if child.kind != d.kind {
            let fixed = Dentry { ino: d.ino, kind: child.kind };
            r.problem(
                format!("entry {name:?} in directory {parent} says {:?}, inode {} is {:?}", d.kind, d.ino, child.kind),
                vec![Fix::Set(k, fixed.encode())],
            );
        }
        *refs.entry(d.ino).or_default() += 1;
        if child.kind == FileType::Dir {
            *subdirs.entry(parent).or_default() += 1;
        }
    }
    // Link counts and reachability.
    let mut live_bytes = 0u64;
    for (&ino, i) in &inodes {
        let n = refs.get(&ino).copied().unwrap_or(0);
        if i.kind == FileType::File {
            live_bytes += i.size;
        }
        if ino != ROOT_INO && n == 0 && !orphans.contains(&ino) {
            // The next open deletes orphans: files once their link count is 0, directories
            // as detached trees.
            let mut fixes = vec![Fix::Set(schema::orphan_key(ino), vec![])];
            if i.kind != FileType::Dir {
                fixes.push(Fix::Set(schema::inode_key(ino), Inode { nlink: 0, ..i.clone() }.encode()));
            }
            r.problem(
                format!("inode {ino} ({:?}) is in no directory and not an orphan: marked orphan (deleted at next open)", i.kind),
                fixes,
            );
            continue;
        }
        if i.kind == FileType::Dir {
            let want = 2 + subdirs.get(&ino).copied().unwrap_or(0);
            let have = (i.nlink as u64).wrapping_add(nlink_delta.get(&ino).copied().unwrap_or(0));
            if have != want && n > 0 || ino == ROOT_INO && have != want {
                let delta = want.wrapping_sub(i.nlink as u64);
                r.problem(
                    format!("directory {ino} has link count {have}, its entries make {want}"),
                    vec![Fix::Set(schema::dir_attr_key(ino, DirAttr::Nlink), delta.to_le_bytes().to_vec())],
                );
            }
            if n > 1 {
                r.problem(format!("directory {ino} is in {n} directories"), vec![]);
            }
        } else if n > 0 && i.nlink as u64 != n {
            let fixed = Inode { nlink: n as u32, ..i.clone() };
            r.problem(
                format!("inode {ino} has link count {}, but {n} entries", i.nlink),
                vec![Fix::Set(schema::inode_key(ino), fixed.encode())],
            );
        }
    }
    // Staging records and their index.
    let (s, e) = schema::stage_range();
    let mut stages = HashSet::new();
    for (k, v) in scan(tx, &s, &e, &mut progress)? {
        let txid = schema::stage_txid(&k)?;
        if let Err(err) = schema::StageRecord::decode(&v) {
            r.problem(format!("staging record {txid}: {err}"), vec![]);
        }
        stages.insert(txid);
    }
    let (s, e) = range(b'U');
    let mut staged_chunks = HashSet::new();
    for (k, _) in scan(tx, &s, &e, &mut progress)? {
        let txid = be(&k[1..]);
        let chunk = schema::staged_chunk(&k)?;
        if stages.contains(&txid) {
            staged_chunks.insert(chunk);
        } else {
            r.problem(format!("staged-index entry of transaction {txid}, which has no staging record"), vec![Fix::Clear(k)]);
        }
    }
    // Blocks.
    let (s, e) = range(b'B');
    let mut used_chunks = HashSet::new();
    for (k, v) in scan(tx, &s, &e, &mut progress)? {
        let ino = be(&k[1..]);
        let idx = schema::block_index(&k)?;
        let block = Block::decode(&v);
        let chunk = match &block {
            Ok(Block::Chunk { id, .. }) => Some(schema::chunk_key(ino, idx, *id)),
            _ => None,
        };
        let mut clear = vec![Fix::Clear(k.clone())];
        clear.extend(chunk.clone().map(Fix::Clear));
        match inodes.get(&ino) {
            None => r.problem(format!("block {idx} of missing inode {ino}"), clear),
            Some(i) if i.kind != FileType::File => r.problem(format!("block {idx} of inode {ino}, a {:?}", i.kind), clear),
            Some(i) if i.is_inline => r.problem(format!("block {idx} of inode {ino}, whose data is inline"), clear),
            Some(i) if idx.saturating_mul(block_size) >= i.size => {
                r.problem(format!("block {idx} of inode {ino} lies beyond its size {}", i.size), clear)
            }
            Some(_) => {
                if let Err(err) = &block {
                    r.problem(format!("block {idx} of inode {ino}: {err}"), vec![]);
                }
                if let Some(c) = chunk {
                    if tx.snapshot_get(&c)?.is_none() {
                        r.problem(format!("block {idx} of inode {ino} refers to a missing chunk"), vec![]);
                    }
                    used_chunks.insert(c);
                }
            }
        }
    }
    // Chunks.
    let (s, e) = range(b'C');
    for (k, _) in scan(tx, &s, &e, &mut progress)? {
        if !used_chunks.contains(&k) && !staged_chunks.contains(&k) {
            let ino = be(&k[1..]);
            r.problem(format!("chunk of inode {ino} that no block or staging record refers to"), vec![Fix::Clear(k)]);
        }
    }
    // Extended attributes.
    let (s, e) = range(b'X');
    for (k, _) in scan(tx, &s, &e, &mut progress)? {
        let ino = be(&k[1..]);
        if !inodes.contains_key(&ino) {
            let name = String::from_utf8_lossy(schema::xattr_name(&k)).into_owned();
            r.problem(format!("xattr {name:?} of missing inode {ino}"), vec![Fix::Clear(k)]);
        }
    }
    // Counters.
    for (meta, what, want) in [(Meta::Inodes, "inode", inodes.len() as u64), (Meta::Bytes, "byte", live_bytes)] {
        let key = schema::meta_key(meta);
        let have = kv::decode_counter(tx.snapshot_get(&key)?.as_deref());
        if have != want {
            r.problem(format!("{what} counter says {have}, the store holds {want}"), vec![Fix::Set(key, want.to_le_bytes().to_vec())]);
        }
    }
    progress.finish();
    Ok(r)
}
