//! `Handle`: a native open file, the raw layer under `txvfs.RawFile`.

use crate::buffer::Borrowed;
use crate::errors::{detached, to_py, Fail, CLOSED_FILE};
use crate::stat::StatResult;
use parking_lot::Mutex;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyBytes;
use std::io::SeekFrom;
use txvfs::{Error, ErrorKind, FileType, FlockOp, RangeLockKind};

/// A native open file: the raw layer under `txvfs.RawFile`. Reads and writes go straight to
/// the store (or the transaction the file was opened in); there is no buffering here.
#[pyclass(frozen, module = "txvfs._txvfs")]
pub(crate) struct Handle {
    file: Mutex<Option<txvfs::File>>,
    readable: bool,
    writable: bool,
}

impl Handle {
    /// A handle over the open core file `file`.
    pub(crate) fn new(file: txvfs::File, readable: bool, writable: bool) -> Self {
        Handle { file: Mutex::new(Some(file)), readable, writable }
    }

    fn with<T: Send>(
        &self,
        py: Python<'_>,
        f: impl FnOnce(&txvfs::File) -> txvfs::Result<T> + Send,
    ) -> PyResult<T> {
        let m = &self.file;
        detached(py, move || -> Result<T, Fail> {
            let g = m.lock();
            Ok(f(g.as_ref().ok_or(Fail::Closed(CLOSED_FILE))?)?)
        })
    }

    /// Reads up to `limit` bytes (to the end of the file with `None`) at the current position
    /// into a new `bytes`, which the core fills in place: one copy, from the store's blocks
    /// into the object Python gets.
    fn read_bytes<'py>(
        &self,
        py: Python<'py>,
        limit: Option<usize>,
    ) -> PyResult<Bound<'py, PyBytes>> {
        // What the file holds from the position: the size of the object to fill. The file can
        // grow or shrink before the read (another handle, or a thread sharing this one).
        let cap = self.with(py, |f| read_capacity(f, limit, f.position()))?;
        let (mut got, mut more) = (0, Vec::new());
        let bytes = PyBytes::new_with(py, cap, |buf| {
            (got, more) = self.with(py, |f| {
                let got = read_full(f, buf)?;
                let mut more = Vec::new();
                if got == buf.len() {
                    // The file may have grown since its size was read: read on, up to the limit.
                    read_on(f, &mut more, limit.map(|n| n - got))?;
                }
                Ok((got, more))
            })?;
            Ok(())
        })?;
        if got == cap && more.is_empty() {
            return Ok(bytes);
        }
        // The end came sooner or later than the size said (or a small read hit the end).
        let mut v = bytes.as_bytes()[..got].to_vec();
        v.append(&mut more);
        Ok(PyBytes::new(py, &v))
    }
}

/// Core reads are issued in pieces of this size: one core read of many megabytes is slower
/// than several of 1 MiB (measured with benches/python_bench.py).
const READ_CHUNK: usize = 1 << 20;

/// How many bytes to allocate for a read of up to `limit` bytes (to the end with `None`) at
/// `offset`: a small limit itself, otherwise no more than the file holds from `offset` (never
/// the caller's limit of terabytes, which would abort the process when the allocation fails).
fn read_capacity(f: &txvfs::File, limit: Option<usize>, offset: u64) -> txvfs::Result<usize> {
    if let Some(n) = limit.filter(|&n| n <= READ_CHUNK) {
        return Ok(n);
    }
    let left = usize::try_from(f.stat()?.size.saturating_sub(offset)).unwrap_or(usize::MAX);
    Ok(limit.map_or(left, |n| n.min(left)))
}

/// Appends to `out` what the file holds from its position, up to `limit` bytes (to the end
/// with `None`), in `READ_CHUNK` pieces.
fn read_on(f: &txvfs::File, out: &mut Vec<u8>, limit: Option<usize>) -> txvfs::Result<()> {
    loop {
        let want = limit.map_or(READ_CHUNK, |n| n.saturating_sub(out.len()).min(READ_CHUNK));
        if want == 0 {
            return Ok(());
        }
        let at = out.len();
        out.resize(at + want, 0);
        let k = read_full(f, &mut out[at..])?;
        out.truncate(at + k);
        if k < want {
            return Ok(());
        }
    }
}

