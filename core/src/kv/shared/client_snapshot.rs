//! A snapshot taken by a client process: pinned at the owner by one connection held open for
//! the snapshot's life (see `snapshot.rs`), read by id over the client's pooled connections.
//! Dropping it closes that connection, which releases it at the owner; so does this process's
//! death. If the owner goes away, the snapshot goes with it: reads fail with an error that
//! says so, at once (no new owner can serve a view the old one pinned).

use super::client::{Client, Conn, Fail};
use super::protocol::{self, op, Fields, Frame};
use super::waits::Outcome;
use crate::error::{Error, ErrorKind, Result};
use crate::kv::frozen::read_only_error;
use crate::kv::owner::{fork_generation, forked_error};
use crate::kv::{Backend, KeyValue, Limits, Snapshots, Txn};
use parking_lot::Mutex;
use std::sync::Arc;

/// How many times taking a snapshot follows a lost connection to a new owner before giving
/// up (an owner that closes the connection on the request, as an older txvfs does, would
/// otherwise be retried for ever).
const TAKE_TRIES: u32 = 3;

struct Pinned {
    client: Arc<Client>,
    id: u64,
    /// The connection whose life is the snapshot's at the owner.
    holder: Mutex<Conn>,
    describe: String,
    disk_space: Option<(u64, u64)>,
    generation: u64,
    pid: u32,
}

/// A read-only backend reading a snapshot pinned at the store's owner.
pub(super) struct ClientSnapshot(Arc<Pinned>);

impl ClientSnapshot {
    /// Asks `client`'s server to pin a snapshot; `tries`: earlier attempts that lost their
    /// connection. A lost connection marks the client lost (the caller then finds the new
    /// owner and asks again).
    pub(super) fn take(
        client: &Arc<Client>,
        disk_space: Option<(u64, u64)>,
        tries: u32,
    ) -> Result<Arc<dyn Backend>> {
        let mut conn = client.take_conn()?;
        let reply = match conn.call(Frame::new(op::SNAPSHOT)) {
            Ok(r) => r?,
            Err(Fail::Stalled { .. }) => return Err(client.stalled_error(Outcome::NoChange)),
            Err(Fail::Lost { .. }) if tries + 1 >= TAKE_TRIES => {
                return Err(Error::new(
                    ErrorKind::Backend,
                    format!(
                        "{}: process {} serving the store closed the connection on a snapshot \
                         request {TAKE_TRIES} times (an older txvfs that cannot take snapshots \
                         for other processes?)",
                        client.describe, client.server_pid
                    ),
                ))
            }
            Err(Fail::Lost { .. }) => {
                client.lose();
                return Err(client.lost_error(false));
            }
        };
        let (_, mut f) = Fields::of(&reply)?;
        let id = f.u64()?;
        Ok(Arc::new(ClientSnapshot(Arc::new(Pinned {
            client: client.clone(),
            id,
            holder: Mutex::new(conn),
            describe: format!("{} (snapshot)", client.describe),
            disk_space,
            generation: fork_generation(),
            pid: std::process::id(),
        }))))
    }
}

/// Asks `client`'s server to create the named snapshot `name`. A lost connection marks the
/// client lost (the caller finds the new owner and asks again; a snapshot the old owner had
/// created by then makes that fail with `Exists`).
pub(super) fn create_named(client: &Arc<Client>, name: &str) -> Result<()> {
    let mut conn = client.take_conn()?;
    match conn.call(Frame::new(op::NAMED_SNAPSHOT).bytes(name.as_bytes())) {
        Ok(r) => {
            client.put_conn(conn);
            r.map(|_| ())
        }
        Err(Fail::Stalled { .. }) => Err(client.stalled_error(Outcome::NoChange)),
        Err(Fail::Lost { .. }) => {
            client.lose();
            Err(client.lost_error(false))
        }
    }
}

impl Pinned {
    /// The error once the owner that pinned the snapshot is gone.
    fn gone(&self) -> Error {
        Error::new(
            ErrorKind::Io,
            format!(
                "{}: process {} serving the store, which held this snapshot, has gone (exited \
                 or closed the store): the snapshot is gone with it; take a new one",
                self.describe, self.client.server_pid
            ),
        )
    }

