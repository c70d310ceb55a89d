//! Path operations. Each takes the store and a transaction: with `tx` NULL the call is a
//! transaction by itself (auto-commit, like a POSIX call); with a transaction it belongs to it.
//!
//! Paths are absolute, NUL-terminated byte strings (not necessarily UTF-8), names up to 255
//! bytes, paths up to 4096; `..` never leaves the root. Every path call can fail with -ENOENT,
//! -ENOTDIR, -ENAMETOOLONG, -ELOOP, -EACCES (with a credential), -EINVAL (NULL argument,
//! relative path), -EXDEV (a transaction of another store), -EINVAL (a finished transaction),
//! and, when it changes something, -EROFS, -ENOSPC, -TXVFS_ECONFLICT and -TXVFS_EBACKEND.
//! Only the errors particular to a call are listed with it.

use crate::boundary::{boundary, bytes, cstr, fill, Fail, Out};
use crate::store::txvfs_store;
use crate::tx::{txvfs_tx, with_fs};
use crate::types::*;
use std::ffi::{c_char, c_int, c_void};
use txvfs::{FileSystem, RenameFlags, SetTime, XattrFlags};

/// Attributes of `path`, following symbolic links, into `*out`.
#[no_mangle]
pub unsafe extern "C" fn txvfs_stat(
    store: *mut txvfs_store,
    tx: *mut txvfs_tx,
    path: *const c_char,
    out: *mut txvfs_attr,
) -> c_int {
    boundary("txvfs_stat", || {
        let (p, out) = (cstr(path, "path")?, Out::new(out, "out")?);
        out.set(with_fs!(store, tx, |fs| fs.stat(p)?).into());
        Ok(())
    })
}

/// Attributes of `path` itself (a symbolic link is not followed) into `*out`.
#[no_mangle]
pub unsafe extern "C" fn txvfs_lstat(
    store: *mut txvfs_store,
    tx: *mut txvfs_tx,
    path: *const c_char,
    out: *mut txvfs_attr,
) -> c_int {
    boundary("txvfs_lstat", || {
        let (p, out) = (cstr(path, "path")?, Out::new(out, "out")?);
        out.set(with_fs!(store, tx, |fs| fs.lstat(p)?).into());
        Ok(())
    })
}

/// `*out` = whether `path` exists (following symbolic links). ENOENT and ENOTDIR give
/// `false`; every other error is returned.
#[no_mangle]
pub unsafe extern "C" fn txvfs_exists(
    store: *mut txvfs_store,
    tx: *mut txvfs_tx,
    path: *const c_char,
    out: *mut bool,
) -> c_int {
    boundary("txvfs_exists", || {
        let (p, out) = (cstr(path, "path")?, Out::new(out, "out")?);
        out.set(with_fs!(store, tx, |fs| fs.exists(p)?));
        Ok(())
    })
}

/// Creates the directory `path` with permission bits `mode` (no umask).
/// Errors: -EEXIST.
#[no_mangle]
pub unsafe extern "C" fn txvfs_mkdir(
    store: *mut txvfs_store,
    tx: *mut txvfs_tx,
    path: *const c_char,
    mode: u32,
) -> c_int {
    boundary("txvfs_mkdir", || {
        let p = cstr(path, "path")?;
        with_fs!(store, tx, |fs| Ok(fs.mkdir(p, mode)?))
    })
}

/// Creates the directory `path` and any missing parents (`mkdir -p`); an existing directory
/// is fine. Errors: -EEXIST (a component is not a directory).
#[no_mangle]
pub unsafe extern "C" fn txvfs_mkdir_all(
    store: *mut txvfs_store,
    tx: *mut txvfs_tx,
    path: *const c_char,
    mode: u32,
) -> c_int {
    boundary("txvfs_mkdir_all", || {
        let p = cstr(path, "path")?;
        with_fs!(store, tx, |fs| Ok(fs.mkdir_all(p, mode)?))
    })
}

/// Removes the empty directory `path`. Errors: -ENOTEMPTY, -EBUSY (the root), -EINVAL (`.`).
#[no_mangle]
pub unsafe extern "C" fn txvfs_rmdir(
    store: *mut txvfs_store,
    tx: *mut txvfs_tx,
    path: *const c_char,
) -> c_int {
    boundary("txvfs_rmdir", || {
        let p = cstr(path, "path")?;
        with_fs!(store, tx, |fs| Ok(fs.rmdir(p)?))
    })
}

