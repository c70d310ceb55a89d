//! A bounded spin before a process sleeps on a socket: a client waiting for its reply, and an
//! owner's serving thread waiting for the next request of a connection.
//!
//! A client's request is usually answered within tens of microseconds, but a process that
//! blocks in `recv` is put to sleep and woken by the owner's reply: on a virtual machine that
//! wake-up (of an idle virtual CPU) costs 20 to 40 µs, more than the owner's work, and when
//! both sides sleep a request pays two. So before blocking, the waiting side polls its socket
//! for up to [`MAX_NS`], yielding the CPU between polls (on a machine with fewer cores than
//! busy processes the other side may need this very core).
//!
//! Each connection end decides for itself, from the waits it saw: it stops spinning after
//! [`OFF_AFTER`] spins in a row ran out (a connection whose next request or reply does not
//! come soon: an idle client, a crowded machine), and starts again after [`ON_AFTER`] waits in
//! a row, slept through, ended within [`SHORT_NS`] (what a spin would have caught even with
//! the wake-up's cost counted in). A spin that ran out is never shortened instead: an earlier
//! design halved its budget after each miss, and two sides that each slept once made each
//! other's waits long enough to bring both to zero, where every request paid two wake-ups
//! (a client's 4 KiB `write_file` took 60 to 130 µs against the owner's 10).

use std::os::unix::io::RawFd;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

/// The longest spin, in nanoseconds: beyond it, sleeping costs less than spinning.
const MAX_NS: u64 = 200_000;
/// A wait slept through that ended within this would have been caught by a spin.
const SHORT_NS: u64 = MAX_NS / 2;
/// Spins in a row that ran out before a connection end stops spinning.
const OFF_AFTER: u32 = 4;
/// Short waits in a row, slept through, before it spins again.
const ON_AFTER: u32 = 2;

/// Spins that saw what they waited for, and spins that ran out: as a client (replies), then
/// as an owner (requests).
static COUNTS: [[AtomicU64; 2]; 2] =
    [[AtomicU64::new(0), AtomicU64::new(0)], [AtomicU64::new(0), AtomicU64::new(0)]];

/// Whether spinning is on (read once). `TXVFS_SPIN=0` in the environment turns it off on both
/// sides (to compare, or where a spare core is never there).
fn enabled() -> bool {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ON.get_or_init(|| std::env::var_os("TXVFS_SPIN").is_none_or(|v| v != "0"))
}

/// How many spins of this process saw what they waited for arrive, and how many ran out
/// before it did: as a client (replies), then as an owner (requests). For measurements.
pub fn spin_counts() -> [(u64, u64); 2] {
    COUNTS.each_ref().map(|[h, m]| (h.load(Ordering::Relaxed), m.load(Ordering::Relaxed)))
}

/// Which side of a connection waits.
#[derive(Clone, Copy)]
pub(super) enum Side {
    /// A client, for its reply.
    Client = 0,
    /// An owner's serving thread, for the connection's next request.
    Owner = 1,
}

/// One connection end's spinning: whether it spins, and the streak that would change that.
pub(super) struct Spinner {
    side: Side,
    /// Spinning is allowed at all (`TXVFS_SPIN`).
    allowed: bool,
    on: bool,
    /// Waits in a row that argue for the other state.
    streak: u32,
}

/// A wait that was slept through, to be timed: [`Spinner::woke`] once it ended.
pub(super) struct Slept(Option<Instant>);

impl Spinner {
    pub(super) fn new(side: Side) -> Spinner {
        let allowed = enabled();
        Spinner { side, allowed, on: allowed, streak: 0 }
    }

    /// Waits, spinning if this end spins, until `fd` has something to read (or an error or
    /// end of file to report). `None`: it has. Otherwise the caller blocks as before and
    /// hands the result to [`Spinner::woke`] when its wait is over.
    pub(super) fn until_readable(&mut self, fd: RawFd) -> Option<Slept> {
        if !self.on {
            return Some(Slept(self.allowed.then(Instant::now)));
        }
        let start = Instant::now();
        let [hits, misses] = &COUNTS[self.side as usize];
        loop {
            if readable(fd) {
                hits.fetch_add(1, Ordering::Relaxed);
                self.streak = 0;
                return None;
            }
            if start.elapsed().as_nanos() as u64 >= MAX_NS {
                misses.fetch_add(1, Ordering::Relaxed);
                self.streak += 1;
                if self.streak >= OFF_AFTER {
                    (self.on, self.streak) = (false, 0);
                }
                return Some(Slept(None));
            }
            std::thread::yield_now();
        }
    }

    /// Counts a wait slept through that is over (what it waited for came, or it failed).
    pub(super) fn woke(&mut self, slept: Slept) {
        let Slept(Some(start)) = slept else { return };
        if start.elapsed().as_nanos() as u64 > SHORT_NS {
            self.streak = 0;
            return;
        }
        self.streak += 1;
        if self.streak >= ON_AFTER {
            (self.on, self.streak) = (true, 0);
        }
    }
}

/// Whether a read of `fd` would not block (data, end of file or an error is waiting).
fn readable(fd: RawFd) -> bool {
    let mut p = libc::pollfd { fd, events: libc::POLLIN, revents: 0 };
    // SAFETY: polls one descriptor without waiting.
    unsafe { libc::poll(&mut p, 1, 0) != 0 }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::os::unix::io::AsRawFd;
    use std::os::unix::net::UnixStream;
    use std::time::Duration;

    #[test]
    fn an_end_stops_spinning_after_long_waits_and_starts_again_after_short_ones() {
        // Allowed whatever TXVFS_SPIN says: the policy is what is tested.
        let mut s = Spinner { side: Side::Client, allowed: true, on: true, streak: 0 };
        let (mut a, b) = UnixStream::pair().unwrap();
        // Something to read is seen at once.
        a.write_all(b"x").unwrap();
        assert!(s.until_readable(b.as_raw_fd()).is_none());
        // Nothing comes: spins run out, a few in a row turn spinning off.
        let (_c, idle) = UnixStream::pair().unwrap();
        for i in 1..=OFF_AFTER {
            let slept = s.until_readable(idle.as_raw_fd()).expect("ran out");
            assert_eq!((s.on, slept.0.is_none()), (i < OFF_AFTER, true));
            s.woke(slept);
        }
        // Off: no spin (a wait returns at once), and a long wait keeps it off.
        let t = Instant::now();
        let slept = s.until_readable(idle.as_raw_fd()).expect("no spin");
        assert!(t.elapsed() < Duration::from_nanos(MAX_NS));
        std::thread::sleep(Duration::from_nanos(2 * SHORT_NS));
        s.woke(slept);
        assert!(!s.on);
        // Short waits in a row turn it on again.
        for _ in 0..ON_AFTER {
            let slept = s.until_readable(idle.as_raw_fd()).expect("no spin");
            s.woke(slept);
        }
        assert!(s.on);
        // One hit between misses resets the streak: it stays on.
        for _ in 0..OFF_AFTER - 1 {
            s.until_readable(idle.as_raw_fd()).expect("ran out");
        }
        assert!(s.until_readable(b.as_raw_fd()).is_none());
        s.until_readable(idle.as_raw_fd()).expect("ran out");
        assert!(s.on);
    }
}
