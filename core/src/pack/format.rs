//! The image format of a pack: a header, one record per inode in inode order, the global keys
//! and the record index. Every byte is covered by a checksum (CRC-32C). Numbers written as
//! "varint" are unsigned LEB128 (7 bits a byte, low first).
//!
//! ```text
//! header   64 B   magic "TXVFSPAK", version, image length, inode count, where the globals
//!                 and the index are, their checksums, and the header's own checksum
//! records         inode 1..=N, back to back, from offset 64
//! globals         the store-wide keys (superblock, counters) as one entry list
//! index           N varints: the length of each record (the reader sums them into offsets)
//! ```
//!
//! A record holds every key of one inode: its attributes, inline data, a directory's entries,
//! its extended attributes, and then its data blocks, so one read returns a small file whole
//! (stat included) and one read returns a directory listing.
//!
//! ```text
//! u32 crc           CRC-32C of (inode number as u64 LE, every byte of the meta part after it)
//! varint body_len   bytes of the meta part after this varint
//! varint count      entries, in key order (scope byte, then key suffix)
//! entries, by scope:
//!   D  name_len varint, name, type u8, child inode varint   (a directory entry)
//!   B  block index varint, length varint, u32 CRC-32C of the bytes   (a data block)
//!   *  suffix_len varint, value_len varint, suffix, value      (any other key: I, X)
//! block data        the blocks' bytes in entry order, ending the record
//! ```
//!
//! Version 1 (fixed-width headers, u64 offsets) is refused with a message asking to rebuild.

pub use super::crc::{crc32c, crc32c_table, crc32c_update};
use crate::error::{Error, ErrorKind, Result};
use crate::schema::{Dentry, FileType};
use std::cmp::Ordering;

/// The first bytes of every pack image.
pub const MAGIC: &[u8; 8] = b"TXVFSPAK";
/// The format this code writes and reads.
pub const PACK_VERSION: u32 = 2;
/// Bytes of the header.
pub const HEADER_LEN: usize = 64;
/// The scope byte of data blocks (values kept out of the meta part).
pub const BLOCK_SCOPE: u8 = crate::schema::scope::BLOCK;
/// The scope byte of directory entries (stored compactly, value rebuilt on read).
pub const DENTRY_SCOPE: u8 = crate::schema::scope::DENTRY;

/// The fixed header at offset 0.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header {
    /// Total bytes of the image (a shorter file is truncated).
    pub image_len: u64,
    /// Number of inodes (records), numbered 1..=inodes.
    pub inodes: u64,
    /// Offset of the globals entry list (where the records end).
    pub globals_off: u64,
    /// Bytes of the globals entry list.
    pub globals_len: u32,
    /// CRC-32C of the globals.
    pub globals_crc: u32,
    /// Offset of the index: one varint record length per inode, up to the end of the image.
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
        if crc32c(&h[..60]) != u32_at(h, 60) {
            return Err(bad(what, "header checksum mismatch"));
        }
        let version = u32_at(h, 8);
        if version != PACK_VERSION {
            return Err(Error::new(
                ErrorKind::Corrupt,
                format!("{what}: pack format version {version}; this txvfs reads version {PACK_VERSION} only: rebuild the image with `txvfs pack`"),
            ));
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

/// One key of a record, as the builder gives it: entries are kept in key order (scope byte,
/// then the key after the inode number), which is the order of the store's keys.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Entry {
    /// A key whose value is kept as is in the meta part (`I`, `X`, ...).
    Inline {
        /// Scope byte.
        scope: u8,
        /// The key after the scope and inode number.
        suffix: Vec<u8>,
        /// The value.
        value: Vec<u8>,
    },
    /// A directory entry (`D` key): its value is rebuilt from the child and its type.
    Dentry {
        /// The entry's name.
        name: Vec<u8>,
        /// The child's inode number (in the image).
        ino: u64,
        /// The child's type.
        kind: FileType,
    },
    /// A data block (`B` key) whose bytes follow the meta part, in entry order.
    Block {
        /// The block index.
        index: u64,
        /// Number of bytes.
        len: u32,
        /// CRC-32C of the bytes.
        crc: u32,
    },
}

