//! Every call on an open file (`txvfs_open` ... `txvfs_close`); the descriptor table is in
//! [`crate::handles`].

use crate::boundary::{boundary, bytes, bytes_mut, cstr, Fail, Out, R};
use crate::store::{store_ref, txvfs_store};
use crate::tx::{txvfs_tx, with_fs};
use crate::types::*;
use std::ffi::{c_char, c_int, c_void};
use std::io::SeekFrom;
use std::sync::Arc;
use txvfs::{FallocateMode, File, FileSystem, FlockOp, OpenOptions, RangeLockKind};

/// Runs `f` on the open file `fd` of `store` (the table is not locked meanwhile, so a blocking
/// lock call does not stall other descriptors).
unsafe fn with_file<T>(store: *mut txvfs_store, fd: c_int, f: impl FnOnce(&File) -> R<T>) -> R<T> {
    let file = store_ref(store)?.files.get(fd)?;
    f(&file)
}

/// Opens `path` with POSIX `open(2)` flags (`O_RDONLY`, `O_WRONLY`, `O_RDWR`, `O_CREAT`,
/// `O_EXCL`, `O_TRUNC`, `O_APPEND`, `O_NOFOLLOW` from `<fcntl.h>`; others are ignored) plus
/// `TXVFS_O_WRITE_BACK`, and `mode` for a new file (no umask). With `tx` NULL each write
/// commits by itself (durable at `txvfs_fsync`); with a transaction, the descriptor's reads
/// and writes belong to it, and fail with -EBADF once it has ended.
///
/// Ownership: the descriptor in `*out_fd` (a positive int) belongs to `store`; close it with
/// `txvfs_close`. It holds a reference to the store handle: the store stays open while it is
/// open, even after `txvfs_store_free`. A closed descriptor's number is -EBADF for at least
/// 2^31 - 2^17 further opens in the process (it is not reused before).
/// Errors: -ENOENT, -EEXIST, -EISDIR, -ENOTDIR, -ELOOP, -ENAMETOOLONG, -EACCES, -EROFS,
/// -EINVAL (NULL argument, O_ACCMODE 3, relative path), -EMFILE (65536 descriptors open),
/// -EXDEV (a transaction of another store).
#[no_mangle]
pub unsafe extern "C" fn txvfs_open(
    store: *mut txvfs_store,
    tx: *mut txvfs_tx,
    path: *const c_char,
    flags: c_int,
    mode: u32,
    out_fd: *mut c_int,
) -> c_int {
    boundary("txvfs_open", || {
        let p = cstr(path, "path")?;
        let out = Out::new(out_fd, "out_fd")?;
        if flags & libc::O_ACCMODE == libc::O_ACCMODE {
            return Err(Fail::invalid("flags: O_ACCMODE bits 3 are not an access mode"));
        }
        let options =
            OpenOptions::from_flags(flags, mode).write_back(flags & TXVFS_O_WRITE_BACK != 0);
        let file = with_fs!(store, tx, |fs| fs.open(p, &options)?);
        let s = store_ref(store)?;
        let fd = s.files.insert(file)?;
        s.retain(); // the descriptor's reference: dropped by txvfs_close
        out.set(fd);
        Ok(())
    })
}

/// Closes `fd`, releasing its locks; the last close of an unlinked file frees its data. The
/// descriptor is gone even when an error is reported (flushing write-back data).
/// Errors: -EBADF (not open on this store: closed already, forged, another store's),
/// -EINVAL (NULL `store`), a write-back flush error.
#[no_mangle]
pub unsafe extern "C" fn txvfs_close(store: *mut txvfs_store, fd: c_int) -> c_int {
    boundary("txvfs_close", || {
        let file = store_ref(store)?.files.remove(fd)?;
        // Another thread may be inside a call on it; then the last one out closes it.
        let closed = match Arc::try_unwrap(file) {
            Ok(file) => file.close(),
            Err(_) => Ok(()),
        };
        // The descriptor's reference to the store: this may free it (no use of `store` below).
        txvfs_store::release(store);
        Ok(closed?)
    })
}

/// Reads up to `len` bytes at the descriptor's position into `buf` and advances it; `*out_n`
/// is the count, 0 at end of file.
/// Errors: -EBADF (bad descriptor, not open for reading, finished transaction), -EISDIR,
/// -EINVAL (NULL `store`, `out_n`, or `buf` with `len` > 0).
#[no_mangle]
pub unsafe extern "C" fn txvfs_read(
    store: *mut txvfs_store,
    fd: c_int,
    buf: *mut c_void,
    len: usize,
    out_n: *mut usize,
) -> c_int {
    boundary("txvfs_read", || {
        let out = Out::new(out_n, "out_n")?;
        let buf = bytes_mut(buf, len, "buf")?;
        out.set(with_file(store, fd, |f| Ok(f.read(buf)?))?);
        Ok(())
    })
}

