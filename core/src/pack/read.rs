//! The read-only backend over a pack image (`pack:/path/image`).
//!
//! Open reads the header, the globals and the index (a varint length per record, kept as one
//! u64 offset per inode) and checks their checksums. A key of an inode is answered from that
//! inode's record, fetched with one `pread` and checked: directory records stay cached (they
//! are the listings that path lookups need), the last few other records are kept so that the
//! reads of one file (attributes, then data) share the one `pread`. A record is kept as its
//! bytes and an array of fixed-size [`Slot`]s in key order, so a lookup is a binary search
//! that compares 8-byte key prefixes (or a probe of the record's hash table) and allocates
//! nothing but the value it returns. The entries of cached directories with names of up to
//! 15 bytes are also kept in one table keyed by (directory, name), so a path component costs
//! one probe. Every write fails with `ReadOnly` (EROFS).

use super::format::{
    self, crc32c, key_prefix, Header, Slot, BLOCK_SCOPE, DENTRY_SCOPE, HEADER_LEN,
};
use crate::error::{Error, ErrorKind, Result};
use crate::kv::KeyValue;
use crate::schema::{scope, Dentry, FileType};
use parking_lot::Mutex;
use std::collections::HashMap;
use std::fs::File;
use std::hash::{BuildHasherDefault, Hasher};
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Records up to this size are read whole; larger ones read their meta part, then each
/// block when asked.
const WHOLE_RECORD: u64 = 256 << 10;
/// Bytes read first from a large record (its meta part usually fits).
const META_PROBE: u64 = 16 << 10;
/// How many recent non-directory records stay cached.
const RECENT: usize = 16;
/// The scopes whose keys belong to an inode record, in key order.
const RECORD_SCOPES: [u8; 4] = [scope::BLOCK, scope::DENTRY, scope::INODE, scope::XATTR];

/// Records decoded lately, by inode, with the next slot to replace.
type RecentRecords = (usize, Vec<(u64, Arc<Record>)>);

/// A hasher for inode numbers (dense small integers; SipHash's protection is not needed).
#[derive(Default)]
struct InoHasher(u64);

impl Hasher for InoHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ b as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = n.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
}

/// One inode's record, decoded.
struct Record {
    /// Where the record starts in the image.
    start: u64,
    /// The record's bytes from its start: all of them, or the meta part only (`whole` false).
    bytes: Vec<u8>,
    whole: bool,
    /// Its entries, in key order.
    slots: Vec<Slot>,
    /// For records of many entries (directories): an open-addressing hash table of slot
    /// numbers + 1 (0: empty), so a lookup touches a few cache lines instead of a binary
    /// search's many (the directory tables of a large image do not fit the CPU caches).
    table: Vec<u32>,
}

/// Records with more entries than this get a hash table.
const HASHED: usize = 8;

/// The hash of a key `(scope, suffix)` for [`Record::table`].
fn key_hash(scope: u8, suffix: &[u8]) -> u64 {
    let mut h = (scope as u64) << 56 ^ suffix.len() as u64;
    for chunk in suffix.chunks(8) {
        h = (h.rotate_left(5) ^ key_prefix(chunk)).wrapping_mul(0x517C_C1B7_2722_0A95);
    }
    h ^ (h >> 29)
}

/// Directory entries with names of at most this many bytes are also kept in [`Inner::names`].
const SHORT_NAME: usize = 15;

/// A key of [`Inner::names`]: the name's length, the directory's inode and the name,
/// zero-padded, as three words (compared and hashed without touching any other memory).
#[derive(Clone, Copy, PartialEq, Eq)]
struct NameKey([u64; 3]);

impl NameKey {
    fn new(dir: u64, name: &[u8]) -> Option<NameKey> {
        if name.len() > SHORT_NAME || dir >> 56 != 0 {
            return None;
        }
        let mut b = [0u8; 16];
        b[0] = name.len() as u8;
        b[1..1 + name.len()].copy_from_slice(name);
        Some(NameKey([
            dir,
            u64::from_le_bytes(b[..8].try_into().unwrap()),
            u64::from_le_bytes(b[8..].try_into().unwrap()),
        ]))
    }
}

