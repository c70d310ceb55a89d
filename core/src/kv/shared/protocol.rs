//! The wire protocol between a store's serving process and its clients, over a Unix socket.
//!
//! Each message is a frame: a 4-byte little-endian length, then that many bytes: a 1-byte
//! operation and its fields (byte strings as a 4-byte length and the bytes, integers
//! little-endian). A connection carries at most one transaction at a time. Requests that
//! cannot fail in a way the caller must see at once (begin, writes, rollback) get no reply, so
//! a client sends them with its next read or commit in one write; an error they cause is kept
//! by the server and returned by the next request that has a reply.

use crate::error::{Error, ErrorKind, Result};
use std::io::Read;

/// Version of this protocol; a client and a server of different versions refuse each other.
pub const VERSION: u32 = 1;

/// Features a server offers, a bit set at the end of its hello reply (older servers send
/// none; older clients ignore it).
pub mod features {
    // 1: the change ring in the file `txvfs.ring` (before issue 37; no longer offered: a
    // file in the store directory, which any process of its user could truncate or scribble
    // on; an older client, not offered it, reads uncached).
    /// The server mapped the reply area the client passed with its hello (`area.rs`).
    pub const AREA: u64 = 2;
    /// The server runs file lock requests (`op::LOCKS`).
    pub const LOCKS: u64 = 4;
    /// The change ring (`ring.rs`) is written, its memory's descriptor attached to the hello
    /// reply: clients may cache reads and use BEGIN_AT.
    pub const RING_FD: u64 = 8;
    /// The store's bell (`bell.rs`), its memory's descriptor attached to the hello reply
    /// (after the ring's).
    pub const BELL_FD: u64 = 16;
    /// The server checks keys a client took as absent without reading (`op::EXPECT_ABSENT`).
    pub const EXPECT_ABSENT: u64 = 32;
}

/// What a client's hello brings (a bit set after the version).
pub mod hello_flags {
    /// Its reply area (`area.rs`), its descriptor attached.
    pub const AREA: u64 = 1;
}

/// The largest frame either side accepts (a value may be 64 MiB; a larger range reply is
/// refused with TooLarge).
pub const MAX_FRAME: usize = 160 << 20;

/// Operation codes.
pub mod op {
    pub const HELLO: u8 = 1;
    pub const BEGIN: u8 = 2;
    pub const GET: u8 = 3;
    pub const GET_RANGE: u8 = 4;
    pub const SET: u8 = 5;
    pub const CLEAR: u8 = 6;
    pub const CLEAR_RANGE: u8 = 7;
    pub const ATOMIC_ADD: u8 = 8;
    pub const ATOMIC_MAX: u8 = 9;
    pub const COMMIT: u8 = 10;
    pub const ROLLBACK: u8 = 11;
    pub const REFRESH: u8 = 12;
    pub const SYNC: u8 = 13;
    /// A versionstamped write (key prefix, value); added without a version bump: an older
    /// server answers it with an error, never with a wrong write.
    pub const SET_VERSIONSTAMPED: u8 = 14;
    /// Begins a transaction whose first reads a client answered from its cache (see
    /// `client_cache.rs`): ring epoch, version, the keys (count, keys) and ranges (count,
    /// start and end) read. Replied to with the owner's read version, or an error.
    pub const BEGIN_AT: u8 = 15;
    /// A key the client took as absent without reading it (`Txn::assume_absent`): the server
    /// reads it in the transaction (a read like GET's, at its read version) and, if present,
    /// fails the transaction with a retryable conflict. No reply of its own.
    pub const EXPECT_ABSENT: u8 = 16;
    /// Whether the commit with this id took effect (its receipt exists); a COMMIT may end with
    /// a commit id (see `receipts.rs`). Numbered apart from the others, for additions.
    pub const OUTCOME: u8 = 40;
    /// Pins a snapshot at the owner for as long as this connection stays open (a connection
    /// holds at most one); the reply carries its id (see `snapshot.rs`).
    pub const SNAPSHOT: u8 = 41;
    /// A read at a pinned snapshot (id, key), on any connection; reply as GET's.
    pub const SNAPSHOT_GET: u8 = 42;
    /// A range read at a pinned snapshot (id, start, end, limit, reverse); reply as
    /// GET_RANGE's.
    pub const SNAPSHOT_RANGE: u8 = 43;
    /// Creates a named snapshot (name), by the owner.
    pub const NAMED_SNAPSHOT: u8 = 44;
    /// A change or test of file lock records (the request, as the file layer's lease table
    /// encodes it), run by the owner in one transaction of its own; the reply carries the
    /// encoded answer. Offered when the hello's features have `LOCKS`. The client's own
    /// descriptor of `txvfs.alive` comes attached: the owner acts only for a process id whose
    /// byte it locks there (`alive.rs`).
    pub const LOCKS: u8 = 45;
    /// Replies: success (with fields), or an error (code, message).
    pub const OK: u8 = 100;
    pub const ERR: u8 = 101;
    /// Success, with the reply's fields in the connection's reply area (`area.rs`): the
    /// frame carries only their length.
    pub const OK_AREA: u8 = 102;
}

