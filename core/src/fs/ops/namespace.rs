//! Namespace operations: creating, linking, removing and renaming names (listing: `listing.rs`).

use super::access::{W_OK, X_OK};
use super::quota::Usage;
use super::{now_ns, Operation, Resolved};
use crate::error::{Error, ErrorKind, Result};
use crate::fs::path::{self, show};
use crate::fs::types::RenameFlags;
use crate::kv::decode_counter;
use crate::schema::{self, Dentry, DirAttr, FileType, Inode, ROOT_INO};

fn check_symlink_target(target: &[u8]) -> Result<()> {
    if target.is_empty() || target.contains(&0) || target.len() > path::PATH_MAX {
        return Err(Error::new(
            ErrorKind::Invalid,
            format!("{}: invalid symlink target", show(target)),
        ));
    }
    Ok(())
}

impl Operation<'_> {
    pub(super) fn alloc_ino(&mut self) -> Result<u64> {
        // Checked first: reserving numbers is a write of its own.
        self.writable()?;
        self.inner.alloc_ino()
    }

    /// Creates `name` in `parent` (in quota tree `quota`, if the caller read it).
    pub(super) fn create_node(
        &mut self,
        (parent, quota): (u64, Option<u64>),
        name: &[u8],
        kind: FileType,
        perm: u32,
        data: &[u8],
        rdev: u64,
    ) -> Result<u64> {
        // The new inode joins its directory's quota tree; checked before anything is written.
        let quota = self.dir_quota(parent, quota)?;
        let size = if kind.is_special() { 0 } else { data.len() as u64 };
        self.count(quota, Usage::of(kind, size, 1))?;
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
            size,
            atime: now,
            mtime: now,
            ctime: now,
            // A special file has no data; a device keeps its number where data would be.
            is_inline: !kind.is_special(),
            has_chunks: false,
            block_shift: 0,
            no_xattrs: true,
            quota,
            inline: if device {
                rdev.to_le_bytes().to_vec()
            } else if kind.is_special() {
                Vec::new()
            } else {
                data.to_vec()
            },
        };
        self.store_inode(ino, &inode)?;
        self.set(&schema::dentry_key(parent, name), &Dentry { ino, kind }.encode())?;
        if kind == FileType::Dir {
            self.atomic_add(&schema::dir_attr_key(parent, DirAttr::Nlink), 1)?;
            self.set_parent(ino, parent)?;
        }
        self.touch_dir(parent, now)?;
        Ok(ino)
    }

    /// Creates a node of `kind` named `name` in `dir`: a directory, an empty file, a symlink
    /// (`data` is its target) or a special file (`rdev` is a device's number).
    pub fn mknod_at(
        &mut self,
        dir: u64,
        name: &[u8],
        kind: FileType,
        perm: u32,
        data: &[u8],
        rdev: u64,
    ) -> Result<u64> {
        if kind == FileType::Symlink {
            check_symlink_target(data)?;
        }
        let quota = self.create_check(dir, name)?;
        let ino = self.create_node((dir, quota), name, kind, perm, data, rdev)?;
        if self.inner.feed.on() {
            let p = self.path_at(dir, name)?;
            self.note(crate::schema::ChangeKind::Created, ino, kind, &p);
        }
        Ok(ino)
    }

    /// Creates a directory.
    pub fn mkdir(&mut self, p: &[u8], mode: u32) -> Result<()> {
        let (parent, name, quota) = self.for_create(p)?;
        let ino = self.create_node((parent, quota), &name, FileType::Dir, mode, &[], 0)?;
        self.note(crate::schema::ChangeKind::Created, ino, FileType::Dir, p);
        Ok(())
    }

    /// Creates a special file (FIFO, device node or socket) at `p`.
    pub fn mknod(&mut self, p: &[u8], kind: FileType, mode: u32, rdev: u64) -> Result<()> {
        if !kind.is_special() {
            return Err(Error::new(
                ErrorKind::Invalid,
                format!("{}: mknod makes only special files", show(p)),
            ));
        }
        let (parent, name, quota) = self.for_create(p)?;
        let ino = self.create_node((parent, quota), &name, kind, mode, &[], rdev)?;
        self.note(crate::schema::ChangeKind::Created, ino, kind, p);
        Ok(())
    }

    /// Creates a symbolic link at `link` pointing to `target`.
    pub fn symlink(&mut self, target: &[u8], link: &[u8]) -> Result<()> {
        check_symlink_target(target)?;
        let (parent, name, quota) = self.for_create(link)?;
        let ino = self.create_node((parent, quota), &name, FileType::Symlink, 0o777, target, 0)?;
        self.note(crate::schema::ChangeKind::Created, ino, FileType::Symlink, link);
        Ok(())
    }

    /// Creates a hard link `to` to the non-directory `from`.
    pub fn link(&mut self, from: &[u8], to: &[u8]) -> Result<()> {
        let (ino, inode) = self.existing(from, false)?;
        let (parent, name, quota) = self.for_create(to)?;
        let kind = inode.kind;
        self.add_link(ino, inode, (parent, quota), &name, from)?;
        self.note(crate::schema::ChangeKind::Linked, ino, kind, to);
        Ok(())
    }

    /// Creates a hard link `name` in `dir` to the non-directory `ino`.
    pub fn link_at(&mut self, ino: u64, dir: u64, name: &[u8]) -> Result<()> {
        let inode = self.inode(ino)?;
        let quota = self.create_check(dir, name)?;
        let kind = inode.kind;
        self.add_link(ino, inode, (dir, quota), name, name)?;
        if self.inner.feed.on() {
            let p = self.path_at(dir, name)?;
            self.note(crate::schema::ChangeKind::Linked, ino, kind, &p);
        }
        Ok(())
    }

    pub(super) fn add_link(
        &mut self,
        ino: u64,
        mut inode: Inode,
        (parent, quota): (u64, Option<u64>),
        name: &[u8],
        from: &[u8],
    ) -> Result<()> {
        if inode.kind == FileType::Dir {
            return Err(Error::new(
                ErrorKind::NotPermitted,
                format!("{}: cannot hard-link a directory", show(from)),
            ));
        }
        self.link_in_quota_tree(&inode, (parent, quota), from)?;
        inode.nlink += 1;
        inode.ctime = now_ns();
        self.store_inode(ino, &inode)?;
        self.set(&schema::dentry_key(parent, name), &Dentry { ino, kind: inode.kind }.encode())?;
        self.touch_dir(parent, inode.ctime)
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

    pub(super) fn link_target(inode: Inode, p: &[u8]) -> Result<Vec<u8>> {
        if inode.kind != FileType::Symlink {
            return Err(Error::new(
                ErrorKind::Invalid,
                format!("{}: not a symbolic link", show(p)),
            ));
        }
        Ok(inode.inline)
    }

    /// Drops one link to a non-directory; frees it, or keeps it as an orphan while open.
    pub(super) fn drop_link(&mut self, ino: u64) -> Result<()> {
        let mut inode = self.inode(ino)?;
        inode.nlink = inode.nlink.saturating_sub(1);
        inode.ctime = now_ns();
        if inode.nlink > 0 {
            return self.store_inode(ino, &inode);
        }
        if self.inner.is_open(ino) || self.open_elsewhere(ino)? {
            self.store_inode(ino, &inode)?;
            self.orphaned.push(ino);
            self.set(&schema::orphan_key(ino), &[])
        } else {
            self.freed.push(ino);
            self.delete_inode(ino, &inode)
        }
    }

    pub(super) fn dir_is_empty(&mut self, dir: u64) -> Result<bool> {
        let (s, e) = schema::dentry_range(dir);
        Ok(self.tx.get_range(&s, &e, 1, false)?.is_empty())
    }

    /// Removes an empty directory `ino` named `name` in `parent`.
    pub(super) fn remove_dir(&mut self, parent: u64, ino: u64, p: &[u8]) -> Result<()> {
        if !self.dir_is_empty(ino)? {
            return Err(Error::at(ErrorKind::NotEmpty, p));
        }
        let inode = self.inode(ino)?;
        self.delete_inode(ino, &inode)?;
        self.atomic_add(&schema::dir_attr_key(parent, DirAttr::Nlink), -1)
    }

    /// The parent, name and entry of `p` for removal (not followed if a symlink): `Busy` for
    /// the root, `Invalid` for a path ending in `.` or `..`, `NotFound` if missing.
    pub(super) fn removable_entry(&mut self, p: &[u8]) -> Result<(u64, Vec<u8>, Dentry)> {
        let r = self.resolve(p, false)?;
        let Some(name) = r.name else {
            let kind = if r.entry.is_some_and(|e| e.ino == ROOT_INO) {
                ErrorKind::Busy
            } else {
                ErrorKind::Invalid
            };
            return Err(Error::at(kind, p));
        };
        let e = r.entry.ok_or_else(|| Error::at(ErrorKind::NotFound, p))?;
        Ok((r.parent, name, e))
    }

    /// Removes an empty directory.
    pub fn rmdir(&mut self, p: &[u8]) -> Result<()> {
        let (parent, name, e) = self.removable_entry(p)?;
        self.rmdir_entry(parent, &name, e, p)?;
        self.note(crate::schema::ChangeKind::Removed, e.ino, e.kind, p);
        Ok(())
    }

    /// Removes the empty directory `name` of `dir`.
    pub fn rmdir_at(&mut self, dir: u64, name: &[u8]) -> Result<()> {
        let r = self.resolved_at(dir, name)?;
        let e = r.entry.ok_or_else(|| Error::at(ErrorKind::NotFound, name))?;
        self.rmdir_entry(dir, name, e, name)?;
        if self.inner.feed.on() {
            let p = self.path_at(dir, name)?;
            self.note(crate::schema::ChangeKind::Removed, e.ino, e.kind, &p);
        }
        Ok(())
    }

    pub(super) fn rmdir_entry(
        &mut self,
        parent: u64,
        name: &[u8],
        e: Dentry,
        p: &[u8],
    ) -> Result<()> {
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
        let entry = r.entry;
        self.unlink_resolved(r, p)?;
        if let Some(e) = entry {
            self.note(crate::schema::ChangeKind::Removed, e.ino, e.kind, p);
        }
        Ok(())
    }

    /// Removes the name `name` of a non-directory in `dir`.
    pub fn unlink_at(&mut self, dir: u64, name: &[u8]) -> Result<()> {
        let r = self.resolved_at(dir, name)?;
        let entry = r.entry;
        self.unlink_resolved(r, name)?;
        if let Some(e) = entry.filter(|_| self.inner.feed.on()) {
            let p = self.path_at(dir, name)?;
            self.note(crate::schema::ChangeKind::Removed, e.ino, e.kind, &p);
        }
        Ok(())
    }

    pub(super) fn unlink_resolved(&mut self, r: Resolved, p: &[u8]) -> Result<()> {
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
            return Err(Error::new(
                ErrorKind::Invalid,
                "rename: no_replace and exchange exclude each other",
            ));
        }
        // The source exists: only the new name may be taken as absent.
        let may_guess = std::mem::replace(&mut self.may_guess, false);
        let s = self.resolve_with(from, false, true);
        self.may_guess = may_guess;
        let s = s?;
        let d = self.resolve_with(to, false, true)?;
        let (moved, other) = (s.entry, d.entry);
        self.rename_resolved(s, d, from, to, flags)?;
        if let Some(e) = moved {
            self.note_rename(e.ino, e.kind, from, to);
        }
        if let (Some(e), true) = (other, flags.exchange) {
            self.note_rename(e.ino, e.kind, to, from);
        }
        Ok(())
    }

    /// Renames `name` of `dir` to `new_name` of `new_dir`. Unlike the path form, this cannot
    /// see whether `new_dir` lies inside a directory being moved (the tree keeps no parent
    /// links): a caller such as the kernel must refuse such a move first.
    pub fn rename_at(
        &mut self,
        dir: u64,
        name: &[u8],
        new_dir: u64,
        new_name: &[u8],
        flags: RenameFlags,
    ) -> Result<()> {
        if flags.no_replace && flags.exchange {
            return Err(Error::new(
                ErrorKind::Invalid,
                "rename: no_replace and exchange exclude each other",
            ));
        }
        let s = self.resolved_at(dir, name)?;
        let d = self.resolved_at(new_dir, new_name)?;
        let (moved, other) = (s.entry, d.entry);
        self.rename_resolved(s, d, name, new_name, flags)?;
        if self.inner.feed.on() {
            let from = self.path_at(dir, name)?;
            let to = self.path_at(new_dir, new_name)?;
            if let Some(e) = moved {
                self.note_rename(e.ino, e.kind, &from, &to);
            }
            if let (Some(e), true) = (other, flags.exchange) {
                self.note_rename(e.ino, e.kind, &to, &from);
            }
        }
        Ok(())
    }

    pub(super) fn rename_resolved(
        &mut self,
        s: Resolved,
        d: Resolved,
        from: &[u8],
        to: &[u8],
        flags: RenameFlags,
    ) -> Result<()> {
        let bad_end = |r: &Resolved, p: &[u8]| {
            let kind = if r.entry.is_some_and(|e| e.ino == ROOT_INO) {
                ErrorKind::Busy
            } else {
                ErrorKind::Invalid
            };
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
        self.same_quota_tree((s.parent, s.parent_quota), (d.parent, d.parent_quota), from, to)?;
        let into_itself = || {
            Error::new(
                ErrorKind::Invalid,
                format!(
                    "rename {} -> {}: cannot move a directory into itself",
                    show(from),
                    show(to)
                ),
            )
        };
        if se.kind == FileType::Dir
            && (d.ancestors.contains(&se.ino) || self.is_below(d.parent, se.ino)?)
        {
            return Err(into_itself());
        }
        if flags.exchange {
            if let Some(de) = d.entry.filter(|de| de.kind == FileType::Dir) {
                if self.is_below(s.parent, de.ino)? {
                    return Err(into_itself());
                }
            }
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
                self.atomic_add(&schema::dir_attr_key(s.parent, DirAttr::Nlink), -dirs)?;
                self.atomic_add(&schema::dir_attr_key(d.parent, DirAttr::Nlink), dirs)?;
            }
            for (e, parent) in [(se, d.parent), (de, s.parent)] {
                if e.kind == FileType::Dir && s.parent != d.parent {
                    self.set_parent(e.ino, parent)?;
                }
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
            self.atomic_add(&schema::dir_attr_key(s.parent, DirAttr::Nlink), -1)?;
            self.atomic_add(&schema::dir_attr_key(d.parent, DirAttr::Nlink), 1)?;
            self.set_parent(se.ino, d.parent)?;
        }
        self.touch_ctime(se.ino, now)?;
        self.touch_dir(s.parent, now)?;
        self.touch_dir(d.parent, now)
    }

    fn set_parent(&mut self, dir: u64, parent: u64) -> Result<()> {
        self.set(&schema::dir_attr_key(dir, DirAttr::Parent), &parent.to_le_bytes())
    }

    /// Is directory `start` the directory `dir` or below it? Walks up from `start` through the
    /// parent keys, which this transaction reads, so a concurrent rename of any directory on
    /// the way conflicts with it (two crossed renames cannot both commit and make a cycle).
    /// A directory from before parent keys existed is looked for below `dir` instead.
    fn is_below(&mut self, start: u64, dir: u64) -> Result<bool> {
        let mut cur = start;
        // More levels than any path can have means a loop: the store is damaged.
        for _ in 0..=crate::fs::PATH_MAX / 2 {
            if cur == dir {
                return Ok(true);
            }
            if cur == ROOT_INO {
                return Ok(false);
            }
            match self.tx.get(&schema::dir_attr_key(cur, DirAttr::Parent))? {
                Some(v) => cur = decode_counter(Some(&v)),
                None => return self.in_subtree(dir, cur),
            }
        }
        Err(Error::new(
            ErrorKind::Corrupt,
            format!("corrupt store: directory {start} has a loop of parents"),
        ))
    }

    /// Is directory `target` somewhere below directory `top`? (A search, for directories made
    /// before parent keys; it reads every directory under `top`.)
    fn in_subtree(&mut self, top: u64, target: u64) -> Result<bool> {
        let mut pending = vec![top];
        while let Some(dir) = pending.pop() {
            let (s, e) = schema::dentry_range(dir);
            for (_, v) in self.tx.get_range(&s, &e, 0, false)? {
                let child = Dentry::decode(&v)?;
                if child.kind == FileType::Dir {
                    if child.ino == target {
                        return Ok(true);
                    }
                    pending.push(child.ino);
                }
            }
        }
        Ok(false)
    }
}
