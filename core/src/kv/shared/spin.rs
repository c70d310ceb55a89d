//! A bounded, adaptive spin before a process sleeps on a socket: a client waiting for its
//! reply, and an owner's serving thread waiting for the next request of a connection.
//!
//! A client's request is usually answered within tens of microseconds, but a process that
//! blocks in `recv` is put to sleep and woken by the owner's reply: on a virtual machine that
//! wake-up (of an idle virtual CPU) alone costs about as much as the owner's work. So before
//! blocking, the waiting side polls its socket for a while, yielding the CPU between polls (on
//! a machine with fewer cores than busy processes the other side may need this very core). How long is learnt: a spin that
//! saw its reply arrive sets the budget to a few times the wait it saw; a spin that ran out
//! halves it; at zero, one call in [`PROBE_EVERY`] tries a short spin again, so a lone client
//! keeps spinning and a crowded machine soon stops. There is one budget per side and process
//! (all connections share one machine's conditions).

use std::os::unix::io::RawFd;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

/// The longest spin, in nanoseconds: beyond it, sleeping costs less than spinning.
const MAX_NS: u64 = 200_000;
/// The spin a probe tries when the budget fell to zero, and the first budget.
const PROBE_NS: u64 = 20_000;
/// With a zero budget, one wait in this many probes.
const PROBE_EVERY: u64 = 64;

/// The adaptive budget, and what the spins saw.
pub(super) struct Spinner {
    /// The current budget in nanoseconds.
    budget_ns: AtomicU64,
    /// Waits counted while the budget is zero, for the probes.
    idle_waits: AtomicU64,
    /// Spins that saw their reply, and spins that ran out.
    hits: AtomicU64,
    misses: AtomicU64,
}

/// This process's spinner for replies (as a client). `TXVFS_SPIN=0` in the environment turns
/// spinning off on both sides (to compare, or where a spare core is never there).
pub(super) static SPINNER: Spinner = Spinner::new();
/// This process's spinner for requests (as an owner).
pub(super) static SERVER_SPINNER: Spinner = Spinner::new();

/// Whether spinning is on (read once).
fn enabled() -> bool {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ON.get_or_init(|| std::env::var_os("TXVFS_SPIN").is_none_or(|v| v != "0"))
}

/// How many spins of this process saw what they waited for arrive, and how many ran out
/// before it did: as a client (replies), then as an owner (requests). For measurements.
pub fn spin_counts() -> [(u64, u64); 2] {
    [SPINNER.counts(), SERVER_SPINNER.counts()]
}

impl Spinner {
    const fn new() -> Spinner {
        Spinner {
            budget_ns: AtomicU64::new(PROBE_NS),
            idle_waits: AtomicU64::new(0),
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
        }
    }

    fn counts(&self) -> (u64, u64) {
        (self.hits.load(Ordering::Relaxed), self.misses.load(Ordering::Relaxed))
    }

    /// Waits, spinning within the budget, until `fd` has something to read (or an error or
    /// end of file to report). Returns whether it did; on false the caller blocks as before.
    pub(super) fn until_readable(&self, fd: RawFd) -> bool {
        if !enabled() {
            return false;
        }
        let mut budget = self.budget_ns.load(Ordering::Relaxed);
        let probe = budget == 0;
        if probe {
            if self.idle_waits.fetch_add(1, Ordering::Relaxed) % PROBE_EVERY != 0 {
                return false;
            }
            budget = PROBE_NS;
        }
        let start = Instant::now();
        loop {
            if readable(fd) {
                let waited = start.elapsed().as_nanos() as u64;
                self.hits.fetch_add(1, Ordering::Relaxed);
                self.budget_ns.store((4 * waited).clamp(PROBE_NS, MAX_NS), Ordering::Relaxed);
                return true;
            }
            if start.elapsed().as_nanos() as u64 >= budget {
                self.misses.fetch_add(1, Ordering::Relaxed);
                // Halved, and zero once below a quarter of a probe (or after a failed probe).
                let half = if probe || budget / 2 < PROBE_NS / 4 { 0 } else { budget / 2 };
                self.budget_ns.store(half, Ordering::Relaxed);
                return false;
            }
            std::thread::yield_now();
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

    #[test]
    fn a_spin_sees_a_reply_that_comes_and_gives_up_on_one_that_does_not() {
        let s = Spinner::new();
        let (mut a, b) = UnixStream::pair().unwrap();
        s.budget_ns.store(MAX_NS, Ordering::Relaxed);
        // Nothing comes: the spin runs out and halves the budget.
        assert!(!s.until_readable(b.as_raw_fd()));
        assert_eq!(s.counts(), (0, 1));
        assert_eq!(s.budget_ns.load(Ordering::Relaxed), MAX_NS / 2);
        // A reply written meanwhile is seen (on a loaded machine the writer may come after
        // the budget: then it is a miss), and the budget follows the wait it took.
        let writer = std::thread::spawn(move || {
            std::thread::sleep(std::time::Duration::from_micros(20));
            a.write_all(b"x").unwrap();
            a
        });
        let seen = s.until_readable(b.as_raw_fd());
        let _a = writer.join().unwrap();
        let (hits, misses) = s.counts();
        assert_eq!((hits + misses, seen), (2, hits == 1));
        if seen {
            assert!((PROBE_NS..=MAX_NS).contains(&s.budget_ns.load(Ordering::Relaxed)));
        }
        // Something to read is seen at once.
        assert!(s.until_readable(b.as_raw_fd()));
        // Misses bring the budget to zero; then one wait in PROBE_EVERY spins, and a failed
        // probe leaves it at zero.
        let (_c, idle) = UnixStream::pair().unwrap();
        while s.budget_ns.load(Ordering::Relaxed) > 0 {
            assert!(!s.until_readable(idle.as_raw_fd()));
        }
        s.idle_waits.store(1, Ordering::Relaxed);
        let before = s.counts();
        for _ in 1..PROBE_EVERY {
            assert!(!s.until_readable(idle.as_raw_fd()));
        }
        assert_eq!(s.counts(), before, "no spin while the budget is zero");
        assert!(!s.until_readable(idle.as_raw_fd()));
        assert_eq!(s.counts().1, before.1 + 1, "the probe spun");
        assert_eq!(s.budget_ns.load(Ordering::Relaxed), 0);
    }
}
