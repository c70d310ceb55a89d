//! Borrowed buffers: the memory of any Python object with the buffer protocol (`bytearray`,
//! `memoryview`, `array.array`, `mmap`, NumPy arrays; `bytes` for reading) as one contiguous
//! run of bytes, so that `readinto` fills the caller's buffer and `write` takes it as it is,
//! without a copy into a `bytes` object first.
//!
//! Why not pyo3's `PyBuffer`: the crate is built with `abi3-py39` (one wheel for CPython 3.9
//! and later, as the README and `tests/python/wheel` promise), and pyo3 compiles `PyBuffer`
//! only for 3.11+ under the limited API, where the buffer protocol became part of the stable
//! ABI. `PyObject_GetBuffer`, `PyBuffer_Release` and the `Py_buffer` layout below are
//! nevertheless the same in every CPython since 3.3 (3.11 added them to the stable ABI
//! unchanged), and every CPython exports the two functions, so they are declared here. The
//! extension resolves them from the interpreter that loads it, like every other C API call
//! (on Linux and macOS; Windows' `python3.dll` forwards them only from 3.11).
//! `tests/python/run` checks the extension on every pyenv CPython from 3.9 that is installed.

use pyo3::exceptions::PyTypeError;
use pyo3::ffi;
use pyo3::prelude::*;
use std::ffi::{c_char, c_int, c_void};

/// CPython's `Py_buffer` (Include/pybuffer.h), unchanged since 3.3.
#[repr(C)]
struct RawBuffer {
    buf: *mut c_void,
    obj: *mut ffi::PyObject,
    len: ffi::Py_ssize_t,
    itemsize: ffi::Py_ssize_t,
    readonly: c_int,
    ndim: c_int,
    format: *mut c_char,
    shape: *mut ffi::Py_ssize_t,
    strides: *mut ffi::Py_ssize_t,
    suboffsets: *mut ffi::Py_ssize_t,
    internal: *mut c_void,
}

/// A request for one C-contiguous run of bytes (no shape, strides or format).
const PYBUF_SIMPLE: c_int = 0;
/// ... that the caller may write to.
const PYBUF_WRITABLE: c_int = 0x0001;

extern "C" {
    fn PyObject_GetBuffer(obj: *mut ffi::PyObject, view: *mut RawBuffer, flags: c_int) -> c_int;
    fn PyBuffer_Release(view: *mut RawBuffer);
}

/// The memory of a Python object, exported to us until dropped: while it is, the object
/// cannot be resized or freed (a `bytearray` raises `BufferError` on a resize), so the core
/// may fill or read it without the GIL. Dropping it releases the export and needs the GIL,
/// which the `'py` lifetime guarantees (it cannot be sent into a detached closure; only the
/// slices it lends can).
///
/// Like the builtin `open`'s `readinto` and `write`, nothing stops another Python thread
/// from reading or writing the same memory meanwhile; what it then sees is unspecified,
/// as with the builtin file objects.
pub(crate) struct Borrowed<'py> {
    view: Box<RawBuffer>,
    _py: Python<'py>,
}

impl<'py> Borrowed<'py> {
    /// Borrows `obj`'s memory to write into, as `what` (the method's name, for the message)
    /// needs: a read-only, non-contiguous or non-buffer object raises `TypeError` (with the
    /// object's own reason as its cause), like the builtin `open`'s `readinto`.
    pub(crate) fn writable(obj: &Bound<'py, PyAny>, what: &str) -> PyResult<Self> {
        Self::get(obj, PYBUF_SIMPLE | PYBUF_WRITABLE).map_err(|cause| {
            let py = obj.py();
            let kind = obj.get_type().name().map(|n| n.to_string()).unwrap_or_else(|_| "?".into());
            let e = PyTypeError::new_err(format!(
                "{what} argument must be read-write bytes-like object, not {kind}"
            ));
            e.set_cause(py, Some(cause));
            e
        })
    }

    /// Borrows `obj`'s memory to read from: any contiguous buffer, `bytes` included; the
    /// builtin `open`'s errors otherwise (`TypeError` for a non-buffer, `BufferError` for a
    /// non-contiguous buffer).
    pub(crate) fn readable(obj: &Bound<'py, PyAny>) -> PyResult<Self> {
        Self::get(obj, PYBUF_SIMPLE)
    }

    fn get(obj: &Bound<'py, PyAny>, flags: c_int) -> PyResult<Self> {
        let mut view = Box::new(RawBuffer {
            buf: std::ptr::null_mut(),
            obj: std::ptr::null_mut(),
            len: 0,
            itemsize: 0,
            readonly: 0,
            ndim: 0,
            format: std::ptr::null_mut(),
            shape: std::ptr::null_mut(),
            strides: std::ptr::null_mut(),
            suboffsets: std::ptr::null_mut(),
            internal: std::ptr::null_mut(),
        });
        // SAFETY: the GIL is held ('py), `obj` is a live object and `view` a writable
        // Py_buffer; on success the export is released exactly once, in Drop.
        if unsafe { PyObject_GetBuffer(obj.as_ptr(), &mut *view, flags) } != 0 {
            return Err(PyErr::fetch(obj.py()));
        }
        Ok(Borrowed { view, _py: obj.py() })
    }

    /// The length in bytes.
    pub(crate) fn len(&self) -> usize {
        self.view.len as usize
    }

    /// The bytes, to read from.
    pub(crate) fn as_slice(&self) -> &[u8] {
        if self.len() == 0 {
            return &[];
        }
        // SAFETY: a successful PyBUF_SIMPLE export is `len` contiguous bytes at `buf`, valid
        // until released (in Drop, after this borrow ends).
        unsafe { std::slice::from_raw_parts(self.view.buf as *const u8, self.len()) }
    }

    /// The bytes, to write into (only for a buffer borrowed with [`Borrowed::writable`]).
    pub(crate) fn as_mut_slice(&mut self) -> &mut [u8] {
        assert!(self.view.readonly == 0, "as_mut_slice of a read-only buffer");
        if self.len() == 0 {
            return &mut [];
        }
        // SAFETY: as in as_slice; PyBUF_WRITABLE made the exporter refuse read-only memory.
        unsafe { std::slice::from_raw_parts_mut(self.view.buf as *mut u8, self.len()) }
    }
}

impl Drop for Borrowed<'_> {
    fn drop(&mut self) {
        // SAFETY: the export succeeded and is released once; the GIL is held ('py).
        unsafe { PyBuffer_Release(&mut *self.view) }
    }
}
