//! The server's reads for clients: range replies encoded straight from the engine, and
//! BEGIN_AT, which continues a client's transaction at the version its cache read
//! (`client_cache.rs`).

use super::Session;
use crate::error::{Error, ErrorKind, Result};
use crate::kv::shared::area::Area;
use crate::kv::shared::protocol::{self, op, Frame};
use crate::kv::shared::ring;
use crate::kv::{Backend, Txn};
use std::time::{Duration, Instant};

/// The reply to GET_RANGE: the count, then each key and value; in the connection's reply
/// area when there is one and the reply fits (`area.rs`), else built in `buf` (the memory of
/// an earlier reply). A whole-range read is encoded straight from the backend's values (no
/// copy of the pairs first).
#[allow(clippy::too_many_arguments)]
pub(super) fn range_reply(
    t: &mut dyn Txn,
    snapshot: bool,
    s: &[u8],
    e: &[u8],
    limit: usize,
    reverse: bool,
    buf: Vec<u8>,
    area: Option<&mut Area>,
) -> Result<Vec<u8>> {
    let mut out = RangeEncoder {
        area: area.map(|a| a.bytes_mut()),
        at: 8,
        frame: Frame::reusing(buf, op::OK).u64(0),
        n: 0,
    };
    if !snapshot && limit == 0 && !reverse {
        t.visit_range(s, e, &mut |k, v| out.pair(k, v))?;
    } else {
        let pairs = if snapshot {
            t.snapshot_get_range(s, e, limit, reverse)?
        } else {
            t.get_range(s, e, limit, reverse)?
        };
        for (k, v) in &pairs {
            out.pair(k, v);
        }
    }
    out.finish()
}

/// Encodes a range reply: into the reply area while it fits (the count first, then the
/// pairs), else, moving what the area holds, into a frame.
struct RangeEncoder<'a> {
    area: Option<&'a mut [u8]>,
    /// Bytes of the area used.
    at: usize,
    frame: Frame,
    n: u64,
}

impl RangeEncoder<'_> {
    fn pair(&mut self, k: &[u8], v: &[u8]) {
        self.n += 1;
        if let Some(a) = &mut self.area {
            if self.at + 8 + k.len() + v.len() <= a.len() {
                for b in [k, v] {
                    a[self.at..self.at + 4].copy_from_slice(&(b.len() as u32).to_le_bytes());
                    a[self.at + 4..self.at + 4 + b.len()].copy_from_slice(b);
                    self.at += 4 + b.len();
                }
                return;
            }
            self.frame.put_raw(&a[8..self.at]);
            self.area = None;
        }
        self.frame.put_bytes(k);
        self.frame.put_bytes(v);
    }

    fn finish(mut self) -> Result<Vec<u8>> {
        if let Some(a) = self.area {
            a[..8].copy_from_slice(&self.n.to_le_bytes());
            return Ok(Frame::reusing(self.frame.into_buf(), op::OK_AREA)
                .u64(self.at as u64)
                .finish());
        }
        if self.frame.fields_len() + 16 > protocol::MAX_FRAME {
            return Err(Error::new(
                ErrorKind::TooLarge,
                "range read too large for one reply: read it with a limit",
            ));
        }
        self.frame.set_u64(0, self.n);
        Ok(self.frame.finish())
    }
}

impl Session<'_> {
    /// BEGIN_AT: begins at the latest version V' >= `from` (a client may have seen a commit
    /// in the ring an instant before it is visible here), checks that no commit in
    /// (`from`, V'] wrote what the client read from its cache, and adds those reads to the
    /// transaction's read set. Returns V'.
    pub(super) fn begin_at(
        &mut self,
        epoch: u64,
        from: u64,
        points: &[&[u8]],
        ranges: &[(&[u8], &[u8])],
    ) -> Result<u64> {
        let changed = |why: &str| {
            Error::new(
                ErrorKind::Conflict,
                format!("transaction conflict: {why} (a client's cached reads); retry it"),
            )
        };
        let ring = self.ring.clone().ok_or_else(|| changed("this owner keeps no change ring"))?;
        if ring.lock().epoch() != epoch {
            return Err(changed("the store's owner changed since the transaction began"));
        }
        if let Some(txn) = self.backend.begin_at(from) {
            // The snapshot the client read is still kept: the transaction reads exactly it,
            // and the commit's check covers its cached reads from there.
            let mut txn = txn?;
            add_reads(&mut *txn, points, ranges)?;
            self.txn = Some(txn);
            return Ok(from);
        }
        let deadline = Instant::now() + Duration::from_secs(1);
        let (mut txn, at) = loop {
            let t = self.backend.begin()?;
            let at = t.read_version().ok_or_else(|| changed("no read version"))?;
            if at >= from {
                break (t, at);
            }
            if Instant::now() > deadline {
                return Err(changed("the commit the client saw did not become visible"));
            }
            std::thread::sleep(Duration::from_micros(50));
        };
        let writes = ring
            .lock()
            .written_between(from, at)
            .ok_or_else(|| changed("its snapshot is older than the change ring"))?;
        if points.iter().any(|k| ring::touches(&writes, k))
            || ranges.iter().any(|(s, e)| ring::touches_range(&writes, s, e))
        {
            return Err(changed("data it read was changed by a concurrent commit"));
        }
        add_reads(&mut *txn, points, ranges)?;
        self.txn = Some(txn);
        Ok(at)
    }
}

/// Adds a client's cached reads to `txn`'s read-conflict set.
fn add_reads(txn: &mut dyn Txn, points: &[&[u8]], ranges: &[(&[u8], &[u8])]) -> Result<()> {
    for k in points {
        let mut end = k.to_vec();
        end.push(0);
        txn.add_read_conflict_range(k, &end)?;
    }
    for (s, e) in ranges {
        txn.add_read_conflict_range(s, e)?;
    }
    Ok(())
}
