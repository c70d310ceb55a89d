//! The disk cache's files: one file per value, the saved index order, and the identity of the
//! store the entries belong to. Every file carries a CRC-32C; a file that fails its check (torn
//! by a crash, damaged on disk) is treated as absent, never as data.
//!
//! ```text
//! DIR/lock          flock'd by the open cache: one user at a time
//! DIR/store         "TXVFSCS1", identity length u32, identity, CRC
//! DIR/index         "TXVFSCI1", count u32, count x (segment u8, key length u16, key), CRC
//! DIR/entries/HEX   "TXVFSCE1", key length u32, value length u32, CRC of key and value, key, value
//! DIR/tmp/          files being written (renamed into entries/ once whole)
//! ```
//! All numbers little-endian; `HEX` is the key in hexadecimal.

use super::slru::Segment;
use crate::pack::format::{crc32c, crc32c_update};
use std::io::Write;
use std::path::{Path, PathBuf};

const ENTRY_MAGIC: &[u8; 8] = b"TXVFSCE1";
const INDEX_MAGIC: &[u8; 8] = b"TXVFSCI1";
const STORE_MAGIC: &[u8; 8] = b"TXVFSCS1";
/// Bytes before the key in an entry file.
pub(crate) const ENTRY_HEADER: usize = 20;

/// The file of `key` under `entries`.
pub(crate) fn entry_path(entries: &Path, key: &[u8]) -> PathBuf {
    entries.join(hex(key))
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// The key a file name in `entries/` stands for.
pub(crate) fn unhex(name: &str) -> Option<Vec<u8>> {
    if name.len() % 2 != 0 {
        return None;
    }
    (0..name.len()).step_by(2).map(|i| u8::from_str_radix(name.get(i..i + 2)?, 16).ok()).collect()
}

/// An entry file's bytes.
pub(crate) fn encode_entry(key: &[u8], value: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(ENTRY_HEADER + key.len() + value.len());
    out.extend_from_slice(ENTRY_MAGIC);
    out.extend_from_slice(&(key.len() as u32).to_le_bytes());
    out.extend_from_slice(&(value.len() as u32).to_le_bytes());
    out.extend_from_slice(&(!crc32c_update(crc32c_update(!0, key), value)).to_le_bytes());
    out.extend_from_slice(key);
    out.extend_from_slice(value);
    out
}

/// The value in an entry file's bytes, if they are whole, undamaged and hold `key`.
pub(crate) fn decode_entry(mut bytes: Vec<u8>, key: &[u8]) -> Option<Vec<u8>> {
    let u32_at = |at: usize| u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap());
    if bytes.len() < ENTRY_HEADER || &bytes[..8] != ENTRY_MAGIC {
        return None;
    }
    let (klen, vlen, crc) = (u32_at(8) as usize, u32_at(12) as usize, u32_at(16));
    let body = &bytes[ENTRY_HEADER..];
    if klen != key.len() || body.len() != klen + vlen || &body[..klen] != key || crc32c(body) != crc
    {
        return None;
    }
    bytes.drain(..ENTRY_HEADER + klen);
    Some(bytes)
}

fn sealed(mut body: Vec<u8>) -> Vec<u8> {
    let crc = crc32c(&body);
    body.extend_from_slice(&crc.to_le_bytes());
    body
}

fn unsealed<'a>(bytes: &'a [u8], magic: &[u8; 8]) -> Option<&'a [u8]> {
    let (body, crc) = bytes.split_at_checked(bytes.len().checked_sub(4)?)?;
    (body.starts_with(magic) && crc32c(body).to_le_bytes() == crc).then(|| &body[8..])
}

/// The `store` file: the identity of the store the entries belong to.
pub(crate) fn encode_store(identity: &[u8]) -> Vec<u8> {
    let mut b = STORE_MAGIC.to_vec();
    b.extend_from_slice(&(identity.len() as u32).to_le_bytes());
    b.extend_from_slice(identity);
    sealed(b)
}

/// The identity in a `store` file, if it is whole.
pub(crate) fn decode_store(bytes: &[u8]) -> Option<Vec<u8>> {
    let b = unsealed(bytes, STORE_MAGIC)?;
    let n = u32::from_le_bytes(b.get(..4)?.try_into().ok()?) as usize;
    (b.len() == 4 + n).then(|| b[4..].to_vec())
}

/// The `index` file: the entries in the order [`super::slru::Slru::entries`] gives.
pub(crate) fn encode_index(entries: &[(Segment, &[u8])]) -> Vec<u8> {
    let mut b = INDEX_MAGIC.to_vec();
    b.extend_from_slice(&(entries.len() as u32).to_le_bytes());
    for (seg, key) in entries {
        b.push(*seg as u8);
        b.extend_from_slice(&(key.len() as u16).to_le_bytes());
        b.extend_from_slice(key);
    }
    sealed(b)
}

/// The entries of an `index` file, if it is whole.
pub(crate) fn decode_index(bytes: &[u8]) -> Option<Vec<(Segment, Vec<u8>)>> {
    let b = unsealed(bytes, INDEX_MAGIC)?;
    let n = u32::from_le_bytes(b.get(..4)?.try_into().ok()?) as usize;
    let (mut at, mut out) = (4, Vec::with_capacity(n.min(1 << 20)));
    for _ in 0..n {
        let seg = if *b.get(at)? == 1 { Segment::Protected } else { Segment::Probation };
        let len = u16::from_le_bytes(b.get(at + 1..at + 3)?.try_into().ok()?) as usize;
        out.push((seg, b.get(at + 3..at + 3 + len)?.to_vec()));
        at += 3 + len;
    }
    Some(out)
}

/// Writes `bytes` to `path` through a file in `tmp` renamed into place, so `path` is never
/// seen half-written by a running process (after a power cut it may be: the checksums catch it).
pub(crate) fn write_atomic(tmp: &Path, path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    let t = tmp.join(format!("{}.{}", std::process::id(), N.fetch_add(1, Ordering::Relaxed)));
    let written = std::fs::File::create(&t)
        .and_then(|mut f| f.write_all(bytes))
        .and_then(|()| std::fs::rename(&t, path));
    if written.is_err() {
        let _ = std::fs::remove_file(&t);
    }
    written
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_round_trip_and_damage_is_refused() {
        let e = encode_entry(b"key", b"value");
        assert_eq!(decode_entry(e.clone(), b"key").as_deref(), Some(&b"value"[..]));
        assert_eq!(decode_entry(e.clone(), b"other"), None, "another key's file");
        for cut in 0..e.len() {
            assert_eq!(decode_entry(e[..cut].to_vec(), b"key"), None, "torn at {cut}");
        }
        for i in 0..e.len() {
            let mut bad = e.clone();
            bad[i] ^= 0x10;
            assert_eq!(decode_entry(bad, b"key"), None, "flipped byte {i}");
        }
    }

    #[test]
    fn index_and_store_files_round_trip() {
        let idx = encode_index(&[(Segment::Probation, b"a"), (Segment::Protected, b"bc")]);
        assert_eq!(
            decode_index(&idx),
            Some(vec![(Segment::Probation, b"a".to_vec()), (Segment::Protected, b"bc".to_vec())])
        );
        assert_eq!(decode_index(&idx[..idx.len() - 1]), None);
        let s = encode_store(b"id");
        assert_eq!(decode_store(&s), Some(b"id".to_vec()));
        assert_eq!(decode_store(&s[1..]), None);
        assert_eq!(unhex(&hex(b"\x00\xffC")), Some(b"\x00\xffC".to_vec()));
        assert_eq!(unhex("zz"), None);
    }
}
