//! Writable clones: a backend whose reads fall through to a read-only lower layer (a named
//! snapshot, a pack) and whose writes go to its own upper layer. The lower layer is never
//! written; making a clone writes one key (the record naming the lower layer).
//!
//! The upper layer holds, for each key `k` of the clone:
//! - `DATA k` → its value, when the clone wrote it;
//! - `WHITEOUT k` → empty, when the clone deleted a key the lower layer has (never removed:
//!   a later write of `k` shadows it, since data wins over a whiteout);
//! - `RANGE end` → `start`: a range whiteout, every lower key in `[start, end)` deleted (what
//!   `clear_range` writes: one key for a file's blocks, whatever their number). Range
//!   whiteouts never overlap or touch: a new one absorbs those it meets, so the one that
//!   may cover a key is the first whose end is past it.
//! - [`CLONE_KEY`] → the lower layer's URI, so that opening the upper opens the clone.
//!
//! A key reads as: its upper data if any; else absent if whited out; else the lower value.
//! Conflicts come from the upper's transactions only: the lower layer never changes.

use super::{Backend, KeyValue, Limits, NamedSnapshots, Sharing, Snapshots, Txn};
use crate::error::{Error, ErrorKind, Result};
use parking_lot::Mutex;
use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, OnceLock, Weak};

/// The key of the record naming a clone's lower layer, in the upper layer. Keys starting with
/// a zero byte belong to the kv layer; the file system's keys start with a scope letter.
pub const CLONE_KEY: &[u8] = b"\x00txvfs.clone.lower";
const DATA: u8 = b'k';
const WHITEOUT: u8 = b'w';
const RANGE: u8 = b'r';
/// Range whiteouts read per range read when merging.
const RANGE_PAGE: usize = 16;
/// Retries of the clone record's read at open (as `Options::max_retries` by default).
const OPEN_RETRIES: u32 = 100;
/// Keys read from the lower layer per range read, when merging.
const LOWER_PAGE: usize = 256;
/// Whiteouts read per range read when merging (small: they add read conflicts).
const WHITEOUT_PAGE: usize = 64;
/// Upper keys read per range read when no limit bounds it.
const DATA_PAGE: usize = 1024;

fn with_prefix(prefix: u8, key: &[u8]) -> Vec<u8> {
    let mut k = Vec::with_capacity(key.len() + 1);
    k.push(prefix);
    k.extend_from_slice(key);
    k
}

/// A writable clone over a read-only lower layer.
pub struct LayeredBackend {
    upper: Arc<dyn Backend>,
    lower: Arc<dyn Backend>,
}

fn registry() -> &'static Mutex<HashMap<usize, Weak<LayeredBackend>>> {
    static CLONES: OnceLock<Mutex<HashMap<usize, Weak<LayeredBackend>>>> = OnceLock::new();
    CLONES.get_or_init(Default::default)
}

impl LayeredBackend {
    /// A clone whose reads fall through to `lower`, which must be read-only
    /// ([`Backend::read_only`]), and whose writes go to `upper`. Writes nothing: for a clone
    /// that survives reopening, use [`create_clone`].
    pub fn new(upper: Arc<dyn Backend>, lower: Arc<dyn Backend>) -> Result<Arc<LayeredBackend>> {
        if !lower.read_only() {
            return Err(Error::new(
                ErrorKind::Invalid,
                format!(
                    "{}: the lower layer of a clone must be read-only (a named snapshot or a pack)",
                    lower.describe()
                ),
            ));
        }
        Ok(Arc::new(LayeredBackend { upper, lower }))
    }

    /// The upper (writable) layer.
    pub fn upper(&self) -> &Arc<dyn Backend> {
        &self.upper
    }

    /// The lower (read-only) layer.
    pub fn lower(&self) -> &Arc<dyn Backend> {
        &self.lower
    }
}

/// The lower layer's URI recorded in `backend`, if it is the upper layer of a clone.
pub(crate) fn clone_record(backend: &dyn Backend) -> Result<Option<String>> {
    // Retried as every other read of an open is: a client whose owner is closing meets a
    // retryable conflict here.
    let record = super::run_with_retries(backend, OPEN_RETRIES, false, |tx| tx.get(CLONE_KEY))?;
    let Some(v) = record else { return Ok(None) };
    String::from_utf8(v).map(Some).map_err(|_| {
        Error::new(ErrorKind::Corrupt, format!("{}: clone record is not UTF-8", backend.describe()))
    })
}

