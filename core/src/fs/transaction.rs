//! [`Transaction`]: an explicit transaction, how it begins ([`Store::begin`],
//! [`Store::transact`]), commits and rolls back.

use super::staging::Staging;
use super::store::Store;
use crate::error::{Error, ErrorKind, Result};
use crate::kv::{self, JournalTxn, Txn};
use crate::schema;
use parking_lot::Mutex;
use std::sync::Arc;

impl Store {
    /// Starts an explicit transaction. Nothing it does is visible to others until
    /// [`Transaction::commit`]; dropping it rolls back.
    ///
    /// ```
    /// use txvfs::{FileSystem, Store};
    /// let store = Store::open("memory:").unwrap();
    /// let tx = store.begin().unwrap();
    /// tx.write_file("/a.txt", b"one").unwrap();
    /// assert!(!store.exists("/a.txt").unwrap()); // not visible before the commit
    /// tx.commit().unwrap();
    /// assert_eq!(store.read_file("/a.txt").unwrap(), b"one");
    /// ```
    pub fn begin(&self) -> Result<Transaction> {
        let backend = &self.inner.backend;
        let limits = backend.limits();
        // On a backend with a time limit, the transaction renews its backend transaction
        // before it runs out (kv::JournalTxn), so it may last as long as it needs.
        let kv: Box<dyn Txn> = match limits.max_txn_duration {
            Some(limit) => Box::new(JournalTxn::begin(backend.clone(), limit / 2)?),
            None => backend.begin()?,
        };
        Ok(self.transaction_of(kv))
    }

    fn transaction_of(&self, kv: Box<dyn Txn>) -> Transaction {
        let limits = self.inner.backend.limits();
        Transaction {
            joined: false,
            shared: Arc::new(TxShared {
                store: self.clone(),
                state: Mutex::new(TxState::Active(kv, Staging::new(limits))),
                orphaned: Mutex::new(Vec::new()),
                freed: Mutex::new(Vec::new()),
                changes: Mutex::new(Vec::new()),
                after_commit: Mutex::new(Vec::new()),
            }),
        }
    }

    /// Runs `f` in a transaction and commits it; retries with backoff when the transaction
    /// conflicts with another one (so `f` may run several times and must not have side
    /// effects outside the transaction). Every other error is returned at once.
    ///
    /// ```
    /// use txvfs::{FileSystem, Store};
    /// let store = Store::open("memory:").unwrap();
    /// store.write_file("/count", b"1").unwrap();
    /// // Read, then write, atomically: a concurrent writer would make this run again.
    /// let next = store.transact(|tx| {
    ///     let n: u32 = String::from_utf8_lossy(&tx.read_file("/count")?).parse().unwrap();
    ///     tx.write_file("/count", (n + 1).to_string().as_bytes())?;
    ///     Ok(n + 1)
    /// }).unwrap();
    /// assert_eq!(next, 2);
    /// ```
    pub fn transact<R>(&self, f: impl FnMut(&Transaction) -> Result<R>) -> Result<R> {
        self.transact_durable(self.per_open.sync, f)
    }

    /// [`Store::transact`], choosing durability for the commit as
    /// [`Transaction::commit_durable`] does (the SQLite VFS follows `PRAGMA synchronous`).
    pub fn transact_durable<R>(
        &self,
        durable: bool,
        mut f: impl FnMut(&Transaction) -> Result<R>,
    ) -> Result<R> {
        kv::retry_loop(
            self.per_open.max_retries,
            || self.begin(),
            |tx| f(&tx).and_then(|v| tx.commit_durable(durable).map(|()| v)),
        )
    }
}

pub(crate) enum TxState {
    Active(Box<dyn Txn>, Staging),
    /// An operation failed after writing part of its changes; only rollback is possible.
    Failed(Error),
    Done,
}

