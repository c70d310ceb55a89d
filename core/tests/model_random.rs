//! Model-based random test: a small in-memory model of POSIX (Linux) semantics and txvfs run
//! the same random operations on a tiny namespace, so that most operations hit existing paths
//! and error cases. Every result (value or errno) is compared, and the whole tree now and then.
//! Random groups of operations run in explicit transactions that commit or roll back; a
//! rollback restores the model from a snapshot.
//!
//! `TXVFS_SEED=N` runs only seed N (on the memory backend), for reproducing a failure.

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use std::collections::{BTreeMap, HashMap, VecDeque};
use txvfs::{Error, FileSystem, FileType, OpenOptions, Options, RenameFlags, Store};

const ROOT: u64 = 1;
const SYMLINK_MAX: usize = 40;
const NAMES: &[&str] = &["a", "b", "c", "d"];

// errno values, as in libc (Linux).
const ENOENT: i32 = 2;
const EEXIST: i32 = 17;
const ENOTDIR: i32 = 20;
const EISDIR: i32 = 21;
const EINVAL: i32 = 22;
const EBUSY: i32 = 16;
const ENOTEMPTY: i32 = 39;
const ELOOP: i32 = 40;
const EPERM: i32 = 1;

#[derive(Clone, Debug)]
enum Kind {
    File(Vec<u8>),
    Dir(BTreeMap<Vec<u8>, u64>),
    Symlink(Vec<u8>),
}

#[derive(Clone, Debug)]
struct Node {
    kind: Kind,
    /// Hard links of a non-directory (directories count 2 + subdirectories).
    links: u64,
}

/// The model: inodes by number, directories as name -> inode maps.
#[derive(Clone, Debug)]
struct Model {
    nodes: BTreeMap<u64, Node>,
    next: u64,
}

/// Result of resolving a path in the model.
struct Res {
    parent: u64,
    /// None when the path ended on a directory without a name (`/`, or a link to `.`/`..`).
    name: Option<Vec<u8>>,
    entry: Option<u64>,
    /// Directories from the root down to `parent`.
    ancestors: Vec<u64>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Val {
    Unit,
    Bytes(Vec<u8>),
    /// kind, size (non-directories only), nlink.
    Stat(FileType, u64, u64),
    Names(Vec<(Vec<u8>, FileType)>),
}

type R = Result<Val, i32>;

impl Model {
    fn new() -> Model {
        let mut nodes = BTreeMap::new();
        nodes.insert(ROOT, Node { kind: Kind::Dir(BTreeMap::new()), links: 0 });
        Model { nodes, next: ROOT + 1 }
    }

    fn dir(&self, ino: u64) -> &BTreeMap<Vec<u8>, u64> {
        match &self.nodes[&ino].kind {
            Kind::Dir(d) => d,
            _ => panic!("not a dir"),
        }
    }

    fn dir_mut(&mut self, ino: u64) -> &mut BTreeMap<Vec<u8>, u64> {
        match &mut self.nodes.get_mut(&ino).unwrap().kind {
            Kind::Dir(d) => d,
            _ => panic!("not a dir"),
        }
    }

    fn is_dir(&self, ino: u64) -> bool {
        matches!(self.nodes[&ino].kind, Kind::Dir(_))
    }

    fn ftype(&self, ino: u64) -> FileType {
        match self.nodes[&ino].kind {
            Kind::File(_) => FileType::File,
            Kind::Dir(_) => FileType::Dir,
            Kind::Symlink(_) => FileType::Symlink,
        }
    }

    fn nlink(&self, ino: u64) -> u64 {
        match &self.nodes[&ino].kind {
            Kind::Dir(d) => 2 + d.values().filter(|&&c| self.is_dir(c)).count() as u64,
            _ => self.nodes[&ino].links,
        }
    }

    fn stat_val(&self, ino: u64) -> Val {
        let size = match &self.nodes[&ino].kind {
            Kind::File(d) => d.len() as u64,
            Kind::Symlink(t) => t.len() as u64,
            Kind::Dir(_) => 0,
        };
        Val::Stat(self.ftype(ino), size, self.nlink(ino))
    }

