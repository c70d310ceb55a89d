//! One transaction of a client process, run by the store's serving process: reads answered by
//! the client's cache stay here (`client_cache.rs`), other reads are round trips, writes wait
//! in the connection's buffer, the commit asks for a receipt (see `client.rs` for connections
//! and `receipts.rs` for outcomes).

use super::client::{Client, Conn, Fail, FLUSH_AT};
use super::client_cache::At;
use super::protocol::{op, Fields, Frame};
use super::receipts;
use super::waits::{self, Outcome};
use super::SharedBackend;
use crate::error::{Error, ErrorKind, Result};
use crate::kv::cache::MAX_VALUE;
use crate::kv::range_cache::RangeKeeper;
use crate::kv::{KeyValue, Txn};
use std::collections::HashMap;
use std::sync::{Arc, Weak};

/// What a transaction read from the client's cache before it reached the owner.
pub(super) struct Local {
    /// Where it reads the cache.
    pub(super) at: At,
    /// Keys read with a conflict, and ranges added to the conflict set.
    pub(super) points: Vec<Vec<u8>>,
    pub(super) ranges: Vec<(Vec<u8>, Vec<u8>)>,
    /// Keys taken as absent without reading ([`Txn::assume_absent`]): the owner checks them.
    pub(super) absent: Vec<Vec<u8>>,
}

/// A transaction run by the serving process for this one.
pub(super) struct ClientTxn {
    /// The store, to ask for the outcome of a commit whose connection was lost.
    pub(super) backend: Weak<SharedBackend>,
    pub(super) client: Arc<Client>,
    /// None before the transaction reached the owner (`local` is then set), and once the
    /// connection broke or stalled.
    pub(super) conn: Option<Conn>,
    /// Set until the transaction reaches the owner: it reads the cache.
    pub(super) local: Option<Local>,
    /// The cache epoch and the owner's read version, once BEGIN_AT was answered (reads
    /// from the owner then fill the cache).
    pub(super) begun: Option<(u64, u64)>,
    /// BEGIN_AT was sent or queued and its reply not read yet (it comes before the next).
    pub(super) begin_pending: bool,
    /// Values this transaction set (small ones) or cleared, by key: its own reads of them
    /// are answered here, and after the commit they fill the cache (`fill_own`).
    pub(super) own: HashMap<Vec<u8>, Option<Vec<u8>>>,
    pub(super) writes: bool,
    /// A key was taken as absent ([`Txn::assume_absent`]): the commit's outcome says whether
    /// rightly.
    pub(super) guessed: bool,
    /// A key not taken as absent (guesses were wrong lately): its read says whether it is.
    pub(super) declined: Option<Vec<u8>>,
    /// Why the connection was dropped: every later call fails with it.
    pub(super) failed: Option<Error>,
}

impl ClientTxn {
    fn conn(&mut self) -> Result<&mut Conn> {
        if self.conn.is_none() && self.failed.is_none() {
            if let Some(l) = self.local.take() {
                self.reach_owner(l)?;
            }
        }
        match &mut self.conn {
            Some(c) => Ok(c),
            None => Err(self.failed.clone().unwrap_or_else(|| self.client.lost_error(false))),
        }
    }

    /// The first request to the owner of a transaction that read the cache: a connection,
    /// and BEGIN_AT with what was read (its reply is read with the next request's).
    fn reach_owner(&mut self, l: Local) -> Result<()> {
        let mut conn = match self.client.take_conn() {
            Ok(c) => c,
            Err(e) => {
                self.failed = Some(e.clone());
                return Err(e);
            }
        };
        let mut frame =
            Frame::new(op::BEGIN_AT).u64(l.at.epoch).u64(l.at.version).u64(l.points.len() as u64);
        for k in &l.points {
            frame = frame.bytes(k);
        }
        frame = frame.u64(l.ranges.len() as u64);
        for (s, e) in &l.ranges {
            frame = frame.bytes(s).bytes(e);
        }
        frame.push_to(&mut conn.out);
        for k in &l.absent {
            Frame::new(op::EXPECT_ABSENT).bytes(k).push_to(&mut conn.out);
        }
        self.begin_pending = true;
        self.begun = Some((l.at.epoch, 0));
        self.conn = Some(conn);
        Ok(())
    }