/// Reads up to `len` bytes at `offset` into `buf` without moving the position (`pread`);
/// `*out_n` is the count, 0 at or past end of file. Errors: as `txvfs_read`.
#[no_mangle]
pub unsafe extern "C" fn txvfs_pread(
    store: *mut txvfs_store,
    fd: c_int,
    buf: *mut c_void,
    len: usize,
    offset: u64,
    out_n: *mut usize,
) -> c_int {
    boundary("txvfs_pread", || {
        let out = Out::new(out_n, "out_n")?;
        let buf = bytes_mut(buf, len, "buf")?;
        out.set(with_file(store, fd, |f| Ok(f.read_at(buf, offset)?))?);
        Ok(())
    })
}

/// Writes all `len` bytes of `buf` at the position (at the end with `O_APPEND`) and advances
/// it; `*out_n` is `len`. Outside a transaction the write commits at once (write-back
/// descriptors: at fsync/close).
/// Errors: -EBADF (bad descriptor, not open for writing, finished transaction), -EFBIG,
/// -ENOSPC, -EROFS, -EINVAL (NULL arguments), -TXVFS_ECONFLICT.
#[no_mangle]
pub unsafe extern "C" fn txvfs_write(
    store: *mut txvfs_store,
    fd: c_int,
    buf: *const c_void,
    len: usize,
    out_n: *mut usize,
) -> c_int {
    boundary("txvfs_write", || {
        let out = Out::new(out_n, "out_n")?;
        let data = bytes(buf, len, "buf")?;
        out.set(with_file(store, fd, |f| Ok(f.write(data)?))?);
        Ok(())
    })
}

/// Writes all `len` bytes of `buf` at `offset` without moving the position (`pwrite`; with
/// `O_APPEND` the data goes to the end, as on Linux); `*out_n` is `len`. Errors: as
/// `txvfs_write`.
#[no_mangle]
pub unsafe extern "C" fn txvfs_pwrite(
    store: *mut txvfs_store,
    fd: c_int,
    buf: *const c_void,
    len: usize,
    offset: u64,
    out_n: *mut usize,
) -> c_int {
    boundary("txvfs_pwrite", || {
        let out = Out::new(out_n, "out_n")?;
        let data = bytes(buf, len, "buf")?;
        out.set(with_file(store, fd, |f| Ok(f.write_at(data, offset)?))?);
        Ok(())
    })
}

/// Moves the descriptor's position to `offset` from `whence` (`TXVFS_SEEK_SET`, `_CUR`,
/// `_END`); the new position goes to `*out_pos`. Seeking past the end is allowed.
/// Errors: -EBADF, -EINVAL (bad whence, a negative result, NULL arguments).
#[no_mangle]
pub unsafe extern "C" fn txvfs_lseek(
    store: *mut txvfs_store,
    fd: c_int,
    offset: i64,
    whence: c_int,
    out_pos: *mut u64,
) -> c_int {
    boundary("txvfs_lseek", || {
        let out = Out::new(out_pos, "out_pos")?;
        let to = match whence {
            TXVFS_SEEK_SET => SeekFrom::Start(
                u64::try_from(offset).map_err(|_| Fail::invalid("negative offset"))?,
            ),
            TXVFS_SEEK_CUR => SeekFrom::Current(offset),
            TXVFS_SEEK_END => SeekFrom::End(offset),
            _ => {
                return Err(Fail::invalid(format!(
                    "whence {whence} is not SEEK_SET, SEEK_CUR or SEEK_END"
                )))
            }
        };
        out.set(with_file(store, fd, |f| Ok(f.seek(to)?))?);
        Ok(())
    })
}

/// Sets the file's size (`ftruncate`); growing reads as zeros.
/// Errors: -EBADF (also: not open for writing), -EFBIG, -EINVAL, -EROFS.
#[no_mangle]
pub unsafe extern "C" fn txvfs_ftruncate(store: *mut txvfs_store, fd: c_int, size: u64) -> c_int {
    boundary("txvfs_ftruncate", || with_file(store, fd, |f| Ok(f.set_len(size)?)))
}

/// Gives the file its own block size in bytes (a power of two from 512 to 65536), for files
/// written at random in small pieces (a database's pages): a 4 KiB write then stores one 4 KiB
/// block instead of rewriting a 64 KiB one. Only while the file has no blocks (empty, or small
/// enough to be inline); the size is kept in the file. `txvfs_fstat`'s `blksize` shows it.
/// Errors: -EBADF (also: not open for writing), -EINVAL (not a power of two from 512 to
/// 65536), -EBUSY (the file has blocks already: it keeps its block size), -EROFS.
#[no_mangle]
pub unsafe extern "C" fn txvfs_set_block_size(
    store: *mut txvfs_store,
    fd: c_int,
    bytes: u32,
) -> c_int {
    boundary("txvfs_set_block_size", || with_file(store, fd, |f| Ok(f.set_block_size(bytes)?)))
}

