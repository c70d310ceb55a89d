//! The client side: a process that does not own a store's files runs its transactions on the
//! owner's backend over the owner's socket (`endpoint.rs`). Connections are pooled; a transaction keeps one
//! connection from begin to commit. Requests without a reply (begin, writes, rollback) wait
//! in the connection's buffer and leave with the next request that has one, so a transaction
//! costs one round trip per read plus one for the commit (none for a read-only commit).
//!
//! When the connection breaks (the owner exited or was killed), the transaction fails with a
//! retryable conflict, or, if its commit was in flight, with the outcome its receipt shows
//! at the next owner (`client_txn.rs`, `receipts.rs`); the client is marked lost and the next
//! begin reconnects (see `SharedBackend::recover`). A transaction the owner ended for idling
//! (`server.rs`, `IDLE_TXN`) fails with the retryable TooOld, and only it: the connection stays.
//!
//! No wait is unbounded: every send and every reply is bounded by the store's `owner_timeout`
//! (see `waits.rs`); a stalled owner gives EBUSY, and the connection is dropped (not the client:
//! the owner is alive and serves again once it runs).

use super::alive::Alive;
use super::area::{self, Area};
use super::bell::Bell;
use super::client_cache::ClientCache;
use super::client_hello::{hello, parse_hello, pidfd};
use super::endpoint::Endpoint;
use super::protocol::{self, op, Fields, Frame};
use super::spin::{Side, Spinner};
use super::waits::{self, Outcome};
use super::SharedBackend;
use crate::error::{Error, ErrorKind, Result};
use crate::kv::owner::{fork_generation, TAKEOVER_QUIET};
use crate::kv::{Limits, Txn};
use parking_lot::Mutex;
use std::io::BufReader;
use std::os::fd::OwnedFd;
use std::os::unix::io::{AsRawFd, RawFd};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

/// Idle connections kept per client.
const POOL: usize = 16;

/// [`TAKEOVER_QUIET`] in nanoseconds.
const TAKEOVER_QUIET_NS: u64 = TAKEOVER_QUIET.as_nanos() as u64;
/// `Client::owner_seen` before the owner was first seen alive.
const NEVER: u64 = u64::MAX;

/// The top of [`Client::may_guess`]'s score.
const GUESS_MAX: i32 = 16;

/// Names this process's clients took as absent rightly, and wrongly (see [`guess_counts`]).
static GUESSES: [AtomicU64; 2] = [AtomicU64::new(0), AtomicU64::new(0)];

/// How often this process, as a client, took a name it was creating as absent without
/// reading it and was right, and how often it was wrong (or read a name instead, while
/// guesses were off, and found it absent, or present). For tests and measurements.
pub fn guess_counts() -> (u64, u64) {
    (GUESSES[0].load(Ordering::Relaxed), GUESSES[1].load(Ordering::Relaxed))
}

/// Requests this process sent to a store's owner and waited for (see [`round_trips`]).
static ROUND_TRIPS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// How many requests this process, as a client of shared stores, sent to their owners and
/// waited for the reply of (requests sent together in one write count once): what a client's
/// operation costs beyond its own work, on a machine where each costs tens of microseconds
/// to milliseconds. For measurements and tests.
pub fn round_trips() -> u64 {
    ROUND_TRIPS.load(Ordering::Relaxed)
}

/// Counts one round trip (see [`round_trips`]).
pub(super) fn count_round_trip() {
    ROUND_TRIPS.fetch_add(1, Ordering::Relaxed);
}
/// Writes buffered before they are sent without waiting for a reply.
pub(super) const FLUSH_AT: usize = 1 << 20;

pub(super) struct Conn {
    pub(super) stream: UnixStream,
    pub(super) reader: BufReader<UnixStream>,
    /// Requests without a reply, not sent yet.
    pub(super) out: Vec<u8>,
    /// The memory of the last large reply, for the next one (see [`Conn::recycle`]).
    spare: Vec<u8>,
    /// Where the server writes large range replies, once it mapped it (`area.rs`).
    pub(super) area: Option<Area>,
    /// Whether waits for replies on this connection spin first (`spin.rs`).
    spinner: Spinner,
}