    /// Drops the connection after `fail`, and returns the error for the call.
    fn drop_conn(&mut self, fail: Fail, during_commit: bool) -> Error {
        self.conn = None;
        let e = match fail {
            Fail::Lost { sent } => {
                self.client.lose();
                self.client.lost_error(during_commit && sent)
            }
            Fail::Stalled { withdrawn } => {
                self.client.stalled_error(match (during_commit, withdrawn) {
                    (false, _) => Outcome::NoChange,
                    (true, true) => Outcome::Withdrawn,
                    (true, false) => Outcome::Unknown,
                })
            }
        };
        // After the commit's outcome, the transaction is over; before, it failed.
        self.failed = Some(match e.kind() {
            ErrorKind::Busy => e.clone(),
            _ => self.client.lost_error(false),
        });
        e
    }

    fn call(&mut self, frame: Frame, during_commit: bool) -> Result<Vec<u8>> {
        let r = self.call_once(frame, during_commit);
        if let (true, Err(e)) = (self.guessed, &r) {
            // A name taken as absent was there (or another conflict: counted alike).
            if e.kind() == ErrorKind::Conflict {
                self.guessed = false;
                self.client.count_guess(false);
            }
        }
        r
    }

    fn call_once(&mut self, frame: Frame, during_commit: bool) -> Result<Vec<u8>> {
        if let Err(e) = self.client.check_stalled() {
            // Nothing of this request was sent: dropping the connection rolls back.
            self.conn = None;
            self.failed = Some(e.clone());
            return Err(e);
        }
        self.conn()?;
        let pending = self.begin_pending;
        let conn = self.conn.as_mut().expect("connected above");
        if !pending {
            return match conn.call(frame) {
                Ok(r) => r,
                Err(fail) => Err(self.drop_conn(fail, during_commit)),
            };
        }
        // BEGIN_AT's reply first: the owner's read version, or why the transaction failed
        // (the request's own reply then carries the same error).
        frame.push_to(&mut conn.out);
        let begun = match conn.flush() {
            Ok(()) => {
                super::client::count_round_trip();
                conn.reply().and_then(|r| Ok((r, conn.reply()?)))
            }
            Err(e) => Err(conn.failed(&e, false)),
        };
        self.begin_pending = false;
        match begun {
            Ok((Ok(b), r)) => {
                let (_, mut f) = Fields::of(&b)?;
                let at = f.u64()?;
                if let Some((_, v)) = &mut self.begun {
                    *v = at;
                }
                r
            }
            Ok((Err(e), _)) => {
                self.begun = None;
                Err(e)
            }
            Err(fail) => Err(self.drop_conn(fail, during_commit)),
        }
    }

    fn send(&mut self, frame: Frame) -> Result<()> {
        self.writes = true;
        let conn = self.conn()?;
        frame.push_to(&mut conn.out);
        if conn.out.len() >= FLUSH_AT {
            if let Err(e) = conn.flush() {
                let fail = conn.failed(&e, false);
                return Err(self.drop_conn(fail, false));
            }
        }
        Ok(())
    }

    /// The definite outcome of the commit `id` whose connection was lost (`lost` is the error
    /// to return when no owner can say): success, or a retryable conflict.
    fn resolve(&self, id: &[u8], lost: Error) -> Result<()> {
        let Some(backend) = self.backend.upgrade() else { return Err(lost) };
        match backend.commit_outcome(id) {
            Ok(true) => Ok(()),
            Ok(false) => Err(Error::new(
                ErrorKind::Conflict,
                format!(
                    "{}: lost contact with process {} serving the store while committing; the \
                     store's current owner has no receipt of the commit: it did not take \
                     effect: retry it",
                    self.client.describe, self.client.server_pid
                ),
            )),
            Err(e) => Err(Error::new(
                ErrorKind::CommitUnknown,
                format!("{}; its outcome could not be asked: {e}", lost.message()),
            )),
        }
    }

    fn check_key(&self, key: &[u8]) -> Result<()> {
        match self.client.limits.max_key {
            Some(max) if key.len() > max => Err(Error::new(
                ErrorKind::TooLarge,
                format!("key of {} bytes exceeds the backend's limit of {max}", key.len()),
            )),
            _ => Ok(()),
        }
    }

    /// A read-only transaction reading exactly version `at` of the ring (the cache answers
    /// what it holds at `at`; BEGIN_AT continues at the owner's kept snapshot of it).
    fn at(backend: Weak<SharedBackend>, client: Arc<Client>, at: At) -> ClientTxn {
        ClientTxn {
            backend,
            client,
            conn: None,
            local: Some(Local { at, points: Vec::new(), ranges: Vec::new(), absent: Vec::new() }),
            begun: None,
            begin_pending: false,
            own: HashMap::new(),
            writes: false,
            guessed: false,
            declined: None,
            failed: None,
        }
    }