/// `fallocate`: `mode` 0 grows the file to cover `offset .. offset+len`;
/// `TXVFS_FALLOC_KEEP_SIZE` leaves the size; `TXVFS_FALLOC_PUNCH_HOLE |
/// TXVFS_FALLOC_KEEP_SIZE` makes the range read as zeros.
/// Errors: -EBADF (also: not open for writing), -EINVAL (other modes, `len` 0), -EFBIG.
#[no_mangle]
pub unsafe extern "C" fn txvfs_fallocate(
    store: *mut txvfs_store,
    fd: c_int,
    mode: c_int,
    offset: u64,
    len: u64,
) -> c_int {
    boundary("txvfs_fallocate", || {
        let mode = match mode {
            0 => FallocateMode::Allocate,
            TXVFS_FALLOC_KEEP_SIZE => FallocateMode::KeepSize,
            m if m == TXVFS_FALLOC_PUNCH_HOLE | TXVFS_FALLOC_KEEP_SIZE => FallocateMode::PunchHole,
            m => return Err(Fail::invalid(format!("fallocate mode {m} is not supported"))),
        };
        with_file(store, fd, |f| Ok(f.allocate(mode, offset, len)?))
    })
}

/// `fsync`: outside a transaction, makes every committed write durable (and flushes a
/// write-back descriptor); inside one it does nothing (the commit makes writes durable).
/// Errors: -EBADF, -TXVFS_EBACKEND.
#[no_mangle]
pub unsafe extern "C" fn txvfs_fsync(store: *mut txvfs_store, fd: c_int) -> c_int {
    boundary("txvfs_fsync", || with_file(store, fd, |f| Ok(f.sync()?)))
}

/// The open file's attributes (`fstat`) into `*out`. Errors: -EBADF, -EINVAL (NULL).
#[no_mangle]
pub unsafe extern "C" fn txvfs_fstat(
    store: *mut txvfs_store,
    fd: c_int,
    out: *mut txvfs_attr,
) -> c_int {
    boundary("txvfs_fstat", || {
        let out = Out::new(out, "out")?;
        out.set(with_file(store, fd, |f| Ok(f.stat()?))?.into());
        Ok(())
    })
}

/// Whole-file lock (`flock`): `TXVFS_LOCK_SH`, `TXVFS_LOCK_EX` or `TXVFS_LOCK_UN`, optionally
/// `| TXVFS_LOCK_NB`. Without `LOCK_NB` it blocks until the lock is free. Locks are between
/// descriptors of this process and are released at close.
/// Errors: -EAGAIN (held elsewhere, with LOCK_NB), -EBADF, -EINVAL (other operations).
#[no_mangle]
pub unsafe extern "C" fn txvfs_flock(
    store: *mut txvfs_store,
    fd: c_int,
    operation: c_int,
) -> c_int {
    boundary("txvfs_flock", || {
        let op = match operation & !TXVFS_LOCK_NB {
            TXVFS_LOCK_SH => FlockOp::Shared,
            TXVFS_LOCK_EX => FlockOp::Exclusive,
            TXVFS_LOCK_UN => FlockOp::Unlock,
            _ => {
                return Err(Fail::invalid(format!(
                    "flock operation {operation} is not LOCK_SH, LOCK_EX or LOCK_UN"
                )))
            }
        };
        with_file(store, fd, |f| Ok(f.flock(op, operation & TXVFS_LOCK_NB == 0)?))
    })
}

/// Byte-range lock (`fcntl` `F_SETLK`/`F_SETLKW`, open-file-description semantics): `type`
/// `TXVFS_F_RDLCK`, `TXVFS_F_WRLCK` or `TXVFS_F_UNLCK` over `start .. start+len` (`len` 0: to
/// the end of the file and beyond). With `wait` it blocks until granted.
/// Errors: -EAGAIN (conflict, without wait), -EDEADLK, -EBADF (also: a read lock on a
/// descriptor not open for reading, a write lock on one not open for writing), -EINVAL.
#[no_mangle]
pub unsafe extern "C" fn txvfs_setlk(
    store: *mut txvfs_store,
    fd: c_int,
    r#type: c_int,
    start: u64,
    len: u64,
    wait: bool,
) -> c_int {
    boundary("txvfs_setlk", || {
        let kind = match r#type {
            TXVFS_F_RDLCK => RangeLockKind::Read,
            TXVFS_F_WRLCK => RangeLockKind::Write,
            TXVFS_F_UNLCK => RangeLockKind::Unlock,
            t => {
                return Err(Fail::invalid(format!(
                    "lock type {t} is not F_RDLCK, F_WRLCK or F_UNLCK"
                )))
            }
        };
        with_file(store, fd, |f| Ok(f.lock_range(kind, start, len, wait)?))
    })
}

/// Tests for a lock held by another descriptor that would block a read (`write` false) or
/// write lock on `start .. start+len` (`fcntl` `F_GETLK`): `*out` describes it, or has type
/// `TXVFS_F_UNLCK` when there is none. Errors: -EBADF, -EINVAL (NULL).
#[no_mangle]
pub unsafe extern "C" fn txvfs_getlk(
    store: *mut txvfs_store,
    fd: c_int,
    write: bool,
    start: u64,
    len: u64,
    out: *mut txvfs_lock,
) -> c_int {
    boundary("txvfs_getlk", || {
        let out = Out::new(out, "out")?;
        out.set(with_file(store, fd, |f| Ok(f.test_lock(write, start, len)?))?.into());
        Ok(())
    })
}
