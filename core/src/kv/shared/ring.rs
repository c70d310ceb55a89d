//! The change ring: a log of the keys every commit wrote, in shared memory, so that other
//! processes keep a read cache that never lies without asking the owner anything (see
//! `client_cache.rs`). This is the idea of SQLite's wal-index:
//! one writer publishes, readers check that what they copied was not overwritten meanwhile.
//!
//! Layout: a header page, then a byte ring of [`CAPACITY`] bytes. The header holds a magic
//! number, the owner's `epoch` (new at every owner start: versions restart with each owner),
//! `version` (the last commit whose writes are in the ring) and `head` (bytes written since
//! the epoch began; the ring holds the last [`CAPACITY`] of them). A record is one written key
//! or cleared range: `len u32, version u64, kind u8, a (u32 len + bytes), b (u32 len + bytes)`.
//!
//! Only the owner writes, under the lock that makes a commit visible, and before it is: first
//! `reserved` (the end of the bytes it is about to write), then the records, then `head` and
//! `version` together, inside a sequence lock (`seq` odd while they change), so a reader always
//! loads a pair that belongs together: the records below `head` are exactly those of the
//! versions up to `version`. (Loaded one after the other without it, a reader could take the
//! writes of commit V+1 as those of V, or skip them, and its cache then kept a stale value for
//! ever.) A reader copies the records after its own position, and keeps them only if `epoch`
//! did not change and no byte written meanwhile can have landed on the copy: `reserved`,
//! loaded after the copy, is at most [`CAPACITY`] past the reader's position. (Checked against
//! `head` instead, bytes written but not yet announced went unseen: a reader one ring behind
//! took the next commit's records for the oldest ones it copied.) Otherwise it starts over
//! from an empty cache.
//!
//! The memory is a memfd the owner creates, maps and then seals: it can never shrink or grow
//! (a mapping of it never faults), and nobody can write it any more but through the owner's
//! own mapping (`F_SEAL_FUTURE_WRITE`). The owner hands it to each client with its hello
//! reply (`SCM_RIGHTS`); a client maps it read-only. So no process but the owner can truncate
//! it (a SIGBUS in every process that maps it, the owner first) or scribble on it (a cache
//! that then serves a stale value as right), as any process of the store's user could a file
//! in the store directory. Each owner has its own ring: a client's cache lives as long as its
//! connection to one owner.

use super::area;
use crate::error::{Error, ErrorKind, Result};
use crate::kv::occ::Mutation;
use std::collections::VecDeque;
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::atomic::{fence, AtomicU64, Ordering};

/// Bytes of records the ring holds (about 50,000 small writes).
pub const CAPACITY: u64 = 4 << 20;
const HEADER: usize = 4096;
/// Versions whose snapshots the owner keeps at least for clients' transactions
/// (`OccStore::begin_at`; younger than 2 s are kept too, up to 16,384): a client's
/// transaction that reaches the owner within that reads exactly its snapshot; an older one
/// moves forward if what it read did not change, else fails with the retryable conflict.
pub(crate) const KEPT_VERSIONS: usize = 256;
// "txvfsrn3": the third layout (with `reserved`); a reader of an older one resets at every look.
const MAGIC: u64 = 0x7478_7666_7372_6e33;
/// How long a reader waits for a writer inside the sequence lock before it gives up on the
/// cache for this look (a writer stopped or killed there; a new owner writes a new epoch).
const SEQ_SPINS: u32 = 10_000;

/// A written key, or a cleared range `[start, end)`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Written {
    Key(Vec<u8>),
    Range(Vec<u8>, Vec<u8>),
}

/// What a reader found since its last position.
pub(crate) enum Changes {
    /// The writes of the commits after the reader's version, up to `version`, each with
    /// the version of its commit.
    Since { version: u64, writes: Vec<(u64, Written)> },
    /// The reader cannot know what changed (a new owner, or it fell more than the ring
    /// behind): it must forget everything; the ring is now at `version` in `epoch`.
    Reset { epoch: u64, version: u64 },
}

/// The mapped file.
struct Map {
    base: *mut u8,
}

// SAFETY: the mapping is shared memory used through atomics (header) and byte copies whose
// validity is checked afterwards (records); nothing refers into it across calls.
unsafe impl Send for Map {}
unsafe impl Sync for Map {}

/// Bytes of the whole mapping.
const LEN: usize = HEADER + CAPACITY as usize;

