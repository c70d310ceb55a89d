//! `txvfs.fsck(uri, repair=False)`: the core's integrity check, and its report.

use crate::errors::detached;
use crate::paths::path_of;
use pyo3::prelude::*;
use txvfs::fsck::CheckReport;

/// What `fsck` found: each problem as `(kind, message, repaired)`, and the keys read.
#[pyclass(module = "txvfs._txvfs", frozen)]
pub(crate) struct FsckReport {
    report: CheckReport,
}

#[pymethods]
impl FsckReport {
    /// The problems found, as `(kind, message, repaired)` tuples; `kind` names the kind of
    /// damage (`"LinkCount"`, `"StrayBlock"`, ...).
    #[getter]
    fn problems(&self) -> Vec<(String, String, bool)> {
        self.report
            .problems
            .iter()
            .map(|p| (format!("{:?}", p.kind), p.message.clone(), p.repaired))
            .collect()
    }

    /// How many keys the check read.
    #[getter]
    fn keys_read(&self) -> u64 {
        self.report.keys_read
    }

    /// True when nothing is wrong (or everything found was repaired).
    #[getter]
    fn clean(&self) -> bool {
        self.report.is_clean()
    }

    /// The report as `txvfs fsck` prints it.
    fn __str__(&self) -> String {
        self.report.to_string()
    }

    fn __repr__(&self) -> String {
        format!(
            "<FsckReport: {} problem(s), {} key(s) read>",
            self.report.problems.len(),
            self.report.keys_read
        )
    }
}

/// Checks the store at `uri` key by key without opening it (opening would tidy up first), and
/// with `repair` fixes what has one safe answer. Creates nothing where there is no store
/// (`FileNotFoundError`). Run it while no one writes to the store.
#[pyfunction]
#[pyo3(signature = (uri, repair = false))]
pub(crate) fn fsck(py: Python<'_>, uri: &Bound<'_, PyAny>, repair: bool) -> PyResult<FsckReport> {
    // Like Store(): str, bytes or os.PathLike.
    let uri = String::from_utf8(path_of(uri)?.bytes)
        .map_err(|_| pyo3::exceptions::PyValueError::new_err("store URI must be UTF-8"))?;
    let report = detached(py, || txvfs::fsck::check_uri(&uri, repair, &mut |_| {}))?;
    Ok(FsckReport { report })
}
