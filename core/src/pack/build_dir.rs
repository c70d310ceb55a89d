//! Building a pack image from a host directory: the host's tree, metadata and extended
//! attributes, renumbered and written as [`super::build`] writes a store's.

use super::build::{globals, inline, Numbering, Writer};
use super::build::{PackStats, ProgressFn};
use super::format::Entry;
use crate::error::{Error, ErrorKind, Result};
use crate::schema;
use crate::schema::{scope, DirAttr, FileType, Inode, Superblock, ROOT_INO};
use std::collections::VecDeque;
use std::fs::File;
use std::io::Read;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::Path;

/// Packs the host directory `src` into `dest`, keeping modes, owners, times, symlinks, hard
/// links (within the tree), device numbers and extended attributes. A file's link count is
/// the host's (links outside the tree count too). `block_size` and `inline_limit` are the
/// store layout the image presents (as in [`crate::Options`]).
pub fn pack_dir(
    src: &Path,
    dest: &Path,
    block_size: u32,
    inline_limit: u32,
    progress: ProgressFn,
) -> Result<PackStats> {
    let meta = std::fs::symlink_metadata(src).map_err(|e| Error::host_io(src, e))?;
    if !meta.is_dir() {
        return Err(Error::new(ErrorKind::NotDir, format!("{}: not a directory", src.display())));
    }
    let mut w = Writer::create(dest)?;
    let mut numbers = Numbering::new();
    numbers.get((meta.dev(), meta.ino()));
    // Each queued inode: its host path, metadata and its parent's new number.
    let mut queue = VecDeque::from([(src.to_path_buf(), meta, ROOT_INO)]);
    let mut file_bytes = 0u64;
    while let Some((path, m, parent)) = queue.pop_front() {
        let kind = host_kind(&m).ok_or_else(|| {
            Error::new(ErrorKind::Invalid, format!("{}: unknown file type", path.display()))
        })?;
        let ino = w.index.len() as u64;
        let mut entries = Vec::new();
        let mut children = Vec::new();
        let mut subdirs = 0;
        if kind == FileType::Dir {
            let rd = std::fs::read_dir(&path).map_err(|e| Error::host_io(&path, e))?;
            let mut names = Vec::new();
            for de in rd {
                names.push(de.map_err(|e| Error::host_io(&path, e))?.file_name());
            }
            names.sort();
            for name in names {
                let child = path.join(&name);
                let cm =
                    std::fs::symlink_metadata(&child).map_err(|e| Error::host_io(&child, e))?;
                let ck = host_kind(&cm).ok_or_else(|| {
                    Error::new(
                        ErrorKind::Invalid,
                        format!("{}: unknown file type", child.display()),
                    )
                })?;
                subdirs += (ck == FileType::Dir) as u32;
                // Only files with several links can share an inode; directories never do.
                let key = if ck != FileType::Dir && cm.nlink() > 1 {
                    (cm.dev(), cm.ino())
                } else {
                    (u64::MAX, numbers.next + 1)
                };
                let (cino, fresh) = numbers.get(key);
                if fresh {
                    children.push((child, cm, ino));
                }
                entries.push(Entry::Dentry { name: name.as_bytes().to_vec(), ino: cino, kind: ck });
            }
        }
        let (data, blocks) = match kind {
            FileType::Symlink => (
                std::fs::read_link(&path)
                    .map_err(|e| Error::host_io(&path, e))?
                    .as_os_str()
                    .as_bytes()
                    .to_vec(),
                false,
            ),
            FileType::CharDevice | FileType::BlockDevice => {
                (m.rdev().to_le_bytes().to_vec(), false)
            }
            FileType::File if m.len() <= inline_limit as u64 => (read_all(&path, m.len())?, false),
            _ => (Vec::new(), kind == FileType::File),
        };
        let size = match kind {
            FileType::File => m.len(),
            FileType::Symlink => data.len() as u64,
            _ => 0,
        };
        if kind == FileType::File {
            file_bytes += size;
        }
        let inode = Inode {
            kind,
            perm: m.mode() & 0o7777,
            uid: m.uid(),
            gid: m.gid(),
            nlink: if kind == FileType::Dir { 2 + subdirs } else { m.nlink() as u32 },
            size,
            atime: m.atime() * 1_000_000_000 + m.atime_nsec(),
            mtime: m.mtime() * 1_000_000_000 + m.mtime_nsec(),
            ctime: m.ctime() * 1_000_000_000 + m.ctime_nsec(),
            is_inline: !kind.is_special() && !blocks,
            has_chunks: false,
            block_shift: 0,
            no_xattrs: false,
            quota: 0,
            inline: data,
        };
        let mut all = vec![inline(scope::INODE, &[], inode.encode())];
        if kind == FileType::Dir && ino != ROOT_INO {
            all.push(inline(scope::INODE, &[DirAttr::Parent as u8], parent.to_le_bytes().to_vec()));
        }
        all.extend(entries);
        for (name, value) in host_xattrs(&path)? {
            all.push(inline(scope::XATTR, &name, value));
        }
        let bs = block_size as usize;
        w.record(all, &mut |emit| {
            if !blocks {
                return Ok(());
            }
            let mut f = File::open(&path).map_err(|e| Error::host_io(&path, e))?;
            let mut buf = vec![0u8; bs];
            for idx in 0.. {
                let n = read_full(&mut f, &mut buf).map_err(|e| Error::host_io(&path, e))?;
                if n > 0 {
                    emit(idx, &buf[..n])?;
                }
                if n < bs {
                    return Ok(());
                }
            }
            Ok(())
        })?;
        queue.extend(children);
        progress(&w.stats);
    }
    let sb = Superblock {
        version: schema::FORMAT_VERSION,
        block_size,
        inline_limit,
        created_ns: now_ns(),
    };
    let inodes = w.stats.inodes;
    w.finish(&globals(&sb, inodes, file_bytes))
}