/// Opens `backend` as the clone it is the upper layer of (its lower layer opened by the URI
/// it records), or returns it unchanged when it is no clone's upper layer. Opening the same
/// upper again in this process gives the same clone.
pub(crate) fn open_if_clone(backend: Arc<dyn Backend>) -> Result<Arc<dyn Backend>> {
    let Some(lower_uri) = clone_record(&*backend)? else { return Ok(backend) };
    let key = Arc::as_ptr(&backend) as *const () as usize;
    if let Some(b) = registry().lock().get(&key).and_then(Weak::upgrade) {
        return Ok(b);
    }
    let lower = super::open_existing(&lower_uri).map_err(|e| {
        Error::new(
            e.kind(),
            format!(
                "{}: cannot open the clone's lower layer {lower_uri}: {}",
                backend.describe(),
                e.message()
            ),
        )
    })?;
    let clone = LayeredBackend::new(backend, lower)?;
    let mut clones = registry().lock();
    if let Some(b) = clones.get(&key).and_then(Weak::upgrade) {
        return Ok(b);
    }
    clones.retain(|_, w| w.strong_count() > 0);
    clones.insert(key, Arc::downgrade(&clone));
    Ok(clone)
}

/// Makes the store at `upper_uri` (which must be empty: a new directory, say) a writable clone
/// of the read-only store at `lower_uri` (a named snapshot such as `rocksdb:/s?snapshot=v1`,
/// or a pack). Writes one key whatever the size of the lower store; the lower store is never
/// modified. Later opens of `upper_uri` open the clone.
pub fn create_clone(lower_uri: &str, upper_uri: &str) -> Result<Arc<dyn Backend>> {
    let lower = super::open_existing(lower_uri)?;
    if !lower.read_only() {
        return Err(Error::new(
            ErrorKind::Invalid,
            format!("{lower_uri}: the lower layer of a clone must be read-only: a named snapshot (STORE?snapshot=NAME) or a pack"),
        ));
    }
    if lower.begin()?.get_range(b"", &[0xff], 1, false)?.is_empty() {
        return Err(Error::new(ErrorKind::NotFound, format!("{lower_uri}: no store there")));
    }
    // Recorded with an absolute path, so the clone opens from any working directory.
    let record = super::absolute_uri(lower_uri)?;
    let upper = super::open(upper_uri)?;
    super::run_with_retries(&*upper, 10, true, |tx| {
        if !tx.get_range(b"", &[0xff], 1, false)?.is_empty() {
            return Err(Error::new(
                ErrorKind::Exists,
                format!("{upper_uri}: not empty: a clone needs a new, empty store"),
            ));
        }
        tx.set(CLONE_KEY, record.as_bytes())
    })?;
    open_if_clone(upper)
}

impl Backend for LayeredBackend {
    fn begin(&self) -> Result<Box<dyn Txn>> {
        Ok(Box::new(LayeredTxn { upper: self.upper.begin()?, lower: self.lower.begin()? }))
    }
    fn limits(&self) -> Limits {
        let l = self.upper.limits();
        Limits { max_key: l.max_key.map(|m| m.saturating_sub(1)), ..l }
    }
    fn sync(&self) -> Result<()> {
        self.upper.sync()
    }
    fn describe(&self) -> String {
        format!("{} (clone of {})", self.upper.describe(), self.lower.describe())
    }
    fn sharing(&self) -> Option<&dyn Sharing> {
        self.upper.sharing()
    }
    fn disk_space(&self) -> Option<(u64, u64)> {
        self.upper.disk_space()
    }
    fn read_only(&self) -> bool {
        self.upper.read_only()
    }
    fn snapshots(&self) -> Option<&dyn Snapshots> {
        self.upper.snapshots().map(|_| self as &dyn Snapshots)
    }
    /// The upper's named snapshots: each holds the clone record, so it opens as a clone of the
    /// same lower layer.
    fn named_snapshots(&self) -> Option<&dyn NamedSnapshots> {
        self.upper.named_snapshots()
    }
}

impl Snapshots for LayeredBackend {
    fn snapshot(&self) -> Result<Arc<dyn Backend>> {
        let upper = self.upper.require(self.upper.snapshots(), "snapshots")?.snapshot()?;
        Ok(Arc::new(LayeredBackend { upper, lower: self.lower.clone() }))
    }
}

struct LayeredTxn {
    upper: Box<dyn Txn>,
    lower: Box<dyn Txn>,
}

#[derive(Clone, Copy)]
enum Atomic {
    Add(i64),
    Max(u64),
}

/// One sorted stream of a range read, fetched a page at a time.
struct Stream {
    buf: VecDeque<KeyValue>,
    start: Vec<u8>,
    end: Vec<u8>,
    /// The prefix of the upper layer's keys (stripped), or none for the lower layer.
    prefix: Option<u8>,
    done: bool,
}

impl Stream {
    fn new(prefix: Option<u8>, start: &[u8], end: &[u8]) -> Stream {
        let p = |k: &[u8]| match prefix {
            Some(b) => with_prefix(b, k),
            None => k.to_vec(),
        };
        Stream { buf: VecDeque::new(), start: p(start), end: p(end), prefix, done: false }
    }

