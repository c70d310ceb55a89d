//! Store directory helpers shared by the commands: joining names and reading listings.

use crate::error::CliResult;
use txvfs::{DirEntry, FileSystem};

/// Directory entries read per `readdir` page.
const PAGE: usize = 1000;

/// `dir/name`.
pub fn join(dir: &[u8], name: &[u8]) -> Vec<u8> {
    let mut p = dir.to_vec();
    if !p.ends_with(b"/") {
        p.push(b'/');
    }
    p.extend_from_slice(name);
    p
}

/// Every entry of a directory, read page by page.
pub fn list(fs: &impl FileSystem, dir: &[u8]) -> CliResult<Vec<DirEntry>> {
    let mut all: Vec<DirEntry> = Vec::new();
    loop {
        let page = fs.readdir(dir, all.last().map(|e| e.name.as_bytes()), PAGE)?;
        let done = page.len() < PAGE;
        all.extend(page);
        if done {
            return Ok(all);
        }
    }
}
