//! Moving bytes: the thread's copy buffer and the loops that copy through it, shared by the
//! commands on single files (`cmds`) and on host trees (`transfer`).

use crate::error::{CliError, CliResult};
use std::io::{Read, Write};
use std::path::Path;

/// Bytes moved per read or write call.
pub const CHUNK: usize = 1 << 20;

thread_local! {
    /// The copy buffer, made once: zeroing a fresh 1 MiB per file was a fifth of an
    /// import's time.
    static BUFFER: std::cell::RefCell<Vec<u8>> = std::cell::RefCell::new(vec![0; CHUNK]);
}

/// Runs `f` with the thread's copy buffer (copies never nest).
pub fn with_buffer<R>(f: impl FnOnce(&mut [u8]) -> R) -> R {
    BUFFER.with(|b| f(&mut b.borrow_mut()))
}

/// The error of a failed write to standard output.
pub fn stdout_err(e: std::io::Error) -> CliError {
    CliError { msg: format!("standard output: {e}"), code: e.raw_os_error().unwrap_or(0) }
}

/// Writes bytes to standard output.
pub fn write_out(out: &mut impl Write, b: &[u8]) -> CliResult {
    out.write_all(b).map_err(stdout_err)
}

/// Copies everything `read` gives to `out`, the host file `what` (`-` for standard output).
pub fn copy_out(
    mut read: impl FnMut(&mut [u8]) -> CliResult<usize>,
    out: &mut impl Write,
    what: &Path,
) -> CliResult {
    with_buffer(|buf| loop {
        let n = read(buf)?;
        if n == 0 {
            return Ok(());
        }
        out.write_all(&buf[..n]).map_err(|e| {
            if what.as_os_str() == "-" {
                stdout_err(e)
            } else {
                CliError::io(what, e)
            }
        })?;
    })
}

/// Reads a host reader to its end through `sink`.
pub fn pump(mut r: impl Read, what: &Path, mut sink: impl FnMut(&[u8]) -> CliResult) -> CliResult {
    with_buffer(|buf| loop {
        let n = r.read(buf).map_err(|e| CliError::io(what, e))?;
        if n == 0 {
            return Ok(());
        }
        sink(&buf[..n])?;
    })
}