/// Removes the name `path` (not a directory). A file still open stays usable through its
/// descriptors until the last close. Errors: -EISDIR.
#[no_mangle]
pub unsafe extern "C" fn txvfs_unlink(
    store: *mut txvfs_store,
    tx: *mut txvfs_tx,
    path: *const c_char,
) -> c_int {
    boundary("txvfs_unlink", || {
        let p = cstr(path, "path")?;
        with_fs!(store, tx, |fs| Ok(fs.unlink(p)?))
    })
}

/// Renames `from` to `to` atomically, replacing `to` (`rename(2)`), with `flags` 0,
/// `TXVFS_RENAME_NOREPLACE` or `TXVFS_RENAME_EXCHANGE` (`renameat2`).
/// Errors: -EEXIST (NOREPLACE), -ENOTEMPTY, -EISDIR, -EINVAL (a directory into its own
/// subtree, both flags, unknown flags), -EBUSY.
#[no_mangle]
pub unsafe extern "C" fn txvfs_rename(
    store: *mut txvfs_store,
    tx: *mut txvfs_tx,
    from: *const c_char,
    to: *const c_char,
    flags: u32,
) -> c_int {
    boundary("txvfs_rename", || {
        let (f, t) = (cstr(from, "from")?, cstr(to, "to")?);
        if flags & !(TXVFS_RENAME_NOREPLACE | TXVFS_RENAME_EXCHANGE) != 0 {
            return Err(Fail::invalid(format!("unknown rename flags {flags:#x}")));
        }
        let flags = RenameFlags {
            no_replace: flags & TXVFS_RENAME_NOREPLACE != 0,
            exchange: flags & TXVFS_RENAME_EXCHANGE != 0,
        };
        with_fs!(store, tx, |fs| Ok(fs.rename_with(f, t, flags)?))
    })
}

/// Makes `to` a new hard link to `from` (a symbolic link `from` is not followed).
/// Errors: -EEXIST, -EPERM (a directory).
#[no_mangle]
pub unsafe extern "C" fn txvfs_link(
    store: *mut txvfs_store,
    tx: *mut txvfs_tx,
    from: *const c_char,
    to: *const c_char,
) -> c_int {
    boundary("txvfs_link", || {
        let (f, t) = (cstr(from, "from")?, cstr(to, "to")?);
        with_fs!(store, tx, |fs| Ok(fs.link(f, t)?))
    })
}

/// Creates the symbolic link `linkpath` pointing at `target` (any bytes; not checked).
/// Errors: -EEXIST.
#[no_mangle]
pub unsafe extern "C" fn txvfs_symlink(
    store: *mut txvfs_store,
    tx: *mut txvfs_tx,
    target: *const c_char,
    linkpath: *const c_char,
) -> c_int {
    boundary("txvfs_symlink", || {
        let (t, l) = (cstr(target, "target")?, cstr(linkpath, "linkpath")?);
        with_fs!(store, tx, |fs| Ok(fs.symlink(t, l)?))
    })
}

/// Copies the target of the symbolic link `path` into `buf` (`cap` bytes) followed by a NUL;
/// `*out_n` is its length without the NUL. `buf` NULL with `cap` 0 only sets `*out_n`.
/// Errors: -EINVAL (not a symbolic link), -ERANGE (`cap` < length + 1; nothing written).
#[no_mangle]
pub unsafe extern "C" fn txvfs_readlink(
    store: *mut txvfs_store,
    tx: *mut txvfs_tx,
    path: *const c_char,
    buf: *mut c_char,
    cap: usize,
    out_n: *mut usize,
) -> c_int {
    boundary("txvfs_readlink", || {
        let (p, out) = (cstr(path, "path")?, Out::new(out_n, "out_n")?);
        let target = with_fs!(store, tx, |fs| fs.readlink(p)?);
        fill(buf.cast(), cap, &target, true, out)
    })
}

/// Sets the permission bits of `path` (following symbolic links). Errors: -EPERM (not the
/// owner, with a credential).
#[no_mangle]
pub unsafe extern "C" fn txvfs_chmod(
    store: *mut txvfs_store,
    tx: *mut txvfs_tx,
    path: *const c_char,
    mode: u32,
) -> c_int {
    boundary("txvfs_chmod", || {
        let p = cstr(path, "path")?;
        with_fs!(store, tx, |fs| Ok(fs.chmod(p, mode)?))
    })
}

