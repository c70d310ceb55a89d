//! Value encodings: every value starts with the format version byte, then little-endian fields.

use super::{corrupt, FORMAT_VERSION};
use crate::error::{Error, ErrorKind, Result};

/// A transaction that writes blocks ahead: who runs it and until when it counts as alive.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StageRecord {
    /// The process running it (see `fs::leases`).
    pub process: u64,
    /// Lease expiry, in milliseconds since the Unix epoch.
    pub expires_ms: u64,
}

impl StageRecord {
    /// Encodes the record.
    pub fn encode(&self) -> Vec<u8> {
        let mut v = vec![FORMAT_VERSION];
        v.extend_from_slice(&self.process.to_le_bytes());
        v.extend_from_slice(&self.expires_ms.to_le_bytes());
        v
    }
    /// Decodes a record.
    pub fn decode(v: &[u8]) -> Result<StageRecord> {
        check_version(v, "staging record")?;
        let mut r = Reader { buf: &v[1..], what: "staging record" };
        Ok(StageRecord { process: r.u64()?, expires_ms: r.u64()? })
    }
}

/// One lock in a lock record: a whole-file (`flock`) lock or a byte range `[start, end)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LockSpec {
    /// A whole-file lock (flock) rather than a byte range (fcntl); the two never conflict.
    pub whole_file: bool,
    /// Exclusive (write) rather than shared (read).
    pub exclusive: bool,
    /// First byte (0 for whole-file locks).
    pub start: u64,
    /// End, exclusive (`u64::MAX`: to the end of the file and beyond).
    pub end: u64,
}

impl LockSpec {
    /// True if the two locks, held by different owners, cannot coexist.
    pub fn conflicts(&self, other: &LockSpec) -> bool {
        self.whole_file == other.whole_file
            && (self.exclusive || other.exclusive)
            && self.start < other.end
            && other.start < self.end
    }
}

/// A holder's locks on one file, valid until `expires_ms` (Unix time in milliseconds) unless
/// renewed: a crashed holder's locks lapse by themselves.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LockRecord {
    /// Lease expiry, in milliseconds since the Unix epoch.
    pub expires_ms: u64,
    /// The locks held.
    pub locks: Vec<LockSpec>,
}

impl LockRecord {
    /// Encodes the record.
    pub fn encode(&self) -> Vec<u8> {
        let mut v = vec![FORMAT_VERSION];
        v.extend_from_slice(&self.expires_ms.to_le_bytes());
        v.extend_from_slice(&(self.locks.len() as u32).to_le_bytes());
        for l in &self.locks {
            v.push(l.whole_file as u8 | (l.exclusive as u8) << 1);
            v.extend_from_slice(&l.start.to_le_bytes());
            v.extend_from_slice(&l.end.to_le_bytes());
        }
        v
    }
    /// Decodes a record.
    pub fn decode(v: &[u8]) -> Result<LockRecord> {
        check_version(v, "lock record")?;
        let mut r = Reader { buf: &v[1..], what: "lock record" };
        let expires_ms = r.u64()?;
        let n = r.u32()?;
        let mut locks = Vec::new();
        for _ in 0..n {
            let flags = r.u8()?;
            locks.push(LockSpec {
                whole_file: flags & 1 != 0,
                exclusive: flags & 2 != 0,
                start: r.u64()?,
                end: r.u64()?,
            });
        }
        Ok(LockRecord { expires_ms, locks })
    }
}

pub(super) fn check_version(v: &[u8], what: &str) -> Result<()> {
    match v.first() {
        Some(&ver) if ver >= 1 && ver <= FORMAT_VERSION => Ok(()),
        Some(&ver) => Err(Error::new(
            ErrorKind::Corrupt,
            format!("{what} has format version {ver}; this txvfs reads up to {FORMAT_VERSION}"),
        )),
        None => Err(corrupt(&format!("empty {what} value"))),
    }
}

