//! A connection's reply area: shared memory through which the server hands a client a large
//! range reply (a megabyte of file data) with one copy on each side, instead of through the
//! socket (a copy into the kernel, one out, and a wake-up per socket buffer of it).
//!
//! The client creates the area (a sealed memfd: it can never shrink under the server, whose
//! writes would then fault) and passes its descriptor with its hello (`SCM_RIGHTS`); a server
//! that maps it says so in its hello reply. Then a GET_RANGE reply that fits comes back as
//! `OK_AREA` with the length of its fields, written in the area. The protocol is one request
//! at a time per connection, so the server writes the area only while the client waits for a
//! reply, and the client reads it only before its next request: no other synchronisation.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

/// The size of each connection's area: a read piece of 16 blocks of 64 KiB, its keys, and
/// room to spare. A larger reply goes through the socket.
pub(super) const AREA_SIZE: usize = 2 << 20;

/// A mapping of a reply area.
pub(super) struct Area {
    ptr: *mut u8,
    len: usize,
}

// SAFETY: the mapping is owned by one connection, used by one thread at a time.
unsafe impl Send for Area {}

fn check(r: libc::c_int) -> io::Result<libc::c_int> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

/// A new memfd of `size` bytes that can never shrink or grow (sealed: a mapping of it never
/// faults, whatever a process holding it does).
pub(super) fn sealed_memfd(name: &std::ffi::CStr, size: usize) -> io::Result<OwnedFd> {
    // SAFETY: a plain system call with a valid C string.
    let fd = check(unsafe {
        libc::memfd_create(name.as_ptr(), libc::MFD_CLOEXEC | libc::MFD_ALLOW_SEALING)
    })?;
    // SAFETY: `fd` was just created and is owned here.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    // SAFETY: system calls on a descriptor owned here.
    unsafe {
        check(libc::ftruncate(fd.as_raw_fd(), size as libc::off_t))?;
        check(libc::fcntl(
            fd.as_raw_fd(),
            libc::F_ADD_SEALS,
            libc::F_SEAL_SHRINK | libc::F_SEAL_GROW,
        ))?;
    }
    Ok(fd)
}

/// Checks that `fd` (passed by another process) is a memfd of exactly `size` bytes sealed
/// against shrinking, with at least the seals `more`: a mapping of it cannot fault.
pub(super) fn check_sealed(fd: &OwnedFd, size: usize, more: libc::c_int) -> io::Result<()> {
    // SAFETY: queries on an open descriptor; `st` is written by fstat.
    let (seals, len) = unsafe {
        let seals = check(libc::fcntl(fd.as_raw_fd(), libc::F_GET_SEALS))?;
        let mut st: libc::stat = std::mem::zeroed();
        check(libc::fstat(fd.as_raw_fd(), &mut st))?;
        (seals, st.st_size as usize)
    };
    let want = libc::F_SEAL_SHRINK | more;
    if seals & want != want || len != size {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, "not a sealed memfd of its size"));
    }
    Ok(())
}

/// Maps `len` bytes of `fd` shared, read and write or (`write` false) read only.
pub(super) fn map_shared(fd: &OwnedFd, len: usize, write: bool) -> io::Result<*mut u8> {
    let prot = if write { libc::PROT_READ | libc::PROT_WRITE } else { libc::PROT_READ };
    // SAFETY: maps `len` bytes of an open descriptor; the caller checked its size and seals.
    let ptr =
        unsafe { libc::mmap(std::ptr::null_mut(), len, prot, libc::MAP_SHARED, fd.as_raw_fd(), 0) };
    if ptr == libc::MAP_FAILED {
        return Err(io::Error::last_os_error());
    }
    Ok(ptr.cast())
}