    /// Sends one read at the snapshot and returns the reply.
    fn call(&self, frame: Frame) -> Result<Vec<u8>> {
        if self.generation != fork_generation() {
            return Err(forked_error(&self.describe, self.pid));
        }
        if !self.holder.lock().alive() {
            return Err(self.gone());
        }
        let mut conn =
            self.client
                .take_conn()
                .map_err(|e| if self.client.lost() { self.gone() } else { e })?;
        match conn.call(frame) {
            Ok(r) => {
                self.client.put_conn(conn);
                r
            }
            Err(Fail::Stalled { .. }) => Err(self.client.stalled_error(Outcome::NoChange)),
            Err(Fail::Lost { .. }) => {
                self.client.lose();
                Err(self.gone())
            }
        }
    }

    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        let reply = self.call(Frame::new(op::SNAPSHOT_GET).u64(self.id).bytes(key))?;
        let (_, mut f) = Fields::of(&reply)?;
        Ok(match f.u8()? {
            0 => None,
            _ => Some(f.bytes()?.to_vec()),
        })
    }

    fn range(
        &self,
        start: &[u8],
        end: &[u8],
        limit: usize,
        reverse: bool,
    ) -> Result<Vec<KeyValue>> {
        let frame = Frame::new(op::SNAPSHOT_RANGE)
            .u64(self.id)
            .bytes(start)
            .bytes(end)
            .u64(limit as u64)
            .u8(reverse as u8);
        protocol::decode_range(&self.call(frame)?)
    }
}

impl Backend for ClientSnapshot {
    fn begin(&self) -> Result<Box<dyn Txn>> {
        if self.0.generation != fork_generation() {
            return Err(forked_error(&self.0.describe, self.0.pid));
        }
        Ok(Box::new(SnapshotTxn(self.0.clone())))
    }
    fn limits(&self) -> Limits {
        // No transaction at a snapshot can grow old: it reads data that never changes.
        Limits { max_txn_duration: None, ..self.0.client.limits() }
    }
    fn sync(&self) -> Result<()> {
        Ok(())
    }
    fn describe(&self) -> String {
        self.0.describe.clone()
    }
    fn disk_space(&self) -> Option<(u64, u64)> {
        self.0.disk_space
    }
    fn read_only(&self) -> bool {
        true
    }
    fn snapshots(&self) -> Option<&dyn Snapshots> {
        Some(self)
    }
}

impl Snapshots for ClientSnapshot {
    fn snapshot(&self) -> Result<Arc<dyn Backend>> {
        Ok(Arc::new(ClientSnapshot(self.0.clone())))
    }
}

/// A transaction at a client's snapshot: reads only.
struct SnapshotTxn(Arc<Pinned>);

impl Txn for SnapshotTxn {
    fn get(&mut self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.0.get(key)
    }
    fn snapshot_get(&mut self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.0.get(key)
    }
    fn get_range(&mut self, s: &[u8], e: &[u8], limit: usize, rev: bool) -> Result<Vec<KeyValue>> {
        self.0.range(s, e, limit, rev)
    }
    fn snapshot_get_range(
        &mut self,
        s: &[u8],
        e: &[u8],
        limit: usize,
        rev: bool,
    ) -> Result<Vec<KeyValue>> {
        self.0.range(s, e, limit, rev)
    }
    fn set(&mut self, _key: &[u8], _value: &[u8]) -> Result<()> {
        Err(read_only_error(&self.0.describe))
    }
    fn clear(&mut self, _key: &[u8]) -> Result<()> {
        Err(read_only_error(&self.0.describe))
    }
    fn clear_range(&mut self, _start: &[u8], _end: &[u8]) -> Result<()> {
        Err(read_only_error(&self.0.describe))
    }
    fn atomic_add(&mut self, _key: &[u8], _delta: i64) -> Result<()> {
        Err(read_only_error(&self.0.describe))
    }
    fn atomic_max(&mut self, _key: &[u8], _value: u64) -> Result<()> {
        Err(read_only_error(&self.0.describe))
    }
    fn set_versionstamped_key(&mut self, _prefix: &[u8], _value: &[u8]) -> Result<()> {
        Err(read_only_error(&self.0.describe))
    }
    fn commit(self: Box<Self>, _durable: bool) -> Result<()> {
        // Nothing was written: serializable at the snapshot.
        Ok(())
    }
}
