//! A client's hello: what it says to a new connection's server, and what it gets back (the
//! server's limits, pid and features, and the descriptors of the ring's and the bell's memory).

use super::area::{self, Area};
use super::client::{count_round_trip, Conn, ConnectError, Fail};
use super::protocol::{self, op, Fields, Frame};
use super::waits::{self, Outcome};
use crate::error::{Error, ErrorKind, Result};
use crate::kv::Limits;
use std::io::Read;
use std::os::fd::{FromRawFd, OwnedFd};
use std::os::unix::io::AsRawFd;
use std::time::{Duration, Instant};

impl Conn {
    /// Reads the hello's reply straight from the socket, with the descriptors attached to
    /// it (nothing was read through the buffered reader yet).
    fn hello_reply(&mut self) -> std::result::Result<(Result<Vec<u8>>, Vec<OwnedFd>), Fail> {
        let lost = Fail::Lost { sent: true };
        let mut len = [0u8; 4];
        let (got, fds) = area::recv_with_fds(self.stream.as_raw_fd(), &mut len)
            .map_err(|e| self.failed(&e, true))?;
        if got == 0 {
            return Err(lost);
        }
        let mut r = &self.stream;
        let mut read = |buf: &mut [u8]| match r.read_exact(buf) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => Err(lost),
            Err(e) => Err(self.failed(&e, true)),
        };
        read(&mut len[got..])?;
        let n = u32::from_le_bytes(len) as usize;
        if n == 0 || n > 1 << 20 {
            return Err(lost);
        }
        let mut reply = vec![0u8; n];
        read(&mut reply)?;
        match reply[0] {
            op::OK => Ok((Ok(reply), fds)),
            op::ERR => {
                let e = protocol::decode_error(Fields::of(&reply).map_err(|_| lost)?.1);
                Ok((Err(e), fds))
            }
            _ => Err(lost),
        }
    }
}

/// The fields of a hello reply: the backend's limits, the server's pid and description, and
/// the features it offers.
pub(super) fn parse_hello(reply: &[u8]) -> Result<(Limits, u32, String, u64)> {
    let (_, mut f) = Fields::of(reply)?;
    let version = f.u64()?;
    if version != protocol::VERSION as u64 {
        return Err(Error::new(ErrorKind::Invalid, format!("server speaks protocol {version}")));
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
    let describe = String::from_utf8_lossy(f.bytes()?).into_owned();
    let features = if f.done() { 0 } else { f.u64()? };
    Ok((limits, pid, describe, features))
}

/// Says hello on a new connection and returns the server's reply; `pid` names the server in
/// the error when it does not answer within `timeout`. The hello brings a reply area, if this
/// system gives one (else replies all come through the socket). The reply comes with the
/// descriptors the server handed over.
pub(super) fn hello(
    conn: &mut Conn,
    timeout: Duration,
    describe: &str,
    pid: impl FnOnce() -> Option<u32>,
) -> std::result::Result<(Vec<u8>, Vec<OwnedFd>), ConnectError> {
    let started = Instant::now();
    let area = Area::create().ok();
    let flags = if area.is_some() { protocol::hello_flags::AREA } else { 0 };
    let frame = Frame::new(op::HELLO).u64(protocol::VERSION as u64).u64(flags);
    let sent = match &area {
        Some((_, fd)) => conn.send_with_fds(frame, &[fd.as_raw_fd()]),
        None => {
            frame.push_to(&mut conn.out);
            conn.flush().map_err(|e| conn.failed(&e, false)).map(|()| count_round_trip())
        }
    };
    match sent.and_then(|()| conn.hello_reply()) {
        Ok((Ok(reply), fds)) => {
            let features = parse_hello(&reply).map_or(0, |h| h.3);
            if features & protocol::features::AREA != 0 {
                conn.area = area.map(|(a, _)| a);
            }
            Ok((reply, fds))
        }
        Ok((Err(e), _)) => Err(ConnectError::Failed(e)),
        Err(Fail::Lost { .. }) => Err(ConnectError::NoServer),
        Err(Fail::Stalled { .. }) => Err(ConnectError::Failed(waits::owner_stalled(
            describe,
            pid(),
            Some(started.elapsed().max(timeout)),
            Outcome::NoChange,
        ))),
    }
}

/// A pidfd of process `pid` (Linux 5.3), if it can be had.
pub(super) fn pidfd(pid: libc::pid_t) -> Option<OwnedFd> {
    if pid <= 0 {
        return None;
    }
    // SAFETY: a plain system call; a descriptor it returns is owned at once.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    // SAFETY: `fd` is a new descriptor of this process.
    (fd >= 0).then(|| unsafe { OwnedFd::from_raw_fd(fd as i32) })
}
