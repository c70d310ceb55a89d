//! The server's front door: who is served (`access.rs`), and how many at once.
//!
//! Each connection costs the owner a thread and a descriptor, so their number is bounded
//! ([`MAX_CONNECTIONS`]): a process that opens connections without end (buggy or hostile)
//! gets an error for those over the bound, and the owner, its own calls and the connections
//! it serves carry on.

use super::wire::send_error;
use super::{serve, Serving};
use crate::error::{Error, ErrorKind};
use crate::kv::shared::{access, endpoint::Endpoint, AloneState};
use crate::kv::Backend;
use parking_lot::Mutex;
use std::collections::HashMap;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

/// The most connections an owner serves at once (every process's, together).
/// `TXVFS_MAX_CONNECTIONS` in the owner's environment replaces it (for tests).
pub const MAX_CONNECTIONS: usize = 1024;

fn max_connections() -> usize {
    std::env::var("TXVFS_MAX_CONNECTIONS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(MAX_CONNECTIONS)
}

/// What the accept loop shares with the server.
pub(super) struct Door {
    pub(super) listener: UnixListener,
    pub(super) dir: PathBuf,
    pub(super) endpoint: Endpoint,
    pub(super) stop: Arc<AtomicBool>,
    pub(super) conns: Arc<Mutex<HashMap<u64, UnixStream>>>,
    pub(super) threads: Arc<Mutex<Vec<JoinHandle<()>>>>,
}

/// Accepts connections until the server stops: each admitted one is served on a thread of
/// its own; a refused one gets an error saying why, then is closed.
pub(super) fn accept_loop(door: Door, serving: Serving, sharing: Arc<AloneState>) {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let Door { listener, dir, endpoint, stop, conns, threads } = door;
    let limit = max_connections();
    loop {
        let stream = match listener.accept() {
            Ok((s, _)) => s,
            Err(_) if stop.load(Ordering::SeqCst) => return,
            Err(e)
                if e.raw_os_error() == Some(libc::EMFILE)
                    || e.raw_os_error() == Some(libc::ENFILE) =>
            {
                std::thread::sleep(Duration::from_millis(10));
                continue;
            }
            Err(_) => continue,
        };
        if stop.load(Ordering::SeqCst) {
            return;
        }
        let what = format!("{} on {}", serving.backend.describe(), endpoint.describe());
        let peer = match access::admit(&dir, &stream, &what) {
            Ok(p) => p,
            Err(e) => {
                send_error(&stream, &e);
                continue;
            }
        };
        if conns.lock().len() >= limit {
            let e = Error::new(
                ErrorKind::Busy,
                format!(
                    "{what}: the owner (process {}) already serves {limit} connections; \
                     process {} was refused another: retry once some close",
                    std::process::id(),
                    peer.pid
                ),
            );
            send_error(&stream, &e);
            continue;
        }
        // Before anything is served: this process's locks go into the store.
        sharing.become_shared();
        let id = NEXT.fetch_add(1, Ordering::Relaxed);
        let Ok(clone) = stream.try_clone() else { continue };
        conns.lock().insert(id, clone);
        let (serving, conns2) = (serving.clone(), conns.clone());
        let spawned = std::thread::Builder::new().name("txvfs-conn".into()).spawn(move || {
            serve(stream, serving);
            conns2.lock().remove(&id);
        });
        let mut ts = threads.lock();
        ts.retain(|t| !t.is_finished());
        match spawned {
            Ok(t) => ts.push(t),
            Err(_) => {
                conns.lock().remove(&id);
            }
        }
    }
}