    /// Path lookup as Linux does it (namei): symlinks are followed in every component but the
    /// last, and in the last when `follow`; at most 40 per lookup; `..` at the root stays.
    fn resolve(&self, path: &[u8], follow: bool) -> Result<Res, i32> {
        let mut queue: VecDeque<Vec<u8>> =
            path.split(|&b| b == b'/').filter(|c| !c.is_empty()).map(<[u8]>::to_vec).collect();
        let mut stack = vec![ROOT];
        let mut links = 0;
        loop {
            let Some(name) = queue.pop_front() else {
                let ino = stack.pop().unwrap();
                let parent = *stack.last().unwrap_or(&ROOT);
                if stack.is_empty() {
                    stack.push(ROOT);
                }
                return Ok(Res { parent, name: None, entry: Some(ino), ancestors: stack });
            };
            let last = queue.is_empty();
            if name == b"." {
                continue;
            }
            if name == b".." {
                if stack.len() > 1 {
                    stack.pop();
                }
                continue;
            }
            let dir = *stack.last().unwrap();
            let entry = self.dir(dir).get(&name).copied();
            match entry {
                Some(e) if matches!(self.nodes[&e].kind, Kind::Symlink(_)) && (!last || follow) => {
                    links += 1;
                    if links > SYMLINK_MAX {
                        return Err(ELOOP);
                    }
                    let Kind::Symlink(target) = &self.nodes[&e].kind else { unreachable!() };
                    if target[0] == b'/' {
                        stack.truncate(1);
                    }
                    for c in target.split(|&b| b == b'/').filter(|c| !c.is_empty()).rev() {
                        queue.push_front(c.to_vec());
                    }
                }
                Some(e) if !last => {
                    if !self.is_dir(e) {
                        return Err(ENOTDIR);
                    }
                    stack.push(e);
                }
                None if !last => return Err(ENOENT),
                _ => return Ok(Res { parent: dir, name: Some(name), entry, ancestors: stack }),
            }
        }
    }

    fn alloc(&mut self, kind: Kind) -> u64 {
        let ino = self.next;
        self.next += 1;
        self.nodes.insert(ino, Node { kind, links: 1 });
        ino
    }

    /// Resolves a name to create (no final symlink followed): EEXIST if anything is there.
    fn for_create(&self, p: &[u8]) -> Result<(u64, Vec<u8>), i32> {
        let r = self.resolve(p, false)?;
        match (r.name, r.entry) {
            (Some(name), None) => Ok((r.parent, name)),
            _ => Err(EEXIST),
        }
    }

    fn mkdir(&mut self, p: &[u8]) -> R {
        let (parent, name) = self.for_create(p)?;
        let ino = self.alloc(Kind::Dir(BTreeMap::new()));
        self.dir_mut(parent).insert(name, ino);
        Ok(Val::Unit)
    }

    fn rmdir(&mut self, p: &[u8]) -> R {
        let r = self.resolve(p, false)?;
        let Some(name) = r.name else { return Err(if r.entry == Some(ROOT) { EBUSY } else { EINVAL }) };
        let e = r.entry.ok_or(ENOENT)?;
        match &self.nodes[&e].kind {
            Kind::Dir(d) if !d.is_empty() => return Err(ENOTEMPTY),
            Kind::Dir(_) => {}
            _ => return Err(ENOTDIR),
        }
        self.dir_mut(r.parent).remove(&name);
        self.nodes.remove(&e);
        Ok(Val::Unit)
    }

    fn drop_link(&mut self, ino: u64) {
        let n = self.nodes.get_mut(&ino).unwrap();
        n.links -= 1;
        if n.links == 0 {
            self.nodes.remove(&ino);
        }
    }

    fn unlink(&mut self, p: &[u8]) -> R {
        let r = self.resolve(p, false)?;
        let e = r.entry.ok_or(ENOENT)?;
        let Some(name) = r.name else { return Err(EISDIR) };
        if self.is_dir(e) {
            return Err(EISDIR);
        }
        self.dir_mut(r.parent).remove(&name);
        self.drop_link(e);
        Ok(Val::Unit)
    }

    /// open(2) of an existing file or, with `create`, a new one; returns the inode.
    fn open(&mut self, p: &[u8], write: bool, create: bool) -> Result<u64, i32> {
        let r = self.resolve(p, true)?;
        match r.entry {
            None if create => {
                let ino = self.alloc(Kind::File(Vec::new()));
                self.dir_mut(r.parent).insert(r.name.unwrap(), ino);
                Ok(ino)
            }
            None => Err(ENOENT),
            Some(e) if write && self.is_dir(e) => Err(EISDIR),
            Some(e) => Ok(e),
        }
    }