    /// Commits; returns where this commit's state is read (its ring epoch and version), when
    /// known: not for a read-only transaction, nor for one whose outcome was asked of a new
    /// owner after a lost connection.
    fn commit_at(mut self: Box<Self>, durable: bool) -> Result<Option<At>> {
        if !self.writes {
            // Read-only: serializable at its snapshot; dropping sends the rollback.
            return Ok(None);
        }
        let id = receipts::new_id();
        let r = self.call(Frame::new(op::COMMIT).u8(durable as u8).bytes(&id), true);
        if self.guessed {
            self.client.count_guess(r.is_ok());
        }
        if let Some(conn) = self.conn.take() {
            self.client.put_conn(conn);
        }
        let r = r.map(|reply| {
            // The commit's version (0 or absent: not known) lets the cache keep what it wrote.
            let version = Fields::of(&reply).ok().and_then(|(_, mut f)| f.u64().ok());
            let (Some(version @ 1..), Some((epoch, _))) = (version, self.begun) else {
                return None;
            };
            if let Some(cache) = &self.client.cache {
                let own: Vec<_> = std::mem::take(&mut self.own).into_iter().collect();
                cache.lock().fill_own(epoch, version, &own);
            }
            Some(At { epoch, version })
        });
        match r {
            // The connection was lost after the commit left: the owner died or stopped
            // serving. Ask the current owner (after a failover) whether its receipt is there.
            Err(e) if e.kind() == ErrorKind::CommitUnknown && self.client.lost() => {
                self.resolve(&id, e).map(|()| None)
            }
            r => r,
        }
    }

    fn get_op(&mut self, key: &[u8], snapshot: bool) -> Result<Option<Vec<u8>>> {
        self.check_key(key)?;
        if let Some(v) = self.own.get(key) {
            // Its own write, as the owner's transaction would answer (no read conflict).
            return Ok(v.clone());
        }
        if let (Some(l), Some(cache)) = (&mut self.local, &self.client.cache) {
            if let Some(v) = cache.lock().get(l.at, key) {
                if !snapshot {
                    l.points.push(key.to_vec());
                }
                return Ok(v.map(|v| v.to_vec()));
            }
        }
        let reply = self.call(Frame::new(op::GET).u8(snapshot as u8).bytes(key), false)?;
        let (_, mut f) = Fields::of(&reply)?;
        let value = match f.u8()? {
            0 => None,
            _ => Some(f.bytes()?.to_vec()),
        };
        if self.declined.as_deref() == Some(key) {
            self.declined = None;
            self.client.count_guess(value.is_none());
        }
        // The owner's value at its read version, unless this transaction wrote (it may be
        // its own uncommitted write).
        if let (Some((epoch, at)), false, Some(cache)) =
            (self.begun, self.writes, &self.client.cache)
        {
            cache.lock().fill(epoch, at, key, value.as_deref());
        }
        Ok(value)
    }

    /// A range read at the owner; each pair is lent to `visit` straight from the reply.
    fn range_op(
        &mut self,
        start: &[u8],
        end: &[u8],
        limit: usize,
        reverse: bool,
        snapshot: bool,
        visit: &mut dyn FnMut(&[u8], &[u8]),
    ) -> Result<()> {
        self.check_key(start)?;
        self.check_key(end)?;
        let frame = Frame::new(op::GET_RANGE)
            .u8(snapshot as u8)
            .bytes(start)
            .bytes(end)
            .u64(limit as u64)
            .u8(reverse as u8);
        let reply = self.call(frame, false)?;
        // What the owner lent fills the cache too (a file's blocks: the next read of them is
        // answered here), as a point read's value does: each is its value at the owner's read
        // version, unless this transaction wrote.
        let client = self.client.clone();
        let fill = match (self.begun, self.writes, &client.cache) {
            (Some((epoch, at @ 1..)), false, Some(cache)) => Some((epoch, at, cache)),
            _ => None,
        };
        // A whole range (a directory listed) is kept whole as well, for the next listing.
        let mut keep = RangeKeeper::new(fill.is_some() && limit == 0 && !reverse && start < end);
        let (code, mut f) = Fields::of(&reply)?;
        let mut f = match (code, &self.conn) {
            // A large reply, in the connection's reply area (its length here).
            (op::OK_AREA, Some(conn)) => {
                let len = f.u64()? as usize;
                let area = conn.area.as_ref().and_then(|a| a.bytes(len));
                Fields::body(area.ok_or_else(|| {
                    Error::new(ErrorKind::Invalid, "bad reply area length on the store's socket")
                })?)
            }
            _ => f,
        };
        for _ in 0..f.u64()? {
            let (k, v) = (f.bytes()?, f.bytes()?);
            visit(k, v);
            keep.add(k, v);
            if let Some((epoch, at, cache)) = &fill {
                cache.lock().fill(*epoch, *at, k, Some(v));
            }
        }
        if let (Some(pairs), Some((epoch, at, cache))) = (keep.finish(), &fill) {
            cache.lock().fill_range(*epoch, *at, start, end, pairs);
        }
        if let Some(conn) = &mut self.conn {
            conn.recycle(reply);
        }
        Ok(())
    }

