//! The start of a connection: the client's hello, read straight from the socket with the
//! descriptors it may bring (its reply area, `area.rs`; its liveness file, `alive.rs`), and
//! the server's reply.

use super::FRAME_WAIT;
use crate::kv::shared::area;
use crate::kv::shared::protocol::{self, op, Frame};
use crate::kv::Backend;
use std::io::Read;
use std::os::fd::OwnedFd;
use std::os::unix::io::AsRawFd;
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

/// How long a new connection may take to send its whole hello: a process that connects and
/// says nothing (or half a hello) gets its connection closed, instead of holding a server
/// thread for ever.
pub const HELLO_WAIT: Duration = Duration::from_secs(5);

/// The largest hello accepted (a hello is a few integers).
const MAX_HELLO: usize = 4096;

/// Reads the hello, the first frame, straight from the socket (no buffered reader yet: the
/// descriptors it brings come attached to its first bytes), within [`HELLO_WAIT`]; the
/// socket's read timeout is then [`FRAME_WAIT`]. `Ok(None)`: the stream ended. An error of
/// kind InvalidData: a bad length.
pub(super) fn read_hello(sock: &UnixStream) -> std::io::Result<Option<(Vec<u8>, Vec<OwnedFd>)>> {
    let deadline = Instant::now() + HELLO_WAIT;
    let left = || deadline.saturating_duration_since(Instant::now()).max(Duration::from_millis(1));
    sock.set_read_timeout(Some(left()))?;
    let mut len = [0u8; 4];
    let (got, fds) = area::recv_with_fds(sock.as_raw_fd(), &mut len)?;
    if got == 0 {
        return Ok(None);
    }
    let mut r = sock;
    let rest = |e: std::io::Error| match e.kind() {
        std::io::ErrorKind::UnexpectedEof => Ok(None),
        _ => Err(e),
    };
    sock.set_read_timeout(Some(left()))?;
    if let Err(e) = r.read_exact(&mut len[got..]) {
        return rest(e);
    }
    let len = u32::from_le_bytes(len) as usize;
    if len == 0 || len > MAX_HELLO {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("bad frame length {len} for a hello"),
        ));
    }
    let mut body = vec![0u8; len];
    sock.set_read_timeout(Some(left()))?;
    if let Err(e) = r.read_exact(&mut body) {
        return rest(e);
    }
    sock.set_read_timeout(Some(FRAME_WAIT))?;
    Ok(Some((body, fds)))
}

/// The hello reply: protocol version, the backend's limits and description, features (lock
/// requests always; the ring's and the bell's memory, as `handed` has them).
pub(super) fn hello_reply(
    backend: &dyn Backend,
    handed: [Option<&OwnedFd>; 2],
    area: bool,
) -> Vec<u8> {
    let l = backend.limits();
    let [ring, bell] = handed;
    Frame::new(op::OK)
        .u64(protocol::VERSION as u64)
        .u64(protocol::opt(l.max_key))
        .u64(protocol::opt(l.max_value))
        .u64(protocol::opt(l.max_txn_bytes))
        .u64(l.max_txn_duration.map(|d| d.as_millis() as u64).unwrap_or(u64::MAX))
        .u64(std::process::id() as u64)
        .bytes(backend.describe().as_bytes())
        .u64(
            if ring.is_some() { protocol::features::RING_FD } else { 0 }
                | if bell.is_some() { protocol::features::BELL_FD } else { 0 }
                | if area { protocol::features::AREA } else { 0 }
                | protocol::features::LOCKS
                | protocol::features::EXPECT_ABSENT,
        )
        .finish()
}

/// Sends the hello reply with the descriptors `handed` has attached, in that order.
pub(super) fn send_hello_reply(
    sock: &UnixStream,
    reply: &[u8],
    handed: [Option<&OwnedFd>; 2],
) -> std::io::Result<()> {
    let fds: Vec<i32> = handed.iter().flatten().map(|fd| fd.as_raw_fd()).collect();
    if fds.is_empty() {
        return super::send_reply(sock, reply);
    }
    area::send_with_fds(sock.as_raw_fd(), reply, &fds)
}
