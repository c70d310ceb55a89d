//! The model of `model_random.rs`: POSIX (Linux) semantics of a tiny namespace, in memory.

pub mod handles;
pub mod ops;
pub mod runner;
pub mod tree;

use handles::MHandle;
use std::collections::{BTreeMap, VecDeque};
use txvfs::{FileType, RenameFlags};

pub const ROOT: u64 = 1;
pub const SYMLINK_MAX: usize = 40;
pub const NAMES: &[&str] = &["a", "b", "c", "d"];

// errno values, as in libc (Linux).
pub const ENOENT: i32 = 2;
pub const EEXIST: i32 = 17;
pub const ENOTDIR: i32 = 20;
pub const EISDIR: i32 = 21;
pub const EINVAL: i32 = 22;
pub const EBUSY: i32 = 16;
pub const ENOTEMPTY: i32 = 39;
pub const ELOOP: i32 = 40;
pub const EPERM: i32 = 1;
pub const EBADF: i32 = 9;

#[derive(Clone, Debug)]
pub enum Kind {
    File(Vec<u8>),
    Dir(BTreeMap<Vec<u8>, u64>),
    Symlink(Vec<u8>),
}

#[derive(Clone, Debug)]
pub struct Node {
    pub kind: Kind,
    /// Hard links of a non-directory (directories count 2 + subdirectories).
    pub links: u64,
}

/// The model: inodes by number, directories as name -> inode maps, and open handles by slot.
#[derive(Clone, Debug)]
pub struct Model {
    pub nodes: BTreeMap<u64, Node>,
    pub next: u64,
    /// Open handles per inode: a file whose last name goes stays (an orphan) while open.
    pub open: BTreeMap<u64, u32>,
    pub handles: Vec<Option<MHandle>>,
}

/// Result of resolving a path in the model.
pub struct Res {
    pub parent: u64,
    /// None when the path ended on a directory without a name (`/`, or a link to `.`/`..`).
    pub name: Option<Vec<u8>>,
    pub entry: Option<u64>,
    /// Directories from the root down to `parent`.
    pub ancestors: Vec<u64>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Val {
    Unit,
    Bytes(Vec<u8>),
    /// kind, size (non-directories only), nlink.
    Stat(FileType, u64, u64),
    Names(Vec<(Vec<u8>, FileType)>),
    /// A position (seek).
    Num(u64),
}

pub type R = Result<Val, i32>;

impl Model {
    pub fn new() -> Model {
        let mut nodes = BTreeMap::new();
        nodes.insert(ROOT, Node { kind: Kind::Dir(BTreeMap::new()), links: 0 });
        Model { nodes, next: ROOT + 1, open: BTreeMap::new(), handles: vec![None; handles::SLOTS] }
    }

    pub fn dir(&self, ino: u64) -> &BTreeMap<Vec<u8>, u64> {
        match &self.nodes[&ino].kind {
            Kind::Dir(d) => d,
            _ => panic!("not a dir"),
        }
    }

    pub fn dir_mut(&mut self, ino: u64) -> &mut BTreeMap<Vec<u8>, u64> {
        match &mut self.nodes.get_mut(&ino).unwrap().kind {
            Kind::Dir(d) => d,
            _ => panic!("not a dir"),
        }
    }

    pub fn is_dir(&self, ino: u64) -> bool {
        matches!(self.nodes[&ino].kind, Kind::Dir(_))
    }

    pub fn ftype(&self, ino: u64) -> FileType {
        match self.nodes[&ino].kind {
            Kind::File(_) => FileType::File,
            Kind::Dir(_) => FileType::Dir,
            Kind::Symlink(_) => FileType::Symlink,
        }
    }

    pub fn nlink(&self, ino: u64) -> u64 {
        match &self.nodes[&ino].kind {
            Kind::Dir(d) => 2 + d.values().filter(|&&c| self.is_dir(c)).count() as u64,
            _ => self.nodes[&ino].links,
        }
    }

    pub fn stat_val(&self, ino: u64) -> Val {
        let size = match &self.nodes[&ino].kind {
            Kind::File(d) => d.len() as u64,
            Kind::Symlink(t) => t.len() as u64,
            Kind::Dir(_) => 0,
        };
        Val::Stat(self.ftype(ino), size, self.nlink(ino))
    }

