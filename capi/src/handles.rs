//! The descriptor table of one store handle, and how descriptor numbers are chosen.
//!
//! Numbers come from one process-wide counter that runs through `FIRST ..= LAST` and wraps,
//! skipping numbers still open in the table that takes one. So a closed descriptor's number
//! is handed out again only after the counter went once round the whole cycle
//! (`CYCLE` = 2^31 - 2^16 numbers): at least `CYCLE - MAX_OPEN` = 2^31 - 2^17 (about 2.1
//! billion) further opens in the process. Until then it is -EBADF, as is a number never handed
//! out; another store's descriptor misses too (the counter is shared). Numbers below 2^16 are
//! never used, so a small POSIX descriptor passed by mistake is -EBADF as well.
//!
//! (With 31-bit positive descriptors no numbering keeps every closed number dead for 2^31
//! opens: there are only 2^31 - 1 of them.)

use crate::boundary::{Fail, R};
use std::collections::HashMap;
use std::ffi::c_int;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use txvfs::File;

/// Most descriptors open at once on one store handle (-EMFILE beyond).
pub(crate) const MAX_OPEN: usize = 1 << 16;
/// The smallest descriptor number handed out.
const FIRST: u32 = 1 << 16;
/// The largest: descriptors are positive `int`s.
const LAST: u32 = i32::MAX as u32;
/// How many numbers the counter runs through before it repeats one.
const CYCLE: u32 = LAST - FIRST + 1;

/// The number `k` places after `n` in the cycle `FIRST ..= LAST`.
const fn advance(n: u32, k: u32) -> u32 {
    FIRST + ((n - FIRST) as u64 + k as u64).rem_euclid(CYCLE as u64) as u32
}

/// A counter of descriptor numbers (one process-wide instance; the tests make their own).
struct Numbers {
    next: AtomicU32,
}

impl Numbers {
    const fn starting_at(n: u32) -> Numbers {
        Numbers { next: AtomicU32::new(n) }
    }

    /// The next number that `in_use` does not claim. `in_use` claims at most `MAX_OPEN`
    /// numbers, so this takes at most `MAX_OPEN + 1` steps.
    fn take(&self, in_use: impl Fn(c_int) -> bool) -> c_int {
        loop {
            let n = self
                .next
                .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| Some(advance(n, 1)));
            // `fetch_update` with a closure that always returns `Some` never fails.
            let n = n.unwrap_or_else(|n| n) as c_int;
            if !in_use(n) {
                return n;
            }
        }
    }
}

static NUMBERS: Numbers = Numbers::starting_at(FIRST);

fn bad_fd(fd: c_int) -> Fail {
    Fail::new(libc::EBADF, format!("descriptor {fd} is not open on this store"))
}

/// The open files of one store handle, by descriptor number.
#[derive(Default)]
pub(crate) struct Handles {
    files: Mutex<HashMap<c_int, Arc<File>>>,
}

impl Handles {
    fn table(&self) -> std::sync::MutexGuard<'_, HashMap<c_int, Arc<File>>> {
        self.files.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Adds `file` under a new descriptor number.
    /// Errors: EMFILE when `MAX_OPEN` descriptors are open.
    pub(crate) fn insert(&self, file: File) -> R<c_int> {
        let mut table = self.table();
        if table.len() >= MAX_OPEN {
            return Err(Fail::new(
                libc::EMFILE,
                format!("{MAX_OPEN} descriptors are open on this store"),
            ));
        }
        let fd = NUMBERS.take(|n| table.contains_key(&n));
        table.insert(fd, Arc::new(file));
        Ok(fd)
    }

    /// The open file `fd`. Errors: EBADF.
    pub(crate) fn get(&self, fd: c_int) -> R<Arc<File>> {
        self.table().get(&fd).cloned().ok_or_else(|| bad_fd(fd))
    }

    /// Takes `fd` out of the table. Errors: EBADF.
    pub(crate) fn remove(&self, fd: c_int) -> R<Arc<File>> {
        self.table().remove(&fd).ok_or_else(|| bad_fd(fd))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_are_positive_ints_above_the_posix_range() {
        assert_eq!(CYCLE, (1u32 << 31) - (1 << 16));
        assert_eq!(LAST as c_int, c_int::MAX);
        for start in [FIRST, FIRST + 1, LAST - 1, LAST] {
            let numbers = Numbers::starting_at(start);
            for _ in 0..4 {
                let n = numbers.take(|_| false);
                assert!(n >= FIRST as c_int, "{n} wrapped below the range");
            }
        }
    }

    #[test]
    fn the_counter_wraps_from_int_max_to_the_first_number() {
        let numbers = Numbers::starting_at(LAST - 1);
        let taken: Vec<c_int> = (0..3).map(|_| numbers.take(|_| false)).collect();
        assert_eq!(taken, [c_int::MAX - 1, c_int::MAX, FIRST as c_int]);
    }

    #[test]
    fn a_number_comes_back_only_after_the_whole_cycle() {
        // The counter's sequence is `advance(n, 1)` repeated: `advance(n, k)` is the number
        // handed out k opens after n. It differs from n for every k below the cycle length.
        for n in [FIRST, FIRST + 1, 1 << 20, LAST - 1, LAST] {
            for k in [1, 2, 1 << 16, 1 << 30, CYCLE - (1 << 17), CYCLE - 2, CYCLE - 1] {
                assert_ne!(advance(n, k), n, "n {n} k {k}");
            }
            assert_eq!(advance(n, CYCLE), n);
            assert_eq!(advance(advance(n, CYCLE - 1), 1), n);
            // And the counter follows that sequence: set CYCLE - 1 opens after n, it gives
            // that number, then n.
            let numbers = Numbers::starting_at(advance(n, CYCLE - 1));
            assert_eq!(numbers.take(|_| false), advance(n, CYCLE - 1) as c_int);
            assert_eq!(numbers.take(|_| false), n as c_int);
        }
        // With MAX_OPEN numbers held open (skipped), at least CYCLE - MAX_OPEN opens pass.
        assert!(CYCLE - MAX_OPEN as u32 >= (1 << 31) - (1 << 17));
    }

    #[test]
    fn numbers_still_open_are_skipped() {
        let numbers = Numbers::starting_at(LAST - 1);
        let open = [c_int::MAX - 1, c_int::MAX, FIRST as c_int];
        assert_eq!(numbers.take(|n| open.contains(&n)), FIRST as c_int + 1);
    }
}
