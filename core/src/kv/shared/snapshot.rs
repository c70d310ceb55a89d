//! Snapshots of a shared store, from any process.
//!
//! In the owner, a snapshot is taken on its engine. It keeps the whole [`SharedBackend`] alive,
//! not only the engine: when the owner drops its `Store` and keeps a snapshot, this process
//! goes on serving the other processes for as long as the snapshot lives, instead of holding
//! RocksDB and the owner lock without serving (which locked every other process out). Dropping
//! the last snapshot then closes the store as dropping the `Store` would have: the server stops
//! (in-flight commits drained) and another process takes over.
//!
//! In a client, the snapshot is pinned at the owner for the client (`client_snapshot.rs`): a
//! connection asks for it ([`op::SNAPSHOT`]) and holds it for as long as it stays open, so it
//! is released when the client drops it or dies (the kernel closes the socket); reads name it
//! by its id on any connection. Named snapshots are created by the owner on request
//! ([`op::NAMED_SNAPSHOT`]), so every process can create them.

use super::client_snapshot::ClientSnapshot;
use super::protocol::{self, op, Fields, Frame};
use super::SharedBackend;
use crate::error::{Error, ErrorKind, Result};
use crate::kv::{Backend, Snapshots};
use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

impl Snapshots for SharedBackend {
    fn snapshot(&self) -> Result<Arc<dyn Backend>> {
        let keep = self.me.upgrade().map(|b| b as Arc<dyn Backend>);
        let disk = self.disk_space();
        let tries = std::cell::Cell::new(0);
        self.on_current(
            |local| local.snapshot_keeping(keep),
            |c| ClientSnapshot::take(c, disk, tries.replace(tries.get() + 1)),
        )
    }
}

/// Snapshots this process pins for its clients, by id.
fn held() -> &'static Mutex<HashMap<u64, Arc<dyn Backend>>> {
    static HELD: OnceLock<Mutex<HashMap<u64, Arc<dyn Backend>>>> = OnceLock::new();
    HELD.get_or_init(Default::default)
}

/// A snapshot pinned for a client by one connection: released when the connection ends.
pub(super) struct Held(u64);

impl Drop for Held {
    fn drop(&mut self) {
        held().lock().remove(&self.0);
    }
}

/// A new snapshot id: random per process, so an id from a former owner names nothing here.
fn new_id() -> u64 {
    static SEQ: AtomicU64 = AtomicU64::new(0);
    super::receipts::process_nonce().wrapping_add(SEQ.fetch_add(1, Ordering::Relaxed))
}

fn not_held(id: u64) -> Error {
    Error::new(
        ErrorKind::Backend,
        format!(
            "snapshot {id:#x} is not held by process {} serving the store (the connection that \
             held it ended, or the store changed owner): the snapshot is gone, take a new one",
            std::process::id()
        ),
    )
}

/// Serves a snapshot request (`code`, one of the snapshot operations) on a connection whose
/// pinned snapshot is `held`, on the owner's `backend`. Outer error: a malformed request (the
/// connection closes); inner: the error reply.
pub(super) fn serve(
    backend: &dyn Backend,
    held_here: &mut Option<Held>,
    code: u8,
    f: &mut Fields<'_>,
) -> Result<Result<Vec<u8>>> {
    Ok(match code {
        op::SNAPSHOT => {
            if held_here.is_some() {
                return Err(Error::new(ErrorKind::Invalid, "a connection holds one snapshot"));
            }
            backend.require(backend.snapshots(), "snapshots").and_then(|s| s.snapshot()).map(
                |snap| {
                    let id = new_id();
                    held().lock().insert(id, snap);
                    *held_here = Some(Held(id));
                    Frame::new(op::OK).u64(id).finish()
                },
            )
        }
        op::SNAPSHOT_GET => {
            let (id, key) = (f.u64()?, f.bytes()?);
            let at = held().lock().get(&id).cloned().ok_or_else(|| not_held(id));
            at.and_then(|b| b.begin()?.get(key)).map(|v| match v {
                Some(v) => Frame::new(op::OK).u8(1).bytes(&v).finish(),
                None => Frame::new(op::OK).u8(0).finish(),
            })
        }
        op::SNAPSHOT_RANGE => {
            let (id, s, e) = (f.u64()?, f.bytes()?, f.bytes()?);
            let (limit, reverse) = (f.u64()? as usize, f.u8()? != 0);
            let at = held().lock().get(&id).cloned().ok_or_else(|| not_held(id));
            at.and_then(|b| b.begin()?.get_range(s, e, limit, reverse))
                .and_then(|pairs| protocol::range_reply(&pairs))
        }
        op::NAMED_SNAPSHOT => {
            let name = f.bytes()?;
            std::str::from_utf8(name)
                .map_err(|_| Error::new(ErrorKind::Invalid, "snapshot name is not UTF-8"))
                .and_then(|name| {
                    backend.require(backend.named_snapshots(), "named snapshots")?.create(name)
                })
                .map(|()| Frame::new(op::OK).finish())
        }
        _ => return Err(Error::new(ErrorKind::Invalid, "not a snapshot request")),
    })
}
