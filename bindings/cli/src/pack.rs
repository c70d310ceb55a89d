//! `txvfs pack SOURCE IMAGE`: a thin front to the core's pack builder.

use crate::error::{CliError, CliResult};
use crate::progress::Progress;
use std::path::Path;
use txvfs::{pack, ErrorKind, Options};

/// Packs SOURCE (a store URI, or a host directory when it holds no store or `host` is set)
/// into `image`, with a progress line on a terminal.
pub fn run(
    source: &str,
    image: &Path,
    host: bool,
    block_size: u32,
    inline_limit: u32,
) -> CliResult {
    let mut bar = Progress::new("packed", 0);
    let mut done = 0;
    let mut progress = |s: &pack::PackStats| {
        bar.add(s.inodes - done);
        done = s.inodes;
    };
    let from_dir = |bar_progress: &mut dyn FnMut(&pack::PackStats)| -> CliResult {
        let o = Options { block_size, inline_limit, ..Options::default() };
        if o.block_size < 512
            || o.block_size > 65536
            || !o.block_size.is_power_of_two()
            || o.inline_limit > 65536
        {
            return Err(CliError { msg: "block size must be a power of two from 512 to 65536, inline limit at most 65536".into(), code: libc::EINVAL });
        }
        pack::pack_dir(Path::new(source), image, block_size, inline_limit, bar_progress)?;
        Ok(())
    };
    let result = if host {
        from_dir(&mut progress)
    } else {
        match pack::pack_store(source, image, &mut progress) {
            // No store there: a plain host directory.
            Err(e) if e.kind() == ErrorKind::NotFound && !source.contains(':') => {
                match Path::new(source).is_dir() {
                    true => from_dir(&mut progress),
                    false => Err(CliError {
                        msg: format!("{source}: neither a store nor a directory"),
                        code: libc::ENOENT,
                    }),
                }
            }
            other => other.map(|_| ()).map_err(CliError::from),
        }
    };
    bar.finish();
    result
}