/// Builds one frame.
pub struct Frame {
    buf: Vec<u8>,
}

impl Frame {
    /// A frame for operation `op`.
    pub fn new(op: u8) -> Frame {
        let mut buf = Vec::with_capacity(64);
        buf.extend_from_slice(&[0, 0, 0, 0, op]);
        Frame { buf }
    }
    /// Appends a byte string.
    pub fn bytes(mut self, b: &[u8]) -> Frame {
        self.buf.extend_from_slice(&(b.len() as u32).to_le_bytes());
        self.buf.extend_from_slice(b);
        self
    }
    /// Appends an integer.
    pub fn u64(mut self, v: u64) -> Frame {
        self.buf.extend_from_slice(&v.to_le_bytes());
        self
    }
    /// Appends a byte.
    pub fn u8(mut self, v: u8) -> Frame {
        self.buf.push(v);
        self
    }
    /// A frame for operation `op` built in `buf` (its contents dropped, its memory kept): a
    /// large reply reuses the memory of the last one instead of faulting in fresh pages.
    pub fn reusing(mut buf: Vec<u8>, op: u8) -> Frame {
        buf.clear();
        buf.extend_from_slice(&[0, 0, 0, 0, op]);
        Frame { buf }
    }
    /// Appends a byte string, in place.
    pub fn put_bytes(&mut self, b: &[u8]) {
        self.buf.extend_from_slice(&(b.len() as u32).to_le_bytes());
        self.buf.extend_from_slice(b);
    }
    /// Appends bytes already encoded as fields, in place.
    pub fn put_raw(&mut self, b: &[u8]) {
        self.buf.extend_from_slice(b);
    }
    /// The frame's memory, to build another in.
    pub fn into_buf(self) -> Vec<u8> {
        self.buf
    }
    /// Overwrites the integer appended at byte `at` of the fields (0: the first field).
    pub fn set_u64(&mut self, at: usize, v: u64) {
        self.buf[5 + at..5 + at + 8].copy_from_slice(&v.to_le_bytes());
    }
    /// Bytes of fields so far.
    pub fn fields_len(&self) -> usize {
        self.buf.len() - 5
    }
    /// The finished frame, length filled in.
    pub fn finish(mut self) -> Vec<u8> {
        let len = (self.buf.len() - 4) as u32;
        self.buf[..4].copy_from_slice(&len.to_le_bytes());
        self.buf
    }
    /// Appends the finished frame to `out`.
    pub fn push_to(self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.finish());
    }
}

/// Asks for socket buffers that hold a megabyte reply whole (the kernel caps the request at
/// `net.core.wmem_max` / `rmem_max`): a large range reply then crosses in one write and one
/// wake-up of the reader instead of a handful of each. Best effort: the defaults work too.
pub fn widen_buffers(sock: &impl std::os::fd::AsRawFd) {
    let size: libc::c_int = 4 << 20;
    for opt in [libc::SO_SNDBUF, libc::SO_RCVBUF] {
        // SAFETY: sets an integer option on an open socket from a live c_int.
        unsafe {
            libc::setsockopt(
                sock.as_raw_fd(),
                libc::SOL_SOCKET,
                opt,
                (&size as *const libc::c_int).cast(),
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            );
        }
    }
}

/// Reads one frame; `Ok(None)` at a clean end of stream.
pub fn read_frame(r: &mut impl Read) -> std::io::Result<Option<Vec<u8>>> {
    read_frame_into(r, &mut Vec::new())
}

/// Frames at least this large are read into the memory of an earlier large one.
pub const SPARE_MIN: usize = 64 << 10;

