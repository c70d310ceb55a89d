//! The serving side: the process that owns a store's RocksDB files answers other processes'
//! transactions on `txvfs.sock` in the store directory, one thread per connection, each
//! connection running its transactions on the owner's own backend (so one resolver checks
//! every process's commits, and durable commits of all processes share fsyncs).
//!
//! Nothing a client sends can hurt the store or the other connections: a malformed message is
//! answered with an error saying so and closes its connection, and its open transaction is
//! dropped (rolled back); a transaction left idle longer than [`IDLE_TXN`] is ended (rolled
//! back, so a stuck or stopped client cannot pin a transaction's snapshot for ever) and its
//! next request answered with a retryable error saying so, the connection staying up for the
//! client's next transaction; a request begun but not finished within [`FRAME_WAIT`] closes
//! its connection.

mod accept;
mod cached_reads;
mod hello;
mod wire;

use cached_reads::range_reply;
use hello::{hello_reply, read_hello, send_hello_reply};
pub use wire::replies_sent;
use wire::{next_frame, send_error, send_reply, FdReader, Next};

use super::alive::Alive;
use super::area::Area;
use super::endpoint::{self, Endpoint};
use super::protocol::{self, op, Fields, Frame};
use super::ring::RingWriter;
use super::spin::{Side, Spinner};
use super::{receipts, snapshot, waits, AloneState};
use crate::error::{Error, ErrorKind, Result};
use crate::kv::rocks::RocksBackend;
use crate::kv::{Backend, Txn};
use parking_lot::Mutex;
use std::collections::HashMap;
use std::io::BufReader;
use std::os::fd::OwnedFd;
use std::os::unix::io::AsRawFd;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

/// How long a client's transaction may sit without a request before the server ends it.
/// `TXVFS_IDLE_TXN_MS` in the owner's environment replaces it (for tests).
pub const IDLE_TXN: Duration = Duration::from_secs(30);

/// [`IDLE_TXN`], or the owner's `TXVFS_IDLE_TXN_MS`.
fn idle_txn_limit() -> Duration {
    std::env::var("TXVFS_IDLE_TXN_MS")
        .ok()
        .and_then(|v| v.parse().ok())
        .map(Duration::from_millis)
        .unwrap_or(IDLE_TXN)
}

/// The error the next request of a transaction ended for idleness gets (retryable).
fn idle_error(limit: Duration) -> Error {
    Error::new(
        ErrorKind::TooOld,
        format!(
            "the store's owner (process {}) ended this transaction: it was idle (no request) \
             for more than {limit:?}; nothing it wrote was committed: retry it",
            std::process::id()
        ),
    )
}

/// How long the rest of a request may take to arrive, without progress, once its first byte
/// has: a client stopped or stuck in the middle of one gets its connection closed, instead of
/// holding a server thread for ever.
pub const FRAME_WAIT: Duration = Duration::from_secs(5);

/// A running server; [`Server::stop`] (or dropping it) closes every connection and waits for
/// their threads, so the backend is no longer used when it returns.
pub(crate) struct Server {
    stop: Arc<AtomicBool>,
    listener: UnixListener,
    conns: Arc<Mutex<HashMap<u64, UnixStream>>>,
    threads: Arc<Mutex<Vec<JoinHandle<()>>>>,
    accept: Option<JoinHandle<()>>,
    stopped: bool,
    /// Where it listens.
    endpoint: Endpoint,
    /// The ring it offers, marked closed once it stops serving.
    ring: Option<Arc<Mutex<RingWriter>>>,
}

