//! The image format of a pack: a header, one record per inode in inode order, the global keys
//! and the offset index. Every byte is covered by a checksum (CRC-32C).
//!
//! ```text
//! header   64 B   magic "TXVFSPAK", version, image length, inode count, where the globals
//!                 and the index are, their checksums, and the header's own checksum
//! records         inode 1..=N, back to back; record i spans index[i-1]..index[i]
//! globals         the store-wide keys (superblock, counters) as one entry list
//! index   8(N+1)  the offset of each record and the end of the last one (u64 LE)
//! ```
//!
//! A record holds every key of one inode: its attributes, inline data, a directory's entries,
//! its extended attributes, and then its data blocks, so one read returns a small file whole
//! (stat included) and one read returns a directory listing.
//!
//! ```text
//! u32 meta_len   bytes of the meta part, this header included
//! u32 meta_crc   CRC-32C of (inode number, meta_len, the meta part after this header)
//! u32 count      entries, in key order
//! entry: u8 scope, u16 suffix length, u32 value length, suffix, then
//!        the value (every scope but `B`), or u64 offset in the record + u32 CRC (`B`: the
//!        block's bytes, stored after the meta part)
//! block data
//! ```

use crate::error::{Error, ErrorKind, Result};

/// The first bytes of every pack image.
pub const MAGIC: &[u8; 8] = b"TXVFSPAK";
/// The format this code writes and reads.
pub const PACK_VERSION: u32 = 1;
/// Bytes of the header.
pub const HEADER_LEN: usize = 64;
/// The scope byte of data blocks (values kept out of the meta part).
pub const BLOCK_SCOPE: u8 = b'B';

/// The fixed header at offset 0.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header {
    /// Total bytes of the image (a shorter file is truncated).
    pub image_len: u64,
    /// Number of inodes (records), numbered 1..=inodes.
    pub inodes: u64,
    /// Offset of the globals entry list.
    pub globals_off: u64,
    /// Bytes of the globals entry list.
    pub globals_len: u32,
    /// CRC-32C of the globals.
    pub globals_crc: u32,
    /// Offset of the index: `inodes + 1` little-endian u64 offsets.
    pub index_off: u64,
    /// CRC-32C of the index.
    pub index_crc: u32,
}

impl Header {
    /// Encodes the header (with its checksum in the last 4 bytes).
    pub fn encode(&self) -> [u8; HEADER_LEN] {
        let mut h = [0u8; HEADER_LEN];
        h[0..8].copy_from_slice(MAGIC);
        h[8..12].copy_from_slice(&PACK_VERSION.to_le_bytes());
        h[12..20].copy_from_slice(&self.image_len.to_le_bytes());
        h[20..28].copy_from_slice(&self.inodes.to_le_bytes());
        h[28..36].copy_from_slice(&self.globals_off.to_le_bytes());
        h[36..40].copy_from_slice(&self.globals_len.to_le_bytes());
        h[40..44].copy_from_slice(&self.globals_crc.to_le_bytes());
        h[44..52].copy_from_slice(&self.index_off.to_le_bytes());
        h[52..56].copy_from_slice(&self.index_crc.to_le_bytes());
        let crc = crc32c(&h[..60]);
        h[60..64].copy_from_slice(&crc.to_le_bytes());
        h
    }

    /// Decodes and checks a header; `what` names the image in errors.
    pub fn decode(h: &[u8], what: &str) -> Result<Header> {
        if h.len() < HEADER_LEN || &h[0..8] != MAGIC {
            return Err(bad(what, "not a txvfs pack image (no TXVFSPAK header)"));
        }
        let version = u32_at(h, 8);
        if version != PACK_VERSION {
            return Err(bad(what, &format!("pack format version {version}; this txvfs reads version {PACK_VERSION}")));
        }
        if crc32c(&h[..60]) != u32_at(h, 60) {
            return Err(bad(what, "header checksum mismatch"));
        }
        Ok(Header {
            image_len: u64_at(h, 12),
            inodes: u64_at(h, 20),
            globals_off: u64_at(h, 28),
            globals_len: u32_at(h, 36),
            globals_crc: u32_at(h, 40),
            index_off: u64_at(h, 44),
            index_crc: u32_at(h, 52),
        })
    }
}

/// One key of a record: its scope, the key bytes after scope and inode number, and the value
/// (for blocks: where the bytes are in the record and their checksum).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Entry {
    /// A key whose value is kept in the meta part.
    Inline {
        /// Scope byte (`I`, `D`, `X`, ...).
        scope: u8,
        /// The key after the scope and inode number.
        suffix: Vec<u8>,
        /// The value.
        value: Vec<u8>,
    },
    /// A data block (`B` key) whose bytes follow the meta part.
    Block {
        /// The block index.
        index: u64,
        /// Offset of the bytes from the record's start.
        offset: u64,
        /// Number of bytes.
        len: u32,
        /// CRC-32C of the bytes.
        crc: u32,
    },
}