impl Area {
    /// A new area (the client's), and the descriptor to pass to the server.
    pub(super) fn create() -> io::Result<(Area, OwnedFd)> {
        let fd = sealed_memfd(c"txvfs-reply-area", AREA_SIZE)?;
        // SAFETY: a system call on a descriptor owned here.
        check(unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_ADD_SEALS, libc::F_SEAL_SEAL) })?;
        Ok((Area::map_fd(fd.as_raw_fd(), AREA_SIZE)?, fd))
    }

    /// Maps an area a client passed (the server's side): only a sealed memfd that cannot
    /// shrink, of the expected size.
    pub(super) fn adopt(fd: OwnedFd) -> io::Result<Area> {
        check_sealed(&fd, AREA_SIZE, 0)
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "not a sealed reply area"))?;
        Area::map_fd(fd.as_raw_fd(), AREA_SIZE)
    }

    fn map_fd(fd: RawFd, len: usize) -> io::Result<Area> {
        // SAFETY: maps `len` bytes of a descriptor whose size is at least `len` and can
        // never shrink (sealed).
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd,
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(Area { ptr: ptr.cast(), len })
    }

    /// The first `len` bytes (None: more than the area holds).
    pub(super) fn bytes(&self, len: usize) -> Option<&[u8]> {
        // SAFETY: within the mapping; the peer writes it only while this side waits.
        (len <= self.len).then(|| unsafe { std::slice::from_raw_parts(self.ptr, len) })
    }

    /// The whole area, to write a reply into.
    pub(super) fn bytes_mut(&mut self) -> &mut [u8] {
        // SAFETY: the whole mapping; the peer reads it only after the reply is sent.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.len) }
    }
}

impl Drop for Area {
    fn drop(&mut self) {
        // SAFETY: unmaps the mapping made in `map_fd`, once.
        unsafe { libc::munmap(self.ptr.cast(), self.len) };
    }
}

/// The most descriptors one message carries (a hello: the reply area and the liveness file).
pub(super) const MAX_FDS: usize = 4;

/// Sends `bytes` with `fds` attached (`SCM_RIGHTS`, at most [`MAX_FDS`]), all of it or an
/// error.
pub(super) fn send_with_fds(sock: RawFd, bytes: &[u8], fds: &[RawFd]) -> io::Result<()> {
    assert!(!fds.is_empty() && fds.len() <= MAX_FDS);
    let mut iov = libc::iovec { iov_base: bytes.as_ptr() as *mut _, iov_len: bytes.len() };
    let size = std::mem::size_of_val(fds) as u32;
    // Room for MAX_FDS descriptors, aligned for the header.
    let mut control = [0u64; 8];
    // SAFETY: msghdr is plain data; the control buffer outlives the call and is large
    // enough for CMSG_SPACE of MAX_FDS descriptors.
    let sent = unsafe {
        let mut msg: libc::msghdr = std::mem::zeroed();
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control.as_mut_ptr().cast();
        msg.msg_controllen = libc::CMSG_SPACE(size) as _;
        let cmsg = libc::CMSG_FIRSTHDR(&msg);
        (*cmsg).cmsg_level = libc::SOL_SOCKET;
        (*cmsg).cmsg_type = libc::SCM_RIGHTS;
        (*cmsg).cmsg_len = libc::CMSG_LEN(size) as _;
        for (i, fd) in fds.iter().enumerate() {
            std::ptr::write_unaligned(libc::CMSG_DATA(cmsg).cast::<RawFd>().add(i), *fd);
        }
        libc::sendmsg(sock, &msg, libc::MSG_NOSIGNAL)
    };
    if sent < 0 {
        return Err(io::Error::last_os_error());
    }
    // The descriptors went with the first byte; the rest (rare: a full buffer) follows.
    let mut at = sent as usize;
    while at < bytes.len() {
        // SAFETY: sends from a live buffer of its length.
        let n = unsafe {
            libc::send(sock, bytes[at..].as_ptr().cast(), bytes.len() - at, libc::MSG_NOSIGNAL)
        };
        if n < 0 {
            let e = io::Error::last_os_error();
            if e.kind() != io::ErrorKind::Interrupted {
                return Err(e);
            }
            continue;
        }
        at += n as usize;
    }
    Ok(())
}

