//! Building a pack image: from a store (one snapshot of its backend) or from a host directory.
//!
//! Inodes are renumbered 1..=N in breadth-first order from the root, so that the reader's
//! index is one offset per inode. The image is written to an unnamed file (`O_TMPFILE`) in
//! the destination's directory, synced, and only then given a name: an interrupted build
//! (even SIGKILL) leaves nothing behind, and no image under the final name until it is
//! complete. Where the file system has no `O_TMPFILE`, a temporary name is used instead
//! (`.NAME.txvfs-pack-PID-N`, removed after an error but left behind by SIGKILL).

use super::format::{self, crc32c, Entry, Header, HEADER_LEN};
use crate::error::{Error, ErrorKind, Result};
use crate::kv::{self, Backend, Txn};
use crate::schema::{
    self, scope, Block, Dentry, DirAttr, FileType, Inode, Meta, Superblock, ROOT_INO,
};
use std::collections::{HashMap, VecDeque};
use std::fs::File;
use std::io::{BufWriter, Seek, SeekFrom, Write};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// What a build has done so far (passed to the progress callback) or did in all.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PackStats {
    /// Inodes written.
    pub inodes: u64,
    /// Bytes of file data written.
    pub data_bytes: u64,
    /// Bytes of the image so far.
    pub image_bytes: u64,
}

/// A progress callback, called after every inode.
pub type ProgressFn<'a> = &'a mut dyn FnMut(&PackStats);

/// Blocks buffered in memory per file before the builder reads them a second time instead.
const BUFFER_LIMIT: usize = 4 << 20;

/// Produces a file's blocks by calling its argument with each (block index, bytes).
type BlockSource<'a> = dyn FnMut(&mut dyn FnMut(u64, &[u8]) -> Result<()>) -> Result<()> + 'a;

/// Writes records in inode order, then the globals, the index and the header.
pub(super) struct Writer {
    out: BufWriter<File>,
    /// The temporary name: only during the final link when the file is unnamed (`O_TMPFILE`),
    /// from the start otherwise.
    tmp: PathBuf,
    /// The file has no name yet (`O_TMPFILE`).
    unnamed: bool,
    dest: PathBuf,
    pub(super) index: Vec<u64>,
    pub(super) stats: PackStats,
}

impl Writer {
    pub(super) fn create(dest: &Path) -> Result<Writer> {
        let name = dest.file_name().ok_or_else(|| {
            Error::new(ErrorKind::Invalid, format!("{}: not a file name", dest.display()))
        })?;
        let mut tmp_name = std::ffi::OsString::from(".");
        tmp_name.push(name);
        // The process id, and a counter for builds running at once in one process.
        static BUILDS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let n = BUILDS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        tmp_name.push(format!(".txvfs-pack-{}-{n}", std::process::id()));
        let tmp = dest.with_file_name(tmp_name);
        let dir = match dest.parent() {
            Some(d) if !d.as_os_str().is_empty() => d,
            _ => Path::new("."),
        };
        let (file, unnamed) = match unnamed_file(dir) {
            Ok(f) => (f, true),
            // The file system has no unnamed files: a temporary name instead.
            Err(e)
                if matches!(
                    e.raw_os_error(),
                    Some(libc::EOPNOTSUPP | libc::EISDIR | libc::EINVAL)
                ) =>
            {
                (File::create(&tmp).map_err(|e| Error::host_io(&tmp, e))?, false)
            }
            Err(e) => return Err(Error::host_io(dir, e)),
        };
        let out = BufWriter::with_capacity(1 << 20, file);
        let mut w = Writer {
            out,
            tmp,
            unnamed,
            dest: dest.to_path_buf(),
            index: vec![HEADER_LEN as u64],
            stats: PackStats::default(),
        };
        w.write(&[0u8; HEADER_LEN])?;
        Ok(w)
    }