impl Entry {
    /// The entry's key after the inode number, with its scope first: entries of a record
    /// are kept in this order, which is the order of the store's keys.
    pub fn key(&self) -> (u8, std::borrow::Cow<'_, [u8]>) {
        match self {
            Entry::Inline { scope, suffix, .. } => (*scope, std::borrow::Cow::Borrowed(suffix)),
            Entry::Block { index, .. } => (BLOCK_SCOPE, std::borrow::Cow::Owned(index.to_be_bytes().to_vec())),
        }
    }

    /// Compares the entry's key with `(scope, suffix)` without allocating (the reader's
    /// binary search).
    pub fn cmp_key(&self, scope: u8, suffix: &[u8]) -> std::cmp::Ordering {
        match self {
            Entry::Inline { scope: s, suffix: k, .. } => s.cmp(&scope).then_with(|| k.as_slice().cmp(suffix)),
            Entry::Block { index, .. } => BLOCK_SCOPE.cmp(&scope).then_with(|| index.to_be_bytes().as_slice().cmp(suffix)),
        }
    }

    /// The entry's scope byte.
    pub fn scope(&self) -> u8 {
        match self {
            Entry::Inline { scope, .. } => *scope,
            Entry::Block { .. } => BLOCK_SCOPE,
        }
    }
}

/// Bytes of a record's meta header (`meta_len`, `meta_crc`, `count`).
pub const META_HEADER: usize = 12;

/// Encodes a record's meta part for inode `ino` (entries in key order).
pub fn encode_meta(ino: u64, entries: &[Entry]) -> Vec<u8> {
    let mut m = vec![0u8; META_HEADER];
    m[8..12].copy_from_slice(&(entries.len() as u32).to_le_bytes());
    for e in entries {
        match e {
            Entry::Inline { scope, suffix, value } => {
                m.push(*scope);
                m.extend_from_slice(&(suffix.len() as u16).to_le_bytes());
                m.extend_from_slice(&(value.len() as u32).to_le_bytes());
                m.extend_from_slice(suffix);
                m.extend_from_slice(value);
            }
            Entry::Block { index, offset, len, crc } => {
                m.push(BLOCK_SCOPE);
                m.extend_from_slice(&8u16.to_le_bytes());
                m.extend_from_slice(&len.to_le_bytes());
                m.extend_from_slice(&index.to_be_bytes());
                m.extend_from_slice(&offset.to_le_bytes());
                m.extend_from_slice(&crc.to_le_bytes());
            }
        }
    }
    let len = m.len() as u32;
    m[0..4].copy_from_slice(&len.to_le_bytes());
    let crc = meta_crc(ino, &m);
    m[4..8].copy_from_slice(&crc.to_le_bytes());
    m
}

/// The checksum of a meta part: it covers the inode number too, so a record read for the
/// wrong inode (a damaged index) is refused.
fn meta_crc(ino: u64, m: &[u8]) -> u32 {
    let mut c = crc32c_update(!0, &ino.to_le_bytes());
    c = crc32c_update(c, &m[0..4]);
    !crc32c_update(c, &m[8..])
}

/// The length of the meta part announced by the first bytes of a record.
pub fn meta_len(rec: &[u8]) -> Option<usize> {
    (rec.len() >= 4).then(|| u32_at(rec, 0) as usize)
}

/// Decodes and checks the meta part `m` (exactly `meta_len` bytes) of inode `ino`'s record of
/// `record_len` bytes.
pub fn decode_meta(ino: u64, m: &[u8], record_len: u64, what: &str) -> Result<Vec<Entry>> {
    let corrupt = |why: &str| bad(what, &format!("inode {ino}: {why}"));
    if m.len() < META_HEADER || u32_at(m, 0) as usize != m.len() || m.len() as u64 > record_len {
        return Err(corrupt("record too short"));
    }
    if meta_crc(ino, m) != u32_at(m, 4) {
        return Err(corrupt("record checksum mismatch"));
    }
    let count = u32_at(m, 8) as usize;
    let mut at = META_HEADER;
    let mut entries = Vec::with_capacity(count.min(m.len() / 7));
    let take = |at: &mut usize, n: usize| -> Result<&[u8]> {
        let s = m.get(*at..*at + n).ok_or_else(|| corrupt("record entry runs past its end"))?;
        *at += n;
        Ok(s)
    };
    for _ in 0..count {
        let head = take(&mut at, 7)?;
        let (scope, slen, vlen) = (head[0], u16::from_le_bytes([head[1], head[2]]) as usize, u32_at(head, 3));
        let suffix = take(&mut at, slen)?.to_vec();
        if scope == BLOCK_SCOPE {
            let index = u64::from_be_bytes(suffix.as_slice().try_into().map_err(|_| corrupt("bad block key"))?);
            let t = take(&mut at, 12)?;
            let (offset, crc) = (u64_at(t, 0), u32_at(t, 8));
            if offset < m.len() as u64 || offset.checked_add(vlen as u64).is_none_or(|e| e > record_len) {
                return Err(corrupt("block outside its record"));
            }
            entries.push(Entry::Block { index, offset, len: vlen, crc });
        } else {
            let value = take(&mut at, vlen as usize)?.to_vec();
            entries.push(Entry::Inline { scope, suffix, value });
        }
    }
    if at != m.len() {
        return Err(corrupt("record has trailing bytes"));
    }
    Ok(entries)
}