impl Server {
    /// Starts serving `backend` on the socket in `dir`, replacing a stale socket file left by
    /// a previous owner (the caller holds the owner lock, so no live server uses it), or on
    /// an abstract socket published in the owner file where `dir` cannot hold a socket file
    /// (see `endpoint.rs`).
    /// The first connection makes `sharing` shared (its hooks run before it is served).
    /// `ring`: the change ring this owner writes, offered to clients for their caches;
    /// `bell`: the store's bell (`bell.rs`); both handed to each client with its hello reply.
    pub(crate) fn start(
        dir: &Path,
        backend: Arc<RocksBackend>,
        sharing: Arc<AloneState>,
        ring: Option<Arc<Mutex<RingWriter>>>,
        bell: Option<OwnedFd>,
    ) -> Result<Server> {
        let (listener, endpoint) = endpoint::listen(dir).map_err(|e| {
            Error::new(
                ErrorKind::Backend,
                format!("{}: cannot serve other processes: {e}", backend.describe()),
            )
        })?;
        if let Some(name) = endpoint.published() {
            backend.publish_socket(name);
        }
        // Tells clients' lock requests which processes are alive (a probe of its own: the
        // owner's own liveness locks count as another holder's, as they should).
        let alive = Alive::open(dir).ok().map(Arc::new);
        let stop = Arc::new(AtomicBool::new(false));
        let conns: Arc<Mutex<HashMap<u64, UnixStream>>> = Default::default();
        let threads: Arc<Mutex<Vec<JoinHandle<()>>>> = Default::default();
        // Without a descriptor of the ring, clients are not offered it (they read uncached).
        let ring_fd = ring.as_ref().and_then(|r| r.lock().share().ok()).map(Arc::new);
        let ring = ring.filter(|_| ring_fd.is_some());
        let offered = ring.clone();
        let bell_fd = bell.map(Arc::new);
        let accept = {
            let door = accept::Door {
                listener: listener.try_clone().map_err(socket_err)?,
                dir: dir.to_path_buf(),
                endpoint: endpoint.clone(),
                stop: stop.clone(),
                conns: conns.clone(),
                threads: threads.clone(),
            };
            std::thread::Builder::new()
                .name("txvfs-serve".into())
                .spawn(move || {
                    let serving = Serving { backend, ring, alive, ring_fd, bell_fd };
                    accept::accept_loop(door, serving, sharing)
                })
                .map_err(socket_err)?
        };
        Ok(Server {
            stop,
            listener,
            conns,
            threads,
            accept: Some(accept),
            stopped: false,
            endpoint,
            ring: offered,
        })
    }

    /// Stops serving: closes the listener, ends every connection after the requests it has
    /// already received (a commit sent before the stop is carried out and answered: a clean
    /// exit drains in-flight commits; their clients then see the connection end and
    /// reconnect, to the next owner) and joins every thread.
    pub(crate) fn stop(&mut self) {
        if self.stopped {
            return;
        }
        self.stopped = true;
        self.stop.store(true, Ordering::SeqCst);
        // SAFETY: shutting down our own listening socket wakes the blocked accept().
        unsafe { libc::shutdown(self.listener.as_raw_fd(), libc::SHUT_RDWR) };
        if let Some(t) = self.accept.take() {
            let _ = t.join();
        }
        for s in self.conns.lock().values() {
            // Reading side only: what is queued is still read and answered, then the reads
            // end; a client's later request fails at once (EPIPE).
            let _ = s.shutdown(std::net::Shutdown::Read);
        }
        let threads = std::mem::take(&mut *self.threads.lock());
        for t in threads {
            let _ = t.join();
        }
        // Clients reading from their caches must ask the next owner from now on.
        if let Some(r) = &self.ring {
            r.lock().close();
        }
    }

    /// Where it listens (to remove the socket file once stopped).
    pub(crate) fn endpoint(&self) -> &Endpoint {
        &self.endpoint
    }

    /// Forgets the server without touching its sockets: in a forked child, whose copies of
    /// the descriptors share the parent's sockets (a shutdown would stop the parent's server).
    pub(crate) fn abandon(mut self) {
        self.stopped = true;
        self.accept.take();
        std::mem::forget(self);
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop();
    }
}

fn socket_err(e: std::io::Error) -> Error {
    Error::new(ErrorKind::Backend, format!("store socket: {e}"))
}

/// What every connection serves.
#[derive(Clone)]
struct Serving {
    backend: Arc<RocksBackend>,
    ring: Option<Arc<Mutex<RingWriter>>>,
    /// A liveness probe, for lock requests.
    alive: Option<Arc<Alive>>,
    /// The descriptors of the ring's and the bell's memory, handed to clients.
    ring_fd: Option<Arc<OwnedFd>>,
    bell_fd: Option<Arc<OwnedFd>>,
}

/// One connection's state: its transaction, and the first error of that transaction that no
/// reply has carried yet (from a request without a reply).
struct Session<'a> {
    backend: &'a RocksBackend,
    ring: Option<Arc<Mutex<RingWriter>>>,
    /// The connection's socket, to see whether its client gave up before a commit.
    peer: i32,
    txn: Option<Box<dyn Txn>>,
    failed: Option<Error>,
    /// The snapshot this connection pins for its client (see `snapshot.rs`).
    held: Option<snapshot::Held>,
    /// The memory of the last large reply, for the next range reply.
    spare: Vec<u8>,
    /// The client's reply area, when it passed one (`area.rs`).
    area: Option<Area>,
    /// A liveness probe, for lock requests.
    alive: Option<Arc<Alive>>,
    /// The descriptors attached to the requests read and not yet handled (a lock request's: the
    /// client's own descriptor of the store's liveness file, `alive.rs`).
    attached: Vec<OwnedFd>,
}