impl std::hash::Hash for NameKey {
    fn hash<H: Hasher>(&self, state: &mut H) {
        let [a, b, c] = self.0;
        let x = (a ^ b.rotate_left(21) ^ c.rotate_left(43)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        state.write_u64(x ^ (x >> 29));
    }
}

pub(super) struct Inner {
    file: File,
    /// Bytes of the image.
    pub(super) len: u64,
    pub(super) what: String,
    index: Vec<u64>,
    globals: Vec<KeyValue>,
    dirs: Mutex<HashMap<u64, Arc<Record>, BuildHasherDefault<InoHasher>>>,
    /// The short-named entries of the cached directories, in one table: a path component is
    /// found with one probe instead of a walk through the directory map, the record and its
    /// own table, which miss the CPU caches at every step once the directories are many.
    /// The child's inode, with its type byte in the top 8 bits.
    names: Mutex<HashMap<NameKey, u64, BuildHasherDefault<InoHasher>>>,
    recent: Mutex<RecentRecords>,
    preads: AtomicU64,
}

/// A read-only [`Backend`](crate::kv::Backend) over a pack image.
pub struct PackBackend {
    pub(super) inner: Arc<Inner>,
}

impl PackBackend {
    /// Opens the image at `path`, refusing a truncated or damaged one (`Corrupt`).
    pub fn open(path: &Path) -> Result<Arc<PackBackend>> {
        let what = format!("pack:{}", path.display());
        let file = File::open(path).map_err(|e| {
            let kind = if e.kind() == std::io::ErrorKind::NotFound {
                ErrorKind::NotFound
            } else {
                ErrorKind::Backend
            };
            Error::new(kind, format!("{what}: {e}"))
        })?;
        let len = file
            .metadata()
            .map_err(|e| Error::new(ErrorKind::Backend, format!("{what}: {e}")))?
            .len();
        let inner = Inner {
            file,
            len,
            what,
            index: Vec::new(),
            globals: Vec::new(),
            dirs: Default::default(),
            names: Default::default(),
            recent: Default::default(),
            preads: AtomicU64::new(0),
        };
        let mut h = [0u8; HEADER_LEN];
        if len < HEADER_LEN as u64 {
            return Err(format::bad(&inner.what, &format!("truncated: {len} bytes")));
        }
        inner.read_at(&mut h, 0)?;
        let header = Header::decode(&h, &inner.what)?;
        if len != header.image_len {
            return Err(format::bad(
                &inner.what,
                &format!(
                    "truncated or extended: {len} bytes, the header says {}",
                    header.image_len
                ),
            ));
        }
        let index_len = len.checked_sub(header.index_off);
        let globals_end = header.globals_off.checked_add(header.globals_len as u64);
        if index_len.is_none()
            || header.globals_off < HEADER_LEN as u64
            || globals_end != Some(header.index_off)
        {
            return Err(format::bad(&inner.what, "the header's layout does not fit the image"));
        }
        let mut g = vec![0u8; header.globals_len as usize];
        inner.read_at(&mut g, header.globals_off)?;
        if crc32c(&g) != header.globals_crc {
            return Err(format::bad(&inner.what, "globals checksum mismatch"));
        }
        let globals = format::decode_globals(&g, &inner.what)?;
        let mut raw = vec![0u8; index_len.unwrap() as usize];
        inner.read_at(&mut raw, header.index_off)?;
        if crc32c(&raw) != header.index_crc {
            return Err(format::bad(&inner.what, "index checksum mismatch"));
        }
        let index = format::decode_index(&raw, header.inodes, header.globals_off, &inner.what)?;
        if header.inodes == 0 {
            return Err(format::bad(&inner.what, "no root directory"));
        }
        Ok(Arc::new(PackBackend { inner: Arc::new(Inner { index, globals, ..inner }) }))
    }

    /// The number of `pread` calls made on the image since it was opened (for tests of the
    /// cost model: one per small file read).
    pub fn preads(&self) -> u64 {
        self.inner.preads.load(Ordering::Relaxed)
    }

    /// The number of inodes in the image.
    pub fn inodes(&self) -> u64 {
        self.inner.index.len() as u64 - 1
    }

    /// Bytes of memory held by the index (one offset per inode), not counting cached records.
    pub fn index_bytes(&self) -> usize {
        self.inner.index.len() * 8
    }