    /// Writes the record of the next inode: `entries` (no blocks) and its blocks, produced by
    /// `blocks` (called twice when the first pass was too large to buffer).
    pub(super) fn record(
        &mut self,
        entries: Vec<Entry>,
        blocks: &mut BlockSource<'_>,
    ) -> Result<()> {
        let ino = self.index.len() as u64;
        let mut sizes: Vec<(u64, u32, u32)> = Vec::new();
        let mut buffer: Option<Vec<u8>> = Some(Vec::new());
        blocks(&mut |idx, data| {
            sizes.push((idx, data.len() as u32, crc32c(data)));
            if let Some(b) = buffer.as_mut() {
                if b.len() + data.len() > BUFFER_LIMIT {
                    buffer = None;
                } else {
                    b.extend_from_slice(data);
                }
            }
            Ok(())
        })?;
        // Blocks first: `B` sorts before `D`, `I` and `X`, and their bytes follow in this order.
        let mut all: Vec<Entry> =
            sizes.iter().map(|&(index, len, crc)| Entry::Block { index, len, crc }).collect();
        let mut rest = entries;
        rest.sort_by(|a, b| a.key().cmp(&b.key()));
        all.extend(rest);
        let meta = format::encode_meta(ino, &all)?;
        self.write(&meta)?;
        match buffer {
            Some(b) => self.write(&b)?,
            None => {
                let mut n = 0;
                blocks(&mut |idx, data| {
                    if sizes.get(n).is_none_or(|s| {
                        s.0 != idx || s.1 as usize != data.len() || s.2 != crc32c(data)
                    }) {
                        return Err(Error::new(
                            ErrorKind::Conflict,
                            "a file changed while it was packed",
                        ));
                    }
                    n += 1;
                    self.write(data)
                })?;
            }
        }
        self.stats.inodes += 1;
        self.stats.data_bytes += sizes.iter().map(|s| s.1 as u64).sum::<u64>();
        self.index.push(self.stats.image_bytes);
        Ok(())
    }

    fn write(&mut self, b: &[u8]) -> Result<()> {
        self.out.write_all(b).map_err(|e| Error::host_io(&self.tmp, e))?;
        self.stats.image_bytes += b.len() as u64;
        Ok(())
    }

    /// Writes globals, index and header, syncs, and renames the image into place.
    pub(super) fn finish(mut self, globals: &[(Vec<u8>, Vec<u8>)]) -> Result<PackStats> {
        let g = format::encode_globals(globals);
        let globals_off = self.stats.image_bytes;
        self.write(&g)?;
        let index_off = self.stats.image_bytes;
        let index = format::encode_index(&self.index);
        self.write(&index)?;
        let header = Header {
            image_len: self.stats.image_bytes,
            inodes: self.index.len() as u64 - 1,
            globals_off,
            globals_len: g.len() as u32,
            globals_crc: crc32c(&g),
            index_off,
            index_crc: crc32c(&index),
        };
        let tmp = self.tmp.clone();
        self.out.flush().map_err(|e| Error::host_io(&tmp, e))?;
        let file = self.out.get_mut();
        file.seek(SeekFrom::Start(0))
            .and_then(|_| file.write_all(&header.encode()))
            .and_then(|_| file.sync_all())
            .map_err(|e| Error::host_io(&tmp, e))?;
        if self.unnamed {
            // A new name links the complete file at once; an existing image is replaced by
            // linking a temporary name and renaming it over (only SIGKILL between those two
            // calls, after the image is complete and synced, can leave that name behind).
            if link_unnamed(self.out.get_ref(), &self.dest).is_err() {
                link_unnamed(self.out.get_ref(), &tmp).map_err(|e| Error::host_io(&tmp, e))?;
                self.unnamed = false;
                std::fs::rename(&tmp, &self.dest).map_err(|e| Error::host_io(&self.dest, e))?;
            }
        } else {
            std::fs::rename(&tmp, &self.dest).map_err(|e| Error::host_io(&self.dest, e))?;
        }
        if let Some(dir) = self.dest.parent().filter(|d| !d.as_os_str().is_empty()) {
            File::open(dir).and_then(|d| d.sync_all()).map_err(|e| Error::host_io(dir, e))?;
        }
        Ok(self.stats)
    }
}

