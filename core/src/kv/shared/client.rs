//! The client side: a process that does not own a store's files runs its transactions on the
//! owner's backend over `txvfs.sock`. Connections are pooled; a transaction keeps one
//! connection from begin to commit. Requests without a reply (begin, writes, rollback) wait
//! in the connection's buffer and leave with the next request that has one, so a transaction
//! costs one round trip per read plus one for the commit (none for a read-only commit).
//!
//! When the connection breaks (the owner exited or was killed), the transaction fails with a
//! retryable conflict, or, if its commit was in flight, with CommitUnknown; the client is
//! marked lost and the next begin reconnects (see `SharedBackend::recover`).

use super::protocol::{self, op, Fields, Frame};
use super::socket_path;
use crate::error::{Error, ErrorKind, Result};
use crate::kv::owner::fork_generation;
use crate::kv::{KeyValue, Limits, Txn};
use parking_lot::Mutex;
use std::io::BufReader;
use std::os::unix::io::AsRawFd;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Idle connections kept per client.
const POOL: usize = 16;
/// Writes buffered before they are sent without waiting for a reply.
const FLUSH_AT: usize = 1 << 20;

struct Conn {
    stream: UnixStream,
    reader: BufReader<UnixStream>,
    /// Requests without a reply, not sent yet.
    out: Vec<u8>,
}

impl Conn {
    fn open(dir: &Path) -> std::io::Result<Conn> {
        let stream = socket_path(dir, |p| UnixStream::connect(p))?;
        let reader = BufReader::with_capacity(64 << 10, stream.try_clone()?);
        Ok(Conn { stream, reader, out: Vec::with_capacity(4096) })
    }

    /// Sends what is buffered plus `frame`, and reads the reply (OK and its fields, or the
    /// server's error). `Err(Lost { sent })`: the connection broke, after the request was
    /// handed to the socket (`sent`: the server may have acted on it) or before.
    fn call(&mut self, frame: Frame) -> std::result::Result<Result<Vec<u8>>, Lost> {
        frame.push_to(&mut self.out);
        self.flush().map_err(|_| Lost { sent: false })?;
        let lost = Lost { sent: true };
        let reply = protocol::read_frame(&mut self.reader).map_err(|_| lost)?.ok_or(lost)?;
        match reply.first() {
            Some(&op::OK) => Ok(Ok(reply)),
            Some(&op::ERR) => {
                Ok(Err(protocol::decode_error(Fields::of(&reply).map_err(|_| lost)?.1)))
            }
            _ => Err(lost),
        }
    }

    /// Sends what is buffered. With MSG_NOSIGNAL: a server that went away gives EPIPE, never
    /// a SIGPIPE that would kill a host program that has not ignored it.
    fn flush(&mut self) -> std::io::Result<()> {
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
    fn alive(&self) -> bool {
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

/// A broken connection; `sent`: the last request reached the socket before it broke.
#[derive(Clone, Copy)]
struct Lost {
    sent: bool,
}

fn to_io(e: Error) -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::InvalidData, e.to_string())
}

fn lost_io(_: Lost) -> std::io::Error {
    std::io::Error::new(
        std::io::ErrorKind::ConnectionReset,
        "connection to the store's server broke",
    )
}

/// A connection to a store's serving process.
pub(crate) struct Client {
    dir: PathBuf,
    pool: Mutex<Vec<Conn>>,
    limits: Limits,
    describe: String,
    server_pid: u32,
    /// Set when a connection broke: the server is probably gone.
    lost: AtomicBool,
    generation: u64,
}

impl Client {
    /// Connects to the process serving the store in `dir` and checks the protocol version.
    pub(crate) fn connect(dir: &Path) -> std::io::Result<Arc<Client>> {
        let mut conn = Conn::open(dir)?;
        let reply = conn
            .call(Frame::new(op::HELLO).u64(protocol::VERSION as u64))
            .map_err(lost_io)?
            .map_err(to_io)?;
        let parse = || -> Result<(Limits, u32, String)> {
            let (_, mut f) = Fields::of(&reply)?;
            let version = f.u64()?;
            if version != protocol::VERSION as u64 {
                return Err(Error::new(
                    ErrorKind::Invalid,
                    format!("server speaks protocol {version}"),
                ));
            }
            let limits = Limits {
                max_key: protocol::unopt(f.u64()?),
                max_value: protocol::unopt(f.u64()?),
                max_txn_bytes: protocol::unopt(f.u64()?),
                max_txn_duration: match f.u64()? {
                    u64::MAX => None,
                    ms => Some(Duration::from_millis(ms)),
                },
            };
            let pid = f.u64()? as u32;
            Ok((limits, pid, String::from_utf8_lossy(f.bytes()?).into_owned()))
        };
        let (limits, server_pid, describe) = parse().map_err(to_io)?;
        Ok(Arc::new(Client {
            dir: dir.to_path_buf(),
            pool: Mutex::new(vec![conn]),
            limits,
            describe,
            server_pid,
            lost: AtomicBool::new(false),
            generation: fork_generation(),
        }))
    }

