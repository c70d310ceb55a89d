//! Every file-system operation, written once against one kv transaction. Auto-commit calls and
//! explicit transactions both run these; the caller decides when the transaction commits.

use super::path::{self, show, SYMLINK_MAX};
use super::types::*;
use super::staging::Staging;
use super::Inner;
use crate::error::{Error, ErrorKind, Result};
use crate::kv::{decode_counter, Txn};
use crate::schema::{self, Block, Dentry, DirAttr, FileType, Inode, Meta, ROOT_INO};
use std::collections::VecDeque;

/// Largest file size (4 PiB): keeps block arithmetic far from overflow.
pub const MAX_FILE_SIZE: u64 = 1 << 52;
/// Blocks fetched per backend read in a large read (1 MiB with 64 KiB blocks).
const READ_PIECE_BLOCKS: u64 = 16;

/// Largest extended attribute name and value (Linux's limits).
pub const XATTR_NAME_MAX: usize = 255;
/// Largest extended attribute value.
pub const XATTR_SIZE_MAX: usize = 65536;

const R_OK: u32 = 4;
const W_OK: u32 = 2;
const X_OK: u32 = 1;

pub(crate) fn now_ns() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as i64)
        .unwrap_or(0)
}

fn check_symlink_target(target: &[u8]) -> Result<()> {
    if target.is_empty() || target.contains(&0) || target.len() > path::PATH_MAX {
        return Err(Error::new(ErrorKind::Invalid, format!("{}: invalid symlink target", show(target))));
    }
    Ok(())
}

/// A resolved path: the directory that holds the last name, and what the name refers to.
pub(crate) struct Resolved {
    /// Directory holding the last component.
    pub parent: u64,
    /// Last component, or `None` when the path ended in `/`, `.` or `..` (a directory
    /// reached without a name in its parent, such as the root).
    pub name: Option<Vec<u8>>,
    /// The entry, if it exists.
    pub entry: Option<Dentry>,
    /// Directories from the root down to `parent`, inclusive.
    pub ancestors: Vec<u64>,
}

/// What a call names: a path (resolved from the root) or an inode.
#[derive(Clone, Copy)]
pub enum Target<'p> {
    /// An absolute path.
    Path(&'p [u8]),
    /// An inode number.
    Ino(u64),
}

impl<'p> Target<'p> {
    /// The path, for messages (empty for an inode).
    fn path(self) -> &'p [u8] {
        match self {
            Target::Path(p) => p,
            Target::Ino(_) => b"",
        }
    }
}

/// Operations over one kv transaction.
pub struct Ops<'a> {
    pub(crate) tx: &'a mut dyn Txn,
    pub(crate) inner: &'a Inner,
    pub(crate) cred: Option<&'a Credential>,
    /// Set once anything was written, so a failure after it can poison an explicit transaction.
    pub(crate) wrote: bool,
    /// Inodes this operation kept as orphans because they were open; once the transaction
    /// commits, the caller frees those whose last handle closed in the meantime.
    pub(crate) orphaned: Vec<u64>,
    /// The explicit transaction's write-ahead state (`None` for auto-commit calls).
    pub(crate) staging: Option<&'a mut Staging>,
}

impl<'a> Ops<'a> {
    // ---- writes: one place that enforces read-only stores and tracks partial writes ----

    fn set(&mut self, k: &[u8], v: &[u8]) -> Result<()> {
        self.writable()?;
        self.wrote = true;
        self.tx.set(k, v)
    }
    fn clear(&mut self, k: &[u8]) -> Result<()> {
        self.writable()?;
        self.wrote = true;
        self.tx.clear(k)
    }
    fn clear_range(&mut self, (s, e): (Vec<u8>, Vec<u8>)) -> Result<()> {
        self.writable()?;
        self.wrote = true;
        self.tx.clear_range(&s, &e)
    }
    fn add(&mut self, k: &[u8], d: i64) -> Result<()> {
        self.writable()?;
        self.wrote = true;
        self.tx.atomic_add(k, d)
    }
    fn max(&mut self, k: &[u8], v: i64) -> Result<()> {
        self.writable()?;
        self.wrote = true;
        self.tx.atomic_max(k, v.max(0) as u64)
    }
    fn writable(&self) -> Result<()> {
        if self.inner.read_only {
            return Err(Error::new(ErrorKind::ReadOnly, "store is opened read-only"));
        }
        Ok(())
    }

    // ---- inodes ----

    pub(crate) fn load_inode(&mut self, ino: u64) -> Result<Option<Inode>> {
        match self.tx.get(&schema::inode_key(ino))? {
            Some(v) => Ok(Some(Inode::decode(&v)?)),
            None => Ok(None),
        }
    }

    /// Loads an inode that a directory entry or handle refers to; missing means corruption
    /// (for entries) or a file deleted under a handle.
    pub(crate) fn inode(&mut self, ino: u64) -> Result<Inode> {
        self.load_inode(ino)?
            .ok_or_else(|| Error::new(ErrorKind::NotFound, format!("inode {ino} no longer exists")))
    }

    fn store_inode(&mut self, ino: u64, inode: &Inode) -> Result<()> {
        self.set(&schema::inode_key(ino), &inode.encode())
    }

    pub(crate) fn lookup(&mut self, dir: u64, name: &[u8]) -> Result<Option<Dentry>> {
        match self.tx.get(&schema::dentry_key(dir, name))? {
            Some(v) => Ok(Some(Dentry::decode(&v)?)),
            None => Ok(None),
        }
    }

    /// Records a change in directory `dir`: bumps its mtime and ctime without a read conflict.
    fn touch_dir(&mut self, dir: u64, now: i64) -> Result<()> {
        self.max(&schema::dir_attr_key(dir, DirAttr::Mtime), now)?;
        self.max(&schema::dir_attr_key(dir, DirAttr::Ctime), now)
    }

    fn stat_of(&mut self, ino: u64, inode: &Inode) -> Result<Stat> {
        let mut st = Stat::from_inode(ino, inode, self.inner.block_size);
        if inode.kind == FileType::Dir {
            let (s, e) = schema::inode_range(ino);
            for (k, v) in self.tx.get_range(&s, &e, 0, false)? {
                let n = decode_counter(Some(&v));
                match k.get(9) {
                    Some(&b) if b == DirAttr::Mtime as u8 => st.mtime_ns = n as i64,
                    Some(&b) if b == DirAttr::Ctime as u8 => st.ctime_ns = st.ctime_ns.max(n as i64),
                    Some(&b) if b == DirAttr::Nlink as u8 => st.nlink = st.nlink.wrapping_add(n),
                    _ => {}
                }
            }
        }
        Ok(st)
    }

    // ---- permissions ----

    fn access(&self, inode: &Inode, mask: u32) -> Result<()> {
        let Some(c) = self.cred else { return Ok(()) };
        if c.uid == 0 {
            // Root may do anything except execute a file with no execute bit at all.
            if mask & X_OK != 0 && inode.kind == FileType::File && inode.perm & 0o111 == 0 {
                return Err(Error::new(ErrorKind::Access, "permission denied"));
            }
            return Ok(());
        }
        let bits = if c.uid == inode.uid {
            inode.perm >> 6
        } else if c.in_group(inode.gid) {
            inode.perm >> 3
        } else {
            inode.perm
        } & 7;
        if bits & mask == mask {
            Ok(())
        } else {
            Err(Error::new(ErrorKind::Access, "permission denied"))
        }
    }

    fn access_ino(&mut self, ino: u64, mask: u32, what: &[u8]) -> Result<()> {
        if self.cred.is_none_or(|c| c.uid == 0) {
            return Ok(());
        }
        let inode = self.inode(ino)?;
        self.access(&inode, mask).map_err(|_| Error::at(ErrorKind::Access, what))
    }

