//! Permission checks: mode bits against the caller's credential (`None` acts as the owner).

use super::Operation;
use crate::error::{Error, ErrorKind, Result};
use crate::schema::{FileType, Inode};

pub(super) const R_OK: u32 = 4;
pub(super) const W_OK: u32 = 2;
pub(super) const X_OK: u32 = 1;

impl Operation<'_> {
    pub(super) fn access(&self, inode: &Inode, mask: u32) -> Result<()> {
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

    pub(super) fn access_ino(&mut self, ino: u64, mask: u32, what: &[u8]) -> Result<()> {
        if self.cred.is_none_or(|c| c.uid == 0) {
            return Ok(());
        }
        let inode = self.inode(ino)?;
        self.access(&inode, mask).map_err(|_| Error::at(ErrorKind::Access, what))
    }

    /// May the caller remove or replace `child` in `dir`? (write+search, and the sticky bit)
    pub(super) fn may_delete(&mut self, dir: u64, child: u64, what: &[u8]) -> Result<()> {
        let Some(c) = self.cred.filter(|c| c.uid != 0) else { return Ok(()) };
        let d = self.inode(dir)?;
        self.access(&d, W_OK | X_OK).map_err(|_| Error::at(ErrorKind::Access, what))?;
        if d.perm & libc::S_ISVTX != 0 && c.uid != d.uid && c.uid != self.inode(child)?.uid {
            return Err(Error::at(ErrorKind::NotPermitted, what));
        }
        Ok(())
    }

    pub(super) fn owner_or_root(&self, inode: &Inode, what: &[u8]) -> Result<()> {
        match self.cred {
            Some(c) if c.uid != 0 && c.uid != inode.uid => {
                Err(Error::at(ErrorKind::NotPermitted, what))
            }
            _ => Ok(()),
        }
    }

    pub(super) fn new_owner(&self) -> (u32, u32) {
        match self.cred {
            Some(c) => (c.uid, c.gid),
            None => (self.inner.owner.0, self.inner.owner.1),
        }
    }

    /// Checks that the caller may access `ino` for `mask` (`R_OK | W_OK | X_OK` bits, 0 for
    /// existence), like `access(2)` with the caller's credential.
    pub fn access_check(&mut self, ino: u64, mask: u32) -> Result<()> {
        let inode = self.inode(ino)?;
        self.access(&inode, mask & 7)
    }
}