impl Entry {
    /// The entry's key after the inode number, with its scope first (the sort order).
    pub fn key(&self) -> (u8, std::borrow::Cow<'_, [u8]>) {
        use std::borrow::Cow;
        match self {
            Entry::Inline { scope, suffix, .. } => (*scope, Cow::Borrowed(suffix)),
            Entry::Dentry { name, .. } => (DENTRY_SCOPE, Cow::Borrowed(name)),
            Entry::Block { index, .. } => (BLOCK_SCOPE, Cow::Owned(index.to_be_bytes().to_vec())),
        }
    }
}

/// Bytes of a record's fixed meta header (the CRC); the varints follow.
pub const META_CRC: usize = 4;

/// Encodes a record's meta part for inode `ino` (entries in key order, blocks in the order
/// their bytes follow). Fails for a meta part too large for the reader's 32-bit offsets.
pub fn encode_meta(ino: u64, entries: &[Entry]) -> Result<Vec<u8>> {
    let mut body = Vec::with_capacity(16 + entries.len() * 16);
    put_varint(&mut body, entries.len() as u64);
    for e in entries {
        match e {
            Entry::Inline { scope, suffix, value } => {
                body.push(*scope);
                put_varint(&mut body, suffix.len() as u64);
                put_varint(&mut body, value.len() as u64);
                body.extend_from_slice(suffix);
                body.extend_from_slice(value);
            }
            Entry::Dentry { name, ino, kind } => {
                body.push(DENTRY_SCOPE);
                put_varint(&mut body, name.len() as u64);
                body.extend_from_slice(name);
                body.push(kind.to_u8());
                put_varint(&mut body, *ino);
            }
            Entry::Block { index, len, crc } => {
                body.push(BLOCK_SCOPE);
                put_varint(&mut body, *index);
                put_varint(&mut body, *len as u64);
                body.extend_from_slice(&crc.to_le_bytes());
            }
        }
    }
    let mut m = Vec::with_capacity(META_CRC + 10 + body.len());
    m.extend_from_slice(&[0; META_CRC]);
    put_varint(&mut m, body.len() as u64);
    m.extend_from_slice(&body);
    if m.len() > u32::MAX as usize {
        return Err(Error::new(
            ErrorKind::TooBig,
            format!("inode {ino}: too many entries for a pack record"),
        ));
    }
    let crc = meta_crc(ino, &m);
    m[..META_CRC].copy_from_slice(&crc.to_le_bytes());
    Ok(m)
}

/// The checksum of a meta part: it covers the inode number too, so a record read for the
/// wrong inode (a damaged index) is refused.
fn meta_crc(ino: u64, m: &[u8]) -> u32 {
    !crc32c_update(crc32c_update(!0, &ino.to_le_bytes()), &m[META_CRC..])
}

/// The length of the meta part announced by the first bytes of a record, if they hold it.
pub fn meta_len(rec: &[u8]) -> Option<usize> {
    let mut at = META_CRC;
    let body = get_varint(rec, &mut at)?;
    (at as u64).checked_add(body).and_then(|n| usize::try_from(n).ok())
}

/// One decoded entry of a record, as the reader keeps it: fixed size, with the first 8 bytes
/// of its key at hand, so binary searches over a directory seldom touch the record's bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Slot {
    /// The key's first 8 bytes after the inode number, big-endian, zero-padded (a block's
    /// index).
    pub prefix: u64,
    /// `D`: the child's inode; `B`: the data's offset from the record's start; others: the
    /// value's offset in the record.
    pub at: u64,
    /// Offset of the key suffix in the record (not for `B`).
    pub key_off: u32,
    /// Bytes of the value (`B`: of the data; `D`: 0).
    pub len: u32,
    /// `B`: CRC-32C of the data.
    pub crc: u32,
    /// Bytes of the key suffix.
    pub key_len: u16,
    /// Scope byte.
    pub scope: u8,
    /// `D`: the child's type byte.
    pub kind: u8,
}

