//! `fsck`: checks the schema's invariants on the raw keys (placeholder, filled in below).
use crate::cmds::Res;

/// Checks the store at `uri`; with `repair`, fixes what it safely can.
pub fn run(_uri: &str, _repair: bool) -> Res {
    Ok(())
}
