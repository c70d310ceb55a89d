//! Path arguments from Python (`str`, `bytes`, `os.PathLike`) and names back to Python.

use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyString};
use txvfs::FileType;

/// A path argument: `str`, `bytes` or an `os.PathLike`; remembers whether it was bytes, so
/// that names derived from it come back as the same type (like `os.listdir`).
pub(crate) struct PathArg {
    pub(crate) bytes: Vec<u8>,
    pub(crate) is_bytes: bool,
}

pub(crate) fn path_of(obj: &Bound<'_, PyAny>) -> PyResult<PathArg> {
    if let Ok(s) = obj.cast::<PyString>() {
        return Ok(PathArg { bytes: str_bytes(s)?, is_bytes: false });
    }
    if let Ok(b) = obj.cast::<PyBytes>() {
        return Ok(PathArg { bytes: b.as_bytes().to_vec(), is_bytes: true });
    }
    if obj.hasattr("__fspath__")? {
        let p = obj.call_method0("__fspath__")?;
        if p.is_instance_of::<PyString>() || p.is_instance_of::<PyBytes>() {
            return path_of(&p);
        }
    }
    Err(pyo3::exceptions::PyTypeError::new_err(format!(
        "expected str, bytes or os.PathLike object, not {}",
        obj.get_type().name()?
    )))
}

/// UTF-8 bytes of a str; lone surrogates (from `os.fsdecode`) map back with surrogateescape.
fn str_bytes(s: &Bound<'_, PyString>) -> PyResult<Vec<u8>> {
    match s.to_cow() {
        Ok(v) => Ok(v.as_bytes().to_vec()),
        Err(_) => Ok(s
            .call_method1("encode", ("utf-8", "surrogateescape"))?
            .cast::<PyBytes>()?
            .as_bytes()
            .to_vec()),
    }
}

/// A name or path as `bytes` (when the caller used bytes) or `str` (surrogateescape-decoded).
pub(crate) fn name_obj<'py>(
    py: Python<'py>,
    v: &[u8],
    as_bytes: bool,
) -> PyResult<Bound<'py, PyAny>> {
    if as_bytes {
        return Ok(PyBytes::new(py, v).into_any());
    }
    match std::str::from_utf8(v) {
        Ok(s) => Ok(PyString::new(py, s).into_any()),
        Err(_) => PyBytes::new(py, v).call_method1("decode", ("utf-8", "surrogateescape")),
    }
}

pub(crate) fn kind_name(k: FileType) -> &'static str {
    match k {
        FileType::File => "file",
        FileType::Dir => "dir",
        FileType::Symlink => "symlink",
        FileType::Fifo => "fifo",
        FileType::CharDevice => "chardev",
        FileType::BlockDevice => "blockdev",
        FileType::Socket => "socket",
    }
}
