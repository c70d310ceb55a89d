//! [`CallScope`]: where a file-system call runs, auto-commit on a store or inside a transaction;
//! and running one auto-commit operation.

use super::ops::Operation;
use super::state::StoreState;
use super::staging::Staging;
use super::store::Store;
use super::transaction::{finished, TxShared, TxState};
use super::types::Credential;
use crate::error::{Error, Result};
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

    pub(crate) fn run<R>(&self, mut f: impl FnMut(&mut Operation<'_>) -> Result<R>) -> Result<R> {
        match self {
            CallScope::AutoCommit(s) => s.inner.auto_commit(s.cred.as_deref(), f),
            CallScope::InTransaction(t) => {
                let mut state = t.state.lock();
                let (kv, staging) = match &mut *state {
                    TxState::Active(kv, staging) => (kv, staging),
                    TxState::Failed(e) => {
                        return Err(Error::new(e.kind(), format!("transaction failed earlier: {}", e.message())))
                    }
                    TxState::Done => return Err(finished()),
                };
                let store = &t.store;
                let mut op = Operation {
                    tx: &mut **kv,
                    inner: &store.inner,
                    cred: store.cred.as_deref(),
                    wrote: false,
                    orphaned: Vec::new(),
                    staging: Some(staging),
                };
                let r = f(&mut op);
                t.orphaned.lock().append(&mut op.orphaned);
                let wrote = op.wrote;
                if let (Err(e), true) = (&r, wrote) {
                    // Only a rollback is possible now: free what the transaction wrote ahead.
                    if let TxState::Active(_, Staging { txid: Some(txid), .. }) = std::mem::replace(&mut *state, TxState::Failed(e.clone())) {
                        let _ = store.inner.collect_stage(txid, None);
                    }
                }
                r
            }
        }
    }
}

impl StoreState {
    /// Runs one auto-commit operation.
    pub(crate) fn auto_commit<R>(&self, cred: Option<&Credential>, mut f: impl FnMut(&mut Operation<'_>) -> Result<R>) -> Result<R> {
        let mut orphaned = Vec::new();
        let r = self.kv_transact(
            |tx| {
                let mut op = Operation { tx, inner: self, cred, wrote: false, orphaned: Vec::new(), staging: None };
                let r = f(&mut op);
                orphaned = op.orphaned;
                r
            },
            false,
        )?;
        self.reap_closed(&orphaned);
        Ok(r)
    }
}