    /// May the caller remove or replace `child` in `dir`? (write+search, and the sticky bit)
    fn may_delete(&mut self, dir: u64, child: u64, what: &[u8]) -> Result<()> {
        let Some(c) = self.cred.filter(|c| c.uid != 0) else { return Ok(()) };
        let d = self.inode(dir)?;
        self.access(&d, W_OK | X_OK).map_err(|_| Error::at(ErrorKind::Access, what))?;
        if d.perm & libc::S_ISVTX != 0 && c.uid != d.uid && c.uid != self.inode(child)?.uid {
            return Err(Error::at(ErrorKind::NotPermitted, what));
        }
        Ok(())
    }

    fn owner_or_root(&self, inode: &Inode, what: &[u8]) -> Result<()> {
        match self.cred {
            Some(c) if c.uid != 0 && c.uid != inode.uid => Err(Error::at(ErrorKind::NotPermitted, what)),
            _ => Ok(()),
        }
    }

    fn new_owner(&self) -> (u32, u32) {
        match self.cred {
            Some(c) => (c.uid, c.gid),
            None => (self.inner.owner.0, self.inner.owner.1),
        }
    }

    // ---- path resolution ----

    /// Resolves `p`. Symbolic links are followed in every component but the last, and in the
    /// last one too when `follow` (or when the path ends in `/`).
    pub(crate) fn resolve(&mut self, p: &[u8], follow: bool) -> Result<Resolved> {
        let (comps, trailing_slash) = path::split(p)?;
        let mut queue: VecDeque<Vec<u8>> = comps.into_iter().map(<[u8]>::to_vec).collect();
        let mut stack = vec![ROOT_INO];
        let mut links = 0;
        loop {
            let Some(name) = queue.pop_front() else {
                // Ended on a directory reached without a name ("/", "x/.", "x/..").
                let ino = *stack.last().unwrap();
                let parent = if stack.len() > 1 { stack[stack.len() - 2] } else { ROOT_INO };
                stack.pop();
                if stack.is_empty() {
                    stack.push(ROOT_INO);
                }
                return Ok(Resolved {
                    parent,
                    name: None,
                    entry: Some(Dentry { ino, kind: FileType::Dir }),
                    ancestors: stack,
                });
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
            self.access_ino(dir, X_OK, p)?;
            let entry = self.lookup(dir, &name)?;
            match entry {
                Some(e) if e.kind == FileType::Symlink && (!last || follow || trailing_slash) => {
                    links += 1;
                    if links > SYMLINK_MAX {
                        return Err(Error::at(ErrorKind::Loop, p));
                    }
                    let target = self.inode(e.ino)?.inline;
                    if target.is_empty() {
                        return Err(Error::at(ErrorKind::NotFound, p));
                    }
                    if target[0] == b'/' {
                        stack.truncate(1);
                    }
                    for c in target.split(|&b| b == b'/').filter(|c| !c.is_empty()).rev() {
                        queue.push_front(c.to_vec());
                    }
                    if trailing_slash && last {
                        // Keep the trailing slash's meaning for the target: it must be a dir.
                        queue.push_back(b".".to_vec());
                    }
                }
                Some(e) if !last => {
                    if e.kind != FileType::Dir {
                        return Err(Error::at(ErrorKind::NotDir, p));
                    }
                    stack.push(e.ino);
                }
                None if !last => return Err(Error::at(ErrorKind::NotFound, p)),
                _ => {
                    if trailing_slash && entry.is_some_and(|e| e.kind != FileType::Dir) {
                        return Err(Error::at(ErrorKind::NotDir, p));
                    }
                    return Ok(Resolved { parent: dir, name: Some(name), entry, ancestors: stack });
                }
            }
        }
    }

    fn existing(&mut self, p: &[u8], follow: bool) -> Result<(u64, Inode)> {
        let r = self.resolve(p, follow)?;
        let e = r.entry.ok_or_else(|| Error::at(ErrorKind::NotFound, p))?;
        Ok((e.ino, self.inode(e.ino)?))
    }

    /// Resolves the parent of a name to create; fails if the name exists.
    fn for_create(&mut self, p: &[u8]) -> Result<(u64, Vec<u8>)> {
        let r = self.resolve(p, false)?;
        match (r.name, r.entry) {
            (Some(name), None) => {
                self.access_ino(r.parent, W_OK | X_OK, p)?;
                Ok((r.parent, name))
            }
            _ => Err(Error::at(ErrorKind::Exists, p)),
        }
    }

    /// The directory `dir`, for looking up `name` in it: it must be a directory the caller
    /// may search.
    fn search_dir(&mut self, dir: u64, name: &[u8]) -> Result<Inode> {
        path::check_name(name)?;
        let d = self.inode(dir)?;
        if d.kind != FileType::Dir {
            return Err(Error::at(ErrorKind::NotDir, name));
        }
        self.access(&d, X_OK).map_err(|_| Error::at(ErrorKind::Access, name))?;
        Ok(d)
    }

    /// Checks that `name` may be created in directory `dir` (it is free and the caller may
    /// write there).
    fn create_check(&mut self, dir: u64, name: &[u8]) -> Result<()> {
        let d = self.search_dir(dir, name)?;
        if self.lookup(dir, name)?.is_some() {
            return Err(Error::at(ErrorKind::Exists, name));
        }
        self.access(&d, W_OK | X_OK).map_err(|_| Error::at(ErrorKind::Access, name))
    }

    /// The entry `name` of directory `dir`, as a resolved path.
    fn resolved_at(&mut self, dir: u64, name: &[u8]) -> Result<Resolved> {
        self.search_dir(dir, name)?;
        let entry = self.lookup(dir, name)?;
        Ok(Resolved { parent: dir, name: Some(name.to_vec()), entry, ancestors: vec![dir] })
    }

    /// `lookup`: the attributes of `name` in directory `dir`.
    pub fn lookup_at(&mut self, dir: u64, name: &[u8]) -> Result<Stat> {
        let r = self.resolved_at(dir, name)?;
        let e = r.entry.ok_or_else(|| Error::at(ErrorKind::NotFound, name))?;
        self.stat_ino(e.ino)
    }

    /// Checks that the caller may access `ino` for `mask` (`R_OK | W_OK | X_OK` bits, 0 for
    /// existence), like `access(2)` with the caller's credential.
    pub fn access_check(&mut self, ino: u64, mask: u32) -> Result<()> {
        let inode = self.inode(ino)?;
        self.access(&inode, mask & 7)
    }

    /// Creates a node of `kind` named `name` in `dir`: a directory, an empty file, a symlink
    /// (`data` is its target) or a special file (`rdev` is a device's number).
    pub fn mknod_at(&mut self, dir: u64, name: &[u8], kind: FileType, perm: u32, data: &[u8], rdev: u64) -> Result<u64> {
        if kind == FileType::Symlink {
            check_symlink_target(data)?;
        }
        self.create_check(dir, name)?;
        self.create_node(dir, name, kind, perm, data, rdev)
    }

    // ---- creating and deleting ----

    fn alloc_ino(&mut self) -> Result<u64> {
        self.inner.alloc_ino()
    }

    fn create_node(&mut self, parent: u64, name: &[u8], kind: FileType, perm: u32, data: &[u8], rdev: u64) -> Result<u64> {
        let ino = self.alloc_ino()?;
        let now = now_ns();
        let (uid, gid) = self.new_owner();
        let device = matches!(kind, FileType::CharDevice | FileType::BlockDevice);
        let inode = Inode {
            kind,
            perm: perm & 0o7777,
            uid,
            gid,
            nlink: if kind == FileType::Dir { 2 } else { 1 },
            size: if kind.is_special() { 0 } else { data.len() as u64 },
            atime: now,
            mtime: now,
            ctime: now,
            // A special file has no data; a device keeps its number where data would be.
            is_inline: !kind.is_special(),
            has_chunks: false,
            inline: if device { rdev.to_le_bytes().to_vec() } else if kind.is_special() { Vec::new() } else { data.to_vec() },
        };
        self.store_inode(ino, &inode)?;
        self.set(&schema::dentry_key(parent, name), &Dentry { ino, kind }.encode())?;
        if kind == FileType::Dir {
            self.add(&schema::dir_attr_key(parent, DirAttr::Nlink), 1)?;
        }
        self.touch_dir(parent, now)?;
        self.add(&schema::meta_key(Meta::Inodes), 1)?;
        if kind == FileType::File {
            self.add(&schema::meta_key(Meta::Bytes), data.len() as i64)?;
        }
        Ok(ino)
    }

    /// Deletes an inode and everything it owns.
    pub(crate) fn delete_inode(&mut self, ino: u64, inode: &Inode) -> Result<()> {
        self.drop_chunks(ino, inode, 0, None)?;
        self.clear_range(schema::inode_range(ino))?;
        self.clear_range(schema::block_range(ino, 0))?;
        self.clear_range(schema::xattr_range(ino))?;
        self.clear(&schema::orphan_key(ino))?;
        self.add(&schema::meta_key(Meta::Inodes), -1)?;
        if inode.kind == FileType::File {
            self.add(&schema::meta_key(Meta::Bytes), -(inode.size as i64))?;
        }
        Ok(())
    }

    /// Drops one link to a non-directory; frees it, or keeps it as an orphan while open.
    fn drop_link(&mut self, ino: u64) -> Result<()> {
        let mut inode = self.inode(ino)?;
        inode.nlink = inode.nlink.saturating_sub(1);
        inode.ctime = now_ns();
        if inode.nlink > 0 {
            return self.store_inode(ino, &inode);
        }
        if self.inner.is_open(ino) {
            self.store_inode(ino, &inode)?;
            self.orphaned.push(ino);
            self.set(&schema::orphan_key(ino), &[])
        } else {
            self.delete_inode(ino, &inode)
        }
    }

    fn dir_is_empty(&mut self, dir: u64) -> Result<bool> {
        let (s, e) = schema::dentry_range(dir);
        Ok(self.tx.get_range(&s, &e, 1, false)?.is_empty())
    }

    /// Removes an empty directory `ino` named `name` in `parent`.
    fn remove_dir(&mut self, parent: u64, ino: u64, p: &[u8]) -> Result<()> {
        if !self.dir_is_empty(ino)? {
            return Err(Error::at(ErrorKind::NotEmpty, p));
        }
        let inode = self.inode(ino)?;
        self.delete_inode(ino, &inode)?;
        self.add(&schema::dir_attr_key(parent, DirAttr::Nlink), -1)
    }

    /// Creates a directory.
    pub fn mkdir(&mut self, p: &[u8], mode: u32) -> Result<()> {
        let (parent, name) = self.for_create(p)?;
        self.create_node(parent, &name, FileType::Dir, mode, &[], 0)?;
        Ok(())
    }

    /// Creates a special file (FIFO, device node or socket) at `p`.
    pub fn mknod(&mut self, p: &[u8], kind: FileType, mode: u32, rdev: u64) -> Result<()> {
        if !kind.is_special() {
            return Err(Error::new(ErrorKind::Invalid, format!("{}: mknod makes only special files", show(p))));
        }
        let (parent, name) = self.for_create(p)?;
        self.create_node(parent, &name, kind, mode, &[], rdev)?;
        Ok(())
    }

    /// The parent, name and entry of `p` for removal (not followed if a symlink): `Busy` for
    /// the root, `Invalid` for a path ending in `.` or `..`, `NotFound` if missing.
    fn removable_entry(&mut self, p: &[u8]) -> Result<(u64, Vec<u8>, Dentry)> {
        let r = self.resolve(p, false)?;
        let Some(name) = r.name else {
            let kind = if r.entry.is_some_and(|e| e.ino == ROOT_INO) { ErrorKind::Busy } else { ErrorKind::Invalid };
            return Err(Error::at(kind, p));
        };
        let e = r.entry.ok_or_else(|| Error::at(ErrorKind::NotFound, p))?;
        Ok((r.parent, name, e))
    }

    /// Removes an empty directory.
    pub fn rmdir(&mut self, p: &[u8]) -> Result<()> {
        let (parent, name, e) = self.removable_entry(p)?;
        self.rmdir_entry(parent, &name, e, p)
    }

    /// Removes the empty directory `name` of `dir`.
    pub fn rmdir_at(&mut self, dir: u64, name: &[u8]) -> Result<()> {
        let r = self.resolved_at(dir, name)?;
        let e = r.entry.ok_or_else(|| Error::at(ErrorKind::NotFound, name))?;
        self.rmdir_entry(dir, name, e, name)
    }

    fn rmdir_entry(&mut self, parent: u64, name: &[u8], e: Dentry, p: &[u8]) -> Result<()> {
        if e.kind != FileType::Dir {
            return Err(Error::at(ErrorKind::NotDir, p));
        }
        self.may_delete(parent, e.ino, p)?;
        self.remove_dir(parent, e.ino, p)?;
        self.clear(&schema::dentry_key(parent, name))?;
        self.touch_dir(parent, now_ns())
    }

    /// Removes a name of a non-directory.
    pub fn unlink(&mut self, p: &[u8]) -> Result<()> {
        let r = self.resolve(p, false)?;
        self.unlink_resolved(r, p)
    }

    /// Removes the name `name` of a non-directory in `dir`.
    pub fn unlink_at(&mut self, dir: u64, name: &[u8]) -> Result<()> {
        let r = self.resolved_at(dir, name)?;
        self.unlink_resolved(r, name)
    }

    fn unlink_resolved(&mut self, r: Resolved, p: &[u8]) -> Result<()> {
        let (Some(name), Some(e)) = (r.name, r.entry) else {
            let kind = if r.entry.is_some() { ErrorKind::IsDir } else { ErrorKind::NotFound };
            return Err(Error::at(kind, p));
        };
        if e.kind == FileType::Dir {
            return Err(Error::at(ErrorKind::IsDir, p));
        }
        self.may_delete(r.parent, e.ino, p)?;
        self.clear(&schema::dentry_key(r.parent, &name))?;
        self.touch_dir(r.parent, now_ns())?;
        self.drop_link(e.ino)
    }

    /// Renames atomically; see [`RenameFlags`].
    pub fn rename(&mut self, from: &[u8], to: &[u8], flags: RenameFlags) -> Result<()> {
        if flags.no_replace && flags.exchange {
            return Err(Error::new(ErrorKind::Invalid, "rename: no_replace and exchange exclude each other"));
        }
        let s = self.resolve(from, false)?;
        let d = self.resolve(to, false)?;
        self.rename_resolved(s, d, from, to, flags)
    }

    /// Renames `name` of `dir` to `new_name` of `new_dir`. Unlike the path form, this cannot
    /// see whether `new_dir` lies inside a directory being moved (the tree keeps no parent
    /// links): a caller such as the kernel must refuse such a move first.
    pub fn rename_at(&mut self, dir: u64, name: &[u8], new_dir: u64, new_name: &[u8], flags: RenameFlags) -> Result<()> {
        if flags.no_replace && flags.exchange {
            return Err(Error::new(ErrorKind::Invalid, "rename: no_replace and exchange exclude each other"));
        }
        let s = self.resolved_at(dir, name)?;
        let d = self.resolved_at(new_dir, new_name)?;
        self.rename_resolved(s, d, name, new_name, flags)
    }

    fn rename_resolved(&mut self, s: Resolved, d: Resolved, from: &[u8], to: &[u8], flags: RenameFlags) -> Result<()> {
        let bad_end = |r: &Resolved, p: &[u8]| {
            let kind = if r.entry.is_some_and(|e| e.ino == ROOT_INO) { ErrorKind::Busy } else { ErrorKind::Invalid };
            Error::at(kind, p)
        };
        let sname = s.name.clone().ok_or_else(|| bad_end(&s, from))?;
        let dname = d.name.clone().ok_or_else(|| bad_end(&d, to))?;
        let se = s.entry.ok_or_else(|| Error::at(ErrorKind::NotFound, from))?;
        // Linux checks the flags against the target before anything else, even when both
        // names are links to one file.
        if flags.no_replace && d.entry.is_some() {
            return Err(Error::at(ErrorKind::Exists, to));
        }
        if flags.exchange && d.entry.is_none() {
            return Err(Error::at(ErrorKind::NotFound, to));
        }
        if se.kind != FileType::Dir && !flags.exchange && to.ends_with(b"/") {
            return Err(Error::at(ErrorKind::NotDir, to));
        }
        self.may_delete(s.parent, se.ino, from)?;
        self.access_ino(d.parent, W_OK | X_OK, to)?;
        if se.kind == FileType::Dir && d.ancestors.contains(&se.ino) {
            return Err(Error::new(
                ErrorKind::Invalid,
                format!("rename {} -> {}: cannot move a directory into itself", show(from), show(to)),
            ));
        }
        if d.entry.is_some_and(|de| de.kind == FileType::Dir && s.ancestors.contains(&de.ino)) {
            // The target is an ancestor of the source: never empty.
            let kind = if flags.exchange { ErrorKind::Invalid } else { ErrorKind::NotEmpty };
            return Err(Error::at(kind, to));
        }
        let now = now_ns();
        if flags.exchange {
            let de = d.entry.ok_or_else(|| Error::at(ErrorKind::NotFound, to))?;
            self.set(&schema::dentry_key(s.parent, &sname), &de.encode())?;
            self.set(&schema::dentry_key(d.parent, &dname), &se.encode())?;
            let dirs = (se.kind == FileType::Dir) as i64 - (de.kind == FileType::Dir) as i64;
            if dirs != 0 && s.parent != d.parent {
                self.add(&schema::dir_attr_key(s.parent, DirAttr::Nlink), -dirs)?;
                self.add(&schema::dir_attr_key(d.parent, DirAttr::Nlink), dirs)?;
            }
            for ino in [se.ino, de.ino] {
                self.touch_ctime(ino, now)?;
            }
            self.touch_dir(s.parent, now)?;
            return self.touch_dir(d.parent, now);
        }
        if let Some(de) = d.entry {
            if de.ino == se.ino {
                return Ok(()); // Two names of one file: POSIX says do nothing.
            }
            self.may_delete(d.parent, de.ino, to)?;
            match (se.kind == FileType::Dir, de.kind == FileType::Dir) {
                (true, false) => return Err(Error::at(ErrorKind::NotDir, to)),
                (false, true) => return Err(Error::at(ErrorKind::IsDir, to)),
                (true, true) => self.remove_dir(d.parent, de.ino, to)?,
                (false, false) => self.drop_link(de.ino)?,
            }
        }
        self.clear(&schema::dentry_key(s.parent, &sname))?;
        self.set(&schema::dentry_key(d.parent, &dname), &se.encode())?;
        if se.kind == FileType::Dir && s.parent != d.parent {
            self.add(&schema::dir_attr_key(s.parent, DirAttr::Nlink), -1)?;
            self.add(&schema::dir_attr_key(d.parent, DirAttr::Nlink), 1)?;
        }
        self.touch_ctime(se.ino, now)?;
        self.touch_dir(s.parent, now)?;
        self.touch_dir(d.parent, now)
    }

    fn touch_ctime(&mut self, ino: u64, now: i64) -> Result<()> {
        let mut inode = self.inode(ino)?;
        if inode.kind == FileType::Dir {
            return self.max(&schema::dir_attr_key(ino, DirAttr::Ctime), now);
        }
        inode.ctime = now;
        self.store_inode(ino, &inode)
    }

    /// Creates a hard link `to` to the non-directory `from`.
    pub fn link(&mut self, from: &[u8], to: &[u8]) -> Result<()> {
        let (ino, inode) = self.existing(from, false)?;
        let (parent, name) = self.for_create(to)?;
        self.add_link(ino, inode, parent, &name, from)
    }

    /// Creates a hard link `name` in `dir` to the non-directory `ino`.
    pub fn link_at(&mut self, ino: u64, dir: u64, name: &[u8]) -> Result<()> {
        let inode = self.inode(ino)?;
        self.create_check(dir, name)?;
        self.add_link(ino, inode, dir, name, name)
    }

    fn add_link(&mut self, ino: u64, mut inode: Inode, parent: u64, name: &[u8], from: &[u8]) -> Result<()> {
        if inode.kind == FileType::Dir {
            return Err(Error::new(ErrorKind::NotPermitted, format!("{}: cannot hard-link a directory", show(from))));
        }
        inode.nlink += 1;
        inode.ctime = now_ns();
        self.store_inode(ino, &inode)?;
        self.set(&schema::dentry_key(parent, name), &Dentry { ino, kind: inode.kind }.encode())?;
        self.touch_dir(parent, inode.ctime)
    }

    /// Creates a symbolic link at `link` pointing to `target`.
    pub fn symlink(&mut self, target: &[u8], link: &[u8]) -> Result<()> {
        check_symlink_target(target)?;
        let (parent, name) = self.for_create(link)?;
        self.create_node(parent, &name, FileType::Symlink, 0o777, target, 0)?;
        Ok(())
    }

    /// Reads a symbolic link's target.
    pub fn readlink(&mut self, p: &[u8]) -> Result<Vec<u8>> {
        let (_, inode) = self.existing(p, false)?;
        Self::link_target(inode, p)
    }

    /// Reads the target of symlink `ino`.
    pub fn readlink_ino(&mut self, ino: u64) -> Result<Vec<u8>> {
        let inode = self.inode(ino)?;
        Self::link_target(inode, b"")
    }

    fn link_target(inode: Inode, p: &[u8]) -> Result<Vec<u8>> {
        if inode.kind != FileType::Symlink {
            return Err(Error::new(ErrorKind::Invalid, format!("{}: not a symbolic link", show(p))));
        }
        Ok(inode.inline)
    }

    // ---- attributes ----

    /// `stat` (follow) or `lstat`.
    pub fn stat(&mut self, p: &[u8], follow: bool) -> Result<Stat> {
        let (ino, inode) = self.existing(p, follow)?;
        self.stat_of(ino, &inode)
    }

    /// `fstat` of an open inode.
    pub fn stat_ino(&mut self, ino: u64) -> Result<Stat> {
        let inode = self.inode(ino)?;
        self.stat_of(ino, &inode)
    }

    /// Changes permission bits.
    pub fn chmod(&mut self, p: &[u8], mode: u32) -> Result<()> {
        let (ino, inode) = self.existing(p, true)?;
        self.chmod_inode(ino, inode, mode, p)
    }

    /// Changes the permission bits of `ino`.
    pub fn chmod_ino(&mut self, ino: u64, mode: u32) -> Result<()> {
        let inode = self.inode(ino)?;
        self.chmod_inode(ino, inode, mode, b"")
    }

    fn chmod_inode(&mut self, ino: u64, mut inode: Inode, mode: u32, p: &[u8]) -> Result<()> {
        self.owner_or_root(&inode, p)?;
        inode.perm = mode & 0o7777;
        inode.ctime = now_ns();
        self.store_inode(ino, &inode)
    }

    /// Changes owner and/or group (`None` leaves one unchanged).
    pub fn chown(&mut self, p: &[u8], uid: Option<u32>, gid: Option<u32>, follow: bool) -> Result<()> {
        let (ino, inode) = self.existing(p, follow)?;
        self.chown_inode(ino, inode, uid, gid, p)
    }

    /// Changes the owner and/or group of `ino`.
    pub fn chown_ino(&mut self, ino: u64, uid: Option<u32>, gid: Option<u32>) -> Result<()> {
        let inode = self.inode(ino)?;
        self.chown_inode(ino, inode, uid, gid, b"")
    }

    fn chown_inode(&mut self, ino: u64, mut inode: Inode, uid: Option<u32>, gid: Option<u32>, p: &[u8]) -> Result<()> {
        if let Some(c) = self.cred.filter(|c| c.uid != 0) {
            let uid_ok = uid.is_none_or(|u| u == inode.uid);
            let gid_ok = gid.is_none_or(|g| g == inode.gid || c.in_group(g));
            if c.uid != inode.uid || !uid_ok || !gid_ok {
                return Err(Error::at(ErrorKind::NotPermitted, p));
            }
        }
        inode.uid = uid.unwrap_or(inode.uid);
        inode.gid = gid.unwrap_or(inode.gid);
        inode.ctime = now_ns();
        self.store_inode(ino, &inode)
    }

    /// Sets access and modification times.
    pub fn utimens(&mut self, p: &[u8], atime: SetTime, mtime: SetTime, follow: bool) -> Result<()> {
        let (ino, inode) = self.existing(p, follow)?;
        self.utimens_inode(ino, inode, atime, mtime, p)
    }

    /// Sets the access and modification times of `ino`.
    pub fn utimens_ino(&mut self, ino: u64, atime: SetTime, mtime: SetTime) -> Result<()> {
        let inode = self.inode(ino)?;
        self.utimens_inode(ino, inode, atime, mtime, b"")
    }

    fn utimens_inode(&mut self, ino: u64, mut inode: Inode, atime: SetTime, mtime: SetTime, p: &[u8]) -> Result<()> {
        let explicit = matches!(atime, SetTime::At(_)) || matches!(mtime, SetTime::At(_));
        if explicit {
            self.owner_or_root(&inode, p)?;
        } else if self.cred.is_some_and(|c| c.uid != inode.uid) {
            self.access(&inode, W_OK).map_err(|_| Error::at(ErrorKind::Access, p))?;
        }
        let now = now_ns();
        let pick = |t: SetTime, old: i64| match t {
            SetTime::Omit => old,
            SetTime::Now => now,
            SetTime::At(ns) => ns,
        };
        inode.atime = pick(atime, inode.atime);
        inode.mtime = pick(mtime, inode.mtime);
        inode.ctime = now;
        if inode.kind == FileType::Dir && mtime != SetTime::Omit {
            // A plain set overrides the atomic max that creates keep on the hot key.
            self.set(&schema::dir_attr_key(ino, DirAttr::Mtime), &(inode.mtime.max(0) as u64).to_le_bytes())?;
            self.max(&schema::dir_attr_key(ino, DirAttr::Ctime), now)?;
        }
        self.store_inode(ino, &inode)
    }

    /// Lists a directory: up to `limit` entries (0: all) with names after `after`.
    pub fn readdir(&mut self, p: &[u8], after: Option<&[u8]>, limit: usize) -> Result<Vec<DirEntry>> {
        let (ino, inode) = self.existing(p, true)?;
        self.list_dir(ino, inode, after, limit, p)
    }

    /// Lists directory `ino` like [`Ops::readdir`].
    pub fn readdir_ino(&mut self, ino: u64, after: Option<&[u8]>, limit: usize) -> Result<Vec<DirEntry>> {
        let inode = self.inode(ino)?;
        self.list_dir(ino, inode, after, limit, b"")
    }

    fn list_dir(&mut self, ino: u64, inode: Inode, after: Option<&[u8]>, limit: usize, p: &[u8]) -> Result<Vec<DirEntry>> {
        if inode.kind != FileType::Dir {
            return Err(Error::at(ErrorKind::NotDir, p));
        }
        self.access(&inode, R_OK).map_err(|_| Error::at(ErrorKind::Access, p))?;
        let (mut start, end) = schema::dentry_range(ino);
        if let Some(a) = after {
            start = schema::dentry_key(ino, a);
            start.push(0);
        }
        let mut out = Vec::new();
        for (k, v) in self.tx.get_range(&start, &end, limit, false)? {
            let d = Dentry::decode(&v)?;
            out.push(DirEntry { name: schema::dentry_name(&k).to_vec(), ino: d.ino, kind: d.kind });
        }
        Ok(out)
    }

    /// Store-wide usage, from counters (O(1)).
    pub fn statfs(&mut self) -> Result<StatFs> {
        let files = decode_counter(self.tx.snapshot_get(&schema::meta_key(Meta::Inodes))?.as_deref());
        let bytes = decode_counter(self.tx.snapshot_get(&schema::meta_key(Meta::Bytes))?.as_deref());
        let bs = self.inner.block_size as u64;
        let used_blocks = bytes.div_ceil(bs);
        let (total, free) = self.inner.space.unwrap_or((u64::MAX / 2, u64::MAX / 2 - bytes));
        Ok(StatFs {
            block_size: bs,
            blocks: (total / bs).max(used_blocks),
            blocks_free: free / bs,
            files,
            files_free: u64::MAX / 2 - files,
            name_max: path::NAME_MAX as u64,
        })
    }

    // ---- extended attributes ----

    /// The inode whose attributes an xattr call names: `Path` follows symlinks, `Ino` is
    /// taken as it is.
    fn xattr_target(&mut self, at: Target<'_>, write: bool) -> Result<u64> {
        let (ino, inode, p) = match at {
            Target::Path(p) => {
                let (ino, inode) = self.existing(p, true)?;
                (ino, inode, p)
            }
            Target::Ino(ino) => (ino, self.inode(ino)?, &b""[..]),
        };
        if write {
            self.owner_or_root(&inode, p).or_else(|_| self.access(&inode, W_OK))
                .map_err(|_| Error::at(ErrorKind::Access, p))?;
        } else {
            self.access(&inode, R_OK).map_err(|_| Error::at(ErrorKind::Access, p))?;
        }
        Ok(ino)
    }

    fn check_xattr_name(name: &[u8]) -> Result<()> {
        if name.is_empty() || name.contains(&0) {
            return Err(Error::new(ErrorKind::Invalid, "invalid extended attribute name"));
        }
        if name.len() > XATTR_NAME_MAX {
            return Err(Error::new(ErrorKind::Range, "extended attribute name longer than 255 bytes"));
        }
        Ok(())
    }

    /// Reads an extended attribute.
    pub fn getxattr(&mut self, at: Target<'_>, name: &[u8]) -> Result<Vec<u8>> {
        Self::check_xattr_name(name)?;
        let p = at.path();
        let ino = self.xattr_target(at, false)?;
        self.tx.get(&schema::xattr_key(ino, name))?.ok_or_else(|| {
            Error::new(ErrorKind::NoData, format!("{}: no attribute {}", show(p), show(name)))
        })
    }

    /// Sets an extended attribute.
    pub fn setxattr(&mut self, at: Target<'_>, name: &[u8], value: &[u8], flags: XattrFlags) -> Result<()> {
        Self::check_xattr_name(name)?;
        if value.len() > XATTR_SIZE_MAX {
            return Err(Error::new(ErrorKind::TooBig, "extended attribute value larger than 64 KiB"));
        }
        let p = at.path();
        let ino = self.xattr_target(at, true)?;
        let key = schema::xattr_key(ino, name);
        let exists = self.tx.get(&key)?.is_some();
        match flags {
            XattrFlags::Create if exists => {
                return Err(Error::new(ErrorKind::Exists, format!("{}: attribute {} exists", show(p), show(name))))
            }
            XattrFlags::Replace if !exists => {
                return Err(Error::new(ErrorKind::NoData, format!("{}: no attribute {}", show(p), show(name))))
            }
            _ => {}
        }
        self.set(&key, value)?;
        self.touch_ctime(ino, now_ns())
    }

    /// Lists extended attribute names.
    pub fn listxattr(&mut self, at: Target<'_>) -> Result<Vec<Vec<u8>>> {
        let ino = self.xattr_target(at, false)?;
        let (s, e) = schema::xattr_range(ino);
        Ok(self.tx.get_range(&s, &e, 0, false)?.into_iter().map(|(k, _)| schema::xattr_name(&k).to_vec()).collect())
    }

    /// Removes an extended attribute.
    pub fn removexattr(&mut self, at: Target<'_>, name: &[u8]) -> Result<()> {
        Self::check_xattr_name(name)?;
        let p = at.path();
        let ino = self.xattr_target(at, true)?;
        let key = schema::xattr_key(ino, name);
        if self.tx.get(&key)?.is_none() {
            return Err(Error::new(ErrorKind::NoData, format!("{}: no attribute {}", show(p), show(name))));
        }
        self.clear(&key)?;
        self.touch_ctime(ino, now_ns())
    }

    // ---- open and file data ----

    /// Opens (and maybe creates or truncates) a file; returns its inode number and type.
    pub fn open(&mut self, p: &[u8], o: &OpenOptions) -> Result<(u64, FileType)> {
        Self::check_open_options(o, p)?;
        let r = self.resolve(p, !(o.create_new || o.no_follow))?;
        self.open_resolved(r, o, p)
    }

    fn check_open_options(o: &OpenOptions, p: &[u8]) -> Result<()> {
        if o.truncate && !o.write {
            return Err(Error::new(ErrorKind::Invalid, format!("{}: truncate needs write access", show(p))));
        }
        if !o.read && !o.write {
            return Err(Error::new(ErrorKind::Invalid, format!("{}: open for neither reading nor writing", show(p))));
        }
        Ok(())
    }

    /// Opens (and maybe creates, see [`OpenOptions`]) the entry `name` of directory `dir`.
    pub fn open_at(&mut self, dir: u64, name: &[u8], o: &OpenOptions) -> Result<(u64, FileType)> {
        Self::check_open_options(o, name)?;
        let r = self.resolved_at(dir, name)?;
        self.open_resolved(r, o, name)
    }

    /// Opens the existing inode `ino`, checking the caller's permission for `o`.
    pub fn open_ino(&mut self, ino: u64, o: &OpenOptions) -> Result<(u64, FileType)> {
        Self::check_open_options(o, b"")?;
        self.open_existing(ino, o, b"")
    }

    fn open_resolved(&mut self, r: Resolved, o: &OpenOptions, p: &[u8]) -> Result<(u64, FileType)> {
        let e = match (r.entry, o.create || o.create_new) {
            (Some(_), _) if o.create_new => return Err(Error::at(ErrorKind::Exists, p)),
            (Some(e), _) => e,
            (None, false) => return Err(Error::at(ErrorKind::NotFound, p)),
            (None, true) => {
                if p.ends_with(b"/") {
                    return Err(Error::at(ErrorKind::IsDir, p));
                }
                let name = r.name.expect("a missing entry has a name");
                self.access_ino(r.parent, W_OK | X_OK, p)?;
                let ino = self.create_node(r.parent, &name, FileType::File, o.mode, &[], 0)?;
                return Ok((ino, FileType::File));
            }
        };
        self.open_existing(e.ino, o, p)
    }

    /// Opens the existing inode `ino` (found as `p`) for `o`: checks its type and the
    /// caller's access, and truncates if asked.
    fn open_existing(&mut self, ino: u64, o: &OpenOptions, p: &[u8]) -> Result<(u64, FileType)> {
        let mut inode = self.inode(ino)?;
        match inode.kind {
            FileType::Symlink => return Err(Error::at(ErrorKind::Loop, p)),
            FileType::Dir if o.write => return Err(Error::at(ErrorKind::IsDir, p)),
            kind if kind.is_special() => {
                return Err(Error::new(ErrorKind::Invalid, format!("{}: a {kind:?} has no data to open in a store", show(p))))
            }
            _ => {}
        }
        let mask = if o.read { R_OK } else { 0 } | if o.write { W_OK } else { 0 };
        self.access(&inode, mask).map_err(|_| Error::at(ErrorKind::Access, p))?;
        if o.truncate && inode.size > 0 {
            self.truncate_inode(ino, &mut inode, 0)?;
            self.store_inode(ino, &inode)?;
        }
        Ok((ino, inode.kind))
    }

    /// Reads up to `len` bytes at `off` of file `ino`.
    pub fn read_ino(&mut self, ino: u64, off: u64, len: usize) -> Result<Vec<u8>> {
        let inode = self.file_inode(ino)?;
        let n = inode.size.saturating_sub(off).min(len as u64) as usize;
        let mut buf = vec![0u8; n];
        self.read_data(ino, &inode, off, &mut buf)?;
        Ok(buf)
    }

    /// Reads into `buf` at `off` of file `ino`; returns the number of bytes (0 at the end).
    pub fn read_into(&mut self, ino: u64, off: u64, buf: &mut [u8]) -> Result<usize> {
        let inode = self.file_inode(ino)?;
        self.read_data(ino, &inode, off, buf)
    }

    fn file_inode(&mut self, ino: u64) -> Result<Inode> {
        let inode = self.inode(ino)?;
        if inode.kind == FileType::Dir {
            return Err(Error::new(ErrorKind::IsDir, "read of a directory"));
        }
        Ok(inode)
    }

    /// Copies file data straight from the block values into `buf` (holes read as zeros).
    fn read_data(&mut self, ino: u64, inode: &Inode, off: u64, buf: &mut [u8]) -> Result<usize> {
        if off >= inode.size || buf.is_empty() {
            return Ok(0);
        }
        let end = inode.size.min(off.saturating_add(buf.len() as u64));
        let out = &mut buf[..(end - off) as usize];
        if inode.is_inline {
            out.copy_from_slice(&inode.inline[off as usize..end as usize]);
            return Ok(out.len());
        }
        out.fill(0);
        let bs = self.inner.block_size as u64;
        let (first, last) = (off / bs, (end - 1) / bs);
        // Large reads go in pieces of READ_PIECE_BLOCKS blocks: the values of one piece are
        // freed before the next is fetched, so the allocator reuses their memory instead of
        // faulting in fresh pages for the whole read (a 256 MiB read ran 5x slower at once).
        let mut piece = first;
        while piece <= last {
            let piece_last = last.min(piece + READ_PIECE_BLOCKS - 1);
            self.copy_blocks(ino, piece, piece_last, off, end, out)?;
            piece = piece_last + 1;
        }
        Ok(out.len())
    }

    /// Copies the stored blocks `first..=last` of `ino` into `out`, which holds the file's
    /// bytes `[off, end)` (missing blocks stay as they are: zeros).
    fn copy_blocks(&mut self, ino: u64, first: u64, last: u64, off: u64, end: u64, out: &mut [u8]) -> Result<()> {
        let bs = self.inner.block_size as u64;
        let blocks = if first == last {
            // One block: a point read is much cheaper than a range iterator.
            let k = schema::block_key(ino, first);
            self.tx.get(&k)?.map(|v| (k, v)).into_iter().collect()
        } else {
            let (s, _) = schema::block_range(ino, first);
            self.tx.get_range(&s, &schema::block_key(ino, last + 1), 0, false)?
        };
        for (k, v) in blocks {
            let idx = schema::block_index(&k)?;
            let bstart = idx * bs;
            let chunk;
            let data: &[u8] = match v.first() {
                Some(0) => &v[1..],
                _ => {
                    chunk = self.block_bytes(ino, idx, &v)?;
                    &chunk
                }
            };
            let from = off.max(bstart);
            let to = end.min(bstart + data.len() as u64);
            if from < to {
                out[(from - off) as usize..(to - off) as usize]
                    .copy_from_slice(&data[(from - bstart) as usize..(to - bstart) as usize]);
            }
        }
        Ok(())
    }

    /// The bytes of block `idx` of `ino` stored as `v`: inline data, or a chunk written ahead.
    /// Chunks never change, so they are read outside the transaction (one written ahead by
    /// this transaction is not in its snapshot).
    fn block_bytes(&mut self, ino: u64, idx: u64, v: &[u8]) -> Result<Vec<u8>> {
        match Block::decode(v)? {
            Block::Data(d) => Ok(d),
            Block::Chunk { id, offset, len } => {
                let stored = self.inner.backend.begin()?.snapshot_get(&schema::chunk_key(ino, idx, id))?.ok_or_else(|| {
                    // Deleted with its block by a transaction newer than this one's snapshot.
                    Error::new(ErrorKind::Conflict, "transaction conflict: the file's data changed while reading")
                })?;
                let Block::Data(chunk) = Block::decode(&stored)? else {
                    return Err(Error::new(ErrorKind::Corrupt, "corrupt store: a chunk refers to another chunk"));
                };
                chunk
                    .get(offset as usize..offset as usize + len as usize)
                    .map(<[u8]>::to_vec)
                    .ok_or_else(|| Error::new(ErrorKind::Corrupt, "corrupt store: chunk shorter than reference"))
            }
        }
    }

    /// Before blocks `first..end` (`None`: to the end) of `ino` are overwritten or deleted:
    /// deletes the chunks they refer to. Only files that ever had a chunk pay for this.
    fn drop_chunks(&mut self, ino: u64, inode: &Inode, first: u64, end: Option<u64>) -> Result<()> {
        if !inode.has_chunks {
            return Ok(());
        }
        let (s, to_end) = schema::block_range(ino, first);
        let e = end.map_or(to_end, |end| schema::block_key(ino, end));
        for (k, v) in self.tx.get_range(&s, &e, 0, false)? {
            if v.first() == Some(&1) {
                if let Block::Chunk { id, .. } = Block::decode(&v)? {
                    self.clear(&schema::chunk_key(ino, schema::block_index(&k)?, id))?;
                }
            }
        }
        Ok(())
    }

    /// Writes `data` at `off` (at the end of the file when `append`); returns the offset
    /// written at.
    pub fn write_ino(&mut self, ino: u64, off: u64, data: &[u8], append: bool) -> Result<u64> {
        let mut inode = self.inode(ino)?;
        let off = if append { inode.size } else { off };
        if data.is_empty() {
            return Ok(off);
        }
        let end = off
            .checked_add(data.len() as u64)
            .filter(|&e| e <= MAX_FILE_SIZE)
            .ok_or_else(|| Error::new(ErrorKind::FileTooBig, "write beyond the maximum file size"))?;
        let old_size = inode.size;
        if inode.is_inline && end > self.inner.inline_limit as u64 {
            self.spill_inline(ino, &mut inode)?;
        }
        if inode.is_inline {
            if inode.inline.len() < end as usize {
                inode.inline.resize(end as usize, 0);
            }
            inode.inline[off as usize..end as usize].copy_from_slice(data);
        } else {
            self.write_blocks(ino, &mut inode, off, data)?;
        }
        inode.size = old_size.max(end);
        inode.is_inline = inode.is_inline && inode.inline.len() as u64 == inode.size;
        let now = now_ns();
        inode.mtime = now;
        inode.ctime = now;
        self.store_inode(ino, &inode)?;
        if inode.size != old_size {
            self.add(&schema::meta_key(Meta::Bytes), (inode.size - old_size) as i64)?;
        }
        Ok(off)
    }

    /// Moves an inline file's data into blocks.
    fn spill_inline(&mut self, ino: u64, inode: &mut Inode) -> Result<()> {
        let data = std::mem::take(&mut inode.inline);
        inode.is_inline = false;
        self.write_blocks(ino, inode, 0, &data)
    }

    /// Writes `data` at `off` into the blocks of `ino`. In a transaction that has written
    /// enough, full blocks are written ahead as chunks and only referenced here (staging.rs).
    fn write_blocks(&mut self, ino: u64, inode: &mut Inode, off: u64, data: &[u8]) -> Result<()> {
        if data.is_empty() {
            return Ok(());
        }
        let bs = self.inner.block_size as u64;
        let end = off + data.len() as u64;
        self.drop_chunks(ino, inode, off / bs, Some((end - 1) / bs + 1))?;
        let stage = self.staging.as_mut().is_some_and(|s| s.should_stage(data.len()));
        let mut ahead: Vec<(u64, &[u8])> = Vec::new();
        let mut pos = off;
        while pos < end {
            let idx = pos / bs;
            let bstart = idx * bs;
            let to = end.min(bstart + bs);
            let src = &data[(pos - off) as usize..(to - off) as usize];
            let key = schema::block_key(ino, idx);
            if pos == bstart && to == bstart + bs {
                if stage {
                    ahead.push((idx, src));
                } else {
                    self.set(&key, &Block::encode_data(src))?;
                }
            } else {
                let mut block = match self.tx.get(&key)? {
                    Some(v) => self.block_bytes(ino, idx, &v)?,
                    None => Vec::new(),
                };
                let (a, b) = ((pos - bstart) as usize, (to - bstart) as usize);
                if block.len() < b {
                    block.resize(b, 0);
                }
                block[a..b].copy_from_slice(src);
                self.set(&key, &Block::encode_data(&block))?;
            }
            pos = to;
        }
        if let (false, Some(staging)) = (ahead.is_empty(), self.staging.as_deref_mut()) {
            let ids = self.inner.stage(staging, ino, &ahead)?;
            inode.has_chunks = true;
            for ((idx, src), id) in ahead.iter().zip(ids) {
                let block = Block::Chunk { id, offset: 0, len: src.len() as u32 };
                self.set(&schema::block_key(ino, *idx), &block.encode())?;
            }
        }
        Ok(())
    }

    /// Sets the size of file `ino`: shrinking drops data, growing reads as zeros.
    /// `truncate(2)` of `ino`: needs write permission, unlike a handle's `set_len`.
    pub fn truncate_checked(&mut self, ino: u64, size: u64) -> Result<()> {
        let inode = self.inode(ino)?;
        if inode.kind == FileType::File {
            self.access(&inode, W_OK)?;
        }
        self.truncate_ino(ino, size)
    }

    /// Sets the size of file `ino` (no permission check: the caller holds a writable handle).
    pub fn truncate_ino(&mut self, ino: u64, size: u64) -> Result<()> {
        let mut inode = self.inode(ino)?;
        match inode.kind {
            FileType::Dir => return Err(Error::new(ErrorKind::IsDir, "truncate of a directory")),
            FileType::File => {}
            _ => return Err(Error::new(ErrorKind::Invalid, "truncate of a symlink or special file")),
        }
        if size > MAX_FILE_SIZE {
            return Err(Error::new(ErrorKind::FileTooBig, "size beyond the maximum file size"));
        }
        self.truncate_inode(ino, &mut inode, size)?;
        self.store_inode(ino, &inode)
    }

    fn truncate_inode(&mut self, ino: u64, inode: &mut Inode, size: u64) -> Result<()> {
        let old = inode.size;
        if inode.is_inline && size > self.inner.inline_limit as u64 {
            self.spill_inline(ino, inode)?;
        }
        if inode.is_inline {
            inode.inline.resize(size as usize, 0);
        } else if size < old {
            let bs = self.inner.block_size as u64;
            self.drop_chunks(ino, inode, size / bs, None)?;
            self.clear_range(schema::block_range(ino, size.div_ceil(bs)))?;
            if size % bs != 0 {
                let key = schema::block_key(ino, size / bs);
                if let Some(v) = self.tx.get(&key)? {
                    let mut b = self.block_bytes(ino, size / bs, &v)?;
                    if b.len() as u64 > size % bs {
                        b.truncate((size % bs) as usize);
                        self.set(&key, &Block::encode_data(&b))?;
                    }
                }
            }
            if size == 0 {
                inode.is_inline = true;
                inode.inline.clear();
            }
        }
        inode.size = size;
        let now = now_ns();
        inode.mtime = now;
        inode.ctime = now;
        if size != old {
            self.add(&schema::meta_key(Meta::Bytes), size as i64 - old as i64)?;
        }
        Ok(())
    }

    /// `fallocate`: mode 0 extends the size; `keep_size` does not; `punch_hole` (with
    /// `keep_size`) zeroes the range.
    pub fn fallocate_ino(&mut self, ino: u64, mode: FallocateMode, off: u64, len: u64) -> Result<()> {
        if len == 0 {
            return Err(Error::new(ErrorKind::Invalid, "fallocate: length must be positive"));
        }
        // Like Linux: a range past the largest file size, even one that overflows, is EFBIG.
        let end = off.checked_add(len).unwrap_or(u64::MAX);
        if end > MAX_FILE_SIZE {
            return Err(Error::new(ErrorKind::FileTooBig, "fallocate beyond the maximum file size"));
        }
        let mut inode = self.inode(ino)?;
        if inode.kind != FileType::File {
            let kind = if inode.kind == FileType::Dir { ErrorKind::IsDir } else { ErrorKind::Invalid };
            return Err(Error::new(kind, "fallocate of a non-file"));
        }
        match mode {
            FallocateMode::Allocate if end > inode.size => {
                self.truncate_inode(ino, &mut inode, end)?;
                self.store_inode(ino, &inode)
            }
            FallocateMode::Allocate | FallocateMode::KeepSize => Ok(()),
            FallocateMode::PunchHole => {
                let end = end.min(inode.size);
                if off >= end {
                    return Ok(());
                }
                if inode.is_inline {
                    inode.inline[off as usize..end as usize].fill(0);
                } else {
                    let bs = self.inner.block_size as u64;
                    let (full_from, full_to) = (off.div_ceil(bs), end / bs);
                    if full_from < full_to {
                        self.drop_chunks(ino, &inode, full_from, Some(full_to))?;
                        let (s, _) = schema::block_range(ino, full_from);
                        self.clear_range((s, schema::block_key(ino, full_to)))?;
                    }
                    // Zero the partial blocks at either end.
                    let head_end = end.min(full_from * bs);
                    if off < head_end {
                        self.write_blocks(ino, &mut inode, off, &vec![0; (head_end - off) as usize])?;
                    }
                    let tail_start = off.max(full_to * bs);
                    if full_to >= full_from && tail_start < end {
                        self.write_blocks(ino, &mut inode, tail_start, &vec![0; (end - tail_start) as usize])?;
                    }
                }
                inode.mtime = now_ns();
                inode.ctime = inode.mtime;
                self.store_inode(ino, &inode)
            }
        }
    }

    /// Detaches `p` for [`Store::remove_all`](super::Store::remove_all): removes its name and,
    /// for a directory, records it as an orphan whose contents are then deleted in bounded
    /// batches ([`Ops::reap_batch`]). Returns the detached directory, or `None` when `p` was a
    /// file or symlink (then simply unlinked).
    pub fn detach_tree(&mut self, p: &[u8]) -> Result<Option<u64>> {
        let (parent, name, e) = self.removable_entry(p)?;
        if e.kind != FileType::Dir {
            self.unlink(p)?;
            return Ok(None);
        }
        self.may_delete(parent, e.ino, p)?;
        self.clear(&schema::dentry_key(parent, &name))?;
        self.add(&schema::dir_attr_key(parent, DirAttr::Nlink), -1)?;
        self.touch_dir(parent, now_ns())?;
        self.set(&schema::orphan_key(e.ino), &[])?;
        Ok(Some(e.ino))
    }

    /// One bounded step of deleting the orphan `ino`: a file orphan is freed if no link is
    /// left; a detached directory loses up to `batch` entries (files unlinked, subdirectories
    /// turned into orphans of their own, returned so the caller reaps them too) and is freed
    /// once empty. Returns the new orphan directories, the number of entries removed, and
    /// whether `ino` is gone. Each step is one transaction, so an interrupted removal resumes
    /// from the orphan records.
    pub(crate) fn reap_batch(&mut self, ino: u64, batch: usize) -> Result<(Vec<u64>, usize, bool)> {
        if self.tx.get(&schema::orphan_key(ino))?.is_none() {
            return Ok((Vec::new(), 0, true));
        }
        let inode = match self.load_inode(ino)? {
            Some(inode) if inode.kind == FileType::Dir => inode,
            _ => return self.reap_orphan(ino).map(|()| (Vec::new(), 0, true)),
        };
        let (s, e) = schema::dentry_range(ino);
        let entries = self.tx.get_range(&s, &e, batch, false)?;
        let mut subdirs = Vec::new();
        for (k, v) in &entries {
            let d = Dentry::decode(v)?;
            self.clear(k)?;
            if d.kind == FileType::Dir {
                self.set(&schema::orphan_key(d.ino), &[])?;
                subdirs.push(d.ino);
            } else {
                self.drop_link(d.ino)?;
            }
        }
        let done = entries.len() < batch;
        if done {
            self.delete_inode(ino, &inode)?;
        }
        Ok((subdirs, entries.len(), done))
    }

    /// Checks, without changing anything, that the caller may delete every entry of `dir`
    /// from `after` on (write and search permission on `dir`); returns the page's
    /// subdirectories and the cursor for the next page (`None` at the end).
    pub(crate) fn check_removable(&mut self, dir: u64, after: Option<&[u8]>, batch: usize)
        -> Result<(Vec<u64>, Option<Vec<u8>>)> {
        self.access_ino(dir, W_OK | X_OK, b"directory in the tree")?;
        let (mut start, end) = schema::dentry_range(dir);
        if let Some(a) = after {
            start = schema::dentry_key(dir, a);
            start.push(0);
        }
        let page = self.tx.snapshot_get_range(&start, &end, batch, false)?;
        let mut subdirs = Vec::new();
        for (_, v) in &page {
            let d = Dentry::decode(v)?;
            if d.kind == FileType::Dir {
                subdirs.push(d.ino);
            }
        }
        let next = (page.len() == batch).then(|| schema::dentry_name(&page[batch - 1].0).to_vec());
        Ok((subdirs, next))
    }

    /// Deletes an orphan (unlinked while open) if it is still one.
    pub(crate) fn reap_orphan(&mut self, ino: u64) -> Result<()> {
        if self.tx.get(&schema::orphan_key(ino))?.is_none() {
            return Ok(());
        }
        match self.load_inode(ino)? {
            Some(inode) if inode.nlink == 0 => self.delete_inode(ino, &inode),
            Some(_) => self.clear(&schema::orphan_key(ino)),
            None => self.clear(&schema::orphan_key(ino)),
        }
    }
}