    fn range_vec(
        &mut self,
        start: &[u8],
        end: &[u8],
        limit: usize,
        reverse: bool,
        snapshot: bool,
    ) -> Result<Vec<KeyValue>> {
        let mut out = Vec::new();
        self.range_op(start, end, limit, reverse, snapshot, &mut |k, v| {
            out.push((k.to_vec(), v.to_vec()))
        })?;
        Ok(out)
    }
}

impl Drop for ClientTxn {
    fn drop(&mut self) {
        if self.begin_pending {
            // BEGIN_AT's reply is still on the way: the connection cannot be reused; closing
            // it rolls back.
            return;
        }
        if let Some(mut conn) = self.conn.take() {
            // Rolled back: sent at once, so the server does not pin the snapshot meanwhile.
            Frame::new(op::ROLLBACK).push_to(&mut conn.out);
            match conn.flush() {
                Ok(()) => self.client.put_conn(conn),
                // A stalled server: this connection is dropped (closing it rolls back).
                Err(e) if waits::is_timeout(&e) => {}
                Err(_) => self.client.lose(),
            }
        }
    }
}

impl Txn for ClientTxn {
    /// Not read: the owner checks it with BEGIN_AT (or with the next request, once the
    /// transaction reached it), saving a round trip for a name about to be created. A key
    /// this transaction wrote, or one the cache holds, is read instead (at no cost).
    fn assume_absent(&mut self, key: &[u8]) -> Result<bool> {
        self.check_key(key)?;
        if !self.client.checks_absent || self.own.contains_key(key) {
            return Ok(false);
        }
        let cache = self.client.cache.as_ref();
        if let (Some(l), Some(cache)) = (&self.local, cache) {
            if cache.lock().get(l.at, key).is_some() {
                return Ok(false);
            }
        }
        if !self.client.may_guess() {
            self.declined = Some(key.to_vec());
            return Ok(false);
        }
        // The commit must reach the owner, even if nothing else is written.
        (self.writes, self.guessed) = (true, true);
        match &mut self.local {
            Some(l) => l.absent.push(key.to_vec()),
            None => self.send(Frame::new(op::EXPECT_ABSENT).bytes(key))?,
        }
        Ok(true)
    }