/// Reads one frame; a large one into `spare`'s memory (taken), so that a megabyte reply does
/// not fault in fresh pages each time; `Ok(None)` at a clean end of stream.
pub fn read_frame_into(r: &mut impl Read, spare: &mut Vec<u8>) -> std::io::Result<Option<Vec<u8>>> {
    let mut len = [0u8; 4];
    match r.read_exact(&mut len) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(e) => return Err(e),
    }
    let len = u32::from_le_bytes(len) as usize;
    if len == 0 || len > MAX_FRAME {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("bad frame length {len}"),
        ));
    }
    let mut body = if len >= SPARE_MIN { std::mem::take(spare) } else { Vec::new() };
    body.clear();
    // The memory grows with the bytes that arrive: a length alone (a peer's claim) never
    // allocates more than the first read's share.
    body.reserve(len.min(SPARE_MIN));
    r.take(len as u64).read_to_end(&mut body)?;
    if body.len() < len {
        return Err(std::io::ErrorKind::UnexpectedEof.into());
    }
    Ok(Some(body))
}

/// Reads the fields of a received frame, failing cleanly on malformed input.
pub struct Fields<'a> {
    rest: &'a [u8],
}

fn malformed() -> Error {
    Error::new(ErrorKind::Invalid, "malformed message on the store's socket")
}

impl<'a> Fields<'a> {
    /// A reader of fields without an operation code (a reply in the reply area).
    pub fn body(rest: &'a [u8]) -> Fields<'a> {
        Fields { rest }
    }
    /// The operation code and a reader of the fields after it.
    pub fn of(frame: &'a [u8]) -> Result<(u8, Fields<'a>)> {
        let (&op, rest) = frame.split_first().ok_or_else(malformed)?;
        Ok((op, Fields { rest }))
    }
    /// The next byte string.
    pub fn bytes(&mut self) -> Result<&'a [u8]> {
        let len = self.u32()? as usize;
        if self.rest.len() < len {
            return Err(malformed());
        }
        let (b, rest) = self.rest.split_at(len);
        self.rest = rest;
        Ok(b)
    }
    fn u32(&mut self) -> Result<u32> {
        if self.rest.len() < 4 {
            return Err(malformed());
        }
        let (b, rest) = self.rest.split_at(4);
        self.rest = rest;
        Ok(u32::from_le_bytes(b.try_into().unwrap()))
    }
    /// The next integer.
    pub fn u64(&mut self) -> Result<u64> {
        if self.rest.len() < 8 {
            return Err(malformed());
        }
        let (b, rest) = self.rest.split_at(8);
        self.rest = rest;
        Ok(u64::from_le_bytes(b.try_into().unwrap()))
    }
    /// The next byte.
    pub fn u8(&mut self) -> Result<u8> {
        let (&b, rest) = self.rest.split_first().ok_or_else(malformed)?;
        self.rest = rest;
        Ok(b)
    }
    /// True when every field was read.
    pub fn done(&self) -> bool {
        self.rest.is_empty()
    }
}

/// An error reply.
pub fn error_frame(e: &Error) -> Vec<u8> {
    Frame::new(op::ERR).u64(e.code() as u32 as u64).bytes(e.message().as_bytes()).finish()
}

/// Decodes an error reply's fields.
pub fn decode_error(mut f: Fields<'_>) -> Error {
    let code = f.u64().unwrap_or(0) as u32 as i32;
    let msg = f.bytes().map(|b| String::from_utf8_lossy(b).into_owned()).unwrap_or_default();
    Error::new(ErrorKind::from_code(code).unwrap_or(ErrorKind::Backend), msg)
}

/// The reply to a range read: the count, then each key and value; TooLarge when it would not
/// fit in a frame.
pub fn range_reply(pairs: &[(Vec<u8>, Vec<u8>)]) -> Result<Vec<u8>> {
    let size: usize = pairs.iter().map(|(k, v)| k.len() + v.len() + 8).sum();
    if size + 16 > MAX_FRAME {
        return Err(Error::new(
            ErrorKind::TooLarge,
            "range read too large for one reply: read it with a limit",
        ));
    }
    let mut fr = Frame::new(op::OK).u64(pairs.len() as u64);
    for (k, v) in pairs {
        fr = fr.bytes(k).bytes(v);
    }
    Ok(fr.finish())
}

/// Decodes [`range_reply`] (a reply frame, OK first).
pub fn decode_range(reply: &[u8]) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
    let (_, mut f) = Fields::of(reply)?;
    let n = f.u64()? as usize;
    let mut out = Vec::with_capacity(n.min(1 << 16));
    for _ in 0..n {
        out.push((f.bytes()?.to_vec(), f.bytes()?.to_vec()));
    }
    Ok(out)
}

/// Encodes optional limits as u64 (u64::MAX for none).
pub fn opt(v: Option<usize>) -> u64 {
    v.map(|v| v as u64).unwrap_or(u64::MAX)
}

/// Decodes [`opt`].
pub fn unopt(v: u64) -> Option<usize> {
    (v != u64::MAX).then_some(v as usize)
}
