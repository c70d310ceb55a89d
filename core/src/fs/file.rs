//! Open file handles.

use super::block_table::{BlockTable, Lookup};
use super::locks::{FlockOp, RangeLock, RangeLockKind};
use super::ops::Operation;
use super::scope::CallScope;
use super::transaction::Transaction;
use super::types::{FallocateMode, Lent, OpenOptions, Stat};
use crate::error::{Error, ErrorKind, Result};
use crate::schema::FileType;
use parking_lot::Mutex;
use std::io::SeekFrom;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::OnceLock;

/// An open file. Opened on a [`super::Store`], each write commits by itself (durable at
/// [`File::sync`]); opened on a [`super::Transaction`], its reads and writes belong to that
/// transaction and fail with EBADF once it has ended. Locks held through a handle are
/// released when it closes; a file unlinked while open stays usable until its last handle
/// closes. Dropping a `File` closes it; [`File::close`] also reports errors.
pub struct File {
    scope: CallScope,
    /// The handle relies on this process's open mark of the file (fs/handle_marks.rs).
    marks: bool,
    ino: u64,
    kind: FileType,
    id: u64,
    readable: bool,
    writable: bool,
    append: bool,
    pos: Mutex<u64>,
    /// Write-back buffer: contiguous bytes not yet written, and where they start.
    pending: Option<Mutex<(u64, Vec<u8>)>>,
    closed: bool,
    /// The path the file was opened at (empty when opened by inode), for the change feed.
    path: Vec<u8>,
    /// The file's blocks as the read cache lent them, for reads outside a transaction
    /// (fs/block_table.rs): made at the handle's second read, since a handle read once (an
    /// open, a read and a close) would only pay for making it.
    blocks: OnceLock<Option<BlockTable>>,
    read_before: AtomicBool,
}

/// A write-back buffer is flushed when it reaches this size.
const WRITE_BACK_MAX: usize = 4 << 20;

impl File {
    pub(crate) fn open(scope: CallScope, path: &[u8], options: &OpenOptions) -> Result<File> {
        let mut file = Self::open_with(scope, options, |op| op.open(path, options))?;
        file.path = path.to_vec();
        Ok(file)
    }

    /// Sets the path the change feed records this handle's writes at.
    pub(crate) fn set_path(&mut self, path: Vec<u8>) {
        self.path = path;
    }

