//! A connection's reads and writes: requests read with the waits that keep a stalled client
//! from holding a server thread ([`FRAME_WAIT`], the idle limit of a transaction), replies
//! sent without ever blocking on a client that stopped reading.

use super::FRAME_WAIT;
use crate::error::Error;
use crate::kv::shared::area;
use crate::kv::shared::{protocol, waits};
use std::io::{BufRead, BufReader, Read};
use std::os::fd::OwnedFd;
use std::os::unix::io::AsRawFd;
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Writes of replies to clients by this process's connection threads (see [`replies_sent`]).
static REPLIES_SENT: AtomicU64 = AtomicU64::new(0);

/// How many times this process, serving a store, wrote replies to its clients' sockets (one
/// write may carry the replies to several requests the client sent together). For tests.
#[doc(hidden)]
pub fn replies_sent() -> u64 {
    REPLIES_SENT.load(Ordering::Relaxed)
}

/// Sends an error reply without waiting (the peer may have stopped reading), before its
/// connection closes.
pub(super) fn send_error(sock: &UnixStream, e: &Error) {
    let f = protocol::error_frame(e);
    // SAFETY: sends from a live buffer of its length on an open socket, never blocking.
    unsafe {
        libc::send(
            sock.as_raw_fd(),
            f.as_ptr().cast(),
            f.len(),
            libc::MSG_NOSIGNAL | libc::MSG_DONTWAIT,
        )
    };
}

/// Sends a reply. A client that stops reading (stopped, stuck) cannot hold it, and so this
/// thread and the server's stop (which waits for it): once the client has taken none of it
/// for [`FRAME_WAIT`], the connection is dropped (the client, if it runs again, sees it lost).
/// With MSG_NOSIGNAL: a vanished client gives EPIPE, never a SIGPIPE to the host program.
pub(super) fn send_reply(sock: &UnixStream, reply: &[u8]) -> std::io::Result<()> {
    REPLIES_SENT.fetch_add(1, Ordering::Relaxed);
    let mut sent = 0;
    while sent < reply.len() {
        let rest = &reply[sent..];
        // SAFETY: sends from a live buffer of its length on an open socket, never blocking.
        let n = unsafe {
            libc::send(
                sock.as_raw_fd(),
                rest.as_ptr().cast(),
                rest.len(),
                libc::MSG_NOSIGNAL | libc::MSG_DONTWAIT,
            )
        };
        if n >= 0 {
            sent += n as usize;
            continue;
        }
        let e = std::io::Error::last_os_error();
        match e.kind() {
            std::io::ErrorKind::Interrupted => {}
            std::io::ErrorKind::WouldBlock => {
                let mut p =
                    libc::pollfd { fd: sock.as_raw_fd(), events: libc::POLLOUT, revents: 0 };
                let ms = FRAME_WAIT.as_millis() as libc::c_int;
                // SAFETY: polls one valid pollfd.
                match unsafe { libc::poll(&mut p, 1, ms) } {
                    0 => return Err(std::io::ErrorKind::TimedOut.into()),
                    n if n < 0 => {
                        let e = std::io::Error::last_os_error();
                        if e.kind() != std::io::ErrorKind::Interrupted {
                            return Err(e);
                        }
                    }
                    _ => {}
                }
            }
            _ => return Err(e),
        }
    }
    Ok(())
}

/// A connection's reading side that keeps the descriptors attached to what it reads
/// (`SCM_RIGHTS`; plain reads would close them): a lock request brings one.
pub(super) struct FdReader {
    sock: UnixStream,
    fds: Vec<OwnedFd>,
}

impl FdReader {
    pub(super) fn new(sock: UnixStream) -> FdReader {
        FdReader { sock, fds: Vec::new() }
    }

    /// The descriptors received since the last call.
    pub(super) fn take_fds(&mut self) -> Vec<OwnedFd> {
        std::mem::take(&mut self.fds)
    }
}

impl Read for FdReader {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let (n, fds) = area::recv_with_fds(self.sock.as_raw_fd(), buf)?;
        // A peer cannot pile descriptors up here: a few at most are kept.
        for fd in fds {
            if self.fds.len() < area::MAX_FDS {
                self.fds.push(fd);
            }
        }
        Ok(n)
    }
}

/// What [`next_frame`] got.
pub(super) enum Next {
    /// A whole request.
    Frame(Vec<u8>),
    /// The stream ended, or a wait inside a request ran out.
    End,
    /// No request began within the idle wait.
    Idle,
}

/// Reads the next request: waits for its first byte at most `idle` (None: as long as it takes;
/// an idle connection without a transaction costs nothing), then for each further part not
/// read yet at most [`FRAME_WAIT`]. `timeout` is the socket's read timeout, set only when it changes.
/// An InvalidData error: a bad frame length.
pub(super) fn next_frame(
    reader: &mut BufReader<FdReader>,
    sock: &UnixStream,
    idle: Option<Duration>,
    timeout: &mut Option<Duration>,
) -> std::io::Result<Next> {
    let mut set = |t: Option<Duration>| {
        if *timeout != t {
            sock.set_read_timeout(t)?;
            *timeout = t;
        }
        std::io::Result::Ok(())
    };
    if reader.buffer().is_empty() {
        set(idle)?;
        loop {
            match reader.fill_buf() {
                Ok([]) => return Ok(Next::End),
                Ok(_) => break,
                // A wait with a timeout fails with EINTR when this process is stopped and
                // continued (signal(7)): wait again.
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) if idle.is_some() && waits::is_timeout(&e) => return Ok(Next::Idle),
                Err(e) => return Err(e),
            }
        }
    }
    // A request already read whole (the usual case) needs no wait: the timeout is left as it
    // is, saving two system calls a request.
    if !whole_frame(reader.buffer()) {
        set(Some(FRAME_WAIT))?;
    }
    Ok(protocol::read_frame(reader)?.map_or(Next::End, Next::Frame))
}

/// Whether `buffered` starts with a whole frame (its length, then that many bytes).
fn whole_frame(buffered: &[u8]) -> bool {
    match buffered.first_chunk::<4>() {
        Some(len) => buffered.len() - 4 >= u32::from_le_bytes(*len) as usize,
        None => false,
    }
}

#[cfg(test)]
mod tests {
    use super::whole_frame;

    #[test]
    fn a_frame_is_whole_once_its_length_and_all_its_bytes_are_there() {
        assert!(!whole_frame(&[]));
        assert!(!whole_frame(&[3, 0, 0]));
        assert!(!whole_frame(&[3, 0, 0, 0, 1, 2]));
        assert!(whole_frame(&[3, 0, 0, 0, 1, 2, 3]));
        assert!(whole_frame(&[3, 0, 0, 0, 1, 2, 3, 9]));
        assert!(!whole_frame(&[0xff, 0xff, 0xff, 0xff, 1]));
    }
}