pub(super) struct Reader<'a> {
    pub(super) buf: &'a [u8],
    pub(super) what: &'static str,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8]> {
        if self.buf.len() < n {
            return Err(corrupt(&format!("{} value too short", self.what)));
        }
        let (a, b) = self.buf.split_at(n);
        self.buf = b;
        Ok(a)
    }
    pub(super) fn u8(&mut self) -> Result<u8> {
        Ok(self.take(1)?[0])
    }
    fn u32(&mut self) -> Result<u32> {
        Ok(u32::from_le_bytes(self.take(4)?.try_into().unwrap()))
    }
    pub(super) fn u64(&mut self) -> Result<u64> {
        Ok(u64::from_le_bytes(self.take(8)?.try_into().unwrap()))
    }
    fn i64(&mut self) -> Result<i64> {
        Ok(self.u64()? as i64)
    }
}

/// The superblock: fixed at creation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Superblock {
    /// Format version the store was created with.
    pub version: u8,
    /// Bytes per data block.
    pub block_size: u32,
    /// Files up to this size keep their data in the inode.
    pub inline_limit: u32,
    /// Creation time, ns since the epoch.
    pub created_ns: i64,
}

impl Superblock {
    /// Encodes the superblock.
    pub fn encode(&self) -> Vec<u8> {
        let mut v = vec![self.version];
        v.extend_from_slice(&self.block_size.to_le_bytes());
        v.extend_from_slice(&self.inline_limit.to_le_bytes());
        v.extend_from_slice(&self.created_ns.to_le_bytes());
        v
    }
    /// Decodes a superblock, refusing formats newer than this code.
    pub fn decode(v: &[u8]) -> Result<Superblock> {
        check_version(v, "superblock")?;
        let mut r = Reader { buf: v, what: "superblock" };
        let sb = Superblock {
            version: r.u8()?,
            block_size: r.u32()?,
            inline_limit: r.u32()?,
            created_ns: r.i64()?,
        };
        if sb.block_size == 0 {
            return Err(corrupt("block size 0"));
        }
        Ok(sb)
    }
}

/// The type of a file.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FileType {
    /// A regular file.
    File,
    /// A directory.
    Dir,
    /// A symbolic link.
    Symlink,
    /// A named pipe (FIFO): only its name and attributes live in the store.
    Fifo,
    /// A character device node (its device number is kept, never opened by the store).
    CharDevice,
    /// A block device node.
    BlockDevice,
    /// A Unix domain socket's name.
    Socket,
}

impl FileType {
    /// The `S_IFMT` bits of this type.
    pub fn mode_bits(self) -> u32 {
        match self {
            FileType::File => libc::S_IFREG,
            FileType::Dir => libc::S_IFDIR,
            FileType::Symlink => libc::S_IFLNK,
            FileType::Fifo => libc::S_IFIFO,
            FileType::CharDevice => libc::S_IFCHR,
            FileType::BlockDevice => libc::S_IFBLK,
            FileType::Socket => libc::S_IFSOCK,
        }
    }
    /// The type whose `S_IFMT` bits `mode` carries, if any.
    pub fn from_mode(mode: u32) -> Option<FileType> {
        [
            FileType::File,
            FileType::Dir,
            FileType::Symlink,
            FileType::Fifo,
            FileType::CharDevice,
            FileType::BlockDevice,
            FileType::Socket,
        ]
        .into_iter()
        .find(|t| t.mode_bits() == mode & libc::S_IFMT)
    }
    /// True for the special files (FIFOs, device nodes, sockets): attributes without data.
    pub fn is_special(self) -> bool {
        !matches!(self, FileType::File | FileType::Dir | FileType::Symlink)
    }
    /// The type of a stored type byte (the inverse of [`FileType::to_u8`]).
    pub(crate) fn from_u8(b: u8) -> Result<FileType> {
        match b {
            1 => Ok(FileType::File),
            2 => Ok(FileType::Dir),
            3 => Ok(FileType::Symlink),
            4 => Ok(FileType::Fifo),
            5 => Ok(FileType::CharDevice),
            6 => Ok(FileType::BlockDevice),
            7 => Ok(FileType::Socket),
            _ => Err(corrupt("unknown file type")),
        }
    }
    /// The byte that stands for the type in stored values.
    pub(crate) fn to_u8(self) -> u8 {
        match self {
            FileType::File => 1,
            FileType::Dir => 2,
            FileType::Symlink => 3,
            FileType::Fifo => 4,
            FileType::CharDevice => 5,
            FileType::BlockDevice => 6,
            FileType::Socket => 7,
        }
    }
}