#[doc(hidden)]
pub struct TxShared {
    pub(crate) store: Store,
    pub(crate) state: Mutex<TxState>,
    /// Inodes the transaction kept as orphans; see [`StoreState::reap_closed`].
    pub(crate) orphaned: Mutex<Vec<u64>>,
    /// Inodes whose data the transaction deleted; see `OpenFiles::commit_freeing`.
    pub(crate) freed: Mutex<Vec<u64>>,
    /// Changes noted for the change feed by the operations so far.
    pub(crate) changes: Mutex<Vec<schema::Change>>,
    /// What to do once the commit's outcome is known (true: committed), such as lock records
    /// released with it ([`super::File::unlock_range_in`]); run with false if it never commits.
    pub(crate) after_commit: Mutex<Vec<AfterCommit>>,
}

/// See [`TxShared::after_commit`].
pub(crate) type AfterCommit = Box<dyn FnOnce(bool) + Send>;

impl Drop for TxShared {
    fn drop(&mut self) {
        for hook in self.after_commit.get_mut().drain(..) {
            hook(false);
        }
    }
}

/// An explicit transaction: every call on it (and on files opened through it) belongs to it.
/// Its reads see its own writes; nobody else sees anything until [`Transaction::commit`],
/// then everything at once. Dropping it rolls back.
pub struct Transaction {
    pub(crate) shared: Arc<TxShared>,
    /// A handle from [`Transaction::joined`]: it works in the transaction but cannot end it.
    pub(crate) joined: bool,
}

impl Transaction {
    /// Commits: all changes become visible at once (and durable, with the `sync` option), or
    /// none do. A [`ErrorKind::Conflict`] error means another transaction changed something
    /// this one read; run it again (see [`Store::transact`]). Takes `&self`, so a transaction
    /// shared between threads or held by a binding can be committed without being moved out;
    /// once committed or rolled back, every further call (a second commit too) fails with
    /// [`ErrorKind::Invalid`] ("already committed or rolled back").
    pub fn commit(&self) -> Result<()> {
        let durable = self.shared.store.per_open.sync;
        self.commit_durable(durable)
    }

    /// Commits like [`Transaction::commit`], choosing durability for this commit alone,
    /// whatever the store's `sync` option says: `true` returns once the commit survives power
    /// loss; `false` makes it atomic and visible at once and durable at the next
    /// [`Store::sync`] or durable commit (like an auto-commit call). The SQLite VFS maps
    /// `PRAGMA synchronous=OFF` to `false`.
    pub fn commit_durable(&self, durable: bool) -> Result<()> {
        self.finish(durable, false).map(|_| ())
    }

    /// True when [`Transaction::commit_pinned`] can give a transaction at this commit's
    /// version (a client process of a shared store).
    pub fn pins_commit(&self) -> bool {
        matches!(&*self.shared.state.lock(), TxState::Active(kv, _) if kv.pins_commit())
    }

    /// Commits like [`Transaction::commit_durable`], then returns a transaction that reads
    /// exactly the state this commit made, whatever commits later (what a reader keeps after
    /// its own commit; use it only to read), where the store can give one
    /// ([`Transaction::pins_commit`]): None otherwise, and the commit stands.
    pub fn commit_pinned(&self, durable: bool) -> Result<Option<Transaction>> {
        let pinned = self.finish(durable, true)?;
        Ok(pinned.map(|kv| self.shared.store.transaction_of(kv)))
    }

    /// Commits (`pin`: with [`Txn::commit_pinned`]) and runs the hooks with the outcome.
    fn finish(&self, durable: bool, pin: bool) -> Result<Option<Box<dyn Txn>>> {
        self.check_owner("commit")?;
        let r = self.finish_commit(durable, pin);
        let hooks = std::mem::take(&mut *self.shared.after_commit.lock());
        for hook in hooks {
            hook(r.is_ok());
        }
        r
    }