    /// Bytes of directory records cached so far.
    pub fn cached_dir_bytes(&self) -> usize {
        let names =
            self.inner.names.lock().capacity() * (std::mem::size_of::<(NameKey, u64)>() + 1);
        self.inner.dirs.lock().values().map(|r| r.size()).sum::<usize>() + names
    }
}

impl Record {
    fn size(&self) -> usize {
        self.bytes.len() + self.slots.len() * std::mem::size_of::<Slot>() + self.table.len() * 4
    }

    /// A record of `bytes` and its `slots`, with a hash table when it has many.
    fn new(start: u64, bytes: Vec<u8>, whole: bool, slots: Vec<Slot>) -> Record {
        let mut table = Vec::new();
        if slots.len() > HASHED {
            table = vec![0u32; (slots.len() * 2).next_power_of_two()];
            let mask = table.len() - 1;
            for (n, slot) in slots.iter().enumerate() {
                let mut i = key_hash(slot.scope, &slot.suffix(&bytes)) as usize & mask;
                while table[i] != 0 {
                    i = (i + 1) & mask;
                }
                table[i] = n as u32 + 1;
            }
        }
        Record { start, bytes, whole, slots, table }
    }

    /// The slot of `(scope, suffix)`: through the hash table, or by binary search.
    fn find(&self, scope: u8, suffix: &[u8]) -> Option<&Slot> {
        let prefix = key_prefix(suffix);
        if !self.table.is_empty() {
            let mask = self.table.len() - 1;
            let mut i = key_hash(scope, suffix) as usize & mask;
            loop {
                let n = self.table[i] as usize;
                let slot = self.slots.get(n.checked_sub(1)?)?;
                if slot.scope == scope
                    && slot.prefix == prefix
                    && slot.key_len as usize == suffix.len()
                    && (suffix.len() <= 8 || slot.suffix(&self.bytes).as_ref() == suffix)
                {
                    return Some(slot);
                }
                i = (i + 1) & mask;
            }
        }
        self.slots
            .binary_search_by(|x| x.cmp_key(&self.bytes, scope, suffix, prefix))
            .ok()
            .map(|i| &self.slots[i])
    }

    /// The first slot at or after `(scope, suffix)`.
    fn lower_bound(&self, scope: u8, suffix: &[u8]) -> usize {
        let prefix = key_prefix(suffix);
        self.slots.partition_point(|x| x.cmp_key(&self.bytes, scope, suffix, prefix).is_lt())
    }

    /// The full key of `slot` (scope, inode number, suffix).
    fn key(&self, ino: u64, slot: &Slot) -> Vec<u8> {
        let suffix = slot.suffix(&self.bytes);
        let mut k = Vec::with_capacity(9 + suffix.len());
        k.push(slot.scope);
        k.extend_from_slice(&ino.to_be_bytes());
        k.extend_from_slice(&suffix);
        k
    }
}

pub(super) fn read_only(what: &str) -> Error {
    Error::new(ErrorKind::ReadOnly, format!("{what}: a pack image is read-only"))
}

impl Inner {
    fn read_at(&self, buf: &mut [u8], off: u64) -> Result<()> {
        self.preads.fetch_add(1, Ordering::Relaxed);
        self.file.read_exact_at(buf, off).map_err(|e| {
            if e.kind() == std::io::ErrorKind::UnexpectedEof {
                format::bad(&self.what, "truncated")
            } else {
                Error::new(ErrorKind::Backend, format!("{}: {e}", self.what))
            }
        })
    }