/// Receives into `buf` (at least one byte, blocking as the socket's timeout says), with the
/// descriptors attached to those bytes, in order (at most [`MAX_FDS`]; any beyond are
/// closed). Ok((0, [])): the stream ended.
pub(super) fn recv_with_fds(sock: RawFd, buf: &mut [u8]) -> io::Result<(usize, Vec<OwnedFd>)> {
    let mut iov = libc::iovec { iov_base: buf.as_mut_ptr().cast(), iov_len: buf.len() };
    let mut control = [0u64; 8];
    loop {
        // SAFETY: msghdr is plain data; the buffers outlive the call; descriptors received
        // are taken into OwnedFd (so closed if unwanted), marked close-on-exec.
        unsafe {
            let mut msg: libc::msghdr = std::mem::zeroed();
            msg.msg_iov = &mut iov;
            msg.msg_iovlen = 1;
            msg.msg_control = control.as_mut_ptr().cast();
            msg.msg_controllen = std::mem::size_of_val(&control) as _;
            let n = libc::recvmsg(sock, &mut msg, libc::MSG_CMSG_CLOEXEC);
            if n < 0 {
                let e = io::Error::last_os_error();
                if e.kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                return Err(e);
            }
            let mut fds = Vec::new();
            let mut cmsg = libc::CMSG_FIRSTHDR(&msg);
            while !cmsg.is_null() {
                if (*cmsg).cmsg_level == libc::SOL_SOCKET && (*cmsg).cmsg_type == libc::SCM_RIGHTS {
                    let data = libc::CMSG_DATA(cmsg);
                    let count = ((*cmsg).cmsg_len as usize - (data as usize - cmsg as usize))
                        / std::mem::size_of::<RawFd>();
                    for i in 0..count {
                        let raw = std::ptr::read_unaligned(data.cast::<RawFd>().add(i));
                        let owned = OwnedFd::from_raw_fd(raw);
                        if fds.len() < MAX_FDS {
                            fds.push(owned);
                        }
                    }
                }
                cmsg = libc::CMSG_NXTHDR(&msg, cmsg);
            }
            return Ok((n as usize, fds));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::net::UnixStream;

    #[test]
    fn an_area_passed_over_a_socket_is_the_same_memory() {
        let (a, b) = UnixStream::pair().unwrap();
        let (mut mine, fd) = Area::create().unwrap();
        let other = std::fs::File::open("/proc/self/stat").unwrap();
        send_with_fds(a.as_raw_fd(), b"hello", &[fd.as_raw_fd(), other.as_raw_fd()]).unwrap();
        let mut buf = [0u8; 16];
        let (n, mut got) = recv_with_fds(b.as_raw_fd(), &mut buf).unwrap();
        assert_eq!(&buf[..n], b"hello");
        assert_eq!(got.len(), 2, "both descriptors, in order");
        assert!(Area::adopt(got.pop().unwrap()).is_err());
        let theirs = Area::adopt(got.pop().unwrap()).unwrap();
        mine.bytes_mut()[..3].copy_from_slice(b"abc");
        assert_eq!(theirs.bytes(3).unwrap(), b"abc");
        assert!(theirs.bytes(AREA_SIZE + 1).is_none());
    }

    #[test]
    fn only_a_sealed_area_of_the_right_size_is_adopted() {
        // A memfd that could shrink under the server (whose writes would then fault).
        // SAFETY: plain system calls on a descriptor owned here.
        let fd = unsafe {
            let fd = libc::memfd_create(c"t".as_ptr(), libc::MFD_CLOEXEC);
            assert!(fd >= 0);
            assert_eq!(libc::ftruncate(fd, AREA_SIZE as libc::off_t), 0);
            OwnedFd::from_raw_fd(fd)
        };
        assert!(Area::adopt(fd).is_err());
        // Not a memfd at all.
        let f = std::fs::File::open("/proc/self/stat").unwrap();
        assert!(Area::adopt(f.into()).is_err());
    }
}