impl Conn {
    /// Connects; the connect (a stopped server's listen backlog fills up) and every send and
    /// receive on the connection wait at most `timeout`: a timeout error then.
    fn open(at: &Endpoint, timeout: Duration) -> std::io::Result<Conn> {
        let stream = at.connect(timeout)?;
        protocol::widen_buffers(&stream);
        let t = Some(waits::socket_timeout(timeout));
        stream.set_read_timeout(t)?;
        stream.set_write_timeout(t)?;
        let reader = BufReader::with_capacity(64 << 10, stream.try_clone()?);
        let spinner = Spinner::new(Side::Client);
        Ok(Conn {
            stream,
            reader,
            out: Vec::with_capacity(4096),
            spare: Vec::new(),
            area: None,
            spinner,
        })
    }

    /// Sends what is buffered plus `frame`, and reads the reply (OK and its fields, or the
    /// server's error). `Err(Fail::Lost { sent })`: the connection broke, after the request
    /// was handed to the socket (`sent`: the server may have acted on it) or before.
    /// `Err(Fail::Stalled)`: the server did not take the request or answer in time; the
    /// connection is shut down (it must be dropped).
    pub(super) fn call(&mut self, frame: Frame) -> std::result::Result<Result<Vec<u8>>, Fail> {
        frame.push_to(&mut self.out);
        self.flush().map_err(|e| self.failed(&e, false))?;
        count_round_trip();
        self.reply()
    }

    /// Sends `frame` with the descriptors `fds` attached (nothing else may be buffered); the
    /// caller reads the reply.
    pub(super) fn send_with_fds(
        &mut self,
        frame: Frame,
        fds: &[RawFd],
    ) -> std::result::Result<(), Fail> {
        debug_assert!(self.out.is_empty());
        area::send_with_fds(self.stream.as_raw_fd(), &frame.finish(), fds)
            .map_err(|e| self.failed(&e, false))?;
        count_round_trip();
        Ok(())
    }

    /// Reads the reply to a request already sent (see [`Conn::call`]).
    pub(super) fn reply(&mut self) -> std::result::Result<Result<Vec<u8>>, Fail> {
        let slept = match self.reader.buffer().is_empty() {
            true => self.spinner.until_readable(self.stream.as_raw_fd()),
            false => None,
        };
        let read = protocol::read_frame_into(&mut self.reader, &mut self.spare);
        if let Some(slept) = slept {
            self.spinner.woke(slept);
        }
        let reply = match read {
            Ok(Some(r)) => r,
            Ok(None) => return Err(Fail::Lost { sent: true }),
            Err(e) => return Err(self.failed(&e, true)),
        };
        let lost = Fail::Lost { sent: true };
        match reply.first() {
            Some(&op::OK) | Some(&op::OK_AREA) => Ok(Ok(reply)),
            Some(&op::ERR) => {
                Ok(Err(protocol::decode_error(Fields::of(&reply).map_err(|_| lost)?.1)))
            }
            _ => Err(lost),
        }
    }

    /// Gives back a reply read: a large one's memory is reused by the next (fresh pages of a
    /// megabyte reply cost more than reading it).
    pub(super) fn recycle(&mut self, reply: Vec<u8>) {
        if (protocol::SPARE_MIN..=8 << 20).contains(&reply.capacity()) {
            self.spare = reply;
        }
    }

    /// What an I/O error on the connection means: a timeout stalls it (and withdraws what the
    /// server has not read), anything else breaks it.
    pub(super) fn failed(&self, e: &std::io::Error, sent: bool) -> Fail {
        if waits::is_timeout(e) {
            Fail::Stalled { withdrawn: waits::withdraw(self.stream.as_raw_fd()) }
        } else {
            Fail::Lost { sent }
        }
    }