impl Map {
    /// A new ring's memory (the owner's), mapped read and write, then sealed; and its
    /// descriptor, to hand to clients.
    fn create() -> std::io::Result<(Map, OwnedFd)> {
        let fd = area::sealed_memfd(c"txvfs-ring", LEN)?;
        let base = area::map_shared(&fd, LEN, true)?;
        let map = Map { base };
        let seals = libc::F_SEAL_FUTURE_WRITE | libc::F_SEAL_SEAL;
        // SAFETY: a system call on a descriptor owned here.
        if unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_ADD_SEALS, seals) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok((map, fd))
    }

    /// Maps a ring the owner handed over, read-only: only a memfd of the ring's size that
    /// nobody can shrink or write any more.
    fn adopt(fd: &OwnedFd) -> std::io::Result<Map> {
        area::check_sealed(fd, LEN, libc::F_SEAL_FUTURE_WRITE | libc::F_SEAL_GROW)?;
        Ok(Map { base: area::map_shared(fd, LEN, false)? })
    }

    fn word(&self, i: usize) -> &AtomicU64 {
        // SAFETY: header words are 8-byte aligned inside the mapping, which lives as long as
        // `self`; every process accesses them atomically.
        unsafe { &*(self.base.add(8 * i) as *const AtomicU64) }
    }
    fn magic(&self) -> &AtomicU64 {
        self.word(0)
    }
    fn epoch(&self) -> &AtomicU64 {
        self.word(1)
    }
    fn version(&self) -> &AtomicU64 {
        self.word(2)
    }
    fn head(&self) -> &AtomicU64 {
        self.word(3)
    }
    fn seq(&self) -> &AtomicU64 {
        self.word(4)
    }
    fn reserved(&self) -> &AtomicU64 {
        self.word(5)
    }

    /// Changes header words inside the sequence lock.
    fn publish(&self, change: impl FnOnce(&Map)) {
        let seq = self.seq().load(Ordering::Relaxed);
        // Odd while changing (a writer that died in here left it odd: stay odd).
        self.seq().store(seq | 1, Ordering::Relaxed);
        fence(Ordering::Release);
        change(self);
        self.seq().store((seq | 1) + 1, Ordering::Release);
    }

    /// `(magic, epoch, version, head)` as one writer left them, or None while a writer is
    /// inside the sequence lock for longer than [`SEQ_SPINS`] looks.
    fn header(&self) -> Option<(u64, u64, u64, u64)> {
        for i in 0..SEQ_SPINS {
            let before = self.seq().load(Ordering::Acquire);
            if before & 1 == 0 {
                let h = (
                    self.magic().load(Ordering::Relaxed),
                    self.epoch().load(Ordering::Relaxed),
                    self.version().load(Ordering::Relaxed),
                    self.head().load(Ordering::Relaxed),
                );
                fence(Ordering::Acquire);
                if self.seq().load(Ordering::Relaxed) == before {
                    return Some(h);
                }
            }
            if i > 100 {
                std::thread::yield_now();
            } else {
                std::hint::spin_loop();
            }
        }
        None
    }

    /// Copies ring bytes `[from, from + out.len())` (positions since the epoch began).
    fn read(&self, from: u64, out: &mut [u8]) {
        let mut done = 0;
        while done < out.len() {
            let at = ((from + done as u64) % CAPACITY) as usize;
            let n = (out.len() - done).min(CAPACITY as usize - at);
            // SAFETY: `at + n <= CAPACITY`, inside the data area. A concurrent writer may
            // change these bytes: the caller checks `head` afterwards and drops the copy.
            unsafe {
                std::ptr::copy_nonoverlapping(
                    self.base.add(HEADER + at),
                    out[done..].as_mut_ptr(),
                    n,
                )
            };
            done += n;
        }
    }

    fn write(&self, from: u64, bytes: &[u8]) {
        let mut done = 0;
        while done < bytes.len() {
            let at = ((from + done as u64) % CAPACITY) as usize;
            let n = (bytes.len() - done).min(CAPACITY as usize - at);
            // SAFETY: as in `read`; only the owner writes, under its commit lock.
            unsafe {
                std::ptr::copy_nonoverlapping(bytes[done..].as_ptr(), self.base.add(HEADER + at), n)
            };
            done += n;
        }
    }
}

impl Drop for Map {
    fn drop(&mut self) {
        // SAFETY: unmaps what `create` or `adopt` mapped.
        unsafe { libc::munmap(self.base.cast(), LEN) };
    }
}

fn ring_error(e: std::io::Error) -> Error {
    Error::new(ErrorKind::Backend, format!("the store's change ring: {e}"))
}