    fn data(&mut self, ino: u64) -> &mut Vec<u8> {
        match &mut self.nodes.get_mut(&ino).unwrap().kind {
            Kind::File(d) => d,
            _ => panic!("not a file"),
        }
    }

    fn write_file(&mut self, p: &[u8], data: &[u8]) -> R {
        let ino = self.open(p, true, true)?;
        *self.data(ino) = data.to_vec();
        Ok(Val::Unit)
    }

    fn pwrite(&mut self, p: &[u8], off: u64, data: &[u8]) -> R {
        let ino = self.open(p, true, false)?;
        if data.is_empty() {
            return Ok(Val::Unit); // writes nothing, extends nothing
        }
        let d = self.data(ino);
        let end = off as usize + data.len();
        if d.len() < end {
            d.resize(end, 0);
        }
        d[off as usize..off as usize + data.len()].copy_from_slice(data);
        Ok(Val::Unit)
    }

    fn truncate(&mut self, p: &[u8], size: u64) -> R {
        let ino = self.open(p, true, false)?;
        self.data(ino).resize(size as usize, 0);
        Ok(Val::Unit)
    }

    fn read(&mut self, p: &[u8]) -> R {
        let ino = self.open(p, false, false)?;
        match &self.nodes[&ino].kind {
            Kind::File(d) => Ok(Val::Bytes(d.clone())),
            _ => Err(EISDIR),
        }
    }

    fn stat(&self, p: &[u8], follow: bool) -> R {
        let r = self.resolve(p, follow)?;
        let e = r.entry.ok_or(ENOENT)?;
        Ok(self.stat_val(e))
    }

    fn readdir(&self, p: &[u8]) -> R {
        let r = self.resolve(p, true)?;
        let e = r.entry.ok_or(ENOENT)?;
        match &self.nodes[&e].kind {
            Kind::Dir(d) => Ok(Val::Names(d.iter().map(|(n, &i)| (n.clone(), self.ftype(i))).collect())),
            _ => Err(ENOTDIR),
        }
    }

    fn readlink(&self, p: &[u8]) -> R {
        let r = self.resolve(p, false)?;
        let e = r.entry.ok_or(ENOENT)?;
        match &self.nodes[&e].kind {
            Kind::Symlink(t) => Ok(Val::Bytes(t.clone())),
            _ => Err(EINVAL),
        }
    }

    fn link(&mut self, from: &[u8], to: &[u8]) -> R {
        let r = self.resolve(from, false)?;
        let e = r.entry.ok_or(ENOENT)?;
        let (parent, name) = self.for_create(to)?;
        if self.is_dir(e) {
            return Err(EPERM);
        }
        self.nodes.get_mut(&e).unwrap().links += 1;
        self.dir_mut(parent).insert(name, e);
        Ok(Val::Unit)
    }

    fn symlink(&mut self, target: &[u8], link: &[u8]) -> R {
        let (parent, name) = self.for_create(link)?;
        let ino = self.alloc(Kind::Symlink(target.to_vec()));
        self.dir_mut(parent).insert(name, ino);
        Ok(Val::Unit)
    }

