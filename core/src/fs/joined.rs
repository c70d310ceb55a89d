//! Joined transactions: one transaction worked on by two bindings of this copy of the library
//! in one process. The SQLite VFS publishes the file transaction of a SQLite write transaction
//! under a token (`PRAGMA txvfs_files`); the store's API joins it by that token
//! ([`Transaction::joined`]), works in it, and the VFS commits it with SQLite's pages at
//! SQLite's commit point: rows and files in one commit.

use super::transaction::{Transaction, TxShared};
use crate::error::{Error, ErrorKind, Result};
use parking_lot::Mutex;
use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock, Weak};

/// How many failed commits of published transactions are remembered (for
/// [`Transaction::joined_commit_error`]).
const FAILURES_KEPT: usize = 64;

#[derive(Default)]
struct Registry {
    /// Published transactions by token (weak: publishing never keeps one alive).
    live: HashMap<String, Weak<TxShared>>,
    /// The last failed commits, oldest first.
    failed: VecDeque<(String, Error)>,
}

fn registry() -> &'static Mutex<Registry> {
    static R: OnceLock<Mutex<Registry>> = OnceLock::new();
    R.get_or_init(Default::default)
}

/// A transaction's publication: withdrawn when dropped.
#[doc(hidden)]
pub struct Published {
    token: String,
}

impl Published {
    /// The token that [`Transaction::joined`] takes.
    pub fn token(&self) -> &str {
        &self.token
    }

    /// Records that the transaction's commit failed with `e` (see
    /// [`Transaction::joined_commit_error`]).
    pub fn commit_failed(&self, e: &Error) {
        let mut r = registry().lock();
        if r.failed.len() == FAILURES_KEPT {
            r.failed.pop_front();
        }
        r.failed.push_back((self.token.clone(), e.clone()));
    }
}

impl Drop for Published {
    fn drop(&mut self) {
        registry().lock().live.remove(&self.token);
    }
}

impl Transaction {
    /// Publishes this transaction in this process under a new token, until the returned value
    /// is dropped. For bindings (the SQLite VFS): see [`Transaction::joined`].
    #[doc(hidden)]
    pub fn publish(&self) -> Published {
        static NEXT: AtomicU64 = AtomicU64::new(1);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        // The registry's address tells this copy of the library from another in the process
        // (each has its own registry and counter), so a token never names another's.
        let copy = registry() as *const _ as usize;
        let token = format!("txvfs-tx-{}-{copy:x}-{n}", std::process::id());
        registry().lock().live.insert(token.clone(), Arc::downgrade(&self.shared));
        Published { token }
    }

    /// Joins the transaction published under `token`: the file transaction of a SQLite write
    /// transaction on a txvfs database, which `PRAGMA txvfs_files` returns inside that
    /// transaction. Calls on the handle (and on files opened through it) belong to that
    /// transaction, so its file changes commit in the same commit as SQLite's rows, at the
    /// connection's `COMMIT`, or are discarded with its `ROLLBACK`. The handle cannot commit or
    /// roll back ([`ErrorKind::Invalid`]); once the SQLite transaction ends, every call on it
    /// fails with [`ErrorKind::Invalid`] ("already committed or rolled back").
    ///
    /// The VFS must be this copy of the library's (`txvfs_sqlite` linked into the same
    /// program, the Python module's `txvfs.sqlite`, `libtxvfs`'s `txvfs_sqlite_register`).
    /// Errors: [`ErrorKind::NotFound`] when no live transaction of this process and library
    /// copy has that token (a token of another process or copy, or one whose SQLite
    /// transaction ended).
    pub fn joined(token: &str) -> Result<Transaction> {
        let shared = registry().lock().live.get(token).and_then(Weak::upgrade);
        match shared {
            Some(shared) => Ok(Transaction { shared, joined: true }),
            None => Err(Error::new(
                ErrorKind::NotFound,
                format!(
                    "no live transaction is published as {token:?} in this process's copy of \
                     txvfs: take the token inside the SQLite write transaction (after BEGIN \
                     IMMEDIATE), on a connection whose txvfs VFS is this library's"
                ),
            )),
        }
    }

    /// The store this transaction belongs to.
    pub fn store(&self) -> &super::Store {
        &self.shared.store
    }

    /// True for a handle from [`Transaction::joined`].
    pub fn is_joined(&self) -> bool {
        self.joined
    }

    /// The error with which the commit of the transaction published as `token` failed at
    /// its SQLite transaction's `COMMIT`, if it did (SQLite itself reports only an I/O
    /// error): a retryable one ([`Error::is_retryable`]) means run the whole unit again.
    /// Kept for the last 64 failures in this process.
    pub fn joined_commit_error(token: &str) -> Option<Error> {
        let r = registry().lock();
        r.failed.iter().rev().find(|(t, _)| t == token).map(|(_, e)| e.clone())
    }
}

#[cfg(test)]
mod tests {
    use crate::{ErrorKind, FileSystem, Store};

    #[test]
    fn a_joined_handle_works_in_the_transaction_but_cannot_end_it() {
        let store = Store::open("memory:").unwrap();
        let tx = store.begin().unwrap();
        let published = tx.publish();
        let joined = crate::Transaction::joined(published.token()).unwrap();
        joined.write_file("/a", b"1").unwrap();
        assert_eq!(joined.commit().unwrap_err().kind(), ErrorKind::Invalid);
        drop(joined); // dropping a joined handle does not roll back
        assert_eq!(tx.read_file("/a").unwrap(), b"1");
        tx.commit().unwrap();
        assert_eq!(store.read_file("/a").unwrap(), b"1");
        drop(published);
        let gone = crate::Transaction::joined("txvfs-tx-0-0").err().unwrap();
        assert_eq!(gone.kind(), ErrorKind::NotFound);
    }

    #[test]
    fn a_token_dies_with_its_transaction() {
        let store = Store::open("memory:").unwrap();
        let tx = store.begin().unwrap();
        let published = tx.publish();
        let token = published.token().to_string();
        drop(tx);
        // The publication is weak: the transaction (rolled back) is gone.
        assert_eq!(crate::Transaction::joined(&token).err().unwrap().kind(), ErrorKind::NotFound);
        published.commit_failed(&crate::Error::new(ErrorKind::Conflict, "x"));
        let e = crate::Transaction::joined_commit_error(&token).unwrap();
        assert!(e.is_retryable());
    }
}
