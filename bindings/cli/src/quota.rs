//! `txvfs quota set|show|remove PATH`: quotas on directory trees.

use crate::args::QuotaAction;
use crate::copy::stdout_err;
use crate::error::CliResult;
use std::io::Write;
use std::os::unix::ffi::OsStrExt;
use txvfs::{FileSystem, QuotaLimits, Store};

/// Runs one `txvfs quota` action. `show` prints a header line and one line for the tree:
/// its path, bytes used and limit, inodes used and limit (`-` for no limit).
pub fn run(store: &Store, out: &mut dyn Write, action: QuotaAction) -> CliResult {
    match action {
        QuotaAction::Set { path, bytes, inodes } => {
            store.set_quota(path.as_bytes(), QuotaLimits { bytes, inodes })?
        }
        QuotaAction::Remove { path } => store.remove_quota(path.as_bytes())?,
        QuotaAction::Show { path } => {
            let Some(q) = store.quota(path.as_bytes())? else {
                writeln!(out, "{}: in no quota tree", path.to_string_lossy())
                    .map_err(stdout_err)?;
                return Ok(());
            };
            let limit = |l: Option<u64>| l.map_or("-".to_string(), |n| n.to_string());
            writeln!(
                out,
                "{:<24} {:>14} {:>14} {:>12} {:>12}",
                "Tree", "Bytes", "Limit", "Inodes", "Limit"
            )
            .map_err(stdout_err)?;
            writeln!(
                out,
                "{:<24} {:>14} {:>14} {:>12} {:>12}",
                String::from_utf8_lossy(&q.path),
                q.bytes_used,
                limit(q.limits.bytes),
                q.inodes_used,
                limit(q.limits.inodes)
            )
            .map_err(stdout_err)?;
        }
    }
    Ok(())
}