fn no_txn() -> Error {
    Error::new(ErrorKind::Invalid, "request outside a transaction on the store's socket")
}

/// Replies keep their memory for the next large one, up to this size.
const SPARE_MAX: usize = 8 << 20;

impl Session<'_> {
    /// Keeps a sent reply's memory for the next large reply.
    fn recycle(&mut self, reply: Vec<u8>) {
        if (protocol::SPARE_MIN..=SPARE_MAX).contains(&reply.capacity()) {
            self.spare = reply;
        }
    }

    /// The transaction, or the error that doomed it.
    fn txn(&mut self) -> Result<&mut Box<dyn Txn>> {
        if let Some(e) = &self.failed {
            return Err(e.clone());
        }
        self.txn.as_mut().ok_or_else(no_txn)
    }

    /// Runs a request that has no reply; an error is kept for the next reply.
    fn quietly(&mut self, f: impl FnOnce(&mut Box<dyn Txn>) -> Result<()>) {
        if let Err(e) = self.txn().and_then(f) {
            self.failed.get_or_insert(e);
        }
    }

    /// Handles one request; returns the reply, if it has one. Err: close the connection.
    fn handle(&mut self, frame: &[u8]) -> Result<Option<Vec<u8>>> {
        let (code, mut f) = Fields::of(frame)?;
        let reply = match code {
            op::BEGIN => {
                self.txn = None;
                self.failed = None;
                match self.backend.begin() {
                    Ok(t) => self.txn = Some(t),
                    Err(e) => self.failed = Some(e),
                }
                None
            }
            op::BEGIN_AT => {
                let (epoch, from) = (f.u64()?, f.u64()?);
                let mut points = Vec::new();
                for _ in 0..f.u64()? {
                    points.push(f.bytes()?);
                }
                let mut ranges = Vec::new();
                for _ in 0..f.u64()? {
                    ranges.push((f.bytes()?, f.bytes()?));
                }
                self.txn = None;
                self.failed = None;
                let r = self.begin_at(epoch, from, &points, &ranges);
                if let Err(e) = &r {
                    self.failed = Some(e.clone());
                }
                Some(r.map(|v| Frame::new(op::OK).u64(v).finish()))
            }
            op::ROLLBACK => {
                self.txn = None;
                self.failed = None;
                None
            }
            op::SET => {
                let (k, v) = (f.bytes()?, f.bytes()?);
                self.quietly(|t| t.set(k, v));
                None
            }
            op::CLEAR => {
                let k = f.bytes()?;
                self.quietly(|t| t.clear(k));
                None
            }
            op::CLEAR_RANGE => {
                let (s, e) = (f.bytes()?, f.bytes()?);
                self.quietly(|t| t.clear_range(s, e));
                None
            }
            op::ATOMIC_ADD => {
                let (k, d) = (f.bytes()?, f.u64()?);
                self.quietly(|t| t.atomic_add(k, d as i64));
                None
            }
            op::ATOMIC_MAX => {
                let (k, m) = (f.bytes()?, f.u64()?);
                self.quietly(|t| t.atomic_max(k, m));
                None
            }
            op::EXPECT_ABSENT => {
                let k = f.bytes()?;
                self.quietly(|t| match t.get(k)? {
                    None => Ok(()),
                    Some(_) => Err(Error::new(
                        ErrorKind::Conflict,
                        "transaction conflict: a key the client took as absent exists; retry it",
                    )),
                });
                None
            }
            op::SET_VERSIONSTAMPED => {
                let (p, v) = (f.bytes()?, f.bytes()?);
                self.quietly(|t| t.set_versionstamped_key(p, v));
                None
            }
            op::GET => {
                let (snapshot, k) = (f.u8()? != 0, f.bytes()?);
                let r =
                    self.txn().and_then(|t| if snapshot { t.snapshot_get(k) } else { t.get(k) });
                Some(r.map(|v| match v {
                    Some(v) => Frame::new(op::OK).u8(1).bytes(&v).finish(),
                    None => Frame::new(op::OK).u8(0).finish(),
                }))
            }
            op::GET_RANGE => {
                let (snapshot, s, e) = (f.u8()? != 0, f.bytes()?, f.bytes()?);
                let (limit, reverse) = (f.u64()? as usize, f.u8()? != 0);
                let buf = std::mem::take(&mut self.spare);
                let t = match &self.failed {
                    Some(e) => Err(e.clone()),
                    None => self.txn.as_mut().ok_or_else(no_txn),
                };
                let area = self.area.as_mut();
                Some(
                    t.and_then(|t| {
                        range_reply(&mut **t, snapshot, s, e, limit, reverse, buf, area)
                    }),
                )
            }
            op::COMMIT => {
                let durable = f.u8()? != 0;
                // The commit id, from clients that ask for a receipt.
                let id = if f.done() { None } else { Some(f.bytes()?) };
                if waits::peer_hung_up(self.peer) {
                    // The client gave up waiting (see `waits::withdraw`) and was told that
                    // nothing changed: the transaction is dropped with the connection.
                    return Err(Error::new(ErrorKind::Invalid, "the client withdrew its commit"));
                }
                let r = self.txn().map(|_| ()).and_then(|()| {
                    let mut t = self.txn.take().ok_or_else(no_txn)?;
                    if let Some(id) = id {
                        // In the same write batch as the commit: there exactly when it is.
                        receipts::record(&mut *t, id)?;
                    }
                    t.commit_versioned(durable)
                });
                self.txn = None;
                self.failed = None;
                if id.is_some() && r.is_ok() {
                    receipts::collect(self.backend);
                }
                // The commit's version, for the client's cache (older clients ignore it).
                Some(r.map(|v| Frame::new(op::OK).u64(v.unwrap_or(0)).finish()))
            }
            op::OUTCOME => {
                let id = f.bytes()?;
                Some(
                    receipts::committed(self.backend, id)
                        .map(|c| Frame::new(op::OK).u8(c as u8).finish()),
                )
            }
            op::REFRESH => {
                Some(self.txn().and_then(|t| t.refresh()).map(|()| Frame::new(op::OK).finish()))
            }
            op::SYNC => Some(self.backend.sync().map(|()| Frame::new(op::OK).finish())),
            op::LOCKS => {
                let request = f.bytes()?;
                if waits::peer_hung_up(self.peer) {
                    // As for a commit: the client was told nothing changed.
                    return Err(Error::new(ErrorKind::Invalid, "the client withdrew its request"));
                }
                let alive = |p| self.alive.as_ref().map(|a| a.is_alive(p));
                // A request may act only for the client's own process: its lock on that id's
                // byte of txvfs.alive, through the descriptor attached to the request (closed
                // once checked: kept, it would keep a dead client's locks alive). It never
                // releases or overwrites another process's locks.
                // The oldest descriptor not yet taken: they come in the order of the requests.
                let theirs = (!self.attached.is_empty()).then(|| self.attached.remove(0));
                let probe = &self.alive;
                let ours = |fd: &OwnedFd| probe.as_ref().is_some_and(|a| a.same_file(fd));
                let theirs = theirs.filter(ours);
                let mut holds = |p: u64| {
                    probe.as_ref().zip(theirs.as_ref()).is_some_and(|(a, fd)| a.held_by(fd, p))
                };
                let r = crate::fs::leases::serve_request(self.backend, &alive, &mut holds, request);
                Some(r.map(|reply| Frame::new(op::OK).bytes(&reply).finish()))
            }
            op::SNAPSHOT | op::SNAPSHOT_GET | op::SNAPSHOT_RANGE | op::NAMED_SNAPSHOT => {
                Some(snapshot::serve(self.backend, &mut self.held, code, &mut f)?)
            }
            _ => {
                return Err(Error::new(
                    ErrorKind::Invalid,
                    format!("unknown request {code} on the store's socket"),
                ))
            }
        };
        if !f.done() {
            return Err(Error::new(
                ErrorKind::Invalid,
                "trailing bytes in a request on the store's socket",
            ));
        }
        Ok(reply.map(|r| r.unwrap_or_else(|e| protocol::error_frame(&e))))
    }
}