/// The owner's side.
pub(crate) struct RingWriter {
    map: Map,
    /// The memory's descriptor, handed to clients.
    fd: OwnedFd,
    epoch: u64,
    /// Ring position after each recent commit, to check a client's reads from its cache
    /// (see [`RingWriter::written_between`]).
    ends: VecDeque<(u64, u64)>,
}

/// Commits whose end positions are remembered.
const ENDS: usize = 4096;

impl RingWriter {
    /// A new ring for a new owner whose versions start after `version`, in an epoch of its
    /// own (a client's reads from its cache name it; see `BEGIN_AT`).
    pub(crate) fn start(version: u64) -> Result<RingWriter> {
        let (map, fd) = Map::create().map_err(ring_error)?;
        let epoch = (crate::clock::now_ms() ^ ((std::process::id() as u64) << 40)).max(1);
        map.publish(|m| {
            m.epoch().store(epoch, Ordering::Relaxed);
            m.head().store(0, Ordering::Relaxed);
            m.reserved().store(0, Ordering::Relaxed);
            m.version().store(version, Ordering::Relaxed);
            m.magic().store(MAGIC, Ordering::Relaxed);
        });
        let mut ends = VecDeque::new();
        ends.push_back((version, 0));
        Ok(RingWriter { map, fd, epoch, ends })
    }

    /// Publishes commit `version`'s writes (`None`: it failed and changed nothing). Called
    /// in version order, before the commit becomes visible.
    pub(crate) fn record(&mut self, version: u64, batch: Option<&[Mutation]>) {
        let head = self.write_records(version, batch);
        self.publish_records(version, head);
    }

    /// Writes commit `version`'s records after the published head, announcing first how far
    /// they reach (`reserved`); returns the new head.
    fn write_records(&mut self, version: u64, batch: Option<&[Mutation]>) -> u64 {
        let head = self.map.head().load(Ordering::Relaxed);
        let mut buf = Vec::with_capacity(256);
        for m in batch.unwrap_or(&[]) {
            let (kind, a, b): (u8, &[u8], &[u8]) = match m {
                Mutation::Set(k, _) | Mutation::Clear(k) => (0, k, &[]),
                Mutation::ClearRange(s, e) => (1, s, e),
            };
            let len = 4 + 8 + 1 + 4 + a.len() + 4 + b.len();
            buf.extend_from_slice(&(len as u32).to_le_bytes());
            buf.extend_from_slice(&version.to_le_bytes());
            buf.push(kind);
            buf.extend_from_slice(&(a.len() as u32).to_le_bytes());
            buf.extend_from_slice(a);
            buf.extend_from_slice(&(b.len() as u32).to_le_bytes());
            buf.extend_from_slice(b);
        }
        // Readers see `reserved` move before any of the bytes it covers (the fence keeps the
        // store before the writes), so a copy that met one of them also meets the reservation.
        self.map.reserved().store(head + buf.len() as u64, Ordering::Relaxed);
        fence(Ordering::Release);
        self.map.write(head, &buf);
        head + buf.len() as u64
    }

    /// Announces records up to `head` as those of the versions up to `version`.
    fn publish_records(&mut self, version: u64, head: u64) {
        self.map.publish(|m| {
            m.head().store(head, Ordering::Relaxed);
            m.version().store(version, Ordering::Relaxed);
        });
        self.ends.push_back((version, head));
        if self.ends.len() > ENDS {
            self.ends.pop_front();
        }
    }

    /// Marks the ring closed (this owner serves no more): its readers reset at every look, so
    /// their caches keep nothing and every read goes to the owner (then to the next).
    pub(crate) fn close(&mut self) {
        self.map.publish(|m| m.magic().store(0, Ordering::Relaxed));
    }

    /// A descriptor of the ring's memory, to hand to a client ([`RingReader::adopt`]).
    pub(crate) fn share(&self) -> std::io::Result<OwnedFd> {
        self.fd.try_clone()
    }

    /// The epoch this owner writes.
    pub(crate) fn epoch(&self) -> u64 {
        self.epoch
    }

    /// The keys and ranges written by the commits after `from` up to `to`, or None when the
    /// ring no longer holds them all.
    pub(crate) fn written_between(&self, from: u64, to: u64) -> Option<Vec<Written>> {
        let start = self.ends.iter().find(|(v, _)| *v == from)?.1;
        let end = match self.ends.iter().find(|(v, _)| *v == to) {
            Some((_, e)) => *e,
            None => return None,
        };
        if end < start {
            return None;
        }
        let head = self.map.head().load(Ordering::Acquire);
        if head - start > CAPACITY {
            return None;
        }
        let mut bytes = vec![0u8; (end - start) as usize];
        self.map.read(start, &mut bytes);
        parse(&bytes, to).map(|w| w.into_iter().map(|(_, w)| w).collect())
    }
}