/// Opens an unnamed file for writing in `dir` (`O_TMPFILE`): it disappears if the process
/// dies before [`link_unnamed`] names it.
fn unnamed_file(dir: &Path) -> std::io::Result<File> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .mode(0o666)
        .custom_flags(libc::O_TMPFILE)
        .open(dir)
}

/// Gives the unnamed file `f` the name `to` (which must not exist), through its
/// `/proc/self/fd` link (no privilege needed), or `AT_EMPTY_PATH` where `/proc` is missing.
fn link_unnamed(f: &File, to: &Path) -> std::io::Result<()> {
    use std::os::unix::io::AsRawFd;
    let cstr = |p: &Path| {
        std::ffi::CString::new(p.as_os_str().as_bytes())
            .map_err(|_| std::io::Error::from_raw_os_error(libc::EINVAL))
    };
    let to = cstr(to)?;
    let proc_path = cstr(Path::new(&format!("/proc/self/fd/{}", f.as_raw_fd())))?;
    // SAFETY: valid C strings; linkat(2) reads them only during the call.
    if unsafe {
        libc::linkat(
            libc::AT_FDCWD,
            proc_path.as_ptr(),
            libc::AT_FDCWD,
            to.as_ptr(),
            libc::AT_SYMLINK_FOLLOW,
        )
    } == 0
    {
        return Ok(());
    }
    let err = std::io::Error::last_os_error();
    if err.raw_os_error() != Some(libc::ENOENT) || Path::new("/proc/self/fd").exists() {
        return Err(err);
    }
    // SAFETY: as above; the empty path names the descriptor itself.
    if unsafe {
        libc::linkat(f.as_raw_fd(), c"".as_ptr(), libc::AT_FDCWD, to.as_ptr(), libc::AT_EMPTY_PATH)
    } == 0
    {
        return Ok(());
    }
    Err(std::io::Error::last_os_error())
}

impl Drop for Writer {
    fn drop(&mut self) {
        // An unnamed file vanishes with its descriptor; a temporary name is removed (after a
        // successful rename it no longer exists).
        if !self.unnamed {
            let _ = std::fs::remove_file(&self.tmp);
        }
    }
}

pub(super) fn inline(scope: u8, suffix: &[u8], value: Vec<u8>) -> Entry {
    Entry::Inline { scope, suffix: suffix.to_vec(), value }
}

/// The store-wide keys of an image of `inodes` inodes holding `bytes` of file data.
pub(super) fn globals(sb: &Superblock, inodes: u64, bytes: u64) -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut g = vec![
        (schema::meta_key(Meta::NextIno), (inodes + 1).to_le_bytes().to_vec()),
        (schema::meta_key(Meta::Inodes), inodes.to_le_bytes().to_vec()),
        (schema::meta_key(Meta::Bytes), bytes.to_le_bytes().to_vec()),
        (schema::super_key(), sb.encode()),
    ];
    g.sort();
    g
}

/// Gives inode numbers 1, 2, ... in the order inodes are first seen.
pub(super) struct Numbering<K> {
    map: HashMap<K, u64>,
    pub(super) next: u64,
}

impl<K: std::hash::Hash + Eq> Numbering<K> {
    pub(super) fn new() -> Self {
        Numbering { map: HashMap::new(), next: 0 }
    }

    /// The new number of `old`, and whether it was just given.
    pub(super) fn get(&mut self, old: K) -> (u64, bool) {
        let next = &mut self.next;
        let mut fresh = false;
        let n = *self.map.entry(old).or_insert_with(|| {
            fresh = true;
            *next += 1;
            *next
        });
        (n, fresh)
    }
}