    /// rename(2)/renameat2(2), with the checks in the order Linux's do_renameat2 and
    /// vfs_rename make them.
    fn rename(&mut self, from: &[u8], to: &[u8], flags: RenameFlags) -> R {
        let s = self.resolve(from, false)?;
        let d = self.resolve(to, false)?;
        let (Some(sname), Some(dname)) = (s.name.clone(), d.name.clone()) else { return Err(EBUSY) };
        let se = s.entry.ok_or(ENOENT)?;
        if flags.no_replace && d.entry.is_some() {
            return Err(EEXIST);
        }
        if flags.exchange && d.entry.is_none() {
            return Err(ENOENT);
        }
        if self.is_dir(se) && d.ancestors.contains(&se) {
            return Err(EINVAL); // source is an ancestor of the target
        }
        if let Some(de) = d.entry.filter(|&de| self.is_dir(de) && s.ancestors.contains(&de)) {
            let _ = de;
            return Err(if flags.exchange { EINVAL } else { ENOTEMPTY }); // target is an ancestor of the source
        }
        if d.entry == Some(se) {
            return Ok(Val::Unit); // two names of one inode: nothing happens
        }
        if flags.exchange {
            let de = d.entry.unwrap();
            self.dir_mut(s.parent).insert(sname, de);
            self.dir_mut(d.parent).insert(dname, se);
            return Ok(Val::Unit);
        }
        if let Some(de) = d.entry {
            match (self.is_dir(se), self.is_dir(de)) {
                (true, false) => return Err(ENOTDIR),
                (false, true) => return Err(EISDIR),
                (true, true) => {
                    if !self.dir(de).is_empty() {
                        return Err(ENOTEMPTY);
                    }
                    self.nodes.remove(&de);
                }
                (false, false) => self.drop_link(de),
            }
        }
        self.dir_mut(s.parent).remove(&sname);
        self.dir_mut(d.parent).insert(dname, se);
        Ok(Val::Unit)
    }
}

/// One random operation.
#[derive(Clone, Debug)]
enum Op {
    Mkdir(Vec<u8>),
    Rmdir(Vec<u8>),
    WriteFile(Vec<u8>, Vec<u8>),
    Pwrite(Vec<u8>, u64, Vec<u8>),
    Truncate(Vec<u8>, u64),
    Read(Vec<u8>),
    Stat(Vec<u8>),
    Lstat(Vec<u8>),
    Readdir(Vec<u8>),
    Unlink(Vec<u8>),
    Rename(Vec<u8>, Vec<u8>, RenameFlags),
    Link(Vec<u8>, Vec<u8>),
    Symlink(Vec<u8>, Vec<u8>),
    Readlink(Vec<u8>),
}

/// A path of 1 to 3 names (or rarely `/`). Directories are mostly named `a` or `b` and files
/// mostly `c` or `d`, with enough overlap that file and directory operations collide often.
fn gen_path(rng: &mut SmallRng, allow_root: bool, dir: bool) -> Vec<u8> {
    if allow_root && rng.gen_ratio(1, 40) {
        return b"/".to_vec();
    }
    let depth = match (rng.gen_range(0..10), dir) {
        (0..=4, true) | (0..=2, false) => 1,
        (5..=8, true) | (3..=6, false) => 2,
        _ => 3,
    };
    let mut p = Vec::new();
    for i in 0..depth {
        let dir_like = if i + 1 < depth { true } else { dir };
        let k = if rng.gen_ratio(4, 5) { 0 } else { 2 };
        let k = k + rng.gen_range(0..2);
        let k = if dir_like { k } else { 3 - k };
        p.push(b'/');
        p.extend_from_slice(NAMES[k].as_bytes());
    }
    p
}

fn gen_target(rng: &mut SmallRng) -> Vec<u8> {
    let name = |rng: &mut SmallRng| NAMES[rng.gen_range(0..NAMES.len())].as_bytes().to_vec();
    match rng.gen_range(0..10) {
        0..=3 => {
            let dir = rng.gen();
            gen_path(rng, false, dir)
        }
        4..=5 => name(rng),
        6 => [b"../".to_vec(), name(rng)].concat(),
        7 => [name(rng), b"/".to_vec(), name(rng)].concat(),
        8 => b".".to_vec(),
        _ => b"..".to_vec(),
    }
}

/// Sizes around the interesting boundaries of the store used (inline limit, block size).
fn gen_size(rng: &mut SmallRng, o: &Options) -> u64 {
    let (il, bs) = (o.inline_limit as u64, o.block_size as u64);
    match rng.gen_range(0..10) {
        0..=3 => rng.gen_range(0..8),
        4..=5 => rng.gen_range(il.saturating_sub(8)..il + 8),
        6..=7 => rng.gen_range(bs - 8..bs + 8),
        _ => rng.gen_range(0..3 * bs),
    }
}

fn gen_data(rng: &mut SmallRng, o: &Options) -> Vec<u8> {
    let n = gen_size(rng, o) as usize;
    let base: u8 = rng.gen();
    (0..n).map(|i| base.wrapping_add((i as u8).wrapping_mul(7)) | 1).collect()
}

fn gen_op(rng: &mut SmallRng, o: &Options) -> Op {
    match rng.gen_range(0..100) {
        0..=7 => Op::Mkdir(gen_path(rng, true, true)),
        8..=12 => Op::Rmdir(gen_path(rng, true, true)),
        13..=28 => Op::WriteFile(gen_path(rng, true, false), gen_data(rng, o)),
        29..=38 => Op::Pwrite(gen_path(rng, false, false), gen_size(rng, o), gen_data(rng, o)),
        39..=43 => Op::Truncate(gen_path(rng, false, false), gen_size(rng, o)),
        44..=52 => Op::Read(gen_path(rng, false, false)),
        53..=56 => Op::Stat(gen_path(rng, true, false)),
        57..=60 => Op::Lstat(gen_path(rng, false, false)),
        61..=64 => Op::Readdir(gen_path(rng, true, true)),
        65..=71 => Op::Unlink(gen_path(rng, true, false)),
        72..=85 => {
            let flags = match rng.gen_range(0..10) {
                0 => RenameFlags { no_replace: true, exchange: false },
                1 => RenameFlags { no_replace: false, exchange: true },
                _ => RenameFlags::default(),
            };
            {
                let dir = rng.gen_ratio(1, 3);
                Op::Rename(gen_path(rng, false, dir), gen_path(rng, false, dir), flags)
            }
        }
        86..=91 => Op::Link(gen_path(rng, false, false), gen_path(rng, false, false)),
        92..=96 => Op::Symlink(gen_target(rng), gen_path(rng, false, false)),
        _ => Op::Readlink(gen_path(rng, false, false)),
    }
}

fn model_apply(m: &mut Model, op: &Op) -> R {
    match op {
        Op::Mkdir(p) => m.mkdir(p),
        Op::Rmdir(p) => m.rmdir(p),
        Op::WriteFile(p, d) => m.write_file(p, d),
        Op::Pwrite(p, off, d) => m.pwrite(p, *off, d),
        Op::Truncate(p, n) => m.truncate(p, *n),
        Op::Read(p) => m.read(p),
        Op::Stat(p) => m.stat(p, true),
        Op::Lstat(p) => m.stat(p, false),
        Op::Readdir(p) => m.readdir(p),
        Op::Unlink(p) => m.unlink(p),
        Op::Rename(a, b, f) => m.rename(a, b, *f),
        Op::Link(a, b) => m.link(a, b),
        Op::Symlink(t, l) => m.symlink(t, l),
        Op::Readlink(p) => m.readlink(p),
    }
}

fn fs_stat(st: txvfs::Stat) -> Val {
    let size = if st.is_dir() { 0 } else { st.size };
    Val::Stat(st.kind, size, st.nlink)
}

fn fs_apply<F: FileSystem>(fs: &F, op: &Op) -> Result<Val, Error> {
    let unit = |r: Result<(), Error>| r.map(|()| Val::Unit);
    match op {
        Op::Mkdir(p) => unit(fs.mkdir(p, 0o755)),
        Op::Rmdir(p) => unit(fs.rmdir(p)),
        Op::WriteFile(p, d) => unit(fs.write_file(p, d)),
        Op::Pwrite(p, off, d) => {
            let f = fs.open(p, &OpenOptions::new().write(true))?;
            f.write_at(d, *off)?;
            f.close().map(|()| Val::Unit)
        }
        Op::Truncate(p, n) => unit(fs.truncate(p, *n)),
        Op::Read(p) => fs.read_file(p).map(Val::Bytes),
        Op::Stat(p) => fs.stat(p).map(fs_stat),
        Op::Lstat(p) => fs.lstat(p).map(fs_stat),
        Op::Readdir(p) => {
            fs.readdir(p, None, 0).map(|es| Val::Names(es.into_iter().map(|e| (e.name, e.kind)).collect()))
        }
        Op::Unlink(p) => unit(fs.unlink(p)),
        Op::Rename(a, b, f) => unit(fs.rename_with(a, b, *f)),
        Op::Link(a, b) => unit(fs.link(a, b)),
        Op::Symlink(t, l) => unit(fs.symlink(t, l)),
        Op::Readlink(p) => fs.readlink(p).map(Val::Bytes),
    }
}

fn show_op(op: &Op) -> String {
    let s = |p: &[u8]| String::from_utf8_lossy(p).into_owned();
    match op {
        Op::WriteFile(p, d) => format!("write_file {} ({} bytes)", s(p), d.len()),
        Op::Pwrite(p, off, d) => format!("pwrite {} at {off} ({} bytes)", s(p), d.len()),
        Op::Symlink(t, l) => format!("symlink {} -> {}", s(l), s(t)),
        Op::Rename(a, b, f) => format!("rename {} {} {:?}", s(a), s(b), f),
        Op::Link(a, b) => format!("link {} {}", s(a), s(b)),
        other => {
            let dbg = format!("{other:?}");
            dbg.chars().take(200).collect()
        }
    }
}

fn show_val(r: &R) -> String {
    match r {
        Ok(Val::Bytes(b)) if b.len() > 40 => format!("Ok({} bytes)", b.len()),
        other => format!("{other:?}"),
    }
}

/// Walks the model and the store together and compares every entry; also checks that names
/// sharing an inode in the model share one in the store, and the other way round.
fn compare_trees<F: FileSystem>(m: &Model, fs: &F, ctx: &str, counts: bool) {
    let mut inos: HashMap<u64, u64> = HashMap::new();
    let mut back: HashMap<u64, u64> = HashMap::new();
    let mut stack = vec![(b"/".to_vec(), ROOT)];
    while let Some((path, ino)) = stack.pop() {
        let st = fs.lstat(&path).unwrap_or_else(|e| panic!("{ctx}: lstat {}: {e}", String::from_utf8_lossy(&path)));
        assert_eq!(fs_stat(st.clone()), m.stat_val(ino), "{ctx}: attributes of {}", String::from_utf8_lossy(&path));
        assert_eq!(*inos.entry(ino).or_insert(st.ino), st.ino, "{ctx}: hard links of {}", String::from_utf8_lossy(&path));
        assert_eq!(*back.entry(st.ino).or_insert(ino), ino, "{ctx}: inode reuse at {}", String::from_utf8_lossy(&path));
        match &m.nodes[&ino].kind {
            Kind::File(d) => {
                let got = fs.read_file(&path).unwrap();
                assert!(got == *d, "{ctx}: contents of {} ({} vs {} bytes)", String::from_utf8_lossy(&path), got.len(), d.len());
            }
            Kind::Symlink(t) => assert_eq!(&fs.readlink(&path).unwrap(), t, "{ctx}: target of {}", String::from_utf8_lossy(&path)),
            Kind::Dir(entries) => {
                let got: Vec<(Vec<u8>, FileType)> =
                    fs.readdir(&path, None, 0).unwrap().into_iter().map(|e| (e.name, e.kind)).collect();
                let want: Vec<(Vec<u8>, FileType)> = entries.iter().map(|(n, &i)| (n.clone(), m.ftype(i))).collect();
                assert_eq!(got, want, "{ctx}: entries of {}", String::from_utf8_lossy(&path));
                for (n, &i) in entries {
                    let mut p = if path == b"/" { Vec::new() } else { path.clone() };
                    p.push(b'/');
                    p.extend_from_slice(n);
                    stack.push((p, i));
                }
            }
        }
    }
    if counts {
        // statfs reads the committed counters, so only outside a transaction.
        assert_eq!(fs.statfs().unwrap().files, m.nodes.len() as u64, "{ctx}: statfs inode count");
    }
}

struct Run {
    ops: usize,
    mismatches: Vec<String>,
    /// Per operation kind: how many succeeded, and how often each errno came back.
    outcomes: BTreeMap<&'static str, (usize, BTreeMap<i32, usize>)>,
}

fn op_name(op: &Op) -> &'static str {
    match op {
        Op::Mkdir(..) => "mkdir",
        Op::Rmdir(..) => "rmdir",
        Op::WriteFile(..) => "write_file",
        Op::Pwrite(..) => "pwrite",
        Op::Truncate(..) => "truncate",
        Op::Read(..) => "read",
        Op::Stat(..) => "stat",
        Op::Lstat(..) => "lstat",
        Op::Readdir(..) => "readdir",
        Op::Unlink(..) => "unlink",
        Op::Rename(..) => "rename",
        Op::Link(..) => "link",
        Op::Symlink(..) => "symlink",
        Op::Readlink(..) => "readlink",
    }
}