    fn get(&mut self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.get_op(key, false)
    }
    fn snapshot_get(&mut self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.get_op(key, true)
    }
    fn get_range(
        &mut self,
        start: &[u8],
        end: &[u8],
        limit: usize,
        reverse: bool,
    ) -> Result<Vec<KeyValue>> {
        self.range_vec(start, end, limit, reverse, false)
    }
    fn visit_range(
        &mut self,
        start: &[u8],
        end: &[u8],
        visit: &mut dyn FnMut(&[u8], &[u8]),
    ) -> Result<()> {
        // Before it reached the owner, a transaction reads a whole range the cache holds
        // there, like a key: the range joins what BEGIN_AT later asks the owner to check.
        self.check_key(start)?;
        self.check_key(end)?;
        if let (Some(l), Some(cache)) = (&mut self.local, &self.client.cache) {
            let cached = cache.lock().get_range(l.at, start, end);
            if let Some(pairs) = cached {
                l.ranges.push((start.to_vec(), end.to_vec()));
                for (k, v) in pairs.iter() {
                    visit(k, v);
                }
                return Ok(());
            }
        }
        self.range_op(start, end, 0, false, false, visit)
    }
    fn get_with(&mut self, key: &[u8], read: &mut dyn FnMut(&[u8])) -> Result<bool> {
        // A hit lends the cached value (a copy per read was a fifth of a client's `stat`).
        if let Some(found) = self.cached_get_with(key, read)? {
            return Ok(found);
        }
        Ok(self.get_op(key, false)?.map(|v| read(&v)).is_some())
    }
    fn cached_get_with(&mut self, key: &[u8], read: &mut dyn FnMut(&[u8])) -> Result<Option<bool>> {
        self.check_key(key)?;
        if let Some(v) = self.own.get(key) {
            return Ok(Some(v.as_deref().map(read).is_some()));
        }
        if let (Some(l), Some(cache)) = (&mut self.local, &self.client.cache) {
            let cached = cache.lock().get(l.at, key);
            if let Some(v) = cached {
                l.points.push(key.to_vec());
                return Ok(Some(v.as_deref().map(read).is_some()));
            }
        }
        Ok(None)
    }
    fn snapshot_get_range(
        &mut self,
        start: &[u8],
        end: &[u8],
        limit: usize,
        reverse: bool,
    ) -> Result<Vec<KeyValue>> {
        self.range_vec(start, end, limit, reverse, true)
    }
    fn add_read_conflict_range(&mut self, start: &[u8], end: &[u8]) -> Result<()> {
        self.check_key(start)?;
        self.check_key(end)?;
        if let Some(l) = &mut self.local {
            l.ranges.push((start.to_vec(), end.to_vec()));
            return Ok(());
        }
        self.range_op(start, end, 0, false, false, &mut |_, _| {})
    }
    fn set(&mut self, key: &[u8], value: &[u8]) -> Result<()> {
        self.check_key(key)?;
        if let Some(max) = self.client.limits.max_value {
            if value.len() > max {
                return Err(Error::new(
                    ErrorKind::TooLarge,
                    format!("value of {} bytes exceeds the backend's limit of {max}", value.len()),
                ));
            }
        }
        self.send(Frame::new(op::SET).bytes(key).bytes(value))?;
        if value.len() <= MAX_VALUE {
            self.own.insert(key.to_vec(), Some(value.to_vec()));
        } else {
            self.own.remove(key);
        }
        Ok(())
    }
    fn clear(&mut self, key: &[u8]) -> Result<()> {
        self.check_key(key)?;
        self.send(Frame::new(op::CLEAR).bytes(key))?;
        self.own.insert(key.to_vec(), None);
        Ok(())
    }
    fn clear_range(&mut self, start: &[u8], end: &[u8]) -> Result<()> {
        self.check_key(start)?;
        self.check_key(end)?;
        self.send(Frame::new(op::CLEAR_RANGE).bytes(start).bytes(end))?;
        // Reads in the range go to the owner, which applies the clear.
        self.own.retain(|k, _| !(start <= k.as_slice() && k.as_slice() < end));
        Ok(())
    }
    fn atomic_add(&mut self, key: &[u8], delta: i64) -> Result<()> {
        self.check_key(key)?;
        self.send(Frame::new(op::ATOMIC_ADD).bytes(key).u64(delta as u64))?;
        self.own.remove(key);
        Ok(())
    }
    fn atomic_max(&mut self, key: &[u8], value: u64) -> Result<()> {
        self.check_key(key)?;
        self.send(Frame::new(op::ATOMIC_MAX).bytes(key).u64(value))?;
        self.own.remove(key);
        Ok(())
    }
    fn set_versionstamped_key(&mut self, prefix: &[u8], value: &[u8]) -> Result<()> {
        self.check_key(prefix)?;
        self.send(Frame::new(op::SET_VERSIONSTAMPED).bytes(prefix).bytes(value))
    }
    fn commit(self: Box<Self>, durable: bool) -> Result<()> {
        self.commit_at(durable).map(|_| ())
    }
    fn pins_commit(&self) -> bool {
        self.begun.is_some() && self.client.cache.is_some()
    }
    fn commit_pinned(self: Box<Self>, durable: bool) -> Result<Option<Box<dyn Txn>>> {
        let (backend, client) = (self.backend.clone(), self.client.clone());
        Ok(self.commit_at(durable)?.map(|at| Box::new(ClientTxn::at(backend, client, at)) as _))
    }
    fn refresh(&mut self) -> Result<()> {
        self.call(Frame::new(op::REFRESH), false).map(|_| ())
    }
}