/// Packs the tree of the store on `backend`, read at one snapshot (one transaction that
/// only reads), into the image `dest`. Files unlinked while open (orphans) and data staged
/// by running transactions are left out: the image is what a reader of that snapshot sees.
pub fn pack_backend(backend: &dyn Backend, dest: &Path, progress: ProgressFn) -> Result<PackStats> {
    let mut tx = backend.begin()?;
    let sb = Superblock::decode(&tx.snapshot_get(&schema::super_key())?.ok_or_else(|| {
        Error::new(ErrorKind::NotFound, format!("{}: no store there", backend.describe()))
    })?)?;
    let mut w = Writer::create(dest)?;
    let mut numbers = Numbering::new();
    numbers.get(ROOT_INO);
    let mut queue = VecDeque::from([ROOT_INO]);
    let mut file_bytes = 0u64;
    while let Some(old) = queue.pop_front() {
        let mut entries = Vec::new();
        let (s, e) = schema::inode_range(old);
        for (k, v) in scan(&mut *tx, &s, &e)? {
            let suffix = &k[9..];
            let value = match schema::dir_attr_of(&k) {
                None if suffix.is_empty() => {
                    let mut inode = Inode::decode(&v)?;
                    inode.has_chunks = false;
                    if inode.kind == FileType::File {
                        file_bytes += inode.size;
                    }
                    inode.encode()
                }
                Some(DirAttr::Parent) => {
                    numbers.get(kv::decode_counter(Some(&v))).0.to_le_bytes().to_vec()
                }
                _ => v,
            };
            entries.push(inline(scope::INODE, suffix, value));
        }
        if entries.is_empty() {
            return Err(Error::new(
                ErrorKind::Corrupt,
                format!("corrupt store: inode {old} is named but missing"),
            ));
        }
        let (s, e) = schema::dentry_range(old);
        for (k, v) in scan(&mut *tx, &s, &e)? {
            let d = Dentry::decode(&v)?;
            let (ino, fresh) = numbers.get(d.ino);
            if fresh {
                queue.push_back(d.ino);
            }
            entries.push(Entry::Dentry {
                name: schema::dentry_name(&k).to_vec(),
                ino,
                kind: d.kind,
            });
        }
        let (s, e) = schema::xattr_range(old);
        for (k, v) in scan(&mut *tx, &s, &e)? {
            entries.push(inline(scope::XATTR, schema::xattr_name(&k), v));
        }
        w.record(entries, &mut |emit| {
            let (s, e) = schema::block_range(old, 0);
            let mut from = s;
            loop {
                let page = tx.snapshot_get_range(&from, &e, 256, false)?;
                let Some((last, _)) = page.last() else { return Ok(()) };
                from = last.clone();
                from.push(0);
                for (k, v) in &page {
                    let idx = schema::block_index(k)?;
                    let data = match Block::decode(v)? {
                        Block::Data(d) => d,
                        Block::Chunk { id, offset, len } => {
                            chunk_slice(&mut *tx, old, idx, id, offset, len)?
                        }
                    };
                    emit(idx, &data)?;
                }
            }
        })?;
        progress(&w.stats);
    }
    let inodes = w.stats.inodes;
    w.finish(&globals(&sb, inodes, file_bytes))
}

/// Packs the store at `uri` (which must exist) into `dest`; see [`pack_backend`].
pub fn pack_store(uri: &str, dest: &Path, progress: ProgressFn) -> Result<PackStats> {
    pack_backend(&*kv::open_existing(uri)?, dest, progress)
}

/// All pairs of a small range (an inode's attributes, a directory, xattrs).
fn scan(tx: &mut dyn Txn, s: &[u8], e: &[u8]) -> Result<Vec<kv::KeyValue>> {
    tx.snapshot_get_range(s, e, 0, false)
}

fn chunk_slice(
    tx: &mut dyn Txn,
    ino: u64,
    idx: u64,
    id: u64,
    offset: u32,
    len: u32,
) -> Result<Vec<u8>> {
    let stored = tx.snapshot_get(&schema::chunk_key(ino, idx, id))?.ok_or_else(|| {
        Error::new(
            ErrorKind::Corrupt,
            format!("corrupt store: block {idx} of inode {ino} refers to a missing chunk"),
        )
    })?;
    match Block::decode(&stored)? {
        Block::Data(d) => {
            d.get(offset as usize..offset as usize + len as usize).map(<[u8]>::to_vec)
        }
        Block::Chunk { .. } => None,
    }
    .ok_or_else(|| {
        Error::new(
            ErrorKind::Corrupt,
            format!("corrupt store: bad chunk for block {idx} of inode {ino}"),
        )
    })
}