/// Changes the owner and/or group of `path` (following symbolic links);
/// `TXVFS_ID_UNCHANGED` keeps one. Errors: -EPERM.
#[no_mangle]
pub unsafe extern "C" fn txvfs_chown(
    store: *mut txvfs_store,
    tx: *mut txvfs_tx,
    path: *const c_char,
    uid: u32,
    gid: u32,
) -> c_int {
    boundary("txvfs_chown", || {
        let p = cstr(path, "path")?;
        let id = |v: u32| (v != TXVFS_ID_UNCHANGED).then_some(v);
        with_fs!(store, tx, |fs| Ok(fs.chown(p, id(uid), id(gid))?))
    })
}

/// Sets the access and modification times of `path` (following symbolic links), in ns since
/// the epoch, or `TXVFS_UTIME_NOW` / `TXVFS_UTIME_OMIT`. Errors: -EPERM, -EACCES.
#[no_mangle]
pub unsafe extern "C" fn txvfs_utimens(
    store: *mut txvfs_store,
    tx: *mut txvfs_tx,
    path: *const c_char,
    atime_ns: i64,
    mtime_ns: i64,
) -> c_int {
    boundary("txvfs_utimens", || {
        let p = cstr(path, "path")?;
        let t = |v: i64| match v {
            TXVFS_UTIME_OMIT => SetTime::Omit,
            TXVFS_UTIME_NOW => SetTime::Now,
            v => SetTime::At(v),
        };
        with_fs!(store, tx, |fs| Ok(fs.utimens(p, t(atime_ns), t(mtime_ns))?))
    })
}

/// Sets the size of the file `path`; growing reads as zeros. Errors: -EISDIR, -EFBIG.
#[no_mangle]
pub unsafe extern "C" fn txvfs_truncate(
    store: *mut txvfs_store,
    tx: *mut txvfs_tx,
    path: *const c_char,
    size: u64,
) -> c_int {
    boundary("txvfs_truncate", || {
        let p = cstr(path, "path")?;
        with_fs!(store, tx, |fs| Ok(fs.truncate(p, size)?))
    })
}

/// Reads one page of the directory `path`, in name order (bytewise), without `.` and `..`:
/// up to `cap` entries after the name `after` (NULL: from the start) into `entries`;
/// `*out_n` is the count. The cursor is the last name returned: pass
/// `entries[*out_n - 1].name` as `after` for the next page; fewer than `cap` entries means the
/// end. Each page is consistent by itself; pages of an auto-commit listing may see changes
/// made in between.
/// Errors: -ENOTDIR, -EINVAL (`after` empty, `.`, `..`, or containing `/`).
#[no_mangle]
pub unsafe extern "C" fn txvfs_readdir(
    store: *mut txvfs_store,
    tx: *mut txvfs_tx,
    path: *const c_char,
    after: *const c_char,
    entries: *mut txvfs_dirent,
    cap: usize,
    out_n: *mut usize,
) -> c_int {
    boundary("txvfs_readdir", || {
        let (p, out) = (cstr(path, "path")?, Out::new(out_n, "out_n")?);
        let after = if after.is_null() { None } else { Some(cstr(after, "after")?) };
        if let Some(a) = after {
            txvfs::fs::check_name(a)?;
        }
        if entries.is_null() && cap > 0 {
            return Err(Fail::invalid("argument `entries` is NULL"));
        }
        if cap == 0 {
            out.set(0);
            return Ok(());
        }
        let list = with_fs!(store, tx, |fs| fs.readdir(p, after, cap)?);
        for (i, e) in list.iter().take(cap).enumerate() {
            entries.add(i).write(e.into());
        }
        out.set(list.len().min(cap));
        Ok(())
    })
}

/// Reads the whole file `path` into `buf` (`cap` bytes); `*out_n` is its size. `buf` NULL
/// with `cap` 0 only sets `*out_n` (a size query). Errors: -EISDIR, -ERANGE (the file is
/// larger than `cap`; nothing written).
#[no_mangle]
pub unsafe extern "C" fn txvfs_read_file(
    store: *mut txvfs_store,
    tx: *mut txvfs_tx,
    path: *const c_char,
    buf: *mut c_void,
    cap: usize,
    out_n: *mut usize,
) -> c_int {
    boundary("txvfs_read_file", || {
        let (p, out) = (cstr(path, "path")?, Out::new(out_n, "out_n")?);
        let data = with_fs!(store, tx, |fs| fs.read_file(p)?);
        fill(buf, cap, &data, false, out)
    })
}