    /// The record of `ino`, from the caches or with one read (two or more for records larger
    /// than [`WHOLE_RECORD`]).
    fn record(&self, ino: u64) -> Result<Arc<Record>> {
        if let Some(r) = self.dirs.lock().get(&ino) {
            return Ok(r.clone());
        }
        if let Some((_, r)) = self.recent.lock().1.iter().find(|(i, _)| *i == ino) {
            return Ok(r.clone());
        }
        let (start, end) = (self.index[ino as usize - 1], self.index[ino as usize]);
        let len = end - start;
        let (bytes, whole) = if len <= WHOLE_RECORD {
            let mut all = vec![0u8; len as usize];
            self.read_at(&mut all, start)?;
            (all, true)
        } else {
            let mut probe = vec![0u8; META_PROBE as usize];
            self.read_at(&mut probe, start)?;
            let m = format::meta_len(&probe)
                .filter(|&m| m as u64 <= len)
                .ok_or_else(|| self.corrupt(ino, "record too short"))?;
            if m > probe.len() {
                probe = vec![0u8; m];
                self.read_at(&mut probe, start)?;
            }
            probe.truncate(m);
            (probe, false)
        };
        let (slots, _) = format::decode_meta(ino, &bytes, len, &self.what)?;
        let rec = Arc::new(Record::new(start, bytes, whole, slots));
        let attrs = rec.find(scope::INODE, &[]);
        let is_dir = attrs.is_some_and(|a| a.len > 1 && rec.bytes[a.at as usize + 1] == 2);
        if is_dir {
            let mut names = self.names.lock();
            for slot in rec.slots.iter().filter(|x| x.scope == DENTRY_SCOPE) {
                if let Some(k) =
                    NameKey::new(ino, &slot.suffix(&rec.bytes)).filter(|_| slot.at >> 56 == 0)
                {
                    names.insert(k, slot.at | (slot.kind as u64) << 56);
                }
            }
            drop(names);
            self.dirs.lock().insert(ino, rec.clone());
        } else {
            let mut recent = self.recent.lock();
            let (next, slots) = &mut *recent;
            if slots.len() < RECENT {
                slots.push((ino, rec.clone()));
            } else {
                slots[*next] = (ino, rec.clone());
                *next = (*next + 1) % RECENT;
            }
        }
        Ok(rec)
    }

    fn corrupt(&self, ino: u64, why: &str) -> Error {
        format::bad(&self.what, &format!("inode {ino}: {why}"))
    }

    /// The stored value of `slot` (a block value gets its data tag, as in a store).
    fn value(&self, ino: u64, rec: &Record, slot: &Slot) -> Result<Vec<u8>> {
        if let Some(v) = slot.inline_value(&rec.bytes) {
            return Ok(v);
        }
        if slot.scope != BLOCK_SCOPE {
            return Err(self.corrupt(ino, "bad entry type"));
        }
        let mut v = Vec::with_capacity(1 + slot.len as usize);
        v.push(0);
        if rec.whole {
            v.extend_from_slice(&rec.bytes[slot.at as usize..slot.at as usize + slot.len as usize]);
        } else {
            v.resize(1 + slot.len as usize, 0);
            self.read_at(&mut v[1..], rec.start + slot.at)?;
        }
        if crc32c(&v[1..]) != slot.crc {
            return Err(self.corrupt(ino, "data checksum mismatch"));
        }
        Ok(v)
    }

    fn inodes(&self) -> u64 {
        self.index.len() as u64 - 1
    }

    pub(super) fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        let Some(scope) = key.first().filter(|s| RECORD_SCOPES.contains(s)) else {
            return Ok(self.globals.iter().find(|(k, _)| k == key).map(|(_, v)| v.clone()));
        };
        let Some(ino) = key.get(1..9).map(|b| u64::from_be_bytes(b.try_into().unwrap())) else {
            return Ok(None);
        };
        if ino == 0 || ino > self.inodes() {
            return Ok(None);
        }
        if *scope == DENTRY_SCOPE {
            let found =
                NameKey::new(ino, &key[9..]).and_then(|k| self.names.lock().get(&k).copied());
            if let Some(child) = found {
                let kind = FileType::from_u8((child >> 56) as u8)?;
                return Ok(Some(Dentry { ino: child & ((1 << 56) - 1), kind }.encode()));
            }
        }
        let rec = self.record(ino)?;
        match rec.find(*scope, &key[9..]) {
            Some(slot) => self.value(ino, &rec, slot).map(Some),
            None => Ok(None),
        }
    }