/// Encodes the globals: store-wide keys and values.
pub fn encode_globals(pairs: &[(Vec<u8>, Vec<u8>)]) -> Vec<u8> {
    let mut g = (pairs.len() as u32).to_le_bytes().to_vec();
    for (k, v) in pairs {
        g.extend_from_slice(&(k.len() as u32).to_le_bytes());
        g.extend_from_slice(&(v.len() as u32).to_le_bytes());
        g.extend_from_slice(k);
        g.extend_from_slice(v);
    }
    g
}

/// Decodes the globals (already checked against their checksum).
pub fn decode_globals(g: &[u8], what: &str) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
    let short = || bad(what, "globals too short");
    let n = u32_at(g.get(0..4).ok_or_else(short)?, 0) as usize;
    let mut at = 4;
    let mut out = Vec::new();
    for _ in 0..n {
        let h = g.get(at..at + 8).ok_or_else(short)?;
        let (kl, vl) = (u32_at(h, 0) as usize, u32_at(h, 4) as usize);
        at += 8;
        let k = g.get(at..at + kl).ok_or_else(short)?.to_vec();
        at += kl;
        let v = g.get(at..at + vl).ok_or_else(short)?.to_vec();
        at += vl;
        out.push((k, v));
    }
    Ok(out)
}

/// The error for a damaged image: `Corrupt`, naming the image.
pub fn bad(what: &str, why: &str) -> Error {
    Error::new(ErrorKind::Corrupt, format!("{what}: corrupt pack image: {why}"))
}

/// The little-endian u32 at `at`.
pub fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().unwrap())
}
/// The little-endian u64 at `at`.
pub fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().unwrap())
}

/// CRC-32C (Castagnoli) of `data`.
pub fn crc32c(data: &[u8]) -> u32 {
    !crc32c_update(!0, data)
}

/// Continues a CRC-32C over `data` (without the final inversion): the SSE 4.2 instruction
/// where the CPU has it (about 8 bytes a cycle, so checking a small file costs less than
/// reading it), else a table.
pub fn crc32c_update(crc: u32, data: &[u8]) -> u32 {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("sse4.2") {
        // SAFETY: the CPU supports SSE 4.2 (checked just above).
        return unsafe { crc32c_sse42(crc, data) };
    }
    crc32c_table(crc, data)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "sse4.2")]
unsafe fn crc32c_sse42(mut crc: u32, data: &[u8]) -> u32 {
    use std::arch::x86_64::{_mm_crc32_u64, _mm_crc32_u8};
    let mut chunks = data.chunks_exact(8);
    let mut c = crc as u64;
    for ch in &mut chunks {
        c = _mm_crc32_u64(c, u64::from_le_bytes(ch.try_into().unwrap()));
    }
    crc = c as u32;
    for &b in chunks.remainder() {
        crc = _mm_crc32_u8(crc, b);
    }
    crc
}

/// The portable CRC-32C, one byte at a time (also checks the SSE 4.2 path in tests).
pub fn crc32c_table(mut crc: u32, data: &[u8]) -> u32 {
    static TABLE: std::sync::OnceLock<[u32; 256]> = std::sync::OnceLock::new();
    let t = TABLE.get_or_init(|| {
        let mut t = [0u32; 256];
        for (i, e) in t.iter_mut().enumerate() {
            let mut c = i as u32;
            for _ in 0..8 {
                c = if c & 1 != 0 { 0x82F6_3B78 ^ (c >> 1) } else { c >> 1 };
            }
            *e = c;
        }
        t
    });
    for &b in data {
        crc = t[((crc ^ b as u32) & 0xff) as usize] ^ (crc >> 8);
    }
    crc
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crc32c_known_value_and_paths_agree() {
        assert_eq!(crc32c(b"123456789"), 0xE306_9283);
        let data: Vec<u8> = (0..1000u32).map(|i| (i * 7 + 3) as u8).collect();
        for n in [0, 1, 7, 8, 9, 999, 1000] {
            assert_eq!(crc32c_update(!0, &data[..n]), crc32c_table(!0, &data[..n]), "length {n}");
        }
    }

    #[test]
    fn meta_round_trips_and_checks_its_inode() {
        let es = vec![
            Entry::Inline { scope: b'I', suffix: vec![], value: b"attrs".to_vec() },
            Entry::Block { index: 0, offset: 100, len: 5, crc: 9 },
        ];
        let m = encode_meta(7, &es);
        assert_eq!(decode_meta(7, &m, 200, "t").unwrap(), es);
        assert_eq!(decode_meta(8, &m, 200, "t").unwrap_err().kind(), ErrorKind::Corrupt);
        let h = Header { image_len: 1, inodes: 2, globals_off: 3, globals_len: 4, globals_crc: 5, index_off: 6, index_crc: 7 };
        assert_eq!(Header::decode(&h.encode(), "t").unwrap(), h);
    }
}
