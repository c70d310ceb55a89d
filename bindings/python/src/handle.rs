//! `Handle`: a native open file, the raw layer under `txvfs.RawFile`.

use crate::errors::{detached, to_py, Fail, CLOSED_FILE};
use crate::stat::StatResult;
use parking_lot::Mutex;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PySlice};
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

    fn with<T: Send>(&self, py: Python<'_>, f: impl FnOnce(&txvfs::File) -> txvfs::Result<T> + Send) -> PyResult<T> {
        let m = &self.file;
        detached(py, move || -> Result<T, Fail> {
            let g = m.lock();
            Ok(f(g.as_ref().ok_or(Fail::Closed(CLOSED_FILE))?)?)
        })
    }

    /// Reads from the current position to the end of the file (which may grow meanwhile).
    fn read_to_end(&self, py: Python<'_>) -> PyResult<Vec<u8>> {
        self.with(py, |f| {
            let n = f.stat()?.size.saturating_sub(f.position()) as usize;
            let mut buf = vec![0u8; n];
            let mut got = read_full(f, &mut buf)?;
            if got == n {
                // The file may have grown since the stat: read on until the end.
                loop {
                    buf.resize(got + READ_CHUNK, 0);
                    match read_full(f, &mut buf[got..])? {
                        0 => break,
                        k => got += k,
                    }
                }
            }
            buf.truncate(got);
            Ok(buf)
        })
    }

    /// Reads up to `n` bytes at the current position (short only at the end of the file).
    /// `n` is a limit, not an allocation: `read(2**44)` of a 3-byte file allocates 3 bytes.
    fn read_some(&self, py: Python<'_>, n: usize) -> PyResult<Vec<u8>> {
        self.with(py, |f| {
            let mut buf = vec![0u8; read_capacity(f, n, f.position())?];
            let mut got = read_full(f, &mut buf)?;
            // The file may have grown since its size was read: read on, up to `n`.
            while got == buf.len() && got < n {
                buf.resize(n.min(got + READ_CHUNK), 0);
                match read_full(f, &mut buf[got..])? {
                    0 => break,
                    k => got += k,
                }
            }
            buf.truncate(got);
            Ok(buf)
        })
    }
}

/// Core reads are issued in pieces of this size: one core read of many megabytes is slower
/// than several of 1 MiB (measured with benches/python_bench.py).
const READ_CHUNK: usize = 1 << 20;

/// How many bytes to allocate for a read of up to `n` bytes at `offset`: `n` itself when it
/// is small, otherwise no more than the file holds from `offset` (never the caller's `n` of
/// terabytes, which would abort the process when the allocation fails).
fn read_capacity(f: &txvfs::File, n: usize, offset: u64) -> txvfs::Result<usize> {
    if n <= READ_CHUNK {
        return Ok(n);
    }
    let left = f.stat()?.size.saturating_sub(offset);
    Ok(n.min(usize::try_from(left).unwrap_or(usize::MAX)))
}

/// Fills `buf` from the file's position in `READ_CHUNK` pieces; returns the bytes read,
/// fewer than `buf.len()` only at the end of the file.
pub(crate) fn read_full(f: &txvfs::File, buf: &mut [u8]) -> txvfs::Result<usize> {
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
        let v = if size < 0 { self.read_to_end(py)? } else { self.read_some(py, size as usize)? };
        Ok(PyBytes::new(py, &v))
    }

    /// Reads everything from the current position to the end of the file.
    fn readall<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        let v = self.read_to_end(py)?;
        Ok(PyBytes::new(py, &v))
    }

    /// Reads into the writable buffer `buffer` (`bytearray`, `memoryview`, ...); returns the
    /// number of bytes read, 0 at the end of the file.
    fn readinto(&self, py: Python<'_>, buffer: &Bound<'_, PyAny>) -> PyResult<usize> {
        let v = self.read_some(py, buffer.len()?)?;
        let k = v.len();
        if k > 0 {
            buffer.set_item(PySlice::new(py, 0, k as isize, 1), PyBytes::new(py, &v))?;
        }
        Ok(k)
    }

    /// Reads up to `size` bytes at `offset` without moving the position (`pread`).
    fn pread<'py>(&self, py: Python<'py>, size: usize, offset: u64) -> PyResult<Bound<'py, PyBytes>> {
        let v = self.with(py, |f| {
            let mut buf = vec![0u8; read_capacity(f, size, offset)?];
            let k = f.read_at(&mut buf, offset)?;
            buf.truncate(k);
            Ok(buf)
        })?;
        Ok(PyBytes::new(py, &v))
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

    /// Writes all of `data` at the current position (at the end in append mode); returns
    /// `len(data)`.
    fn write(&self, py: Python<'_>, data: &[u8]) -> PyResult<usize> {
        self.with(py, |f| f.write(data))
    }

    /// Writes all of `data` at `offset` without moving the position (`pwrite`).
    fn pwrite(&self, py: Python<'_>, data: &[u8], offset: u64) -> PyResult<usize> {
        self.with(py, |f| f.write_at(data, offset))
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
            _ => return Err(PyValueError::new_err(format!("invalid whence ({whence}, should be 0, 1 or 2)"))),
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
        _ => return Err(to_py(Error::new(ErrorKind::Invalid, format!("invalid lock operation {op}")))),
    };
    Ok((o, wait))
}