fn step<F: FileSystem>(fs: &F, m: &mut Model, op: &Op, i: usize, run: &mut Run, seed: u64) {
    let want = model_apply(m, op);
    let got = fs_apply(fs, op).map_err(|e| e.code());
    run.ops += 1;
    let o = run.outcomes.entry(op_name(op)).or_default();
    match &want {
        Ok(_) => o.0 += 1,
        Err(e) => *o.1.entry(*e).or_default() += 1,
    }
    if want != got {
        run.mismatches.push(format!(
            "seed {seed} op {i}: {}: model {} txvfs {}",
            show_op(op),
            show_val(&want),
            show_val(&got)
        ));
    }
}

/// Runs `n` random operations with seed `seed` on `store`; returns the count run.
fn run_seed(store: &Store, options: &Options, seed: u64, n: usize) -> usize {
    eprintln!("model_random: seed {seed} ({n} ops, {}, block {} inline {})", store.describe(), options.block_size, options.inline_limit);
    let mut rng = SmallRng::seed_from_u64(seed);
    let mut m = Model::new();
    let mut run = Run { ops: 0, mismatches: Vec::new(), outcomes: BTreeMap::new() };
    let mut i = 0;
    let (mut commits, mut rollbacks) = (0, 0);
    while i < n {
        if rng.gen_ratio(1, 8) {
            // A group of operations in one explicit transaction.
            let snapshot = m.clone();
            let tx = store.begin().unwrap();
            let k = rng.gen_range(1..20);
            for _ in 0..k {
                let op = gen_op(&mut rng, options);
                step(&tx, &mut m, &op, i, &mut run, seed);
                i += 1;
            }
            if rng.gen_ratio(1, 4) {
                compare_trees(&m, &tx, &format!("seed {seed} op {i} (inside a transaction)"), false);
            }
            if rng.gen_ratio(2, 3) {
                tx.commit().unwrap_or_else(|e| panic!("seed {seed} op {i}: commit: {e}"));
                commits += 1;
            } else {
                tx.rollback();
                m = snapshot;
                rollbacks += 1;
            }
            compare_trees(&m, store, &format!("seed {seed} op {i} (after a transaction)"), true);
        } else {
            let op = gen_op(&mut rng, options);
            step(store, &mut m, &op, i, &mut run, seed);
            i += 1;
            if i % 50 == 0 {
                compare_trees(&m, store, &format!("seed {seed} op {i}"), true);
            }
        }
        if run.mismatches.len() >= 20 {
            break;
        }
    }
    compare_trees(&m, store, &format!("seed {seed} end"), true);
    assert!(
        run.mismatches.is_empty(),
        "seed {seed} (rerun with TXVFS_SEED={seed}): {} mismatches:\n{}",
        run.mismatches.len(),
        run.mismatches.join("\n")
    );
    let summary: Vec<String> = run
        .outcomes
        .iter()
        .map(|(k, (ok, errs))| {
            let errs: Vec<String> = errs.iter().map(|(e, n)| format!("e{e}:{n}")).collect();
            format!("{k} ok:{ok} {}", errs.join(" "))
        })
        .collect();
    eprintln!(
        "model_random: seed {seed} ok: {} ops, {commits} commits, {rollbacks} rollbacks, {} inodes at the end\n  outcomes (model): {}",
        run.ops,
        m.nodes.len(),
        summary.join("; ")
    );
    run.ops
}

fn small_blocks() -> Options {
    Options { block_size: 512, inline_limit: 128, sync: false, ..Options::default() }
}

fn env_seed() -> Option<u64> {
    std::env::var("TXVFS_SEED").ok().map(|s| s.parse().expect("TXVFS_SEED must be a number"))
}

#[test]
fn model_random_memory() {
    let seeds: Vec<u64> = match env_seed() {
        Some(s) => vec![s],
        None => (1..=8).collect(),
    };
    let mut total = 0;
    for seed in seeds {
        // Odd seeds use tiny blocks (many inline/block transitions), even ones the defaults.
        let options = if seed % 2 == 1 { small_blocks() } else { Options::default() };
        let store = Store::open_with("memory:", options.clone()).unwrap();
        total += run_seed(&store, &options, seed, 2500);
    }
    eprintln!("model_random: {total} operations on memory");
    assert!(env_seed().is_some() || total >= 10_000);
}

#[test]
fn model_random_rocksdb() {
    if env_seed().is_some() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let options = small_blocks();
    let store = Store::open_with(dir.path().join("db").to_str().unwrap(), options.clone()).unwrap();
    run_seed(&store, &options, 1001, 2500);
    drop(store);
}