    /// Sends what is buffered. With MSG_NOSIGNAL: a server that went away gives EPIPE, never
    /// a SIGPIPE that would kill a host program that has not ignored it.
    pub(super) fn flush(&mut self) -> std::io::Result<()> {
        let mut sent = 0;
        while sent < self.out.len() {
            let rest = &self.out[sent..];
            // SAFETY: the descriptor is open and `rest` readable for its length.
            let n = unsafe {
                libc::send(
                    self.stream.as_raw_fd(),
                    rest.as_ptr().cast(),
                    rest.len(),
                    libc::MSG_NOSIGNAL,
                )
            };
            if n < 0 {
                let e = std::io::Error::last_os_error();
                if e.kind() == std::io::ErrorKind::Interrupted {
                    continue;
                }
                self.out.clear();
                return Err(e);
            }
            sent += n as usize;
        }
        self.out.clear();
        Ok(())
    }

    /// False when the server has closed this idle connection (it stopped or died).
    pub(super) fn alive(&self) -> bool {
        let mut b = 0u8;
        // SAFETY: peeks at most one byte into `b`, without blocking.
        let n = unsafe {
            libc::recv(
                self.stream.as_raw_fd(),
                (&mut b as *mut u8).cast(),
                1,
                libc::MSG_PEEK | libc::MSG_DONTWAIT,
            )
        };
        n < 0 && std::io::Error::last_os_error().kind() == std::io::ErrorKind::WouldBlock
    }
}

/// Why a call on a connection got no reply.
#[derive(Clone, Copy)]
pub(super) enum Fail {
    /// The connection broke; `sent`: the last request reached the socket before it broke.
    Lost { sent: bool },
    /// The server did not answer within the deadline; `withdrawn`: it had not read the whole
    /// request (and will not act on it).
    Stalled { withdrawn: bool },
}

/// Why a connection to the owner could not be made.
pub(crate) enum ConnectError {
    /// Nobody serves the socket (the owner is starting or has just gone): try again.
    NoServer,
    /// The server accepted the connection but did not answer in time, or refused it.
    Failed(Error),
}

/// A connection to a store's serving process.
pub(crate) struct Client {
    /// Where its server listens.
    endpoint: Endpoint,
    /// The deadline of every wait on the server (the store's `owner_timeout`).
    timeout: Duration,
    pool: Mutex<Vec<Conn>>,
    pub(super) limits: Limits,
    pub(super) describe: String,
    pub(super) server_pid: u32,
    /// The read cache kept exact by the owner's change ring (None: the owner offers none).
    pub(super) cache: Option<Mutex<ClientCache>>,
    /// The server runs lock requests (`op::LOCKS`).
    serves_locks: bool,
    /// The server checks keys taken as absent (`op::EXPECT_ABSENT`).
    pub(super) checks_absent: bool,
    /// When this client was made, and (in nanoseconds since then) when its owner was last
    /// seen alive (see [`Client::owner_exited`]).
    opened: Instant,
    owner_seen: AtomicU64,
    /// How often taking a name as absent was right lately (see [`Client::may_guess`]).
    guess_score: AtomicI32,
    /// This process's liveness file of the store, attached to every lock request: the server
    /// runs only those for the ids this process locks there.
    alive: Arc<Mutex<Option<Alive>>>,
    /// The store's bell, as the owner handed it (`bell.rs`).
    pub(super) bell: Option<Arc<Bell>>,
    /// The owner process (a pidfd), whose exit a client with a cache must see at its next
    /// begin: the ring it reads is that owner's alone.
    owner: Option<OwnedFd>,
    /// Set when a connection broke: the server is probably gone.
    lost: AtomicBool,
    /// Set when a call ran out of time: while the owner stays stopped, calls fail at once
    /// (an operation of many calls, as SQLite's, then fails after one deadline, not many).
    stalled: AtomicBool,
    generation: u64,
}

