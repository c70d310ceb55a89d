//! [`CallScope`]: where a file-system call runs, auto-commit on a store or inside a transaction;
//! and running one auto-commit operation.

use super::ops::Operation;
use super::options::PerOpen;
use super::staging::Staging;
use super::state::StoreState;
use super::store::Store;
use super::transaction::{finished, TxShared, TxState};
use super::types::Credential;
use crate::error::{panic_error, Error, ErrorKind, Result};
use crate::kv;
use std::panic::{self, AssertUnwindSafe};
use std::sync::Arc;

/// Where a file-system call runs: auto-commit on a store, or inside a transaction.
#[doc(hidden)]
#[derive(Clone)]
pub enum CallScope {
    /// Each operation commits by itself.
    AutoCommit(Store),
    /// Operations belong to this explicit transaction.
    InTransaction(Arc<TxShared>),
}

impl CallScope {
    pub(crate) fn store(&self) -> &Store {
        match self {
            CallScope::AutoCommit(s) => s,
            CallScope::InTransaction(t) => &t.store,
        }
    }

    pub(crate) fn is_finished(&self) -> bool {
        match self {
            CallScope::AutoCommit(_) => false,
            CallScope::InTransaction(t) => !matches!(*t.state.lock(), TxState::Active(..)),
        }
    }

    /// [`CallScope::run`] for a call that only reads: on its own (auto-commit) it is first
    /// answered from the read cache alone (`Backend::begin_cached`), and runs as an ordinary
    /// transaction only when the cache cannot answer it.
    pub(crate) fn read<R>(&self, f: impl FnMut(&mut Operation<'_>) -> Result<R>) -> Result<R> {
        match self {
            CallScope::AutoCommit(s) => s.inner.auto_read(s.cred.as_deref(), s.per_open, f),
            CallScope::InTransaction(_) => self.run(f),
        }
    }

    pub(crate) fn run<R>(&self, mut f: impl FnMut(&mut Operation<'_>) -> Result<R>) -> Result<R> {
        match self {
            CallScope::AutoCommit(s) => s.inner.auto_commit_as(s.cred.as_deref(), s.per_open, f),
            CallScope::InTransaction(t) => {
                let mut state = t.state.lock();
                let (kv, staging) = match &mut *state {
                    TxState::Active(kv, staging) => (kv, staging),
                    TxState::Failed(e) => {
                        return Err(Error::new(
                            e.kind(),
                            format!("transaction failed earlier: {}", e.message()),
                        ))
                    }
                    TxState::Done => return Err(finished()),
                };
                let store = &t.store;
                let mut op = Operation::new(
                    &mut **kv,
                    &store.inner,
                    store.cred.as_deref(),
                    store.per_open.read_only,
                    Some(staging),
                );
                // A panic leaves the transaction as half an operation, like an error after a
                // write: poison it, then let the panic go on (the bindings turn it into an error).
                let r = match panic::catch_unwind(AssertUnwindSafe(|| f(&mut op))) {
                    Ok(r) => r,
                    Err(payload) => {
                        let why = panic_error(payload.as_ref());
                        drop(op);
                        if let TxState::Active(_, Staging { txid: Some(txid), .. }) =
                            std::mem::replace(&mut *state, TxState::Failed(why))
                        {
                            let _ = store.inner.collect_stage(txid, None);
                        }
                        drop(state);
                        panic::resume_unwind(payload);
                    }
                };
                t.orphaned.lock().append(&mut op.orphaned);
                t.freed.lock().append(&mut op.freed);
                if r.is_ok() {
                    t.changes.lock().append(&mut op.changes);
                }
                let wrote = op.wrote;
                if let (Err(e), true) = (&r, wrote) {
                    // Only a rollback is possible now: free what the transaction wrote ahead.
                    if let TxState::Active(_, Staging { txid: Some(txid), .. }) =
                        std::mem::replace(&mut *state, TxState::Failed(e.clone()))
                    {
                        let _ = store.inner.collect_stage(txid, None);
                    }
                }
                r
            }
        }
    }
}

impl StoreState {
    /// Runs one auto-commit operation of the store's own (reaping, removal of detached trees):
    /// writable, with the first open's retry limit.
    pub(crate) fn auto_commit<R>(
        &self,
        cred: Option<&Credential>,
        f: impl FnMut(&mut Operation<'_>) -> Result<R>,
    ) -> Result<R> {
        let mode = PerOpen { read_only: false, sync: self.sync, max_retries: self.max_retries };
        self.auto_commit_as(cred, mode, f)
    }

    /// Runs one auto-commit operation that only reads: from the read cache alone where it
    /// can answer every read (see `Backend::begin_cached`), else as [`Self::auto_commit_as`].
    pub(crate) fn auto_read<R>(
        &self,
        cred: Option<&Credential>,
        mode: PerOpen,
        mut f: impl FnMut(&mut Operation<'_>) -> Result<R>,
    ) -> Result<R> {
        if let Some(mut tx) = self.backend.begin_cached() {
            let mut op = Operation::new(&mut *tx, self, cred, mode.read_only, None);
            let r = f(&mut op);
            drop(op);
            // A failed commit means a read missed the cache (or `f` tried to write, which the
            // cached transaction refuses): what `f` returned is unfounded, run it again.
            if tx.commit(false).is_ok() {
                return r;
            }
        }
        self.auto_commit_as(cred, mode, f)
    }

    /// Runs one auto-commit operation for an open of the store with options `mode`.
    pub(crate) fn auto_commit_as<R>(
        &self,
        cred: Option<&Credential>,
        mode: PerOpen,
        mut f: impl FnMut(&mut Operation<'_>) -> Result<R>,
    ) -> Result<R> {
        let mut orphaned = Vec::new();
        // The first attempt may take names it creates as absent without reading them
        // (`Operation::lookup_to_create`). If it did and failed before its commit (an error
        // the guess may have caused) or its commit conflicted (the owner found such a name),
        // the call runs again at once, reading them. Nothing was committed then; a commit
        // whose outcome is unknown is never run again.
        let (mut may_guess, mut guess_failed) = (true, false);
        let r = loop {
            let r = kv::retry_loop(
                mode.max_retries,
                || self.backend.begin(),
                |mut tx| {
                    let mut op = Operation::new(&mut *tx, self, cred, mode.read_only, None);
                    op.may_guess = std::mem::take(&mut may_guess);
                    let r = f(&mut op);
                    let guessed = op.guessed;
                    // Not retried after a backoff: run again at once, below.
                    let again = || Error::new(ErrorKind::Invalid, "a guess to take back");
                    let (r, orphans, freed, changes) = match r {
                        Ok(r) => (r, op.orphaned, op.freed, op.changes),
                        // Nothing was committed: an error the guess may have caused.
                        Err(_) if guessed => {
                            guess_failed = true;
                            return Err(again());
                        }
                        Err(e) => return Err(e),
                    };
                    orphaned = orphans;
                    super::feed::write_record(&mut *tx, &changes)?;
                    match self.open_files.commit_freeing(&freed, || tx.commit(false)) {
                        // The owner found a guessed name: nothing was committed. Any other
                        // failure stands (CommitUnknown: the commit may have taken effect).
                        Err(e) if guessed && e.kind() == ErrorKind::Conflict => {
                            guess_failed = true;
                            return Err(again());
                        }
                        r => r?,
                    }
                    if !changes.is_empty() {
                        self.feed_committed();
                    }
                    Ok(r)
                },
            );
            if !std::mem::take(&mut guess_failed) {
                break r?;
            }
        };
        self.reap_closed(&orphaned);
        Ok(r)
    }
}
