//! The change feed across power cuts: a consumer of the store's feed, and its check.
//!
//! The store's feed is on (the first run turns it on, durably). While the lanes commit, a
//! consumer thread in the owner polls the feed and appends what it read to the consumer log
//! (ACKLOG.feed, on the real disk), one write per poll:
//!
//!   b CURSOR ID,ID,...   a transaction (IDs: `tK.G` the rename of /LK/tx/r{G-1} to r{G}, made
//!                        by step G of lane K only; `aK.G` the creation of /LK/auto/aG; `-` none)
//!   at CURSOR            the cursor saved after the poll (where a restart resumes)
//!
//! The feed delivers only durable commits, so no cut may take back what the consumer read.
//! After each cut the check replays the log and then, as the consumer would on restart:
//! notes the newest cursor the recovered store holds (`cut CURSOR`: nothing delivered or saved
//! may be past it), commits one marker transaction, resumes from the saved cursor and reads to
//! the end. It checks that
//! - no transaction delivered before a cut was lost with it, and the consumer's cursor was
//!   never past the recovered store (a commit delivered before it was durable);
//! - every cursor delivered is above every cursor delivered or saved before it, across cuts
//!   (a stamp given again after a cut, the defect the fsynced stamp bound prevents, would
//!   show here, or as a resume that fails after the marker, or as a lost step);
//! - no transaction is delivered twice (no ID twice, unless the first was lost with a cut);
//! - every step in the store, and every acknowledged step and auto-commit file, was delivered
//!   (with its path), and none the store does not hold survived a cut.
//!
//! A missing acknowledged commit is a lost commit (exit 3, like the store's own check, so the
//! negative control detects it here too); anything else is a failure (exit 4).

use crate::Acks;
use std::collections::HashMap;
use std::io::Write;
use std::time::Duration;
use txvfs::{Batch, ChangeKind, Cursor, FileSystem, Store, WatchOptions, Watcher};

/// The consumer log of the ack log `ack_path`.
pub fn log_path(ack_path: &str) -> String {
    format!("{ack_path}.feed")
}

fn append(path: &str, text: &str) {
    let mut f =
        std::fs::OpenOptions::new().create(true).append(true).open(path).expect("consumer log");
    // One write: a killed consumer leaves whole lines (the real disk keeps it through SIGKILL).
    f.write_all(text.as_bytes()).expect("consumer log write");
}

/// Turns the feed on (durably) if it is off, and saves its start as the consumer's cursor.
pub fn enable(store: &Store, ack_path: &str) -> txvfs::Result<()> {
    if store.change_feed() {
        return Ok(());
    }
    store.set_change_feed(true)?;
    store.sync()?;
    let at = store.watch(WatchOptions::default())?.cursor();
    append(&log_path(ack_path), &format!("at {at}\n"));
    Ok(())
}

/// The IDs of a batch's changes (see the module's comment).
fn ids(b: &Batch) -> Vec<String> {
    let mut out = Vec::new();
    for c in &b.changes {
        let (path, kind, pre) = match (c.kind, &c.to) {
            (ChangeKind::Renamed, Some(to)) => (to, "/tx/r", 't'),
            (ChangeKind::Created, _) => (&c.path, "/auto/a", 'a'),
            _ => continue,
        };
        let Ok(path) = std::str::from_utf8(path) else { continue };
        let Some((lane, g)) = path.strip_prefix("/L").and_then(|p| p.split_once(kind)) else {
            continue;
        };
        if let (Ok(lane), Ok(g)) = (lane.parse::<usize>(), g.parse::<u64>()) {
            out.push(format!("{pre}{lane}.{g}"));
        }
    }
    out
}

fn batch_lines(batches: &[Batch], at: Cursor) -> String {
    let mut s = String::new();
    for b in batches {
        let ids = ids(b);
        let ids = if ids.is_empty() { "-".to_string() } else { ids.join(",") };
        s.push_str(&format!("b {} {ids}\n", b.cursor));
    }
    s.push_str(&format!("at {at}\n"));
    s
}