impl Client {
    /// Connects to the process serving the store in `dir` and checks the protocol version;
    /// waits at most `timeout` for each answer.
    pub(crate) fn connect(
        dir: &Path,
        timeout: Duration,
        describe: &str,
        alive: &Arc<Mutex<Option<Alive>>>,
    ) -> std::result::Result<Arc<Client>, ConnectError> {
        // Every connection of this client goes where the first went: after a failover, the
        // old owner's name is refused and the client recovers.
        let endpoint = Endpoint::of(dir);
        let mut conn = Conn::open(&endpoint, timeout).map_err(|e| {
            if waits::is_timeout(&e) {
                // Its backlog is full: the server is there but does not accept.
                ConnectError::Failed(waits::owner_stalled(
                    describe,
                    super::owner_info(dir).0,
                    Some(timeout),
                    Outcome::NoChange,
                ))
            } else {
                ConnectError::NoServer
            }
        })?;
        let (reply, fds) = hello(&mut conn, timeout, describe, || super::owner_info(dir).0)?;
        let (limits, server_pid, describe, features) =
            parse_hello(&reply).map_err(ConnectError::Failed)?;
        // The ring's and the bell's memory, as the owner handed them. A ring that cannot be
        // mapped here only costs the cache; a bell, the watchers' prompt wake-ups.
        let mut fds = fds.into_iter();
        let ring = (features & protocol::features::RING_FD != 0).then(|| fds.next()).flatten();
        let bell = (features & protocol::features::BELL_FD != 0).then(|| fds.next()).flatten();
        // The cache needs to see its owner's exit (a clean close marks the ring instead).
        let owner = super::access::peer_cred(&conn.stream).and_then(|c| pidfd(c.pid));
        let ring = ring.filter(|_| owner.is_some());
        let cache = ring.and_then(|fd| ClientCache::adopt(&fd).ok()).map(Mutex::new);
        let bell = bell.and_then(|fd| Bell::adopt(&fd).ok());
        Ok(Arc::new(Client {
            endpoint,
            timeout,
            pool: Mutex::new(vec![conn]),
            limits,
            describe,
            server_pid,
            cache,
            serves_locks: features & protocol::features::LOCKS != 0,
            checks_absent: features & protocol::features::EXPECT_ABSENT != 0,
            guess_score: AtomicI32::new(GUESS_MAX / 2),
            opened: Instant::now(),
            // Not seen yet: the first begin asks.
            owner_seen: AtomicU64::new(NEVER),
            alive: alive.clone(),
            bell,
            owner,
            lost: AtomicBool::new(false),
            stalled: AtomicBool::new(false),
            generation: fork_generation(),
        }))
    }

    /// Whether a name about to be created should be taken as absent without reading it
    /// (`Txn::assume_absent`): a right guess saves a round trip, a wrong one costs the
    /// commit that found the name and a second round trip, so guesses stop while they are
    /// wrong more than once in five (names overwritten, not created) and start again once
    /// the names read instead turn out absent.
    pub(super) fn may_guess(&self) -> bool {
        self.checks_absent && self.guess_score.load(Ordering::Relaxed) >= GUESS_MAX / 4
    }

