//! `txvfs watch [PATH] [--since CURSOR] [--json]`: follows the store's change feed, one line
//! per change; and `txvfs feed on|off`.

use crate::error::{CliError, CliResult};
use serde_json::{Map, Value};
use std::io::Write;
use std::time::{Duration, Instant};
use txvfs::{Change, Cursor, Store, WatchOptions};

/// Standard base64 (RFC 4648, with padding) of `b`.
fn base64(b: &[u8]) -> String {
    const ABC: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut s = String::with_capacity(b.len().div_ceil(3) * 4);
    for chunk in b.chunks(3) {
        let n = chunk.iter().enumerate().fold(0u32, |n, (i, &x)| n | ((x as u32) << (16 - 8 * i)));
        for i in 0..4 {
            let c = ABC[(n >> (18 - 6 * i)) as usize & 63] as char;
            s.push(if i <= chunk.len() { c } else { '=' });
        }
    }
    s
}

/// Puts name `b` into `obj` losslessly: as the string `key` when it is UTF-8, else as
/// `KEY_b64`, its bytes in base64 (a file name may be any bytes but `/` and NUL).
fn put_name(obj: &mut Map<String, Value>, key: &str, b: &[u8]) {
    match std::str::from_utf8(b) {
        Ok(s) => obj.insert(key.into(), s.into()),
        Err(_) => obj.insert(format!("{key}_b64"), base64(b).into()),
    };
}

/// One change as a JSON object: `cursor`, `kind`, `path` (or `path_b64`), `to` (or `to_b64`;
/// null when the change has no destination), `ino`.
fn json(c: &Change, cursor: &Cursor) -> Value {
    let mut obj = Map::new();
    obj.insert("cursor".into(), cursor.to_string().into());
    obj.insert("kind".into(), c.kind.name().into());
    put_name(&mut obj, "path", &c.path);
    match c.to.as_deref() {
        Some(to) => put_name(&mut obj, "to", to),
        None => {
            obj.insert("to".into(), Value::Null);
        }
    }
    obj.insert("ino".into(), c.ino.into());
    Value::Object(obj)
}

/// One change as `watch` prints it: JSON, or `CURSOR KIND PATH [-> TO]` (names that are not
/// UTF-8 shown with U+FFFD there: `--json` is the exact form).
fn line(c: &Change, cursor: &Cursor, as_json: bool) -> String {
    if as_json {
        json(c, cursor).to_string()
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

    #[test]
    fn base64_is_rfc_4648s() {
        // The test vectors of RFC 4648, section 10, and a byte that is not UTF-8.
        let cases: [(&[u8], &str); 8] = [
            (b"", ""),
            (b"f", "Zg=="),
            (b"fo", "Zm8="),
            (b"foo", "Zm9v"),
            (b"foob", "Zm9vYg=="),
            (b"fooba", "Zm9vYmE="),
            (b"foobar", "Zm9vYmFy"),
            (b"/caf\xe9", "L2NhZuk="),
        ];
        for (raw, b64) in cases {
            assert_eq!(base64(raw), b64, "{raw:?}");
        }
    }
}
