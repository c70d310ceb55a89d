//! `txvfs watch [PATH] [--since CURSOR] [--json]`: follows the store's change feed, one line
//! per change; and `txvfs feed on|off`.

use crate::error::{CliError, CliResult};
use std::io::Write;
use std::time::{Duration, Instant};
use txvfs::{Change, Cursor, Store, WatchOptions};

fn json_str(b: &[u8]) -> String {
    let mut s = String::from("\"");
    for c in String::from_utf8_lossy(b).chars() {
        match c {
            '"' => s.push_str("\\\""),
            '\\' => s.push_str("\\\\"),
            c if (c as u32) < 0x20 => s.push_str(&format!("\\u{:04x}", c as u32)),
            c => s.push(c),
        }
    }
    s.push('"');
    s
}

fn line(c: &Change, cursor: &Cursor, json: bool) -> String {
    if json {
        let to = c.to.as_deref().map_or("null".to_string(), json_str);
        format!(
            "{{\"cursor\":\"{cursor}\",\"kind\":\"{}\",\"path\":{},\"to\":{to},\"ino\":{}}}",
            c.kind.name(),
            json_str(&c.path),
            c.ino
        )
    } else {
        let to = c.to.as_deref().map(|t| format!(" -> {}", String::from_utf8_lossy(t)));
        // A file changed through its inode alone (the FUSE mount) has no known path.
        let path = match c.path.is_empty() {
            true => format!("(inode {})", c.ino),
            false => String::from_utf8_lossy(&c.path).into_owned(),
        };
        format!("{cursor} {} {path}{}", c.kind.name(), to.unwrap_or_default())
    }
}

/// Prints each change after `since` (default: from now) at or below `path`, until `count`
/// changes were printed or nothing came for `idle` seconds (both optional: forever).
pub fn watch(
    store: &Store,
    path: Option<&[u8]>,
    since: Option<&str>,
    json: bool,
    count: Option<u64>,
    idle: Option<f64>,
) -> CliResult {
    let since = since.map(Cursor::parse).transpose()?;
    let prefixes = path.map(|p| vec![p.to_vec()]).unwrap_or_default();
    let mut w = store.watch(WatchOptions { prefixes, since, ..WatchOptions::default() })?;
    let mut out = std::io::stdout().lock();
    let mut printed = 0u64;
    let mut last = Instant::now();
    loop {
        // One wait until the idle time is up: the watcher wakes for changes by itself.
        let hour = Duration::from_secs(3600);
        let slice = match idle {
            Some(s) => Duration::try_from_secs_f64(s.max(0.0))
                .unwrap_or(hour)
                .saturating_sub(last.elapsed())
                .min(hour),
            None => hour,
        };
        for b in w.wait(slice.max(Duration::from_millis(1)))? {
            for c in &b.changes {
                writeln!(out, "{}", line(c, &b.cursor, json))
                    .and_then(|()| out.flush())
                    .map_err(|e| CliError::msg(format!("standard output: {e}")))?;
                printed += 1;
                if count.is_some_and(|n| printed >= n) {
                    return Ok(());
                }
            }
            last = Instant::now();
        }
        if idle.is_some_and(|s| last.elapsed().as_secs_f64() >= s) {
            return Ok(());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use txvfs::{ChangeKind, FileType};

    #[test]
    fn a_change_without_a_path_shows_its_inode() {
        let cursor = Cursor::parse(&format!("txvfs-c1-{}-{}", "0".repeat(32), "0".repeat(20)));
        let cursor = cursor.unwrap();
        let c = |path: &[u8]| Change {
            kind: ChangeKind::Written,
            ino: 42,
            file_type: FileType::File,
            path: path.to_vec(),
            to: None,
        };
        assert!(line(&c(b""), &cursor, false).ends_with(" written (inode 42)"));
        assert!(line(&c(b"/a"), &cursor, false).ends_with(" written /a"));
        assert!(line(&c(b""), &cursor, true).contains("\"path\":\"\",\"to\":null,\"ino\":42"));
    }
}