/// The first 8 bytes of `s`, big-endian, zero-padded.
pub fn key_prefix(s: &[u8]) -> u64 {
    let mut b = [0u8; 8];
    let n = s.len().min(8);
    b[..n].copy_from_slice(&s[..n]);
    u64::from_be_bytes(b)
}

impl Slot {
    /// The key suffix, `rec` being the record's bytes (from its start).
    pub fn suffix<'a>(&self, rec: &'a [u8]) -> std::borrow::Cow<'a, [u8]> {
        if self.scope == BLOCK_SCOPE {
            std::borrow::Cow::Owned(self.prefix.to_be_bytes().to_vec())
        } else {
            std::borrow::Cow::Borrowed(
                &rec[self.key_off as usize..self.key_off as usize + self.key_len as usize],
            )
        }
    }

    /// Orders the slot's key against `(scope, suffix)`, whose [`key_prefix`] is `prefix`.
    pub fn cmp_key(&self, rec: &[u8], scope: u8, suffix: &[u8], prefix: u64) -> Ordering {
        self.scope.cmp(&scope).then_with(|| self.prefix.cmp(&prefix)).then_with(|| {
            if self.key_len <= 8 && suffix.len() <= 8 {
                // Equal zero-padded prefixes: the shorter key is a prefix of the longer.
                (self.key_len as usize).cmp(&suffix.len())
            } else {
                self.suffix(rec).as_ref().cmp(suffix)
            }
        })
    }

    /// The stored value of a `D` or inline slot (`None` for a block, whose bytes are apart).
    pub fn inline_value(&self, rec: &[u8]) -> Option<Vec<u8>> {
        match self.scope {
            BLOCK_SCOPE => None,
            // The kind byte was checked when the record was decoded.
            DENTRY_SCOPE => {
                Some(Dentry { ino: self.at, kind: FileType::from_u8(self.kind).ok()? }.encode())
            }
            _ => Some(rec[self.at as usize..self.at as usize + self.len as usize].to_vec()),
        }
    }
}

/// Decodes and checks the meta part of inode `ino`'s record of `record_len` bytes: `rec`
/// holds the record from its start, at least [`meta_len`] bytes of it. Returns the slots, in
/// key order, and the length of the meta part.
pub fn decode_meta(
    ino: u64,
    rec: &[u8],
    record_len: u64,
    what: &str,
) -> Result<(Vec<Slot>, usize)> {
    let corrupt = |why: &str| bad(what, &format!("inode {ino}: {why}"));
    let mlen = meta_len(rec)
        .filter(|&m| m <= rec.len() && m as u64 <= record_len && m <= u32::MAX as usize)
        .ok_or_else(|| corrupt("record too short"))?;
    let m = &rec[..mlen];
    if meta_crc(ino, m) != u32_at(m, 0) {
        return Err(corrupt("record checksum mismatch"));
    }
    let mut at = META_CRC;
    get_varint(m, &mut at).ok_or_else(|| corrupt("bad record length"))?;
    let short = || corrupt("record entry runs past its end");
    let count = get_varint(m, &mut at).ok_or_else(short)?;
    let mut slots = Vec::with_capacity((count as usize).min(m.len() / 3));
    let mut data_at = mlen as u64;
    let num = |at: &mut usize, max: u64| get_varint(m, at).filter(|&n| n <= max).ok_or_else(short);
    for _ in 0..count {
        let scope = *m.get(at).ok_or_else(short)?;
        at += 1;
        let slot = match scope {
            DENTRY_SCOPE => {
                let nlen = num(&mut at, u16::MAX as u64)? as usize;
                let key_off = at;
                let name = m.get(at..at + nlen).ok_or_else(short)?;
                let kind = *m.get(at + nlen).ok_or_else(short)?;
                FileType::from_u8(kind).map_err(|_| corrupt("bad entry type"))?;
                at += nlen + 1;
                let child = num(&mut at, u64::MAX)?;
                Slot {
                    prefix: key_prefix(name),
                    at: child,
                    key_off: key_off as u32,
                    len: 0,
                    crc: 0,
                    key_len: nlen as u16,
                    scope,
                    kind,
                }
            }
            BLOCK_SCOPE => {
                let index = num(&mut at, u64::MAX)?;
                let len = num(&mut at, u32::MAX as u64)?;
                let crc = u32_at(m.get(at..at + 4).ok_or_else(short)?, 0);
                at += 4;
                let slot = Slot {
                    prefix: index,
                    at: data_at,
                    key_off: 0,
                    len: len as u32,
                    crc,
                    key_len: 8,
                    scope,
                    kind: 0,
                };
                data_at += len;
                slot
            }
            _ => {
                let slen = num(&mut at, u16::MAX as u64)? as usize;
                let vlen = num(&mut at, u32::MAX as u64)? as usize;
                let key_off = at;
                let end = at
                    .checked_add(slen)
                    .and_then(|e| e.checked_add(vlen))
                    .filter(|&e| e <= m.len())
                    .ok_or_else(short)?;
                at = end;
                let suffix = &m[key_off..key_off + slen];
                Slot {
                    prefix: key_prefix(suffix),
                    at: (key_off + slen) as u64,
                    key_off: key_off as u32,
                    len: vlen as u32,
                    crc: 0,
                    key_len: slen as u16,
                    scope,
                    kind: 0,
                }
            }
        };
        if let Some(prev) = slots.last() {
            let prev: &Slot = prev;
            if prev.cmp_key(m, slot.scope, &slot.suffix(m), slot.prefix) != Ordering::Less {
                return Err(corrupt("record keys out of order"));
            }
        }
        slots.push(slot);
    }
    if at != m.len() {
        return Err(corrupt("record has trailing bytes"));
    }
    if data_at != record_len {
        return Err(corrupt("blocks do not fill their record"));
    }
    Ok((slots, mlen))
}