    /// True once a connection broke, or in a forked child (whose connections are the
    /// parent's): the next begin must reconnect.
    pub(crate) fn lost(&self) -> bool {
        self.lost.load(Ordering::SeqCst) || self.generation != fork_generation()
    }

    pub(crate) fn limits(&self) -> Limits {
        self.limits
    }

    fn take_conn(&self) -> std::io::Result<Conn> {
        if let Some(c) = self.pool.lock().pop() {
            if c.alive() {
                return Ok(c);
            }
            // The server closed it: it has stopped or died; the caller recovers.
            return Err(std::io::Error::new(std::io::ErrorKind::ConnectionReset, "server gone"));
        }
        let mut c = Conn::open(&self.dir)?;
        c.call(Frame::new(op::HELLO).u64(protocol::VERSION as u64))
            .map_err(lost_io)?
            .map_err(to_io)?;
        Ok(c)
    }

    fn put_conn(&self, c: Conn) {
        let mut pool = self.pool.lock();
        if pool.len() < POOL && !self.lost() {
            pool.push(c);
        }
    }

    fn lose(&self) {
        self.lost.store(true, Ordering::SeqCst);
        self.pool.lock().clear();
    }

    fn lost_error(&self, during_commit: bool) -> Error {
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

    /// Starts a transaction (sent with its first read or its commit).
    pub(crate) fn begin(self: &Arc<Self>) -> Result<Box<dyn Txn>> {
        let mut conn = self.take_conn().map_err(|_| {
            self.lose();
            self.lost_error(false)
        })?;
        Frame::new(op::BEGIN).push_to(&mut conn.out);
        Ok(Box::new(ClientTxn { client: self.clone(), conn: Some(conn), writes: false }))
    }

    /// Makes every commit so far durable (the serving process's shared fsync).
    pub(crate) fn sync(self: &Arc<Self>) -> Result<()> {
        let mut conn = self.take_conn().map_err(|_| {
            self.lose();
            self.lost_error(false)
        })?;
        match conn.call(Frame::new(op::SYNC)) {
            Ok(r) => {
                self.put_conn(conn);
                r.map(|_| ())
            }
            Err(_) => {
                self.lose();
                Err(self.lost_error(false))
            }
        }
    }
}

/// A transaction run by the serving process for this one.
struct ClientTxn {
    client: Arc<Client>,
    /// None once the connection broke.
    conn: Option<Conn>,
    writes: bool,
}

impl ClientTxn {
    fn call(&mut self, frame: Frame, during_commit: bool) -> Result<Vec<u8>> {
        let conn = self.conn.as_mut().ok_or_else(|| self.client.lost_error(false))?;
        match conn.call(frame) {
            Ok(r) => r,
            Err(Lost { sent }) => {
                self.conn = None;
                self.client.lose();
                Err(self.client.lost_error(during_commit && sent))
            }
        }
    }