    /// Counts a name taken as absent (or read instead) that was absent (`right`) or not.
    pub(super) fn count_guess(&self, right: bool) {
        GUESSES[!right as usize].fetch_add(1, Ordering::Relaxed);
        let step = if right { 1 } else { -(GUESS_MAX / 4) };
        let _ = self.guess_score.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |s| {
            Some((s + step).clamp(0, GUESS_MAX))
        });
    }

    /// True once a connection broke, or in a forked child (whose connections are the
    /// parent's): the next begin must reconnect.
    pub(crate) fn lost(&self) -> bool {
        self.lost.load(Ordering::SeqCst) || self.generation != fork_generation()
    }

    pub(crate) fn limits(&self) -> Limits {
        self.limits
    }

    /// A connection from the pool, or a new one. Errors are the caller's: a gone server marks
    /// the client lost (the caller recovers), a stalled one gives EBUSY.
    pub(super) fn take_conn(&self) -> Result<Conn> {
        self.check_stalled()?;
        let pooled = self.pool.lock().pop();
        if let Some(c) = pooled {
            if c.alive() {
                return Ok(c);
            }
            // The server closed it: it has stopped or died; the caller recovers.
            self.lose();
            return Err(self.lost_error(false));
        }
        let mut c = Conn::open(&self.endpoint, self.timeout).map_err(|e| {
            if waits::is_timeout(&e) {
                return self.stalled_error(Outcome::NoChange);
            }
            self.lose();
            self.lost_error(false)
        })?;
        match hello(&mut c, self.timeout, &self.describe, || Some(self.server_pid)) {
            Ok(_) => Ok(c),
            Err(ConnectError::Failed(e)) => {
                if e.kind() == ErrorKind::Busy {
                    self.stalled.store(true, Ordering::SeqCst);
                }
                Err(e)
            }
            Err(ConnectError::NoServer) => {
                self.lose();
                Err(self.lost_error(false))
            }
        }
    }

    /// Whether the owner process has exited, as far as a transaction beginning now must
    /// know: once its pidfd showed it alive, for [`TAKEOVER_QUIET`] no new owner can have
    /// committed anything (it stays quiet that long after taking the store over), so the
    /// cache is trusted without asking again (the poll was two fifths of a cached `stat`).
    fn owner_exited(&self) -> bool {
        let Some(fd) = self.owner.as_ref() else { return false };
        let now = self.opened.elapsed().as_nanos() as u64;
        let seen = self.owner_seen.load(Ordering::Relaxed);
        if seen != NEVER && now.saturating_sub(seen) < TAKEOVER_QUIET_NS {
            return false;
        }
        let mut p = libc::pollfd { fd: fd.as_raw_fd(), events: libc::POLLIN, revents: 0 };
        // SAFETY: polls one valid pollfd without waiting; a pidfd is readable once its
        // process has exited.
        let exited = unsafe { libc::poll(&mut p, 1, 0) > 0 };
        if !exited {
            // Alive at the poll, so at `now` (taken before it). Another thread may have
            // stored a later sighting meanwhile: keep the later one (NEVER is replaced).
            let _ = self.owner_seen.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |s| {
                Some(if s == NEVER { now } else { s.max(now) })
            });
        }
        exited
    }

    /// The error of a call that got no answer in time.
    pub(super) fn stalled_error(&self, outcome: Outcome) -> Error {
        self.stalled.store(true, Ordering::SeqCst);
        waits::owner_stalled(&self.describe, Some(self.server_pid), Some(self.timeout), outcome)
    }

    /// After a call ran out of time: fails at once while the owner is still stopped (nothing
    /// was sent); once it runs again, calls wait for it as usual.
    pub(super) fn check_stalled(&self) -> Result<()> {
        if self.stalled.load(Ordering::Relaxed) {
            if waits::proc_state(self.server_pid) == waits::ProcState::Stopped {
                return Err(waits::owner_stalled(
                    &self.describe,
                    Some(self.server_pid),
                    None,
                    Outcome::NoChange,
                ));
            }
            self.stalled.store(false, Ordering::SeqCst);
        }
        Ok(())
    }

    pub(super) fn put_conn(&self, c: Conn) {
        let mut pool = self.pool.lock();
        if pool.len() < POOL && !self.lost() {
            pool.push(c);
        }
    }

    pub(super) fn lose(&self) {
        self.lost.store(true, Ordering::SeqCst);
        self.pool.lock().clear();
    }

    pub(super) fn lost_error(&self, during_commit: bool) -> Error {
        if during_commit {
            Error::new(
                ErrorKind::CommitUnknown,
                format!(
                    "{}: lost contact with process {} serving the store while committing: the \
                     commit may or may not have taken effect",
                    self.describe, self.server_pid
                ),
            )
        } else {
            Error::new(
                ErrorKind::Conflict,
                format!(
                    "{}: lost contact with process {} serving the store (it exited); the \
                     transaction did not commit: retry it",
                    self.describe, self.server_pid
                ),
            )
        }
    }

    /// Sets the read cache's capacity in bytes (0: none).
    pub(crate) fn set_cache_capacity(&self, bytes: u64) {
        if let Some(c) = &self.cache {
            c.lock().set_capacity(usize::try_from(bytes).unwrap_or(usize::MAX));
        }
    }

    /// The read cache's counters, when it keeps anything.
    pub(crate) fn cache_stats(&self) -> Option<crate::kv::CacheStats> {
        self.cache.as_ref().and_then(|c| c.lock().stats())
    }

    /// Starts a transaction. With a read cache it reads there first and reaches the owner
    /// only when it must (`client_cache.rs`); otherwise the begin is sent with its first read
    /// or its commit. `backend` is asked for the commit's outcome when the connection is lost
    /// during it.
    pub(crate) fn begin(self: &Arc<Self>, backend: Weak<SharedBackend>) -> Result<Box<dyn Txn>> {
        let cache = self.cache.as_ref().map(|c| c.lock()).filter(|c| c.enabled());
        if cache.is_some() && self.owner_exited() {
            // Its ring no longer moves, but a new owner's commits do: nothing cached holds.
            self.lose();
            return Err(self.lost_error(false));
        }
        let cached = cache.map(|mut c| super::client_txn::Local {
            at: c.catch_up(),
            points: Vec::new(),
            ranges: Vec::new(),
            absent: Vec::new(),
        });
        let conn = match cached {
            Some(_) => None,
            None => {
                let mut conn = self.take_conn()?;
                Frame::new(op::BEGIN).push_to(&mut conn.out);
                Some(conn)
            }
        };
        Ok(Box::new(super::client_txn::ClientTxn {
            backend,
            client: self.clone(),
            conn,
            local: cached,
            begun: None,
            begin_pending: false,
            own: std::collections::HashMap::new(),
            writes: false,
            guessed: false,
            declined: None,
            failed: None,
        }))
    }

    /// Makes every commit so far durable (the serving process's shared fsync).
    pub(crate) fn sync(self: &Arc<Self>) -> Result<()> {
        self.call_alone(Frame::new(op::SYNC), None, |_| Outcome::NoChange).map(|_| ())
    }

    /// One request outside any transaction, on a connection of the pool: the reply, or the
    /// error a stall (`on_stall(withdrawn)` says what the caller may assume) or a lost
    /// server gives.
    /// `fd`: a descriptor to attach to the request.
    fn call_alone(
        &self,
        frame: Frame,
        fd: Option<RawFd>,
        on_stall: impl Fn(bool) -> Outcome,
    ) -> Result<Vec<u8>> {
        let mut conn = self.take_conn()?;
        let r = match fd {
            Some(fd) => conn.send_with_fds(frame, &[fd]).and_then(|()| conn.reply()),
            None => conn.call(frame),
        };
        match r {
            Ok(r) => {
                self.put_conn(conn);
                r
            }
            Err(Fail::Stalled { withdrawn }) => Err(self.stalled_error(on_stall(withdrawn))),
            Err(Fail::Lost { .. }) => {
                self.lose();
                Err(self.lost_error(false))
            }
        }
    }
}

impl Client {
    /// Runs a lock request (see `Sharing::serve_locks`) at the server: its reply, or None
    /// when the server does not run them.
    pub(crate) fn serve_locks(&self, request: &[u8]) -> Result<Option<Vec<u8>>> {
        if !self.serves_locks {
            return Ok(None);
        }
        let on_stall = |withdrawn| if withdrawn { Outcome::Withdrawn } else { Outcome::Unknown };
        let reply = {
            let alive = self.alive.lock();
            let fd = alive.as_ref().map(|a| a.raw_fd());
            self.call_alone(Frame::new(op::LOCKS).bytes(request), fd, on_stall)?
        };
        let (_, mut f) = Fields::of(&reply)?;
        Ok(Some(f.bytes()?.to_vec()))
    }

    /// Whether the commit with receipt `id` took effect (asked of this client's server).
    pub(crate) fn outcome(&self, id: &[u8]) -> Result<bool> {
        let reply =
            self.call_alone(Frame::new(op::OUTCOME).bytes(id), None, |_| Outcome::NoChange)?;
        let (_, mut f) = Fields::of(&reply)?;
        Ok(f.u8()? != 0)
    }
}
