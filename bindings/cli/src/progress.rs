//! A one-line progress display with rate and ETA, drawn on standard error only when it is a
//! terminal (silent when piped or redirected).

use std::io::{IsTerminal, Write};
use std::time::{Duration, Instant};

/// Progress of a long command, counted in items.
pub struct Progress {
    label: &'static str,
    total: u64,
    done: u64,
    start: Instant,
    last: Option<Instant>,
    enabled: bool,
}

impl Progress {
    /// Starts a display for `total` items (0: unknown).
    pub fn new(label: &'static str, total: u64) -> Progress {
        Progress {
            label,
            total,
            done: 0,
            start: Instant::now(),
            last: None,
            enabled: std::io::stderr().is_terminal(),
        }
    }

    /// Counts `n` more items done, redrawing at most ten times a second.
    pub fn add(&mut self, n: u64) {
        self.done += n;
        if !self.enabled || self.last.is_some_and(|t| t.elapsed() < Duration::from_millis(100)) {
            return;
        }
        self.last = Some(Instant::now());
        let secs = self.start.elapsed().as_secs_f64().max(1e-3);
        let rate = self.done as f64 / secs;
        let line = if self.total > 0 {
            let pct = self.done * 100 / self.total.max(1);
            let eta =
                if rate > 0.0 { (self.total.saturating_sub(self.done)) as f64 / rate } else { 0.0 };
            format!(
                "{} {}/{} ({pct}%) {rate:.0}/s ETA {eta:.0}s",
                self.label, self.done, self.total
            )
        } else {
            format!("{} {} {rate:.0}/s", self.label, self.done)
        };
        eprint!("\r{line}\x1b[K");
        let _ = std::io::stderr().flush();
    }

    /// Clears the line.
    pub fn finish(&mut self) {
        if self.enabled && self.last.is_some() {
            eprint!("\r\x1b[K");
        }
    }
}