/// Fills `buf` from the file's position in `READ_CHUNK` pieces; returns the bytes read,
/// fewer than `buf.len()` only at the end of the file. An empty `buf` still asks the core
/// (which checks that the handle may read, like `read(fd, buf, 0)`).
pub(crate) fn read_full(f: &txvfs::File, buf: &mut [u8]) -> txvfs::Result<usize> {
    if buf.is_empty() {
        return f.read(buf);
    }
    let mut got = 0;
    while got < buf.len() {
        let end = buf.len().min(got + READ_CHUNK);
        match f.read(&mut buf[got..end])? {
            0 => break,
            k => got += k,
        }
    }
    Ok(got)
}

#[pymethods]
impl Handle {
    /// Reads up to `size` bytes (all to the end with -1) at the current position.
    #[pyo3(signature = (size = -1))]
    fn read<'py>(&self, py: Python<'py>, size: i64) -> PyResult<Bound<'py, PyBytes>> {
        self.read_bytes(py, usize::try_from(size).ok())
    }

    /// Reads everything from the current position to the end of the file.
    fn readall<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        self.read_bytes(py, None)
    }

    /// Reads into the writable buffer `buffer` (`bytearray`, `memoryview`, `array.array`,
    /// `mmap`, ...: any writable C-contiguous buffer), filling it in place without the GIL;
    /// returns the number of bytes read, 0 at the end of the file. Any other object raises
    /// `TypeError` and reads nothing.
    fn readinto(&self, py: Python<'_>, buffer: &Bound<'_, PyAny>) -> PyResult<usize> {
        let mut b = Borrowed::writable(buffer, "readinto()")?;
        let dst = b.as_mut_slice();
        self.with(py, |f| read_full(f, dst))
    }

    /// Reads up to `size` bytes at `offset` without moving the position (`pread`).
    fn pread<'py>(
        &self,
        py: Python<'py>,
        size: usize,
        offset: u64,
    ) -> PyResult<Bound<'py, PyBytes>> {
        let cap = self.with(py, |f| read_capacity(f, Some(size), offset))?;
        let mut got = 0;
        let bytes = PyBytes::new_with(py, cap, |buf| {
            got = self.with(py, |f| f.read_at(buf, offset))?;
            Ok(())
        })?;
        Ok(if got == cap { bytes } else { PyBytes::new(py, &bytes.as_bytes()[..got]) })
    }

    /// For the benchmark: reads from the current position to the end of the file in `chunk`-byte
    /// core reads into one reused buffer (no Python in the loop) and returns the seconds it
    /// took: the ceiling a read from Python can approach.
    fn _time_core_read(&self, py: Python<'_>, chunk: usize) -> PyResult<f64> {
        self.with(py, |f| {
            let mut buf = vec![0u8; chunk.max(1)];
            let t = std::time::Instant::now();
            while read_full(f, &mut buf)? > 0 {}
            Ok(t.elapsed().as_secs_f64())
        })
    }

    /// Writes all of `data` (any C-contiguous buffer: `bytes`, `bytearray`, `memoryview`,
    /// `array.array`, ...) at the current position (at the end in append mode), straight
    /// from its memory; returns its length in bytes.
    fn write(&self, py: Python<'_>, data: &Bound<'_, PyAny>) -> PyResult<usize> {
        let b = Borrowed::readable(data)?;
        let src = b.as_slice();
        self.with(py, |f| f.write(src))
    }

    /// Writes all of `data` (any C-contiguous buffer) at `offset` without moving the
    /// position (`pwrite`).
    fn pwrite(&self, py: Python<'_>, data: &Bound<'_, PyAny>, offset: u64) -> PyResult<usize> {
        let b = Borrowed::readable(data)?;
        let src = b.as_slice();
        self.with(py, |f| f.write_at(src, offset))
    }

    /// Moves the position like `os.lseek` (`whence` 0, 1 or 2); returns the new position.
    #[pyo3(signature = (offset, whence = 0))]
    fn seek(&self, py: Python<'_>, offset: i64, whence: i32) -> PyResult<u64> {
        let to = match whence {
            // `seek(0, SEEK_CUR)` only asks for the position (io's buffered objects ask it
            // when they close): it needs no store, so it answers after the transaction ended.
            1 if offset == 0 => return self.with(py, |f| Ok(f.position())),
            0 if offset >= 0 => SeekFrom::Start(offset as u64),
            0 => return Err(to_py(Error::new(ErrorKind::Invalid, "negative seek position"))),
            1 => SeekFrom::Current(offset),
            2 => SeekFrom::End(offset),
            _ => {
                return Err(PyValueError::new_err(format!(
                    "invalid whence ({whence}, should be 0, 1 or 2)"
                )))
            }
        };
        self.with(py, |f| f.seek(to))
    }

    /// The current position.
    fn tell(&self, py: Python<'_>) -> PyResult<u64> {
        self.with(py, |f| Ok(f.position()))
    }

    /// Sets the file's size (`ftruncate`).
    fn truncate(&self, py: Python<'_>, size: u64) -> PyResult<()> {
        self.with(py, |f| f.set_len(size))
    }

    /// Attributes of the open file (`fstat`).
    fn stat(&self, py: Python<'_>) -> PyResult<StatResult> {
        Ok(self.with(py, |f| f.stat())?.into())
    }

    /// `fsync`: makes the file's committed writes durable (flushes a write-back buffer).
    fn fsync(&self, py: Python<'_>) -> PyResult<()> {
        self.with(py, |f| f.sync())
    }

    /// True if the handle was opened for reading.
    fn readable(&self) -> bool {
        self.readable
    }

    /// True if the handle was opened for writing.
    fn writable(&self) -> bool {
        self.writable
    }

    /// True if the handle refers to a directory.
    fn isdir(&self, py: Python<'_>) -> PyResult<bool> {
        self.with(py, |f| Ok(f.kind() == FileType::Dir))
    }

    /// `flock(2)`: `operation` is `fcntl.LOCK_SH`, `LOCK_EX` or `LOCK_UN`, optionally
    /// or-ed with `LOCK_NB` (then a held lock raises BlockingIOError instead of waiting).
    fn flock(&self, py: Python<'_>, operation: i32) -> PyResult<()> {
        let (op, wait) = lock_op(operation)?;
        let op = match op {
            LockOp::Sh => FlockOp::Shared,
            LockOp::Ex => FlockOp::Exclusive,
            LockOp::Un => FlockOp::Unlock,
        };
        self.with(py, |f| f.flock(op, wait))
    }

    /// A byte-range lock like `fcntl.lockf`: `cmd` is `LOCK_SH`, `LOCK_EX` or `LOCK_UN`
    /// (with optional `LOCK_NB`) on `len` bytes from `start` (0: to the end and beyond).
    #[pyo3(signature = (cmd, len = 0, start = 0))]
    fn lockf(&self, py: Python<'_>, cmd: i32, len: u64, start: u64) -> PyResult<()> {
        let (op, wait) = lock_op(cmd)?;
        let kind = match op {
            LockOp::Sh => RangeLockKind::Read,
            LockOp::Ex => RangeLockKind::Write,
            LockOp::Un => RangeLockKind::Unlock,
        };
        self.with(py, |f| f.lock_range(kind, start, len, wait))
    }

    /// Closes the handle, releasing its locks; reports a failed flush. Idempotent.
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        let m = &self.file;
        detached(py, move || match m.lock().take() {
            Some(f) => f.close(),
            None => Ok(()),
        })
    }

    /// True once closed.
    #[getter]
    fn closed(&self) -> bool {
        self.file.lock().is_none()
    }
}

enum LockOp {
    Sh,
    Ex,
    Un,
}

fn lock_op(op: i32) -> PyResult<(LockOp, bool)> {
    const LOCK_SH: i32 = 1;
    const LOCK_EX: i32 = 2;
    const LOCK_NB: i32 = 4;
    const LOCK_UN: i32 = 8;
    let wait = op & LOCK_NB == 0;
    let o = match op & !LOCK_NB {
        LOCK_SH => LockOp::Sh,
        LOCK_EX => LockOp::Ex,
        LOCK_UN => LockOp::Un,
        _ => {
            return Err(to_py(Error::new(
                ErrorKind::Invalid,
                format!("invalid lock operation {op}"),
            )))
        }
    };
    Ok((o, wait))
}