    fn finish_commit(&self, durable: bool, pin: bool) -> Result<Option<Box<dyn Txn>>> {
        let state = std::mem::replace(&mut *self.shared.state.lock(), TxState::Done);
        match state {
            TxState::Active(mut kv, staging) => {
                let inner = &self.shared.store.inner;
                let freed = std::mem::take(&mut *self.shared.freed.lock());
                let changes = std::mem::take(&mut *self.shared.changes.lock());
                let commit = |mut kv: Box<dyn Txn>| {
                    super::feed::write_record(kv.as_mut(), &changes)?;
                    inner.open_files.commit_freeing(&freed, || match pin {
                        true => kv.commit_pinned(durable),
                        false => kv.commit(durable).map(|()| None),
                    })
                };
                let committed = match staging.txid {
                    None => commit(kv),
                    Some(txid) => finish_stage(kv.as_mut(), txid)
                        .and_then(|()| commit(kv))
                        .inspect_err(|_| {
                            // Not committed (the staging record is still there): free the chunks.
                            let _ = inner.collect_stage(txid, None);
                        }),
                };
                let pinned = committed?;
                if !changes.is_empty() {
                    inner.feed_committed();
                }
                let orphaned = std::mem::take(&mut *self.shared.orphaned.lock());
                inner.reap_closed(&orphaned);
                Ok(pinned)
            }
            TxState::Failed(e) => Err(Error::new(
                e.kind(),
                format!(
                    "transaction cannot commit: an earlier operation failed part-way: {}",
                    e.message()
                ),
            )),
            TxState::Done => Err(finished()),
        }
    }

    /// Runs `f` on the transaction's backend transaction (a lock change that commits with it).
    pub(crate) fn with_kv<R>(&self, f: impl FnOnce(&mut dyn Txn) -> Result<R>) -> Result<R> {
        match &mut *self.shared.state.lock() {
            TxState::Active(kv, _) => f(&mut **kv),
            TxState::Failed(e) => {
                Err(Error::new(e.kind(), format!("transaction failed earlier: {}", e.message())))
            }
            TxState::Done => Err(finished()),
        }
    }

    /// Runs `hook` once the commit's outcome is known (true: committed; false: failed, rolled
    /// back or dropped).
    pub(crate) fn after_commit(&self, hook: AfterCommit) {
        self.shared.after_commit.lock().push(hook);
    }

    /// Discards every change of the transaction (nothing happens if it already ended).
    pub fn rollback(&self) {
        if !self.joined {
            self.end();
        }
    }

    /// Fails for a handle from [`Transaction::joined`]: its owner ends the transaction.
    fn check_owner(&self, verb: &str) -> Result<()> {
        if self.joined {
            return Err(Error::new(
                ErrorKind::Invalid,
                format!(
                    "cannot {verb} a joined transaction: it commits with its SQLite transaction \
                     (COMMIT or ROLLBACK on the connection)"
                ),
            ));
        }
        Ok(())
    }

    /// Ends the transaction without committing; frees what it wrote ahead (a failure leaves
    /// that to the next open).
    fn end(&self) {
        let state = std::mem::replace(&mut *self.shared.state.lock(), TxState::Done);
        if let TxState::Active(_, Staging { txid: Some(txid), .. }) = state {
            let _ = self.shared.store.inner.collect_stage(txid, None);
        }
    }
}

/// In the final commit of a transaction that wrote ahead: hands its chunks to their blocks by
/// deleting its staging record and index, after checking that they were not collected.
fn finish_stage(kv: &mut dyn Txn, txid: u64) -> Result<()> {
    // Someone may have collected the chunks of this live transaction: another process on a
    // shared backend (when its lease ran out), or another store instance over the same data
    // (a wrapped backend, a second copy of the library), which takes every staging record it
    // finds for dead. So the transaction reads its staging record at a fresh snapshot (later
    // than its own staging writes, which committed on their own), and a collector that
    // deletes it conflicts with this commit.
    kv.refresh()?;
    if kv.get(&schema::stage_key(txid))?.is_none() {
        return Err(Error::new(
            ErrorKind::TooOld,
            "data this transaction wrote ahead was collected (its lease ran out, or another store instance \
             over the same data took it for dead)",
        ));
    }
    kv.clear(&schema::stage_key(txid))?;
    let (s, e) = schema::staged_range(txid);
    kv.clear_range(&s, &e)
}

impl Drop for Transaction {
    fn drop(&mut self) {
        if !self.joined {
            self.end();
        }
    }
}

pub(crate) fn finished() -> Error {
    Error::new(ErrorKind::Invalid, "transaction already committed or rolled back")
}
