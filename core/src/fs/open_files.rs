//! Which inodes have open handles in this process, and the rule that keeps an unlinked file
//! readable through every handle of it.
//!
//! An open reads the inode at its transaction's snapshot and counts its handle a moment
//! later; an unlink deciding "nobody has it open, free it now" in between would free the data
//! under a handle that POSIX says must stay readable. So every commit that frees a file's
//! data ([`OpenFiles::commit_freeing`], and the reaping of orphans through
//! [`OpenFiles::reap_unless_open`]) happens under this table's lock, after checking that no
//! handle counts the file (an unlink then fails with a conflict and, retried, keeps the file
//! as an orphan), and notes what it freed. An open that began before such a commit and counted
//! its handle after it learns so from [`OpenFiles::end_open`] and starts again at a fresh
//! snapshot, where the file is gone. One lock orders every count against every free.

use crate::error::{Error, ErrorKind, Result};
use parking_lot::Mutex;
use std::collections::{BTreeMap, HashMap, VecDeque};

#[derive(Default)]
struct State {
    /// Open handles per inode.
    handles: HashMap<u64, usize>,
    /// Number of reaps so far; an open remembers the value it started at.
    reaps: u64,
    /// Recent reaps (count after the reap, inode), kept while an open older than them runs.
    reaped: VecDeque<(u64, u64)>,
    /// Opens in progress, by the reap count they started at.
    opening: BTreeMap<u64, usize>,
    /// This process's open marks in the store (fs/handle_marks.rs), by inode.
    marks: HashMap<u64, Mark>,
    /// Rounds of the liveness thread so far; see [`OpenFiles::clear_idle_marks`].
    round: u64,
}

/// This process's open mark of one inode.
struct Mark {
    /// Handles (counted from inside their opens) that rely on the mark.
    users: usize,
    /// The mark is in the store: an open that wrote it has committed. An unconfirmed mark
    /// does not spare the next open its write.
    confirmed: bool,
    /// The round in which `users` last fell to 0.
    idle_since: u64,
}

/// The open-handle table of one store in this process.
#[derive(Default)]
pub(crate) struct OpenFiles {
    state: Mutex<State>,
}

/// An open in progress: from before its transaction reads anything until [`OpenFiles::end_open`].
#[must_use]
pub(crate) struct OpenTicket(u64);

impl OpenFiles {
    /// Starts an open; call before its transaction takes a snapshot.
    pub(crate) fn begin_open(&self) -> OpenTicket {
        let mut st = self.state.lock();
        let at = st.reaps;
        *st.opening.entry(at).or_insert(0) += 1;
        OpenTicket(at)
    }

    /// Ends an open that counted a handle of `ino` (or none, when it failed). Returns false
    /// when `ino` was reaped after the open began: its snapshot may show freed data, so the
    /// caller drops its count and opens again.
    pub(crate) fn end_open(&self, ticket: OpenTicket, ino: Option<u64>) -> bool {
        let mut st = self.state.lock();
        if let Some(n) = st.opening.get_mut(&ticket.0) {
            *n -= 1;
            if *n == 0 {
                st.opening.remove(&ticket.0);
            }
        }
        let raced =
            ino.is_some_and(|ino| st.reaped.iter().any(|&(at, r)| at > ticket.0 && r == ino));
        let oldest = st.opening.keys().next().copied().unwrap_or(st.reaps);
        while st.reaped.front().is_some_and(|&(at, _)| at <= oldest) {
            st.reaped.pop_front();
        }
        !raced
    }

    /// True while a handle of `ino` is open.
    pub(crate) fn is_open(&self, ino: u64) -> bool {
        self.state.lock().handles.contains_key(&ino)
    }

    /// Counts one more handle of `ino`; true when it is the first.
    pub(crate) fn opened(&self, ino: u64) -> bool {
        let mut st = self.state.lock();
        let n = st.handles.entry(ino).or_insert(0);
        *n += 1;
        *n == 1
    }

    /// Notes that a handle of `ino` being opened relies on this process's open mark; true
    /// when the open must write the mark (it is not known to be in the store yet). Call from
    /// inside the open's operation; undo with [`OpenFiles::unuse_mark`] if it does not commit,
    /// confirm with [`OpenFiles::confirm_mark`] once it has.
    pub(crate) fn use_mark(&self, ino: u64) -> bool {
        let mut st = self.state.lock();
        let m = st.marks.entry(ino).or_insert(Mark { users: 0, confirmed: false, idle_since: 0 });
        m.users += 1;
        !m.confirmed
    }

    /// Notes that the open that wrote (or found) the mark of `ino` has committed.
    pub(crate) fn confirm_mark(&self, ino: u64) {
        if let Some(m) = self.state.lock().marks.get_mut(&ino) {
            m.confirmed = true;
        }
    }

    /// One handle fewer relies on the mark of `ino` (it closed, or its open did not commit).
    /// An unconfirmed mark that nothing relies on is forgotten; a confirmed one stays in the
    /// store, idle, so that the next open of the file writes nothing, until
    /// [`OpenFiles::clear_idle_marks`] or the last close of the file as an orphan clears it.
    pub(crate) fn unuse_mark(&self, ino: u64) {
        let mut st = self.state.lock();
        let round = st.round;
        if let Some(m) = st.marks.get_mut(&ino) {
            m.users = m.users.saturating_sub(1);
            if m.users == 0 {
                m.idle_since = round;
                if !m.confirmed {
                    st.marks.remove(&ino);
                }
            }
        }
    }

