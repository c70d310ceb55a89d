//! `fsck`: runs the core's integrity check ([`txvfs::fsck`]) on the store's raw keys and
//! prints its report; with `--repair` the core applies the fixes that need no guessing.

use crate::cmds::no_store_hint;
use crate::error::{CliError, CliResult};
use crate::progress::Progress;

/// Checks the store at `uri`; with `repair`, applies the safe fixes. Exits non-zero while
/// problems remain.
pub fn run(uri: &str, repair: bool) -> CliResult {
    let mut progress = Progress::new("fsck: keys read", 0);
    let mut shown = 0;
    let report = txvfs::fsck::check_uri(uri, repair, &mut |n| {
        progress.add(n - shown);
        shown = n;
    });
    progress.finish();
    let report = report.map_err(no_store_hint)?;
    print!("{report}");
    let remaining = report.remaining();
    if remaining > 0 {
        let hint = if repair { " that cannot be repaired safely" } else { " (run fsck --repair)" };
        return Err(CliError::msg(format!("{remaining} problem(s) found{hint}")));
    }
    Ok(())
}