/// A directory entry's value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Dentry {
    /// The child's inode number.
    pub ino: u64,
    /// The child's type (so readdir needs no inode reads).
    pub kind: FileType,
}

impl Dentry {
    /// Encodes the entry.
    pub fn encode(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(10);
        v.push(FORMAT_VERSION);
        v.extend_from_slice(&self.ino.to_le_bytes());
        v.push(self.kind.to_u8());
        v
    }
    /// Decodes an entry.
    pub fn decode(v: &[u8]) -> Result<Dentry> {
        check_version(v, "directory entry")?;
        let mut r = Reader { buf: &v[1..], what: "directory entry" };
        Ok(Dentry { ino: r.u64()?, kind: FileType::from_u8(r.u8()?)? })
    }
}

/// An inode's stored attributes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Inode {
    /// File type.
    pub kind: FileType,
    /// Permission bits (`0o7777`).
    pub perm: u32,
    /// Owner.
    pub uid: u32,
    /// Group.
    pub gid: u32,
    /// Link count (for directories, the base that the `n` hot attribute adjusts).
    pub nlink: u32,
    /// Size in bytes.
    pub size: u64,
    /// Access time, ns since the epoch.
    pub atime: i64,
    /// Modification time, ns.
    pub mtime: i64,
    /// Status change time, ns.
    pub ctime: i64,
    /// True while the data lives in `inline` rather than in blocks.
    pub is_inline: bool,
    /// True once a block of the file may be held in a chunk (`C` keys), which must then be
    /// deleted with the block.
    pub has_chunks: bool,
    /// The file's block size as a power of two (`1 << block_shift` bytes), chosen when the
    /// file was created; 0 means the store's block size. A SQLite database gets its page size,
    /// so writing a page rewrites one block of that size, not a 64 KiB one.
    pub block_shift: u8,
    /// True while the inode has had no extended attribute since it was created, so deleting
    /// it need not look for any (a range read per delete). Set at creation, cleared by the
    /// first `setxattr` and never set again; inodes written before the flag existed lack it
    /// and are looked through.
    pub no_xattrs: bool,
    /// The innermost quota tree the inode counts toward: the inode number of that tree's top
    /// directory (the top directory carries its own number), 0 for none. Inherited from the
    /// parent directory at creation; set for a whole subtree by setting a quota. Inodes
    /// without one are encoded as before quotas existed.
    pub quota: u64,
    /// Inline data (small files) or the symlink target; `inline.len() == size` when inline.
    /// A device node keeps its device number here (8 bytes, little-endian, not inline).
    pub inline: Vec<u8>,
}

impl Inode {
    /// The file's block size in bytes: its own, or `store_default` (the store's).
    pub fn block_size(&self, store_default: u32) -> u64 {
        if self.block_shift == 0 {
            store_default as u64
        } else {
            1u64 << self.block_shift
        }
    }

    /// The device number of a device node (0 for every other type).
    pub fn rdev(&self) -> u64 {
        match (self.kind, <[u8; 8]>::try_from(self.inline.as_slice())) {
            (FileType::CharDevice | FileType::BlockDevice, Ok(b)) => u64::from_le_bytes(b),
            _ => 0,
        }
    }

    /// Encodes the inode.
    pub fn encode(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(48 + self.inline.len());
        v.push(FORMAT_VERSION);
        v.push(self.kind.to_u8());
        for x in [self.perm, self.uid, self.gid, self.nlink] {
            v.extend_from_slice(&x.to_le_bytes());
        }
        v.extend_from_slice(&self.size.to_le_bytes());
        for t in [self.atime, self.mtime, self.ctime] {
            v.extend_from_slice(&t.to_le_bytes());
        }
        // Flag 4: a block-shift byte follows (only files with their own block size have it).
        // Flag 16: a quota tree's number follows (8 bytes; only inodes inside a quota tree).
        v.push(
            self.is_inline as u8
                | (self.has_chunks as u8) << 1
                | ((self.block_shift != 0) as u8) << 2
                | (self.no_xattrs as u8) << 3
                | ((self.quota != 0) as u8) << 4,
        );
        if self.block_shift != 0 {
            v.push(self.block_shift);
        }
        if self.quota != 0 {
            v.extend_from_slice(&self.quota.to_le_bytes());
        }
        v.extend_from_slice(&self.inline);
        v
    }
    /// Decodes an inode.
    pub fn decode(v: &[u8]) -> Result<Inode> {
        let (mut inode, data) = Inode::decode_meta(v)?;
        if inode.inline.is_empty() {
            inode.inline = data.to_vec();
        }
        Ok(inode)
    }