/// Creates or replaces the file `path` (mode 0644 when new) with the `len` bytes of `data`.
/// Errors: -EISDIR, -EFBIG.
#[no_mangle]
pub unsafe extern "C" fn txvfs_write_file(
    store: *mut txvfs_store,
    tx: *mut txvfs_tx,
    path: *const c_char,
    data: *const c_void,
    len: usize,
) -> c_int {
    boundary("txvfs_write_file", || {
        let (p, d) = (cstr(path, "path")?, bytes(data, len, "data")?);
        with_fs!(store, tx, |fs| Ok(fs.write_file(p, d)?))
    })
}

/// Copies the value of the extended attribute `name` of `path` into `buf` (`cap` bytes);
/// `*out_n` is its length. `buf` NULL with `cap` 0 only sets `*out_n`.
/// Errors: -ENODATA (no such attribute), -ERANGE (`cap` too small; nothing written).
#[no_mangle]
pub unsafe extern "C" fn txvfs_getxattr(
    store: *mut txvfs_store,
    tx: *mut txvfs_tx,
    path: *const c_char,
    name: *const c_char,
    buf: *mut c_void,
    cap: usize,
    out_n: *mut usize,
) -> c_int {
    boundary("txvfs_getxattr", || {
        let (p, n, out) = (cstr(path, "path")?, cstr(name, "name")?, Out::new(out_n, "out_n")?);
        let value = with_fs!(store, tx, |fs| fs.getxattr(p, n)?);
        fill(buf, cap, &value, false, out)
    })
}

/// Sets the extended attribute `name` of `path` to the `len` bytes of `value`; `flags` 0,
/// `TXVFS_XATTR_CREATE` or `TXVFS_XATTR_REPLACE`.
/// Errors: -EEXIST (CREATE), -ENODATA (REPLACE), -ERANGE (name too long), -E2BIG (value too
/// big), -EINVAL (empty name, unknown flags).
#[no_mangle]
pub unsafe extern "C" fn txvfs_setxattr(
    store: *mut txvfs_store,
    tx: *mut txvfs_tx,
    path: *const c_char,
    name: *const c_char,
    value: *const c_void,
    len: usize,
    flags: c_int,
) -> c_int {
    boundary("txvfs_setxattr", || {
        let (p, n, v) = (cstr(path, "path")?, cstr(name, "name")?, bytes(value, len, "value")?);
        let flags = match flags {
            0 => XattrFlags::Any,
            TXVFS_XATTR_CREATE => XattrFlags::Create,
            TXVFS_XATTR_REPLACE => XattrFlags::Replace,
            f => return Err(Fail::invalid(format!("unknown setxattr flags {f}"))),
        };
        with_fs!(store, tx, |fs| Ok(fs.setxattr(p, n, v, flags)?))
    })
}

/// Lists the extended attribute names of `path` into `buf` (`cap` bytes), each followed by a
/// NUL, in name order (as `listxattr(2)`); `*out_n` is the total length. `buf` NULL with
/// `cap` 0 only sets `*out_n`. Errors: -ERANGE (`cap` too small; nothing written).
#[no_mangle]
pub unsafe extern "C" fn txvfs_listxattr(
    store: *mut txvfs_store,
    tx: *mut txvfs_tx,
    path: *const c_char,
    buf: *mut c_char,
    cap: usize,
    out_n: *mut usize,
) -> c_int {
    boundary("txvfs_listxattr", || {
        let (p, out) = (cstr(path, "path")?, Out::new(out_n, "out_n")?);
        let names = with_fs!(store, tx, |fs| fs.listxattr(p)?);
        let joined: Vec<u8> = names.iter().flat_map(|n| n.iter().copied().chain([0])).collect();
        fill(buf.cast(), cap, &joined, false, out)
    })
}

/// Removes the extended attribute `name` of `path`. Errors: -ENODATA.
#[no_mangle]
pub unsafe extern "C" fn txvfs_removexattr(
    store: *mut txvfs_store,
    tx: *mut txvfs_tx,
    path: *const c_char,
    name: *const c_char,
) -> c_int {
    boundary("txvfs_removexattr", || {
        let (p, n) = (cstr(path, "path")?, cstr(name, "name")?);
        with_fs!(store, tx, |fs| Ok(fs.removexattr(p, n)?))
    })
}

/// Store-wide usage into `*out` (O(1), from counters).
#[no_mangle]
pub unsafe extern "C" fn txvfs_statfs(
    store: *mut txvfs_store,
    tx: *mut txvfs_tx,
    out: *mut txvfs_usage,
) -> c_int {
    boundary("txvfs_statfs", || {
        let out = Out::new(out, "out")?;
        out.set(with_fs!(store, tx, |fs| fs.statfs()?).into());
        Ok(())
    })
}