    /// Runs a write of this handle's file, noting it for the change feed.
    fn run_write<R>(&self, mut f: impl FnMut(&mut Operation<'_>) -> Result<R>) -> Result<R> {
        self.scope.run(|op| {
            let r = f(op)?;
            op.note(crate::schema::ChangeKind::Written, self.ino, self.kind, &self.path);
            Ok(r)
        })
    }

    /// Opens the file that `open` finds (or creates) inside the operation.
    pub(crate) fn open_with(
        scope: CallScope,
        options: &OpenOptions,
        mut open: impl FnMut(&mut Operation<'_>) -> Result<(u64, FileType)>,
    ) -> Result<File> {
        let inner = &scope.store().inner;
        // Handles opened outside a transaction rely on this process's open mark of the file
        // in the store (fs/handle_marks.rs); a transaction's handles read at its snapshot.
        let marks = inner.marks_handles() && matches!(scope, CallScope::AutoCommit(_));
        let may_write = options.write
            || options.append
            || options.truncate
            || options.create
            || options.create_new;
        let (ino, kind) = loop {
            // Before the snapshot: a file freed after this point may still be in it.
            let ticket = inner.open_files.begin_open();
            // Count the handle as open from inside the operation, so that an unlink racing
            // with this open sees it (or its commit conflicts) and keeps the inode as an orphan.
            let mut counted: Option<u64> = None;
            let undo = |ino: u64| {
                inner.closed(ino);
                if marks {
                    inner.open_files.unuse_mark(ino);
                }
            };
            // A read-only open of a file already marked (or on a store that needs no marks)
            // writes nothing: it is answered from the read cache where it can be. An open that
            // may write goes straight to a transaction (a cached try would be work twice).
            let body = |op: &mut Operation<'_>| {
                if let Some(ino) = counted.take() {
                    undo(ino);
                }
                let (ino, kind) = open(op)?;
                inner.opened(ino);
                counted = Some(ino);
                // Other processes must see the handle: the mark is written in the open's
                // transaction, unless it is in the store already (kept since a recent close).
                if marks && inner.open_files.use_mark(ino) {
                    op.mark_open(ino)?;
                }
                Ok((ino, kind))
            };
            let r = if may_write { scope.run(body) } else { scope.read(body) };
            match r {
                Ok((ino, kind)) => {
                    if marks {
                        inner.open_files.confirm_mark(ino);
                    }
                    // A transaction's handle reads the transaction's snapshot, where the
                    // file still is (its commit conflicts); an auto-commit handle reads the
                    // latest state, so it opens again if the file was freed meanwhile.
                    if inner.open_files.end_open(ticket, Some(ino))
                        || matches!(scope, CallScope::InTransaction(_))
                    {
                        break (ino, kind);
                    }
                    undo(ino);
                }
                Err(e) => {
                    if let Some(ino) = counted {
                        undo(ino);
                    }
                    let _ = inner.open_files.end_open(ticket, None);
                    return Err(e);
                }
            }
        };
        let write_back =
            options.write_back && !options.append && matches!(scope, CallScope::AutoCommit(_));
        Ok(File {
            id: inner.new_handle_id(),
            scope,
            marks,
            ino,
            kind,
            readable: options.read,
            writable: options.write,
            append: options.append,
            pos: Mutex::new(0),
            // Only store handles buffer: a transaction's handle writes into the transaction,
            // which its commit would otherwise finish without the buffered bytes.
            pending: write_back.then(|| Mutex::new((0, Vec::new()))),
            closed: false,
            path: Vec::new(),
            blocks: OnceLock::new(),
            read_before: AtomicBool::new(false),
        })
    }

    fn check(&self, want_read: bool, want_write: bool) -> Result<()> {
        if self.scope.is_finished() {
            return Err(Error::new(
                ErrorKind::BadHandle,
                "file handle belongs to a finished transaction",
            ));
        }
        if let Some(e) = self.scope.store().inner.locks.lost(self.id) {
            return Err(e);
        }
        if want_read && !self.readable {
            return Err(Error::new(ErrorKind::BadHandle, "file handle is not open for reading"));
        }
        if want_write && !self.writable {
            return Err(Error::new(ErrorKind::BadHandle, "file handle is not open for writing"));
        }
        if (want_read || want_write) && self.kind == FileType::Dir {
            return Err(Error::new(ErrorKind::IsDir, "file handle refers to a directory"));
        }
        Ok(())
    }

    /// Writes out the write-back buffer, if any.
    fn flush(&self) -> Result<()> {
        let Some(pending) = &self.pending else { return Ok(()) };
        let mut p = pending.lock();
        if !p.1.is_empty() {
            let (start, data) = (p.0, &p.1);
            self.run_write(|op| op.write_ino(self.ino, start, data, false))?;
            p.1.clear();
        }
        Ok(())
    }

    /// The inode number.
    pub fn ino(&self) -> u64 {
        self.ino
    }

    /// The type of the opened file (a directory can be opened read-only, like `O_RDONLY`).
    pub fn kind(&self) -> FileType {
        self.kind
    }

    /// A process-unique identifier of this handle (the owner of its locks).
    pub fn handle_id(&self) -> u64 {
        self.id
    }

    /// Reads at the current position and advances it; returns 0 at end of file.
    pub fn read(&self, buf: &mut [u8]) -> Result<usize> {
        let mut pos = self.pos.lock();
        let n = self.read_at(buf, *pos)?;
        *pos += n as u64;
        Ok(n)
    }

    /// Reads at `offset` without moving the position (`pread`).
    pub fn read_at(&self, buf: &mut [u8], offset: u64) -> Result<usize> {
        self.check(true, false)?;
        self.flush()?;
        if let Some(table) = self.table() {
            match table.read(offset, buf) {
                Lookup::Read(n) => return Ok(n),
                Lookup::Stale => {
                    table.refresh(offset, buf.len());
                    if let Lookup::Read(n) = table.read(offset, buf) {
                        return Ok(n);
                    }
                }
                Lookup::No => {}
            }
        }
        self.scope.read(|op| op.read_into(self.ino, offset, buf))
    }

    /// The handle's table of blocks, from its second read on, where it has one: a handle of
    /// a file, outside a transaction, on a backend that offers a [`crate::kv::CacheWatch`].
    fn table(&self) -> Option<&BlockTable> {
        if let Some(table) = self.blocks.get() {
            return table.as_ref();
        }
        if !self.read_before.swap(true, Ordering::Relaxed) {
            return None;
        }
        let made = || {
            let CallScope::AutoCommit(store) = &self.scope else { return None };
            let inner = &store.inner;
            let watch = (self.kind == FileType::File).then(|| inner.backend.cache_watch())??;
            Some(BlockTable::new(watch, self.ino, inner.block_size))
        };
        self.blocks.get_or_init(made).as_ref()
    }

    /// Lends the bytes `[offset, offset + len)` instead of copying them, where they lie
    /// within the file and inside one block that the process's read cache holds (or takes in
    /// now): they are exactly what [`File::read_at`] would read now, and never change while the
    /// [`Lent`] is held, whatever commits meanwhile. `None` where they cannot be lent so (read
    /// them with [`File::read_at`]); backends without a read cache of their own (a client of
    /// a shared store, FoundationDB) never lend.
    pub fn lend(&self, offset: u64, len: usize) -> Result<Option<Lent>> {
        self.check(true, false)?;
        self.flush()?;
        self.scope.read(|op| op.lend(self.ino, offset, len))
    }

    /// Writes all of `data` at the current position (at the end with append) and advances.
    pub fn write(&self, data: &[u8]) -> Result<usize> {
        self.check(false, true)?;
        let mut pos = self.pos.lock();
        if let Some(pending) = &self.pending {
            let mut p = pending.lock();
            // The buffer is written out first when this write does not follow it or would make
            // it larger than WRITE_BACK_MAX, so that no commit carries more than one buffer or
            // one write (a backend caps a transaction's size). If that fails, this write has
            // not happened: nothing of it is buffered and the position stays, so a retry writes
            // it once; the earlier writes stay buffered for the next flush.
            let follows = p.0 + p.1.len() as u64 == *pos;
            if !p.1.is_empty() && (!follows || p.1.len() + data.len() > WRITE_BACK_MAX) {
                drop(p);
                self.flush()?;
                p = pending.lock();
            }
            if data.len() >= WRITE_BACK_MAX {
                // Too large to buffer: it commits at once, as on a write-through handle.
                drop(p);
                let at = self.run_write(|op| op.write_ino(self.ino, *pos, data, false))?;
                *pos = at + data.len() as u64;
                return Ok(data.len());
            }
            if p.1.is_empty() {
                p.0 = *pos;
            }
            p.1.extend_from_slice(data);
            *pos += data.len() as u64;
            return Ok(data.len());
        }
        let at = self.run_write(|op| op.write_ino(self.ino, *pos, data, self.append))?;
        *pos = at + data.len() as u64;
        Ok(data.len())
    }

    /// Writes all of `data` at `offset` without moving the position (`pwrite`). With append,
    /// the data goes to the end, as on Linux.
    pub fn write_at(&self, data: &[u8], offset: u64) -> Result<usize> {
        self.check(false, true)?;
        self.flush()?;
        self.run_write(|op| op.write_ino(self.ino, offset, data, self.append))?;
        Ok(data.len())
    }

    /// Moves the position; returns the new one. Seeking past the end is allowed.
    pub fn seek(&self, to: SeekFrom) -> Result<u64> {
        self.check(false, false)?;
        let mut pos = self.pos.lock();
        let new = match to {
            SeekFrom::Start(n) => Some(n),
            SeekFrom::Current(d) => pos.checked_add_signed(d),
            SeekFrom::End(d) => self.stat()?.size.checked_add_signed(d),
        }
        .ok_or_else(|| {
            Error::new(ErrorKind::Invalid, "seek to a negative or overflowing offset")
        })?;
        *pos = new;
        Ok(new)
    }

    /// The current position.
    pub fn position(&self) -> u64 {
        *self.pos.lock()
    }

    /// Sets the file's size (`ftruncate`).
    pub fn set_len(&self, size: u64) -> Result<()> {
        self.check(false, true)?;
        self.flush()?;
        self.run_write(|op| op.truncate_ino(self.ino, size))
    }

    /// Gives the file its own block size in bytes (a power of two from 512 to 65536; see
    /// [`OpenOptions::block_size`]). Only while the file has no blocks (empty, or small enough
    /// to be inline): [`ErrorKind::Busy`] after that, [`ErrorKind::Invalid`] for a bad size.
    pub fn set_block_size(&self, bytes: u32) -> Result<()> {
        self.check(false, true)?;
        self.flush()?;
        super::ops::check_block_size(bytes)?;
        self.scope.run(|op| op.set_block_size_ino(self.ino, bytes))
    }

    /// `fallocate`; see [`FallocateMode`].
    pub fn allocate(&self, mode: FallocateMode, offset: u64, len: u64) -> Result<()> {
        self.check(false, true)?;
        self.flush()?;
        self.run_write(|op| op.fallocate_ino(self.ino, mode, offset, len))
    }

    /// Attributes (`fstat`).
    pub fn stat(&self) -> Result<Stat> {
        self.check(false, false)?;
        self.flush()?;
        self.scope.read(|op| op.stat_ino(self.ino))
    }

    /// `fsync`: on a store handle, makes every committed write durable; inside a transaction
    /// it does nothing (the commit is what makes the writes durable).
    pub fn sync(&self) -> Result<()> {
        self.check(false, false)?;
        self.flush()?;
        match &self.scope {
            CallScope::AutoCommit(store) => store.sync(),
            CallScope::InTransaction(_) => Ok(()),
        }
    }

    /// Takes or releases a whole-file lock (`flock`). With `wait` false a held lock gives
    /// [`ErrorKind::WouldBlock`]; with `wait` true the call blocks until it is free.
    pub fn flock(&self, op: FlockOp, wait: bool) -> Result<()> {
        self.check(false, false)?;
        self.scope.store().inner.locks.flock(self.ino, self.id, op, wait)
    }

    /// Takes or releases a byte-range lock (`fcntl(F_SETLK/F_SETLKW)` with open-file-description
    /// semantics). `len` 0 means to the end of the file and beyond.
    pub fn lock_range(&self, kind: RangeLockKind, start: u64, len: u64, wait: bool) -> Result<()> {
        self.check(false, false)?;
        if kind == RangeLockKind::Read && !self.readable
            || kind == RangeLockKind::Write && !self.writable
        {
            return Err(Error::new(
                ErrorKind::BadHandle,
                "lock type needs the matching access mode",
            ));
        }
        self.scope.store().inner.locks.lock_range(self.ino, self.id, kind, start, len, wait)
    }

    /// Releases this handle's byte-range locks on `[start, start + len)` with the commit of
    /// `tx` instead of at once: other processes see them released exactly when (and if) the
    /// commit lands, and on a client process of a shared store the release costs no round
    /// trip of its own. Until the commit ends they stay held. Returns false, and does
    /// nothing, where no other process sees this handle's locks (a store not shared, or this
    /// process alone on it): release them with [`File::lock_range`] then.
    pub fn unlock_range_in(&self, tx: &Transaction, start: u64, len: u64) -> Result<bool> {
        self.check(false, false)?;
        let store = self.scope.store();
        if !std::sync::Arc::ptr_eq(&tx.shared.store.inner, &store.inner) {
            return Err(Error::new(
                ErrorKind::Invalid,
                "unlock_range_in: the transaction and the file belong to different stores (or \
                 to different opens of one store)",
            ));
        }
        let (ino, owner) = (self.ino, self.id);
        let Some(kept) =
            tx.with_kv(|kv| store.inner.locks.unlock_in(kv, ino, owner, start, len))?
        else {
            return Ok(false);
        };
        let inner = store.inner.clone();
        tx.after_commit(Box::new(move |committed| {
            inner.locks.unlocked_in(ino, owner, start, len, &kept, committed)
        }));
        Ok(true)
    }

    /// Reports a lock held by another handle that would block this one (`F_GETLK`).
    pub fn test_lock(&self, write: bool, start: u64, len: u64) -> Result<Option<RangeLock>> {
        self.check(false, false)?;
        self.scope.store().inner.locks.test_range(self.ino, self.id, write, start, len)
    }

    /// Closes the handle, releasing its locks; the last close of an unlinked file frees it.
    pub fn close(mut self) -> Result<()> {
        self.release()
    }

    fn release(&mut self) -> Result<()> {
        if std::mem::replace(&mut self.closed, true) {
            return Ok(());
        }
        let flushed = if self.scope.is_finished() { Ok(()) } else { self.flush() };
        let store = self.scope.store();
        store.inner.locks.release_all(self.ino, self.id);
        store.inner.locks.forget_lost(self.id);
        if self.marks {
            store.inner.open_files.unuse_mark(self.ino);
        }
        if store.inner.closed(self.ino) {
            after_last_close(store, self.ino)?;
        }
        flushed
    }
}

/// After the last handle of `ino` in this process closed, unless one was opened since: if
/// the file is an orphan (unlinked), clears this process's open mark of it and, on a writable
/// store, frees it if no handle anywhere holds it, in one auto-commit. A file still linked
/// keeps the mark for a while (fs/handle_marks.rs): then nothing is written.
pub(crate) fn after_last_close(store: &super::Store, ino: u64) -> Result<()> {
    let (inner, read_only) = (&store.inner, store.per_open.read_only);
    inner.open_files.close_last(ino, |marked| {
        if !marked && read_only {
            return Ok((false, false));
        }
        // Usually the file is still linked: the read cache alone says so, with no transaction.
        let mode = super::options::PerOpen { read_only, ..store.per_open };
        if !inner.auto_read(None, mode, |op| op.is_orphan(ino))? {
            return Ok((false, false));
        }
        inner.auto_commit(None, |op| {
            if !op.is_orphan(ino)? {
                return Ok((false, false));
            }
            if marked {
                op.unmark_open(ino)?;
            }
            let freed = !read_only && op.reap_orphan(ino)?;
            Ok((freed, marked))
        })
    })
}

impl Drop for File {
    fn drop(&mut self) {
        // A drop cannot return an error: buffered data that cannot be written is reported to
        // the next `Store::sync` (or `File::sync`) instead, as the kernel reports a failed
        // write-back to the next fsync. `close` returns the error itself.
        if !self.closed && !self.scope.is_finished() {
            if let Err(e) = self.flush() {
                self.scope.store().inner.note_lost_write(Error::new(
                    e.kind(),
                    format!(
                        "write-back data of inode {} was lost when its handle was dropped: {}",
                        self.ino,
                        e.message()
                    ),
                ));
            }
        }
        let _ = self.release();
    }
}

impl std::fmt::Debug for File {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "File(ino {}, handle {})", self.ino, self.id)
    }
}

impl std::io::Read for &File {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        Ok(File::read(self, buf)?)
    }
}

impl std::io::Write for &File {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        Ok(File::write(self, buf)?)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(File::flush(self)?)
    }
}

impl std::io::Seek for &File {
    fn seek(&mut self, pos: SeekFrom) -> std::io::Result<u64> {
        Ok(File::seek(self, pos)?)
    }
}

impl std::io::Read for File {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        std::io::Read::read(&mut &*self, buf)
    }
}

impl std::io::Write for File {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        std::io::Write::write(&mut &*self, buf)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        std::io::Write::flush(&mut &*self)
    }
}

impl std::io::Seek for File {
    fn seek(&mut self, pos: SeekFrom) -> std::io::Result<u64> {
        std::io::Seek::seek(&mut &*self, pos)
    }
}