    /// Decodes the inode's attributes, lending a regular file's inline data instead of
    /// copying it: the returned inode's `inline` is then empty (its `size` still counts the
    /// data), so it serves stat, access checks and reads, and must never be stored back.
    /// Other types (symlink targets, device numbers) keep `inline`.
    pub fn decode_meta(v: &[u8]) -> Result<(Inode, &[u8])> {
        check_version(v, "inode")?;
        let mut r = Reader { buf: &v[1..], what: "inode" };
        let kind = FileType::from_u8(r.u8()?)?;
        let (perm, uid, gid, nlink) = (r.u32()?, r.u32()?, r.u32()?, r.u32()?);
        let size = r.u64()?;
        let (atime, mtime, ctime) = (r.i64()?, r.i64()?, r.i64()?);
        let flags = r.u8()?;
        let (is_inline, has_chunks, no_xattrs) = (flags & 1 != 0, flags & 2 != 0, flags & 8 != 0);
        let block_shift = if flags & 4 != 0 { r.u8()? } else { 0 };
        if flags & 4 != 0 && !(MIN_BLOCK_SHIFT..=MAX_BLOCK_SHIFT).contains(&block_shift) {
            return Err(corrupt("inode block size out of range"));
        }
        let quota = if flags & 16 != 0 { r.u64()? } else { 0 };
        let data = r.buf;
        if is_inline && data.len() as u64 != size {
            return Err(corrupt("inline data length differs from size"));
        }
        let inline = if kind == FileType::File { Vec::new() } else { data.to_vec() };
        Ok((
            Inode {
                kind,
                perm,
                uid,
                gid,
                nlink,
                size,
                atime,
                mtime,
                ctime,
                is_inline,
                has_chunks,
                block_shift,
                no_xattrs,
                quota,
                inline,
            },
            data,
        ))
    }
}

/// The smallest block size a file or store may have: 512 bytes.
pub const MIN_BLOCK_SHIFT: u8 = 9;
/// The largest: 64 KiB.
pub const MAX_BLOCK_SHIFT: u8 = 16;

/// A data block's value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Block {
    /// The bytes themselves (a short block reads as zeros past its end).
    Data(Vec<u8>),
    /// A slice of an immutable chunk written ahead of the commit.
    Chunk {
        /// The chunk id.
        id: u64,
        /// Offset of the block's bytes in the chunk.
        offset: u32,
        /// Number of bytes.
        len: u32,
    },
}

impl Block {
    /// Encodes the block: a tag byte (0 data, 1 chunk reference), then the payload.
    pub fn encode(&self) -> Vec<u8> {
        match self {
            Block::Data(d) => {
                let mut v = Vec::with_capacity(1 + d.len());
                v.push(0);
                v.extend_from_slice(d);
                v
            }
            Block::Chunk { id, offset, len } => {
                let mut v = vec![1];
                v.extend_from_slice(&id.to_le_bytes());
                v.extend_from_slice(&offset.to_le_bytes());
                v.extend_from_slice(&len.to_le_bytes());
                v
            }
        }
    }
    /// Encodes raw data without building a `Block`.
    pub fn encode_data(d: &[u8]) -> Vec<u8> {
        let mut v = Vec::with_capacity(1 + d.len());
        v.push(0);
        v.extend_from_slice(d);
        v
    }
    /// Decodes a block.
    pub fn decode(v: &[u8]) -> Result<Block> {
        match v.first() {
            Some(0) => Ok(Block::Data(v[1..].to_vec())),
            Some(1) => {
                let mut r = Reader { buf: &v[1..], what: "block" };
                Ok(Block::Chunk { id: r.u64()?, offset: r.u32()?, len: r.u32()? })
            }
            _ => Err(corrupt("unknown block tag")),
        }
    }
}