/// Encodes the index: the length of each record, from the records' offsets (`offsets[0]` is
/// where the first record starts).
pub fn encode_index(offsets: &[u64]) -> Vec<u8> {
    let mut out = Vec::with_capacity(offsets.len() * 2);
    for w in offsets.windows(2) {
        put_varint(&mut out, w[1] - w[0]);
    }
    out
}

/// Decodes the index of `inodes` records (already checked against its checksum) into
/// `inodes + 1` offsets from [`HEADER_LEN`]; the last must be `records_end`.
pub fn decode_index(raw: &[u8], inodes: u64, records_end: u64, what: &str) -> Result<Vec<u64>> {
    let n = usize::try_from(inodes)
        .ok()
        .filter(|&n| n <= raw.len())
        .ok_or_else(|| bad(what, "index too short"))?;
    let mut out = Vec::with_capacity(n + 1);
    let mut off = HEADER_LEN as u64;
    out.push(off);
    let mut at = 0;
    for _ in 0..n {
        let len = get_varint(raw, &mut at).ok_or_else(|| bad(what, "index too short"))?;
        off = off
            .checked_add(len)
            .filter(|&o| o <= records_end)
            .ok_or_else(|| bad(what, "index past the records"))?;
        out.push(off);
    }
    if at != raw.len() || off != records_end {
        return Err(bad(what, "index does not match the records"));
    }
    Ok(out)
}

/// Appends `n` as a varint.
pub fn put_varint(out: &mut Vec<u8>, mut n: u64) {
    while n >= 0x80 {
        out.push(n as u8 | 0x80);
        n >>= 7;
    }
    out.push(n as u8);
}