    fn send(&mut self, frame: Frame) -> Result<()> {
        let conn = self.conn.as_mut().ok_or_else(|| self.client.lost_error(false))?;
        frame.push_to(&mut conn.out);
        self.writes = true;
        if conn.out.len() >= FLUSH_AT && conn.flush().is_err() {
            self.conn = None;
            self.client.lose();
            return Err(self.client.lost_error(false));
        }
        Ok(())
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

    fn get_op(&mut self, key: &[u8], snapshot: bool) -> Result<Option<Vec<u8>>> {
        self.check_key(key)?;
        let reply = self.call(Frame::new(op::GET).u8(snapshot as u8).bytes(key), false)?;
        let (_, mut f) = Fields::of(&reply)?;
        Ok(match f.u8()? {
            0 => None,
            _ => Some(f.bytes()?.to_vec()),
        })
    }

    fn range_op(
        &mut self,
        start: &[u8],
        end: &[u8],
        limit: usize,
        reverse: bool,
        snapshot: bool,
    ) -> Result<Vec<KeyValue>> {
        self.check_key(start)?;
        self.check_key(end)?;
        let frame = Frame::new(op::GET_RANGE)
            .u8(snapshot as u8)
            .bytes(start)
            .bytes(end)
            .u64(limit as u64)
            .u8(reverse as u8);
        let reply = self.call(frame, false)?;
        let (_, mut f) = Fields::of(&reply)?;
        let n = f.u64()? as usize;
        let mut out = Vec::with_capacity(n.min(1 << 16));
        for _ in 0..n {
            out.push((f.bytes()?.to_vec(), f.bytes()?.to_vec()));
        }
        Ok(out)
    }
}

impl Drop for ClientTxn {
    fn drop(&mut self) {
        if let Some(mut conn) = self.conn.take() {
            // Rolled back: sent at once, so the server does not pin the snapshot meanwhile.
            Frame::new(op::ROLLBACK).push_to(&mut conn.out);
            if conn.flush().is_ok() {
                self.client.put_conn(conn);
            } else {
                self.client.lose();
            }
        }
    }
}

impl Txn for ClientTxn {
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
        self.range_op(start, end, limit, reverse, false)
    }
    fn snapshot_get_range(
        &mut self,
        start: &[u8],
        end: &[u8],
        limit: usize,
        reverse: bool,
    ) -> Result<Vec<KeyValue>> {
        self.range_op(start, end, limit, reverse, true)
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
        self.send(Frame::new(op::SET).bytes(key).bytes(value))
    }
    fn clear(&mut self, key: &[u8]) -> Result<()> {
        self.check_key(key)?;
        self.send(Frame::new(op::CLEAR).bytes(key))
    }
    fn clear_range(&mut self, start: &[u8], end: &[u8]) -> Result<()> {
        self.check_key(start)?;
        self.check_key(end)?;
        self.send(Frame::new(op::CLEAR_RANGE).bytes(start).bytes(end))
    }
    fn atomic_add(&mut self, key: &[u8], delta: i64) -> Result<()> {
        self.check_key(key)?;
        self.send(Frame::new(op::ATOMIC_ADD).bytes(key).u64(delta as u64))
    }
    fn atomic_max(&mut self, key: &[u8], value: u64) -> Result<()> {
        self.check_key(key)?;
        self.send(Frame::new(op::ATOMIC_MAX).bytes(key).u64(value))
    }
    fn set_versionstamped_key(&mut self, prefix: &[u8], value: &[u8]) -> Result<()> {
        self.check_key(prefix)?;
        self.send(Frame::new(op::SET_VERSIONSTAMPED).bytes(prefix).bytes(value))
    }
    fn commit(mut self: Box<Self>, durable: bool) -> Result<()> {
        if !self.writes {
            // Read-only: serializable at its snapshot; dropping sends the rollback.
            return Ok(());
        }
        let r = self.call(Frame::new(op::COMMIT).u8(durable as u8), true).map(|_| ());
        if let Some(conn) = self.conn.take() {
            self.client.put_conn(conn);
        }
        r
    }
    fn refresh(&mut self) -> Result<()> {
        self.call(Frame::new(op::REFRESH), false).map(|_| ())
    }
}
