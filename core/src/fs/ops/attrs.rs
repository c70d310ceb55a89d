//! Attributes: stat, mode, owner, times, extended attributes and store-wide usage.

use super::access::{R_OK, W_OK};
use super::{now_ns, FileRef, Operation};
use crate::error::{Error, ErrorKind, Result};
use crate::fs::path::{self, show};
use crate::fs::types::{SetTime, Stat, StatFs, XattrFlags};
use crate::kv::decode_counter;
use crate::schema::{self, DirAttr, FileType, Inode, Meta};

/// Largest extended attribute name and value (Linux's limits).
pub const XATTR_NAME_MAX: usize = 255;
/// Largest extended attribute value.
pub const XATTR_SIZE_MAX: usize = 65536;

impl Operation<'_> {
    pub(super) fn stat_of(&mut self, ino: u64, inode: &Inode) -> Result<Stat> {
        let mut st = Stat::from_inode(ino, inode, inode.block_size(self.inner.block_size) as u32);
        if inode.kind == FileType::Dir {
            let (s, e) = schema::inode_range(ino);
            for (k, v) in self.tx.get_range(&s, &e, 0, false)? {
                let n = decode_counter(Some(&v));
                match schema::dir_attr_of(&k) {
                    Some(DirAttr::Mtime) => st.mtime_ns = n as i64,
                    Some(DirAttr::Ctime) => st.ctime_ns = st.ctime_ns.max(n as i64),
                    Some(DirAttr::Nlink) => st.nlink = st.nlink.wrapping_add(n),
                    Some(DirAttr::Parent) | None => {}
                }
            }
        }
        Ok(st)
    }

    /// `stat` (follow) or `lstat`.
    pub fn stat(&mut self, p: &[u8], follow: bool) -> Result<Stat> {
        let r = self.resolve(p, follow)?;
        let ino = r.entry.ok_or_else(|| Error::at(ErrorKind::NotFound, p))?.ino;
        let inode = self.inode_meta(ino)?;
        self.stat_of(ino, &inode)
    }

    /// `fstat` of an open inode.
    pub fn stat_ino(&mut self, ino: u64) -> Result<Stat> {
        let inode = self.inode_meta(ino)?;
        self.stat_of(ino, &inode)
    }

    /// Changes permission bits.
    pub fn chmod(&mut self, p: &[u8], mode: u32) -> Result<()> {
        let (ino, inode) = self.existing(p, true)?;
        let kind = inode.kind;
        self.chmod_inode(ino, inode, mode, p)?;
        self.note(crate::schema::ChangeKind::Attrs, ino, kind, p);
        Ok(())
    }

    /// Changes the permission bits of `ino`.
    pub fn chmod_ino(&mut self, ino: u64, mode: u32) -> Result<()> {
        let inode = self.inode(ino)?;
        let kind = inode.kind;
        self.chmod_inode(ino, inode, mode, b"")?;
        self.note_ino(crate::schema::ChangeKind::Attrs, ino, kind)
    }

    pub(super) fn chmod_inode(
        &mut self,
        ino: u64,
        mut inode: Inode,
        mode: u32,
        p: &[u8],
    ) -> Result<()> {
        self.owner_or_root(&inode, p)?;
        inode.perm = mode & 0o7777;
        inode.ctime = now_ns();
        self.store_inode(ino, &inode)
    }

    /// Changes owner and/or group (`None` leaves one unchanged).
    pub fn chown(
        &mut self,
        p: &[u8],
        uid: Option<u32>,
        gid: Option<u32>,
        follow: bool,
    ) -> Result<()> {
        let (ino, inode) = self.existing(p, follow)?;
        let kind = inode.kind;
        self.chown_inode(ino, inode, uid, gid, p)?;
        self.note(crate::schema::ChangeKind::Attrs, ino, kind, p);
        Ok(())
    }

    /// Changes the owner and/or group of `ino`.
    pub fn chown_ino(&mut self, ino: u64, uid: Option<u32>, gid: Option<u32>) -> Result<()> {
        let inode = self.inode(ino)?;
        let kind = inode.kind;
        self.chown_inode(ino, inode, uid, gid, b"")?;
        self.note_ino(crate::schema::ChangeKind::Attrs, ino, kind)
    }

    pub(super) fn chown_inode(
        &mut self,
        ino: u64,
        mut inode: Inode,
        uid: Option<u32>,
        gid: Option<u32>,
        p: &[u8],
    ) -> Result<()> {
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
    pub fn utimens(
        &mut self,
        p: &[u8],
        atime: SetTime,
        mtime: SetTime,
        follow: bool,
    ) -> Result<()> {
        let (ino, inode) = self.existing(p, follow)?;
        let kind = inode.kind;
        self.utimens_inode(ino, inode, atime, mtime, p)?;
        self.note(crate::schema::ChangeKind::Attrs, ino, kind, p);
        Ok(())
    }

    /// Sets the access and modification times of `ino`.
    pub fn utimens_ino(&mut self, ino: u64, atime: SetTime, mtime: SetTime) -> Result<()> {
        let inode = self.inode(ino)?;
        let kind = inode.kind;
        self.utimens_inode(ino, inode, atime, mtime, b"")?;
        self.note_ino(crate::schema::ChangeKind::Attrs, ino, kind)
    }

    pub(super) fn utimens_inode(
        &mut self,
        ino: u64,
        mut inode: Inode,
        atime: SetTime,
        mtime: SetTime,
        p: &[u8],
    ) -> Result<()> {
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
            self.set(
                &schema::dir_attr_key(ino, DirAttr::Mtime),
                &(inode.mtime.max(0) as u64).to_le_bytes(),
            )?;
            self.atomic_max(&schema::dir_attr_key(ino, DirAttr::Ctime), now)?;
        }
        self.store_inode(ino, &inode)
    }

    /// Store-wide usage, from counters: the store's (the usage outside quota trees) and the
    /// outermost quota trees' (O(number of trees)).
    pub fn statfs(&mut self) -> Result<StatFs> {
        let in_trees = self.usage_in_trees()?;
        let counter = |tx: &mut Self, m: Meta, add: i64| -> Result<u64> {
            let v = decode_counter(tx.tx.snapshot_get(&schema::meta_key(m))?.as_deref());
            Ok((v as i64).wrapping_add(add).max(0) as u64)
        };
        let files = counter(self, Meta::Inodes, in_trees.inodes)?;
        let bytes = counter(self, Meta::Bytes, in_trees.bytes)?;
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

    /// The inode whose attributes an xattr call names: `Path` follows symlinks, `Ino` is
    /// taken as it is.
    pub(super) fn xattr_target(&mut self, at: FileRef<'_>, write: bool) -> Result<u64> {
        let (ino, inode, p) = match at {
            FileRef::Path(p) => {
                let (ino, inode) = self.existing(p, true)?;
                (ino, inode, p)
            }
            FileRef::Ino(ino) => (ino, self.inode(ino)?, &b""[..]),
        };
        if write {
            self.owner_or_root(&inode, p)
                .or_else(|_| self.access(&inode, W_OK))
                .map_err(|_| Error::at(ErrorKind::Access, p))?;
        } else {
            self.access(&inode, R_OK).map_err(|_| Error::at(ErrorKind::Access, p))?;
        }
        Ok(ino)
    }

    pub(super) fn check_xattr_name(name: &[u8]) -> Result<()> {
        if name.is_empty() || name.contains(&0) {
            return Err(Error::new(ErrorKind::Invalid, "invalid extended attribute name"));
        }
        if name.len() > XATTR_NAME_MAX {
            return Err(Error::new(
                ErrorKind::Range,
                "extended attribute name longer than 255 bytes",
            ));
        }
        Ok(())
    }

    /// Reads an extended attribute.
    pub fn getxattr(&mut self, at: FileRef<'_>, name: &[u8]) -> Result<Vec<u8>> {
        Self::check_xattr_name(name)?;
        let p = at.path();
        let ino = self.xattr_target(at, false)?;
        self.tx.get(&schema::xattr_key(ino, name))?.ok_or_else(|| {
            Error::new(ErrorKind::NoData, format!("{}: no attribute {}", show(p), show(name)))
        })
    }

    /// Sets an extended attribute.
    pub fn setxattr(
        &mut self,
        at: FileRef<'_>,
        name: &[u8],
        value: &[u8],
        flags: XattrFlags,
    ) -> Result<()> {
        Self::check_xattr_name(name)?;
        if value.len() > XATTR_SIZE_MAX {
            return Err(Error::new(
                ErrorKind::TooBig,
                "extended attribute value larger than 64 KiB",
            ));
        }
        let p = at.path();
        let ino = self.xattr_target(at, true)?;
        let key = schema::xattr_key(ino, name);
        let exists = self.tx.get(&key)?.is_some();
        match flags {
            XattrFlags::Create if exists => {
                return Err(Error::new(
                    ErrorKind::Exists,
                    format!("{}: attribute {} exists", show(p), show(name)),
                ))
            }
            XattrFlags::Replace if !exists => {
                return Err(Error::new(
                    ErrorKind::NoData,
                    format!("{}: no attribute {}", show(p), show(name)),
                ))
            }
            _ => {}
        }
        self.set(&key, value)?;
        self.mark_xattrs(ino)?;
        self.touch_ctime(ino, now_ns())?;
        self.note_xattr(ino, p)
    }

    /// Lists extended attribute names.
    pub fn listxattr(&mut self, at: FileRef<'_>) -> Result<Vec<Vec<u8>>> {
        let ino = self.xattr_target(at, false)?;
        let (s, e) = schema::xattr_range(ino);
        Ok(self
            .tx
            .get_range(&s, &e, 0, false)?
            .into_iter()
            .map(|(k, _)| schema::xattr_name(&k).to_vec())
            .collect())
    }

    /// Removes an extended attribute.
    pub fn removexattr(&mut self, at: FileRef<'_>, name: &[u8]) -> Result<()> {
        Self::check_xattr_name(name)?;
        let p = at.path();
        let ino = self.xattr_target(at, true)?;
        let key = schema::xattr_key(ino, name);
        if self.tx.get(&key)?.is_none() {
            return Err(Error::new(
                ErrorKind::NoData,
                format!("{}: no attribute {}", show(p), show(name)),
            ));
        }
        self.clear(&key)?;
        self.touch_ctime(ino, now_ns())?;
        self.note_xattr(ino, p)
    }

    /// Clears the inode's `no_xattrs` flag (once: it is never set again), so that deleting the
    /// inode looks for its attributes.
    fn mark_xattrs(&mut self, ino: u64) -> Result<()> {
        let mut inode = self.inode(ino)?;
        if !inode.no_xattrs {
            return Ok(());
        }
        inode.no_xattrs = false;
        self.store_inode(ino, &inode)
    }

    /// Notes an xattr change for the change feed (a call by inode has an empty `p`).
    fn note_xattr(&mut self, ino: u64, p: &[u8]) -> Result<()> {
        if self.inner.feed.on() {
            let kind = self.inode_meta(ino)?.kind;
            if p.is_empty() {
                return self.note_ino(crate::schema::ChangeKind::Xattrs, ino, kind);
            }
            self.note(crate::schema::ChangeKind::Xattrs, ino, kind, p);
        }
        Ok(())
    }

    /// Notes a change of a call by inode, at the inode's best-known path
    /// ([`Operation::path_of`]: a directory's path, empty for other files).
    pub(super) fn note_ino(
        &mut self,
        kind: crate::schema::ChangeKind,
        ino: u64,
        file_type: FileType,
    ) -> Result<()> {
        if self.inner.feed.on() {
            let p = self.path_of(ino, file_type)?;
            self.note(kind, ino, file_type, &p);
        }
        Ok(())
    }
}