/// A reader's side: its own position in the ring.
pub(crate) struct RingReader {
    map: Map,
    epoch: u64,
    version: u64,
    pos: u64,
}

impl RingReader {
    /// Maps the ring whose descriptor the owner handed over (see [`Map::adopt`]); the first
    /// [`RingReader::changes`] is a reset.
    pub(crate) fn adopt(fd: &OwnedFd) -> Result<RingReader> {
        let map = Map::adopt(fd).map_err(ring_error)?;
        Ok(RingReader { map, epoch: 0, version: 0, pos: 0 })
    }

    /// What changed since the last call (see [`Changes`]).
    pub(crate) fn changes(&mut self) -> Changes {
        let m = &self.map;
        let Some((magic, epoch, version, head)) = m.header() else {
            // A writer stopped inside the lock: this look knows nothing; the cache starts
            // empty in an epoch no owner writes, so every read goes to the owner (which
            // answers once it runs again, or a new owner does).
            self.epoch = 0;
            return Changes::Reset { epoch: 0, version: 0 };
        };
        let reset = |r: &mut RingReader| {
            r.epoch = epoch;
            r.version = version;
            r.pos = head;
            Changes::Reset { epoch, version }
        };
        if magic != MAGIC || epoch == 0 || epoch != self.epoch || head < self.pos {
            return reset(self);
        }
        if version == self.version && head == self.pos {
            return Changes::Since { version, writes: Vec::new() };
        }
        if head - self.pos > CAPACITY {
            return reset(self);
        }
        let mut bytes = vec![0u8; (head - self.pos) as usize];
        m.read(self.pos, &mut bytes);
        // Valid only if nothing written meanwhile, announced or not, reached the copy and the
        // epoch did not change (the fence keeps the copy's loads before these).
        fence(Ordering::Acquire);
        let lapped = m.reserved().load(Ordering::Acquire).saturating_sub(self.pos) > CAPACITY;
        if lapped || m.epoch().load(Ordering::Acquire) != epoch {
            return reset(self);
        }
        match parse(&bytes, u64::MAX) {
            Some(writes) => {
                self.version = version;
                self.pos = head;
                Changes::Since { version, writes }
            }
            None => reset(self),
        }
    }
}

/// Parses records of versions up to `to`; None if malformed (a torn copy).
fn parse(mut bytes: &[u8], to: u64) -> Option<Vec<(u64, Written)>> {
    fn take<'a>(b: &mut &'a [u8], n: usize) -> Option<&'a [u8]> {
        (b.len() >= n).then(|| {
            let (x, rest) = b.split_at(n);
            *b = rest;
            x
        })
    }
    fn u32_of(b: &mut &[u8]) -> Option<usize> {
        take(b, 4).map(|x| u32::from_le_bytes(x.try_into().unwrap()) as usize)
    }
    let mut out = Vec::new();
    while !bytes.is_empty() {
        let len = u32_of(&mut bytes)?;
        let mut rec = take(&mut bytes, len.checked_sub(4)?)?;
        let version = u64::from_le_bytes(take(&mut rec, 8)?.try_into().unwrap());
        let kind = take(&mut rec, 1)?[0];
        let n = u32_of(&mut rec)?;
        let a = take(&mut rec, n)?.to_vec();
        let n = u32_of(&mut rec)?;
        let b = take(&mut rec, n)?.to_vec();
        if version > to {
            break;
        }
        out.push((
            version,
            match kind {
                0 => Written::Key(a),
                1 => Written::Range(a, b),
                _ => return None,
            },
        ));
    }
    Some(out)
}

/// True when `key` is among `writes`.
pub(crate) fn touches(writes: &[Written], key: &[u8]) -> bool {
    writes.iter().any(|w| match w {
        Written::Key(k) => k == key,
        Written::Range(s, e) => s.as_slice() <= key && key < e.as_slice(),
    })
}

/// True when a write in `writes` falls in `[start, end)`.
pub(crate) fn touches_range(writes: &[Written], start: &[u8], end: &[u8]) -> bool {
    writes.iter().any(|w| match w {
        Written::Key(k) => start <= k.as_slice() && k.as_slice() < end,
        Written::Range(s, e) => s.as_slice() < end && start < e.as_slice(),
    })
}

#[cfg(test)]
#[path = "ring_tests.rs"]
mod tests;