    /// Starts a round of the liveness thread and clears the marks idle since before the
    /// previous one (so a mark outlives its last handle by one or two rounds): runs `clear`
    /// on them, a batch at a time, holding the table's lock so that no open relies on them
    /// meanwhile, and forgets those it cleared.
    pub(crate) fn clear_idle_marks(
        &self,
        mut clear: impl FnMut(&[u64]) -> Result<()>,
    ) -> Result<()> {
        let mut st = self.state.lock();
        st.round += 1;
        let round = st.round;
        let idle: Vec<u64> = st
            .marks
            .iter()
            .filter(|(_, m)| m.users == 0 && round - m.idle_since >= 2)
            .map(|(&ino, _)| ino)
            .collect();
        for batch in idle.chunks(1000) {
            clear(batch)?;
            for ino in batch {
                st.marks.remove(ino);
            }
        }
        Ok(())
    }

    /// The inodes this process has (or may have) a mark of in the store.
    pub(crate) fn marked(&self) -> Vec<u64> {
        self.state.lock().marks.keys().copied().collect()
    }

    /// Counts one handle of `ino` fewer; true when it was the last.
    pub(crate) fn closed(&self, ino: u64) -> bool {
        let mut st = self.state.lock();
        match st.handles.get_mut(&ino) {
            Some(n) if *n > 1 => {
                *n -= 1;
                false
            }
            _ => {
                st.handles.remove(&ino);
                true
            }
        }
    }

    /// Runs `commit`, which frees the data of the inodes in `freed`, holding the table's lock
    /// so that no open counts a handle of them meanwhile; fails with a (retryable) conflict
    /// instead when one of them was opened since the transaction decided to free it. Notes
    /// what it freed for opens in progress. With nothing freed, just commits.
    pub(crate) fn commit_freeing<R>(
        &self,
        freed: &[u64],
        commit: impl FnOnce() -> Result<R>,
    ) -> Result<R> {
        if freed.is_empty() {
            return commit();
        }
        let mut st = self.state.lock();
        if let Some(ino) = freed.iter().find(|i| st.handles.contains_key(i)) {
            return Err(Error::new(
                ErrorKind::Conflict,
                format!("inode {ino}, which this transaction deletes, was opened meanwhile"),
            ));
        }
        let r = commit()?;
        st.note_freed(freed);
        Ok(r)
    }

    /// Runs `reap` (which frees `ino` if it is still an orphan and returns whether it did)
    /// unless a handle of `ino` is open, holding the table's lock throughout so that no open
    /// counts a handle meanwhile; notes the reap for opens in progress.
    pub(crate) fn reap_unless_open(
        &self,
        ino: u64,
        reap: impl FnOnce() -> Result<bool>,
    ) -> Result<()> {
        self.close_last(ino, |_| reap().map(|freed| (freed, false)))
    }

    /// After the last close of `ino` in this process: unless a handle of it was opened since,
    /// runs `f` with whether this process may have an idle mark of it in the store, holding
    /// the table's lock throughout (no open counts a handle or relies on the mark meanwhile).
    /// `f` returns whether it freed the inode and whether it cleared the mark.
    pub(crate) fn close_last(
        &self,
        ino: u64,
        f: impl FnOnce(bool) -> Result<(bool, bool)>,
    ) -> Result<()> {
        let mut st = self.state.lock();
        if st.handles.contains_key(&ino) {
            return Ok(());
        }
        let marked = st.marks.get(&ino).is_some_and(|m| m.users == 0);
        let (freed, unmarked) = f(marked)?;
        if unmarked {
            st.marks.remove(&ino);
        }
        if freed {
            st.note_freed(&[ino]);
        }
        Ok(())
    }
}

impl State {
    fn note_freed(&mut self, freed: &[u64]) {
        self.reaps += 1;
        let at = self.reaps;
        if !self.opening.is_empty() {
            self.reaped.extend(freed.iter().map(|&ino| (at, ino)));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_open_that_began_before_a_reap_must_start_again() {
        let t = OpenFiles::default();
        let early = t.begin_open();
        t.reap_unless_open(7, || Ok(true)).unwrap();
        let late = t.begin_open();
        t.opened(7);
        assert!(!t.end_open(early, Some(7)), "began before the reap: its snapshot may be stale");
        assert!(t.end_open(late, Some(8)));
        assert!(t.state.lock().reaped.is_empty(), "no open left that could need the record");
    }

    #[test]
    fn a_commit_freeing_an_inode_opened_meanwhile_conflicts() {
        let t = OpenFiles::default();
        t.opened(5);
        let e =
            t.commit_freeing(&[4, 5], || -> Result<()> { panic!("must not commit") }).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Conflict);
        assert!(t.closed(5));
        let early = t.begin_open();
        t.commit_freeing(&[4, 5], || Ok(())).unwrap();
        assert!(!t.end_open(early, Some(5)));
    }

    #[test]
    fn a_counted_handle_stops_the_reap_until_the_last_close() {
        let t = OpenFiles::default();
        t.opened(3);
        t.opened(3);
        t.reap_unless_open(3, || panic!("must not reap an open inode")).unwrap();
        assert!(!t.closed(3));
        assert!(t.closed(3));
        let mut ran = false;
        t.reap_unless_open(3, || {
            ran = true;
            Ok(true)
        })
        .unwrap();
        assert!(ran);
    }
}