    /// Path lookup as Linux does it (namei): symlinks are followed in every component but the
    /// last, and in the last when `follow`; at most 40 per lookup; `..` at the root stays.
    pub fn resolve(&self, path: &[u8], follow: bool) -> Result<Res, i32> {
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

    pub fn alloc(&mut self, kind: Kind) -> u64 {
        let ino = self.next;
        self.next += 1;
        self.nodes.insert(ino, Node { kind, links: 1 });
        ino
    }

    /// Resolves a name to create (no final symlink followed): EEXIST if anything is there.
    pub fn for_create(&self, p: &[u8]) -> Result<(u64, Vec<u8>), i32> {
        let r = self.resolve(p, false)?;
        match (r.name, r.entry) {
            (Some(name), None) => Ok((r.parent, name)),
            _ => Err(EEXIST),
        }
    }

    pub fn mkdir(&mut self, p: &[u8]) -> R {
        let (parent, name) = self.for_create(p)?;
        let ino = self.alloc(Kind::Dir(BTreeMap::new()));
        self.dir_mut(parent).insert(name, ino);
        Ok(Val::Unit)
    }

    pub fn rmdir(&mut self, p: &[u8]) -> R {
        let r = self.resolve(p, false)?;
        let Some(name) = r.name else {
            return Err(if r.entry == Some(ROOT) { EBUSY } else { EINVAL });
        };
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

    pub fn drop_link(&mut self, ino: u64) {
        let n = self.nodes.get_mut(&ino).unwrap();
        n.links -= 1;
        if n.links == 0 && !self.open.contains_key(&ino) {
            self.nodes.remove(&ino);
        }
    }

    pub fn unlink(&mut self, p: &[u8]) -> R {
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
    pub fn open(&mut self, p: &[u8], write: bool, create: bool) -> Result<u64, i32> {
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

    pub fn data(&mut self, ino: u64) -> &mut Vec<u8> {
        match &mut self.nodes.get_mut(&ino).unwrap().kind {
            Kind::File(d) => d,
            _ => panic!("not a file"),
        }
    }

    pub fn write_file(&mut self, p: &[u8], data: &[u8]) -> R {
        let ino = self.open(p, true, true)?;
        *self.data(ino) = data.to_vec();
        Ok(Val::Unit)
    }

    pub fn pwrite(&mut self, p: &[u8], off: u64, data: &[u8]) -> R {
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

    pub fn truncate(&mut self, p: &[u8], size: u64) -> R {
        let ino = self.open(p, true, false)?;
        self.data(ino).resize(size as usize, 0);
        Ok(Val::Unit)
    }

    pub fn read(&mut self, p: &[u8]) -> R {
        let ino = self.open(p, false, false)?;
        match &self.nodes[&ino].kind {
            Kind::File(d) => Ok(Val::Bytes(d.clone())),
            _ => Err(EISDIR),
        }
    }

    pub fn stat(&self, p: &[u8], follow: bool) -> R {
        let r = self.resolve(p, follow)?;
        let e = r.entry.ok_or(ENOENT)?;
        Ok(self.stat_val(e))
    }

    pub fn readdir(&self, p: &[u8]) -> R {
        let r = self.resolve(p, true)?;
        let e = r.entry.ok_or(ENOENT)?;
        match &self.nodes[&e].kind {
            Kind::Dir(d) => {
                Ok(Val::Names(d.iter().map(|(n, &i)| (n.clone(), self.ftype(i))).collect()))
            }
            _ => Err(ENOTDIR),
        }
    }

    pub fn readlink(&self, p: &[u8]) -> R {
        let r = self.resolve(p, false)?;
        let e = r.entry.ok_or(ENOENT)?;
        match &self.nodes[&e].kind {
            Kind::Symlink(t) => Ok(Val::Bytes(t.clone())),
            _ => Err(EINVAL),
        }
    }

    pub fn link(&mut self, from: &[u8], to: &[u8]) -> R {
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

    pub fn symlink(&mut self, target: &[u8], link: &[u8]) -> R {
        let (parent, name) = self.for_create(link)?;
        let ino = self.alloc(Kind::Symlink(target.to_vec()));
        self.dir_mut(parent).insert(name, ino);
        Ok(Val::Unit)
    }

    /// rename(2)/renameat2(2), with the checks in the order Linux's do_renameat2 and
    /// vfs_rename make them.
    pub fn rename(&mut self, from: &[u8], to: &[u8], flags: RenameFlags) -> R {
        let s = self.resolve(from, false)?;
        let d = self.resolve(to, false)?;
        let (Some(sname), Some(dname)) = (s.name.clone(), d.name.clone()) else {
            return Err(EBUSY);
        };
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