fn serve(stream: UnixStream, serving: Serving) {
    let Serving { backend, ring, alive, ring_fd, bell_fd } = serving;
    let backend = &*backend;
    protocol::widen_buffers(&stream);
    let Ok(read_half) = stream.try_clone() else { return };
    let mut reader = BufReader::with_capacity(64 << 10, FdReader::new(read_half));
    let writer = stream;
    let mut timeout;
    // Garbage (a bad frame length, a malformed or unknown request) is answered with an error
    // saying so, then the connection closes (its transaction, if any, is dropped); a stalled
    // or vanished peer's connection closes without one. The client sees a lost connection
    // (a retryable error) and reconnects.
    let garbage = |sock: &UnixStream, e: std::io::Error| {
        if e.kind() == std::io::ErrorKind::InvalidData {
            send_error(sock, &Error::new(ErrorKind::Invalid, format!("{e} on the store's socket")));
        }
    };
    // The first message must be a hello of this protocol's version; it may bring a reply
    // area (read straight from the socket, with the descriptor attached to it).
    let mut area = None;
    match read_hello(&writer) {
        Ok(Some((f, fds))) => {
            match Fields::of(&f).map(|(code, mut fl)| (code, fl.u64().ok(), fl)) {
                Ok((op::HELLO, Some(v), mut fl)) if v == protocol::VERSION as u64 => {
                    let flags = if fl.done() { 0 } else { fl.u64().unwrap_or(0) };
                    if flags & protocol::hello_flags::AREA != 0 {
                        area = fds.into_iter().next().and_then(|fd| Area::adopt(fd).ok());
                    }
                    let handed = [ring_fd.as_deref(), bell_fd.as_deref()];
                    let reply = hello_reply(backend, handed, area.is_some());
                    if send_hello_reply(&writer, &reply, handed).is_err() {
                        return;
                    }
                    timeout = Some(FRAME_WAIT);
                }
                _ => {
                    let e = Error::new(
                        ErrorKind::Invalid,
                        format!("expected a hello of protocol version {}", protocol::VERSION),
                    );
                    send_error(&writer, &e);
                    return;
                }
            }
        }
        Ok(None) => return,
        Err(e) => return garbage(&writer, e),
    }
    let limit = idle_txn_limit();
    let mut session = Session {
        backend,
        ring,
        peer: writer.as_raw_fd(),
        txn: None,
        failed: None,
        held: None,
        spare: Vec::new(),
        area,
        alive,
        attached: Vec::new(),
    };
    // Replies not written yet: those to requests the client sent together go out in one
    // write once the last of them is handled, so the client takes them in one read.
    let mut pending = Vec::new();
    let mut spinner = Spinner::new(Side::Owner);
    loop {
        if reader.buffer().is_empty() && !pending.is_empty() {
            if send_reply(&writer, &pending).is_err() {
                return;
            }
            pending.clear();
        }
        // A transaction idle for longer than IDLE_TXN is ended (rolled back): its next
        // request gets the error; the connection stays for the client's next transaction.
        let idle = session.txn.is_some().then_some(limit);
        // A client's next request is often microseconds away (the next call of a loop, the
        // commit after a read): wait for it awake a while; a connection whose next request
        // does not come soon stops spinning (`spin.rs`).
        let slept = match reader.buffer().is_empty() {
            true => spinner.until_readable(writer.as_raw_fd()),
            false => None,
        };
        let next = next_frame(&mut reader, &writer, idle, &mut timeout);
        if let Some(slept) = slept {
            spinner.woke(slept);
        }
        let frame = match next {
            Ok(Next::Frame(f)) => f,
            Ok(Next::Idle) => {
                session.txn = None;
                session.failed = Some(idle_error(limit));
                continue;
            }
            Ok(Next::End) => return,
            Err(e) => {
                // The replies to the requests before the bad one go first, as they did.
                if pending.is_empty() || send_reply(&writer, &pending).is_ok() {
                    garbage(&writer, e);
                }
                return;
            }
        };
        // What came attached to the bytes read so far, kept for the lock requests they belong
        // to: the buffered reader may take several requests' bytes (and their descriptors) in
        // one read, before the request that brought them is parsed. A few at most are kept.
        session.attached.extend(reader.get_mut().take_fds());
        let extra = session.attached.len().saturating_sub(super::area::MAX_FDS);
        session.attached.drain(..extra);
        match session.handle(&frame) {
            // A small reply waits for the others; one in the reply area goes at once (the
            // next request may write the area again), and so does a large one (not copied).
            Ok(Some(reply)) if reply.len() <= 4096 && reply.get(4) != Some(&op::OK_AREA) => {
                pending.extend_from_slice(&reply);
            }
            Ok(Some(reply)) => {
                if !pending.is_empty() && send_reply(&writer, &pending).is_err() {
                    return;
                }
                pending.clear();
                if send_reply(&writer, &reply).is_err() {
                    return;
                }
                session.recycle(reply);
            }
            Ok(None) => {}
            Err(e) => {
                if !pending.is_empty() && send_reply(&writer, &pending).is_err() {
                    return;
                }
                return send_error(&writer, &e);
            }
        }
    }
}
