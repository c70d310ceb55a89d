//! Path resolution: from a path (or a directory inode and a name) to the entry it names.

use super::access::{W_OK, X_OK};
use super::Operation;
use crate::error::{Error, ErrorKind, Result};
use crate::fs::path::{self, SYMLINK_MAX};
use crate::fs::types::Stat;
use crate::schema::{Dentry, FileType, Inode, ROOT_INO};
use std::borrow::Cow;
use std::collections::VecDeque;

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
    /// The quota tree of `parent` (its `Inode::quota`), where resolution read its inode
    /// before looking the name up (for a create: a shared store's client then reads it from
    /// its cache, before the lookup's miss sends its transaction to the owner).
    pub parent_quota: Option<u64>,
}

/// What a call names: a path (resolved from the root) or an inode.
#[derive(Clone, Copy)]
pub enum FileRef<'p> {
    /// An absolute path.
    Path(&'p [u8]),
    /// An inode number.
    Ino(u64),
}

impl<'p> FileRef<'p> {
    /// The path, for messages (empty for an inode).
    pub(super) fn path(self) -> &'p [u8] {
        match self {
            FileRef::Path(p) => p,
            FileRef::Ino(_) => b"",
        }
    }
}

impl Operation<'_> {
    /// Resolves `p`. Symbolic links are followed in every component but the last, and in the
    /// last one too when `follow` (or when the path ends in `/`).
    pub(crate) fn resolve(&mut self, p: &[u8], follow: bool) -> Result<Resolved> {
        self.resolve_with(p, follow, false)
    }

    /// [`Operation::resolve`]; with `for_create`, the inode of the directory holding the last
    /// name is read before the name is looked up ([`Resolved::parent_quota`]).
    pub(crate) fn resolve_with(
        &mut self,
        p: &[u8],
        follow: bool,
        for_create: bool,
    ) -> Result<Resolved> {
        let (comps, trailing_slash) = path::split(p)?;
        let mut parent_quota = None;
        // On a remote backend, what the path will need is read in one batch (`prefetch.rs`).
        self.prefetch_path(&comps)?;
        // The path's own components are borrowed; only a symbolic link's target is copied.
        let mut queue: VecDeque<Cow<[u8]>> = comps.into_iter().map(Cow::Borrowed).collect();
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
                    parent_quota: None,
                });
            };
            let last = queue.is_empty();
            if *name == b"."[..] {
                continue;
            }
            if *name == b".."[..] {
                if stack.len() > 1 {
                    stack.pop();
                }
                continue;
            }
            let dir = *stack.last().unwrap();
            self.access_ino(dir, X_OK, p)?;
            if for_create && last {
                parent_quota = Some(self.inode_meta(dir)?.quota);
            }
            let entry = match for_create && last {
                true => self.lookup_to_create(dir, &name)?,
                false => self.lookup(dir, &name)?,
            };
            self.learn_entry(dir, &name, entry);
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
                        queue.push_front(Cow::Owned(c.to_vec()));
                    }
                    if trailing_slash && last {
                        // Keep the trailing slash's meaning for the target: it must be a dir.
                        queue.push_back(Cow::Borrowed(b"."));
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
                    let name = Some(name.into_owned());
                    return Ok(Resolved {
                        parent: dir,
                        name,
                        entry,
                        ancestors: stack,
                        parent_quota,
                    });
                }
            }
        }
    }

    pub(super) fn existing(&mut self, p: &[u8], follow: bool) -> Result<(u64, Inode)> {
        let r = self.resolve(p, follow)?;
        let e = r.entry.ok_or_else(|| Error::at(ErrorKind::NotFound, p))?;
        Ok((e.ino, self.inode(e.ino)?))
    }

    /// Resolves the parent of a name to create; fails if the name exists. Returns the parent,
    /// the name and the parent's quota tree.
    pub(super) fn for_create(&mut self, p: &[u8]) -> Result<(u64, Vec<u8>, Option<u64>)> {
        let r = self.resolve_with(p, false, true)?;
        match (r.name, r.entry) {
            (Some(name), None) => {
                self.access_ino(r.parent, W_OK | X_OK, p)?;
                Ok((r.parent, name, r.parent_quota))
            }
            _ => Err(Error::at(ErrorKind::Exists, p)),
        }
    }

    /// The directory `dir`, for looking up `name` in it: it must be a directory the caller
    /// may search.
    pub(super) fn search_dir(&mut self, dir: u64, name: &[u8]) -> Result<Inode> {
        path::check_name(name)?;
        let d = self.inode(dir)?;
        if d.kind != FileType::Dir {
            return Err(Error::at(ErrorKind::NotDir, name));
        }
        self.access(&d, X_OK).map_err(|_| Error::at(ErrorKind::Access, name))?;
        Ok(d)
    }

    /// Checks that `name` may be created in directory `dir` (it is free and the caller may
    /// write there); returns the directory's quota tree.
    pub(super) fn create_check(&mut self, dir: u64, name: &[u8]) -> Result<Option<u64>> {
        let d = self.search_dir(dir, name)?;
        if self.lookup(dir, name)?.is_some() {
            return Err(Error::at(ErrorKind::Exists, name));
        }
        self.access(&d, W_OK | X_OK).map_err(|_| Error::at(ErrorKind::Access, name))?;
        Ok(Some(d.quota))
    }

    /// The entry `name` of directory `dir`, as a resolved path.
    pub(super) fn resolved_at(&mut self, dir: u64, name: &[u8]) -> Result<Resolved> {
        let quota = self.search_dir(dir, name)?.quota;
        let entry = self.lookup(dir, name)?;
        let name = Some(name.to_vec());
        Ok(Resolved { parent: dir, name, entry, ancestors: vec![dir], parent_quota: Some(quota) })
    }

    /// `lookup`: the attributes of `name` in directory `dir`.
    pub fn lookup_at(&mut self, dir: u64, name: &[u8]) -> Result<Stat> {
        let r = self.resolved_at(dir, name)?;
        let e = r.entry.ok_or_else(|| Error::at(ErrorKind::NotFound, name))?;
        self.stat_ino(e.ino)
    }
}