    /// The next key and value, fetching a page of `page` from `tx` when needed.
    fn peek(
        &mut self,
        tx: &mut dyn Txn,
        page: usize,
        reverse: bool,
        conflict: bool,
    ) -> Result<Option<&KeyValue>> {
        if self.buf.is_empty() && !self.done {
            let got = if conflict {
                tx.get_range(&self.start, &self.end, page, reverse)?
            } else {
                tx.snapshot_get_range(&self.start, &self.end, page, reverse)?
            };
            self.done = got.len() < page;
            if let Some((last, _)) = got.last() {
                if reverse {
                    self.end = last.clone();
                } else {
                    self.start = last.clone();
                    self.start.push(0);
                }
            }
            let strip = usize::from(self.prefix.is_some());
            self.buf.extend(got.into_iter().map(|(mut k, v)| {
                k.drain(..strip);
                (k, v)
            }));
        }
        Ok(self.buf.front())
    }
}

impl LayeredTxn {
    fn upper_read(&mut self, key: &[u8], conflict: bool) -> Result<Option<Vec<u8>>> {
        if conflict {
            self.upper.get(key)
        } else {
            self.upper.snapshot_get(key)
        }
    }

    fn read(&mut self, key: &[u8], conflict: bool) -> Result<Option<Vec<u8>>> {
        if let Some(v) = self.upper_read(&with_prefix(DATA, key), conflict)? {
            return Ok(Some(v));
        }
        // Without a lower value, only upper data can make the key appear (read above).
        let Some(lower) = self.lower.get(key)? else { return Ok(None) };
        if self.whited_out(key, conflict)? {
            return Ok(None);
        }
        Ok(Some(lower))
    }

    /// Is the lower key `key` deleted in the clone (a point or a range whiteout)?
    fn whited_out(&mut self, key: &[u8], conflict: bool) -> Result<bool> {
        if self.upper_read(&with_prefix(WHITEOUT, key), conflict)?.is_some() {
            return Ok(true);
        }
        // The first range whiteout ending after `key` is the only one that can cover it.
        let mut from = with_prefix(RANGE, key);
        from.push(0);
        let to = [RANGE + 1];
        let first = if conflict {
            self.upper.get_range(&from, &to, 1, false)?
        } else {
            self.upper.snapshot_get_range(&from, &to, 1, false)?
        };
        Ok(first.first().is_some_and(|(_, start)| start.as_slice() <= key))
    }

    fn read_range(
        &mut self,
        start: &[u8],
        end: &[u8],
        limit: usize,
        reverse: bool,
        conflict: bool,
    ) -> Result<Vec<KeyValue>> {
        if start >= end {
            return Ok(Vec::new());
        }
        let limit = if limit == 0 { usize::MAX } else { limit };
        let mut data = Stream::new(Some(DATA), start, end);
        let mut lower = Stream::new(None, start, end);
        let mut whiteouts = Stream::new(Some(WHITEOUT), start, end);
        // Range whiteouts by end key: those ending after `start`.
        let mut ranges = Stream::new(Some(RANGE), start, end);
        ranges.start.push(0);
        ranges.end = vec![RANGE + 1];
        let before = |a: &[u8], b: &[u8]| if reverse { a > b } else { a < b };
        let mut out = Vec::new();
        while out.len() < limit {
            // Upper data always shows, so reading no more of it than the limit still needs
            // keeps the read conflict range to what is returned.
            let page = (limit - out.len()).min(DATA_PAGE);
            let d = data.peek(&mut *self.upper, page, reverse, conflict)?.map(|kv| kv.0.clone());
            let l =
                lower.peek(&mut *self.lower, LOWER_PAGE, reverse, false)?.map(|kv| kv.0.clone());
            let take_data = match (&d, &l) {
                (None, None) => break,
                (Some(_), None) => true,
                (None, Some(_)) => false,
                (Some(d), Some(l)) => !before(l, d),
            };
            if take_data {
                if l.is_some() && l == d {
                    lower.buf.pop_front();
                }
                out.push(data.buf.pop_front().expect("peeked"));
                continue;
            }
            let kv = lower.buf.pop_front().expect("peeked");
            let mut whited = false;
            while let Some(w) = whiteouts
                .peek(&mut *self.upper, WHITEOUT_PAGE, reverse, conflict)?
                .map(|kv| kv.0.clone())
            {
                if before(&w, &kv.0) {
                    whiteouts.buf.pop_front();
                    continue;
                }
                whited = w == kv.0;
                break;
            }
            while !whited {
                let Some((r_end, r_start)) =
                    ranges.peek(&mut *self.upper, RANGE_PAGE, reverse, conflict)?.cloned()
                else {
                    break;
                };
                // Forward: skip ranges ending at or before the key; reverse: starting after it.
                let passed = if reverse { r_start > kv.0 } else { r_end <= kv.0 };
                if passed {
                    ranges.buf.pop_front();
                    continue;
                }
                whited = r_start <= kv.0 && kv.0 < r_end;
                break;
            }
            if !whited {
                out.push(kv);
            }
        }
        Ok(out)
    }

