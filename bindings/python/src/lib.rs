//! Python bindings for txvfs.
use pyo3::prelude::*;

/// The native module `txvfs._txvfs`.
#[pymodule]
fn _txvfs(_m: &Bound<'_, PyModule>) -> PyResult<()> {
    Ok(())
}