use crate::clock::now_ns;

fn host_kind(m: &std::fs::Metadata) -> Option<FileType> {
    let t = m.file_type();
    Some(if t.is_dir() {
        FileType::Dir
    } else if t.is_file() {
        FileType::File
    } else if t.is_symlink() {
        FileType::Symlink
    } else if t.is_fifo() {
        FileType::Fifo
    } else if t.is_char_device() {
        FileType::CharDevice
    } else if t.is_block_device() {
        FileType::BlockDevice
    } else if t.is_socket() {
        FileType::Socket
    } else {
        return None;
    })
}

fn read_full(f: &mut File, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match f.read(&mut buf[n..])? {
            0 => break,
            k => n += k,
        }
    }
    Ok(n)
}

fn read_all(path: &Path, expect: u64) -> Result<Vec<u8>> {
    let d = std::fs::read(path).map_err(|e| Error::host_io(path, e))?;
    if d.len() as u64 != expect {
        return Err(Error::new(
            ErrorKind::Conflict,
            format!("{}: the file changed while it was packed", path.display()),
        ));
    }
    Ok(d)
}

/// The extended attributes of a host path (not following symlinks), sorted by name.
fn host_xattrs(path: &Path) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
    let c = std::ffi::CString::new(path.as_os_str().as_bytes())
        .map_err(|_| Error::new(ErrorKind::Invalid, "path with a NUL byte"))?;
    let os = |what: &str| {
        Error::new(
            ErrorKind::Backend,
            format!("{}: {what}: {}", path.display(), std::io::Error::last_os_error()),
        )
    };
    // SAFETY: `c` is a valid C string; a null buffer of size 0 asks for the size.
    let n = unsafe { libc::llistxattr(c.as_ptr(), std::ptr::null_mut(), 0) };
    if n < 0 {
        let err = std::io::Error::last_os_error().raw_os_error();
        return if err == Some(libc::ENOTSUP) { Ok(Vec::new()) } else { Err(os("listxattr")) };
    }
    let mut names = vec![0u8; n as usize];
    // SAFETY: the buffer holds `names.len()` bytes.
    let n = unsafe { libc::llistxattr(c.as_ptr(), names.as_mut_ptr().cast(), names.len()) };
    if n < 0 {
        return Err(os("listxattr"));
    }
    names.truncate(n as usize);
    let mut out = Vec::new();
    for name in names.split(|b| *b == 0).filter(|n| !n.is_empty()) {
        let cn = std::ffi::CString::new(name).unwrap();
        // SAFETY: valid C strings; size query first.
        let len = unsafe { libc::lgetxattr(c.as_ptr(), cn.as_ptr(), std::ptr::null_mut(), 0) };
        if len < 0 {
            return Err(os("getxattr"));
        }
        let mut v = vec![0u8; len as usize];
        // SAFETY: the buffer holds `v.len()` bytes.
        let len =
            unsafe { libc::lgetxattr(c.as_ptr(), cn.as_ptr(), v.as_mut_ptr().cast(), v.len()) };
        if len < 0 {
            return Err(os("getxattr"));
        }
        v.truncate(len as usize);
        out.push((name.to_vec(), v));
    }
    out.sort();
    Ok(out)
}