/// Reads a varint at `*at`, advancing it; `None` if it runs past `b` or past 64 bits.
pub fn get_varint(b: &[u8], at: &mut usize) -> Option<u64> {
    let mut n = 0u64;
    for shift in (0..64).step_by(7) {
        let byte = *b.get(*at)?;
        *at += 1;
        if shift == 63 && byte > 1 {
            return None;
        }
        n |= ((byte & 0x7f) as u64) << shift;
        if byte < 0x80 {
            return Some(n);
        }
    }
    None
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn meta_round_trips_and_checks_its_inode() {
        let es = vec![
            Entry::Block { index: 0, len: 5, crc: 9 },
            Entry::Block { index: 300, len: 2, crc: 8 },
            Entry::Dentry {
                name: b"a-long-name-past-eight".to_vec(),
                ino: 1 << 40,
                kind: FileType::Dir,
            },
            Entry::Dentry { name: b"b".to_vec(), ino: 3, kind: FileType::File },
            Entry::Inline {
                scope: crate::schema::scope::INODE,
                suffix: vec![],
                value: b"attrs".to_vec(),
            },
        ];
        let mut rec = encode_meta(7, &es).unwrap();
        let mlen = rec.len();
        rec.extend_from_slice(b"hello!!");
        let (slots, m) = decode_meta(7, &rec, rec.len() as u64, "t").unwrap();
        assert_eq!(m, mlen);
        assert_eq!((slots[0].at, slots[0].len, slots[0].crc), (mlen as u64, 5, 9));
        assert_eq!((slots[1].at, slots[1].prefix), (mlen as u64 + 5, 300));
        assert_eq!(
            slots[2].inline_value(&rec).unwrap(),
            Dentry { ino: 1 << 40, kind: FileType::Dir }.encode()
        );
        assert_eq!(slots[2].suffix(&rec).as_ref(), b"a-long-name-past-eight");
        assert_eq!(slots[4].inline_value(&rec).unwrap(), b"attrs");
        for (i, s) in slots.iter().enumerate() {
            let (scope, key) = es[i].key();
            assert_eq!(s.cmp_key(&rec, scope, &key, key_prefix(&key)), Ordering::Equal);
        }
        assert_eq!(
            slots[3].cmp_key(&rec, DENTRY_SCOPE, b"b\0", key_prefix(b"b\0")),
            Ordering::Less
        );
        assert_eq!(
            slots[3].cmp_key(
                &rec,
                DENTRY_SCOPE,
                b"a-long-name-past-eighty",
                key_prefix(b"a-long-name-past-eighty")
            ),
            Ordering::Greater
        );
        assert_eq!(
            decode_meta(8, &rec, rec.len() as u64, "t").unwrap_err().kind(),
            ErrorKind::Corrupt
        );
        assert_eq!(
            decode_meta(7, &rec, rec.len() as u64 + 1, "t").unwrap_err().kind(),
            ErrorKind::Corrupt
        );
        let h = Header {
            image_len: 1,
            inodes: 2,
            globals_off: 3,
            globals_len: 4,
            globals_crc: 5,
            index_off: 6,
            index_crc: 7,
        };
        assert_eq!(Header::decode(&h.encode(), "t").unwrap(), h);
    }

    #[test]
    fn varints_and_the_index_round_trip() {
        for n in [0, 1, 127, 128, 16383, 16384, u32::MAX as u64, u64::MAX] {
            let mut b = Vec::new();
            put_varint(&mut b, n);
            let mut at = 0;
            assert_eq!((get_varint(&b, &mut at), at), (Some(n), b.len()));
            assert_eq!(get_varint(&b[..b.len() - 1], &mut 0), None);
        }
        let offs = [64, 100, 100, 70_000, 70_001];
        let raw = encode_index(&offs);
        assert_eq!(decode_index(&raw, 4, 70_001, "t").unwrap(), offs);
        assert!(decode_index(&raw, 4, 70_002, "t").is_err());
        assert!(decode_index(&raw, 3, 70_000, "t").is_err());
    }

    #[test]
    fn an_old_format_is_refused_with_a_clear_error() {
        let mut h = Header {
            image_len: 1,
            inodes: 2,
            globals_off: 3,
            globals_len: 4,
            globals_crc: 5,
            index_off: 6,
            index_crc: 7,
        }
        .encode();
        h[8..12].copy_from_slice(&1u32.to_le_bytes());
        let crc = crc32c(&h[..60]);
        h[60..64].copy_from_slice(&crc.to_le_bytes());
        let e = Header::decode(&h, "t").unwrap_err();
        assert!(e.to_string().contains("version 1") && e.to_string().contains("rebuild"), "{e}");
    }
}