    fn atomic(&mut self, key: &[u8], op: Atomic) -> Result<()> {
        let dk = with_prefix(DATA, key);
        let apply = |tx: &mut dyn Txn| match op {
            Atomic::Add(d) => tx.atomic_add(&dk, d),
            Atomic::Max(m) => tx.atomic_max(&dk, m),
        };
        // Already in the upper layer (or absent below, or whited out): the upper's own atomic
        // operation has the right base, and adds no read conflict.
        if self.upper.snapshot_get(&dk)?.is_some() {
            return apply(&mut *self.upper);
        }
        let Some(base) = self.lower.get(key)? else { return apply(&mut *self.upper) };
        if self.whited_out(key, true)? {
            return apply(&mut *self.upper);
        }
        // First change of a lower value: copy it up. The read of the upper key makes two
        // transactions copying the same key up conflict, so no update is lost.
        if self.upper.get(&dk)?.is_some() {
            return apply(&mut *self.upper);
        }
        let v = super::decode_counter(Some(&base));
        let v = match op {
            Atomic::Add(d) => v.wrapping_add(d as u64),
            Atomic::Max(m) => v.max(m),
        };
        self.upper.set(&dk, &v.to_le_bytes())
    }

    /// Whites out the lower keys in `[start, end)` with one range whiteout, merged with the
    /// range whiteouts it overlaps or touches (read with conflicts: two transactions merging
    /// the same ones cannot both commit).
    fn whiteout_range(&mut self, start: &[u8], end: &[u8]) -> Result<()> {
        if self.lower.get_range(start, end, 1, false)?.is_empty() {
            return Ok(());
        }
        let (mut s, mut e) = (start.to_vec(), end.to_vec());
        let mut from = with_prefix(RANGE, start);
        let to = [RANGE + 1];
        // One record per read: each read's conflict range ends at the record it returns, so
        // range whiteouts written elsewhere conflict with this one only when they are near.
        'scan: loop {
            let page = self.upper.get_range(&from, &to, 1, false)?;
            for (k, r_start) in &page {
                let r_end = &k[1..];
                if r_start.as_slice() > end {
                    break 'scan;
                }
                if r_start < &s {
                    s = r_start.clone();
                }
                if r_end > e.as_slice() {
                    e = r_end.to_vec();
                }
                self.upper.clear(k)?;
            }
            match page.last() {
                Some((last, _)) => {
                    from = last.clone();
                    from.push(0);
                }
                None => break,
            }
        }
        self.upper.set(&with_prefix(RANGE, &e), &s)
    }
}

impl Txn for LayeredTxn {
    fn get(&mut self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.read(key, true)
    }
    fn snapshot_get(&mut self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.read(key, false)
    }
    fn get_range(&mut self, s: &[u8], e: &[u8], limit: usize, rev: bool) -> Result<Vec<KeyValue>> {
        self.read_range(s, e, limit, rev, true)
    }
    fn snapshot_get_range(
        &mut self,
        s: &[u8],
        e: &[u8],
        limit: usize,
        rev: bool,
    ) -> Result<Vec<KeyValue>> {
        self.read_range(s, e, limit, rev, false)
    }
    fn set(&mut self, key: &[u8], value: &[u8]) -> Result<()> {
        self.upper.set(&with_prefix(DATA, key), value)
    }
    fn clear(&mut self, key: &[u8]) -> Result<()> {
        self.upper.clear(&with_prefix(DATA, key))?;
        if self.lower.get(key)?.is_some() {
            self.upper.set(&with_prefix(WHITEOUT, key), b"")?;
        }
        Ok(())
    }
    fn clear_range(&mut self, start: &[u8], end: &[u8]) -> Result<()> {
        if start >= end {
            return Ok(());
        }
        self.upper.clear_range(&with_prefix(DATA, start), &with_prefix(DATA, end))?;
        self.whiteout_range(start, end)
    }
    fn atomic_add(&mut self, key: &[u8], delta: i64) -> Result<()> {
        self.atomic(key, Atomic::Add(delta))
    }
    fn atomic_max(&mut self, key: &[u8], value: u64) -> Result<()> {
        self.atomic(key, Atomic::Max(value))
    }
    fn commit(self: Box<Self>, durable: bool) -> Result<()> {
        self.upper.commit(durable)
    }
    fn refresh(&mut self) -> Result<()> {
        self.upper.refresh()
    }
}