    pub(super) fn get_range(
        &self,
        start: &[u8],
        end: &[u8],
        limit: usize,
        reverse: bool,
    ) -> Result<Vec<KeyValue>> {
        if let Some(out) = self.one_record_range(start, end, limit, reverse)? {
            return Ok(out);
        }
        let mut out = Vec::new();
        let full = |out: &Vec<KeyValue>| limit != 0 && out.len() >= limit;
        let in_range = |k: &[u8]| start <= k && k < end;
        let mut scopes: Vec<u8> =
            RECORD_SCOPES.iter().copied().chain(self.globals.iter().map(|(k, _)| k[0])).collect();
        scopes.sort();
        scopes.dedup();
        if reverse {
            scopes.reverse();
        }
        for s in scopes {
            if start.first().is_some_and(|&f| s < f) || end.first().is_none_or(|&l| s > l) {
                continue;
            }
            if !RECORD_SCOPES.contains(&s) {
                let mut g: Vec<&KeyValue> =
                    self.globals.iter().filter(|(k, _)| k[0] == s && in_range(k)).collect();
                if reverse {
                    g.reverse();
                }
                for kv in g {
                    if full(&out) {
                        return Ok(out);
                    }
                    out.push(kv.clone());
                }
                continue;
            }
            let (lo, hi) = self.ino_bounds(s, start, end);
            let mut inos: Box<dyn Iterator<Item = u64>> =
                if reverse { Box::new((lo..=hi).rev()) } else { Box::new(lo..=hi) };
            for ino in &mut inos {
                let rec = self.record(ino)?;
                let mut found: Vec<&Slot> = rec.slots.iter().filter(|x| x.scope == s).collect();
                if reverse {
                    found.reverse();
                }
                for x in found {
                    let k = rec.key(ino, x);
                    if in_range(&k) {
                        if full(&out) {
                            return Ok(out);
                        }
                        out.push((k, self.value(ino, &rec, x)?));
                    }
                }
            }
        }
        Ok(out)
    }

    /// The range reads of the file-system layer (an inode's attributes, a directory, its
    /// xattrs or blocks) stay within one record: answered from it directly. `None` for other
    /// ranges.
    fn one_record_range(
        &self,
        start: &[u8],
        end: &[u8],
        limit: usize,
        reverse: bool,
    ) -> Result<Option<Vec<KeyValue>>> {
        let (Some(&s), Some(&e)) = (start.first(), end.first()) else { return Ok(None) };
        if !RECORD_SCOPES.contains(&s) || start.len() < 9 || end.len() < 9 {
            return Ok(None);
        }
        let ino = u64::from_be_bytes(start[1..9].try_into().unwrap());
        let end_ino = u64::from_be_bytes(end[1..9].try_into().unwrap());
        // The end is in the same record, or is the start of the next inode's keys.
        let same = e == s && (end_ino == ino || (end_ino == ino.wrapping_add(1) && end.len() == 9));
        if !same {
            return Ok(None);
        }
        if ino == 0 || ino > self.inodes() {
            return Ok(Some(Vec::new()));
        }
        let rec = self.record(ino)?;
        let from = rec.lower_bound(s, &start[9..]);
        let end_prefix = key_prefix(end.get(9..).unwrap_or_default());
        let in_end =
            |x: &Slot| end_ino != ino || x.cmp_key(&rec.bytes, s, &end[9..], end_prefix).is_lt();
        let within: Vec<&Slot> =
            rec.slots[from..].iter().take_while(|x| x.scope == s && in_end(x)).collect();
        let n = if limit == 0 { within.len() } else { limit.min(within.len()) };
        let mut out = Vec::with_capacity(n);
        let picked: Box<dyn Iterator<Item = &&Slot>> = if reverse {
            Box::new(within.iter().rev().take(n))
        } else {
            Box::new(within.iter().take(n))
        };
        for x in picked {
            out.push((rec.key(ino, x), self.value(ino, &rec, x)?));
        }
        Ok(Some(out))
    }

    /// The inode numbers of scope `s` whose keys can fall in `[start, end)`.
    fn ino_bounds(&self, s: u8, start: &[u8], end: &[u8]) -> (u64, u64) {
        let padded = |k: &[u8]| {
            let mut b = [0u8; 8];
            let rest = &k[1.min(k.len())..k.len().min(9)];
            b[..rest.len()].copy_from_slice(rest);
            u64::from_be_bytes(b)
        };
        let lo = if start.first() == Some(&s) { padded(start).max(1) } else { 1 };
        let hi = if end.first() == Some(&s) {
            // Keys of inode X are `s X suffix`: below `end` when X < end's number, or X equals
            // it and `end` goes on past the number.
            let e = padded(end);
            if end.len() > 9 {
                e
            } else {
                e.saturating_sub(1)
            }
        } else {
            u64::MAX
        };
        (lo, hi.min(self.inodes()))
    }
}