/// What the consumer has seen, replayed from its log, and what was wrong with it.
#[derive(Default)]
struct State {
    /// ID -> the cursor of the transaction that delivered it (lost ones removed).
    seen: HashMap<String, Cursor>,
    /// The highest cursor delivered or saved so far.
    high: Option<Cursor>,
    /// The saved cursor.
    at: Option<Cursor>,
    batches: usize,
    /// Transactions seen, then lost with a cut (unacknowledged, or the check says so).
    lost_seen: usize,
    /// Cuts after which the consumer's cursor was past the recovered store.
    ahead: usize,
    cuts: usize,
    bad: Vec<String>,
}

impl State {
    fn delivered(&mut self, c: Cursor, ids: &[&str]) {
        self.batches += 1;
        if let Some(h) = self.high.filter(|h| c <= *h) {
            self.bad.push(format!("feed: cursor {c} delivered after {h} (backwards or repeated)"));
        }
        self.high = self.high.max(Some(c));
        for id in ids {
            if let Some(first) = self.seen.insert(id.to_string(), c) {
                self.bad.push(format!("feed: {id} delivered again at {c} (first at {first})"));
            }
        }
    }

    fn saved(&mut self, c: Cursor) {
        if let Some(h) = self.high.filter(|h| c < *h) {
            self.bad.push(format!("feed: cursor {c} saved after {h} was delivered"));
        }
        self.high = self.high.max(Some(c));
        self.at = Some(c);
    }

    /// After a cut: the recovered store's newest cursor is `newest`. The feed delivers only
    /// durable commits, so nothing delivered or saved may be past it.
    fn cut(&mut self, newest: Cursor) {
        self.cuts += 1;
        let before = self.seen.len();
        let mut lost: Vec<&String> =
            self.seen.iter().filter(|(_, c)| **c > newest).map(|(id, _)| id).collect();
        lost.sort();
        if !lost.is_empty() {
            let ids: Vec<&str> = lost.iter().take(5).map(|s| s.as_str()).collect();
            self.bad.push(format!(
                "feed: {} delivered (before cut {}) and then taken back by the cut: the feed \
                 delivered a commit that was not durable",
                ids.join(","),
                self.cuts
            ));
        }
        self.seen.retain(|_, c| *c <= newest);
        self.lost_seen += before - self.seen.len();
        if let Some(h) = self.high.filter(|h| *h > newest) {
            self.bad.push(format!(
                "feed: cursor {h} was delivered or saved before cut {}, and the recovered store \
                 ends at {newest}: the consumer was past the recovered store",
                self.cuts
            ));
            self.ahead += 1;
        }
    }

    fn replay(path: &str) -> State {
        let mut s = State::default();
        let text = std::fs::read_to_string(path).unwrap_or_default();
        for line in text.lines() {
            let words: Vec<&str> = line.split(' ').collect();
            let cursor = words.get(1).and_then(|w| Cursor::parse(w).ok());
            match (words[0], cursor) {
                ("b", Some(c)) => {
                    let ids: Vec<&str> = match words.get(2) {
                        Some(&"-") | None => Vec::new(),
                        Some(w) => w.split(',').collect(),
                    };
                    s.delivered(c, &ids);
                }
                ("at", Some(c)) => s.saved(c),
                ("cut", Some(c)) => s.cut(c),
                ("error", _) => s.bad.push(format!("feed: the consumer failed: {line}")),
                _ => s.bad.push(format!("feed: consumer log line {line:?}")),
            }
        }
        s
    }
}

