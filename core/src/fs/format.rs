//! The store format: a new store's superblock and root directory.

use super::ops::now_ns;
use super::options::Options;
use crate::error::{Error, ErrorKind, Result};
use crate::kv::{self, Backend};
use crate::schema::{self, Inode, Meta, Superblock, FORMAT_VERSION, ROOT_INO};

/// Creates the superblock and root directory of a new store, or reads an existing one.
/// Without `create`, a backend without a store gives NotFound.
pub(crate) fn format_or_read(
    backend: &dyn Backend,
    o: &Options,
    create: bool,
) -> Result<Superblock> {
    // Durable: a new store exists once its open returns.
    kv::run_with_retries(backend, o.max_retries, true, |tx| {
        if let Some(v) = tx.get(&schema::super_key())? {
            return Superblock::decode(&v);
        }
        if !create {
            return Err(Error::new(
                ErrorKind::NotFound,
                format!("{}: no store there", backend.describe()),
            ));
        }
        if o.read_only {
            return Err(Error::new(ErrorKind::ReadOnly, "cannot create a new store read-only"));
        }
        let now = now_ns();
        let sb = Superblock {
            version: FORMAT_VERSION,
            block_size: o.block_size,
            inline_limit: o.inline_limit,
            created_ns: now,
        };
        tx.set(&schema::super_key(), &sb.encode())?;
        // SAFETY: getuid/getgid cannot fail.
        let (uid, gid) = unsafe { (libc::getuid(), libc::getgid()) };
        let root = Inode {
            kind: schema::FileType::Dir,
            perm: 0o755,
            uid,
            gid,
            nlink: 2,
            size: 0,
            atime: now,
            mtime: now,
            ctime: now,
            is_inline: true,
            has_chunks: false,
            block_shift: 0,
            no_xattrs: false,
            quota: 0,
            inline: Vec::new(),
        };
        tx.set(&schema::inode_key(ROOT_INO), &root.encode())?;
        tx.atomic_add(&schema::meta_key(Meta::Inodes), 1)?;
        Ok(sb)
    })
}