/// Resumes the consumer after a cut and checks the feed against the store (lanes at `steps`)
/// and the acks. Returns the watcher to go on with, and a summary.
pub fn check(
    store: &Store,
    ack_path: &str,
    acks: &[Acks],
    steps: &[u64],
    lost: &mut Vec<String>,
    bad: &mut Vec<String>,
) -> (Option<Watcher>, String) {
    let log = log_path(ack_path);
    let mut s = State::replay(&log);
    let watcher = resume(store, &log, &mut s);
    bad.append(&mut s.bad);
    let watcher = match watcher {
        Ok(w) => Some(w),
        Err(e) => {
            bad.push(e);
            None
        }
    };
    for (lane, (a, &g)) in acks.iter().zip(steps).enumerate() {
        let missing: Vec<u64> =
            (1..=g.max(a.tx)).filter(|k| !s.seen.contains_key(&format!("t{lane}.{k}"))).collect();
        let (acked, unacked): (Vec<u64>, Vec<u64>) = missing.iter().partition(|&&k| k <= a.tx);
        if !acked.is_empty() {
            lost.push(format!(
                "feed: acknowledged steps {} of /L{lane} (of {}) were not delivered",
                short(&acked),
                acked.len()
            ));
        }
        let unacked: Vec<u64> = unacked.into_iter().filter(|&k| k <= g).collect();
        if !unacked.is_empty() {
            bad.push(format!(
                "feed: steps {} of /L{lane} are in the store (at step {g}), not in the feed",
                short(&unacked)
            ));
        }
        let beyond: Vec<u64> = s
            .seen
            .keys()
            .filter_map(|id| id.strip_prefix(&format!("t{lane}."))?.parse().ok())
            .filter(|&k| k > g)
            .collect();
        if !beyond.is_empty() {
            bad.push(format!(
                "feed: steps {} of /L{lane} were delivered and kept through the cut, the store \
                 is at step {g}",
                short(&beyond)
            ));
        }
        let auto: Vec<u64> = a
            .auto
            .iter()
            .copied()
            .filter(|k| !s.seen.contains_key(&format!("a{lane}.{k}")))
            .collect();
        if !auto.is_empty() {
            lost.push(format!(
                "feed: the creation of acknowledged /L{lane}/auto/a{{{}}} was not delivered",
                short(&auto)
            ));
        }
    }
    let summary = format!(
        "feed: {} transactions delivered over {} cuts, {} seen live then lost with a cut, \
         consumer past the recovered store after {} cuts",
        s.batches, s.cuts, s.lost_seen, s.ahead
    );
    (watcher, summary)
}

fn short(v: &[u64]) -> String {
    let mut s: Vec<String> = v.iter().take(5).map(|k| k.to_string()).collect();
    if v.len() > 5 {
        s.push("...".into());
    }
    s.join(",")
}

/// The consumer's restart: the cut line, the marker commit, then everything after the saved
/// cursor, appended to the log and applied to `s`.
fn resume(store: &Store, log: &str, s: &mut State) -> Result<Watcher, String> {
    let at = s.at.ok_or("feed: the consumer log holds no saved cursor")?;
    let newest = store
        .watch(WatchOptions::default())
        .map_err(|e| format!("feed: reading the newest cursor failed: {e}"))?
        .cursor();
    append(log, &format!("cut {newest}\n"));
    s.cut(newest);
    let marker = format!("cut {}, resuming after {at}", s.cuts);
    // Not synced: a sync would make the stamp bound of this owner's first block durable
    // whether or not the core syncs it, and hide a stamp given again after the next cut.
    store
        .write_file("/feedmark", marker.as_bytes())
        .map_err(|e| format!("feed: the marker commit failed: {e}"))?;
    let options = WatchOptions { since: Some(at), ..Default::default() };
    let mut w = store.watch(options).map_err(|e| {
        format!(
            "feed: resuming from the cursor saved before the cut failed after a new commit \
             (the recovered store's newest is {newest}; a stamp given again?): {e}"
        )
    })?;
    loop {
        let batches = w.poll().map_err(|e| format!("feed: reading after {at} failed: {e}"))?;
        if batches.is_empty() {
            return Ok(w);
        }
        let text = batch_lines(&batches, w.cursor());
        append(log, &text);
        for b in &batches {
            let ids = ids(b);
            s.delivered(b.cursor, &ids.iter().map(|i| i.as_str()).collect::<Vec<_>>());
        }
        s.saved(w.cursor());
    }
}

/// The live consumer: polls the feed while the lanes commit, logging what it reads.
pub fn consume(mut w: Watcher, ack_path: &str) {
    let log = log_path(ack_path);
    std::thread::spawn(move || loop {
        match w.poll() {
            Ok(b) if b.is_empty() => {}
            Ok(b) => append(&log, &batch_lines(&b, w.cursor())),
            Err(e) => {
                append(&log, &format!("error {e}\n"));
                return;
            }
        }
        std::thread::sleep(Duration::from_millis(10));
    });
}
