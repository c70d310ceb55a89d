//! Transactions that outlive the backend's time limit (FoundationDB: 5 s).
//!
//! A [`JournalTxn`] runs on an ordinary backend transaction and keeps a journal of what it
//! did: every conflicting read (with a hash of its result) and every write, in order. Before
//! the backend transaction gets too old, it begins a new one and replays the journal into it:
//! each write is applied again and each read is executed again and must give the same result.
//! If a read differs, another transaction changed something this one read, and it fails with
//! a retryable `Conflict`. Otherwise the new backend transaction is in exactly the state of the
//! old one, and its conflict set covers every read, so the final commit is as serializable as
//! a short transaction. Read-your-writes comes from the backend itself.
//!
//! The journal holds the writes, so it is meant for transactions whose writes are small:
//! `fs` writes large data ahead as chunks and journals only references to them.

use super::{Backend, KeyValue, Txn};
use crate::error::{Error, ErrorKind, Result};
use std::hash::{Hash, Hasher};
use std::sync::Arc;
use std::time::{Duration, Instant};

enum Entry {
    Get { key: Vec<u8>, hash: u64 },
    Range { start: Vec<u8>, end: Vec<u8>, limit: usize, reverse: bool, hash: u64 },
    Set(Vec<u8>, Vec<u8>),
    Clear(Vec<u8>),
    ClearRange(Vec<u8>, Vec<u8>),
    Add(Vec<u8>, i64),
    Max(Vec<u8>, u64),
    Stamped(Vec<u8>, Vec<u8>),
}

/// A backend transaction that renews itself before `renew_after` (see the module docs).
pub struct JournalTxn {
    backend: Arc<dyn Backend>,
    tx: Box<dyn Txn>,
    begun: Instant,
    renew_after: Duration,
    journal: Vec<Entry>,
    renewals: u32,
    /// Keys read by `snapshot_get_many` from the current backend transaction and not yet
    /// noted as reads, with the hash of what they read.
    unnoted: Vec<(Vec<u8>, u64)>,
}

fn hash_of<T: Hash>(v: &T) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    v.hash(&mut h);
    h.finish()
}

impl JournalTxn {
    /// Begins a transaction on `backend` that renews itself when older than `renew_after`.
    pub fn begin(backend: Arc<dyn Backend>, renew_after: Duration) -> Result<JournalTxn> {
        let tx = backend.begin()?;
        Ok(JournalTxn {
            backend,
            tx,
            begun: Instant::now(),
            renew_after,
            journal: Vec::new(),
            renewals: 0,
            unnoted: Vec::new(),
        })
    }

    /// How many times the backend transaction was replaced so far.
    pub fn renewals(&self) -> u32 {
        self.renewals
    }

    fn renew_if_old(&mut self) -> Result<()> {
        if self.begun.elapsed() < self.renew_after {
            return Ok(());
        }
        self.renew()
    }

    /// Replaces the backend transaction by a new one in the same state (module docs).
    fn renew(&mut self) -> Result<()> {
        let mut tx = self.backend.begin()?;
        let changed = |what: &str| {
            Error::new(
                ErrorKind::Conflict,
                format!("transaction conflict: {what} read by this long transaction changed while it ran"),
            )
        };
        for e in &self.journal {
            match e {
                Entry::Get { key, hash } => {
                    if hash_of(&tx.get(key)?) != *hash {
                        return Err(changed("a key"));
                    }
                }
                Entry::Range { start, end, limit, reverse, hash } => {
                    if hash_of(&tx.get_range(start, end, *limit, *reverse)?) != *hash {
                        return Err(changed("a range"));
                    }
                }
                Entry::Set(k, v) => tx.set(k, v)?,
                Entry::Clear(k) => tx.clear(k)?,
                Entry::ClearRange(s, e) => tx.clear_range(s, e)?,
                Entry::Add(k, d) => tx.atomic_add(k, *d)?,
                Entry::Max(k, v) => tx.atomic_max(k, *v)?,
                Entry::Stamped(p, v) => tx.set_versionstamped_key(p, v)?,
            }
        }
        self.tx = tx;
        self.unnoted.clear();
        self.begun = Instant::now();
        self.renewals += 1;
        Ok(())
    }
}

impl Txn for JournalTxn {
    fn get(&mut self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.renew_if_old()?;
        let v = self.tx.get(key)?;
        self.journal.push(Entry::Get { key: key.to_vec(), hash: hash_of(&v) });
        Ok(v)
    }

    /// Snapshot reads need no checking on renewal; each value's hash is kept until
    /// [`Txn::note_read`] journals it, or a renewal forgets it.
    fn snapshot_get_many(
        &mut self,
        keys: &[&[u8]],
        read: &mut dyn FnMut(usize, Option<&[u8]>),
    ) -> Result<()> {
        self.renew_if_old()?;
        let unnoted = &mut self.unnoted;
        self.tx.snapshot_get_many(keys, &mut |i, v| {
            // `Option<&[u8]>` hashes as the `Option<Vec<u8>>` that `get` journals.
            unnoted.push((keys[i].to_vec(), hash_of(&v)));
            read(i, v)
        })
    }

    /// Journaled as a read by [`Txn::get`]. After a renewal, the value was read at the older
    /// snapshot: it is read again, and if it changed meanwhile, this fails with `Conflict`.
    fn note_read(&mut self, key: &[u8], value: Option<&[u8]>) -> Result<()> {
        let hash = hash_of(&value);
        if let Some(i) = self.unnoted.iter().position(|(k, h)| k == key && *h == hash) {
            self.unnoted.swap_remove(i);
            self.tx.note_read(key, value)?;
            self.journal.push(Entry::Get { key: key.to_vec(), hash });
            return Ok(());
        }
        if hash_of(&self.get(key)?) != hash {
            return Err(Error::new(
                ErrorKind::Conflict,
                "transaction conflict: a key read by this long transaction changed while it ran",
            ));
        }
        Ok(())
    }

    fn batches_reads(&self) -> bool {
        self.tx.batches_reads()
    }

    /// Snapshot reads add no conflict, so they need no checking on renewal.
    fn snapshot_get(&mut self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.renew_if_old()?;
        self.tx.snapshot_get(key)
    }

    fn get_range(
        &mut self,
        start: &[u8],
        end: &[u8],
        limit: usize,
        reverse: bool,
    ) -> Result<Vec<KeyValue>> {
        self.renew_if_old()?;
        let v = self.tx.get_range(start, end, limit, reverse)?;
        let hash = hash_of(&v);
        self.journal.push(Entry::Range {
            start: start.to_vec(),
            end: end.to_vec(),
            limit,
            reverse,
            hash,
        });
        Ok(v)
    }

    fn snapshot_get_range(
        &mut self,
        start: &[u8],
        end: &[u8],
        limit: usize,
        reverse: bool,
    ) -> Result<Vec<KeyValue>> {
        self.renew_if_old()?;
        self.tx.snapshot_get_range(start, end, limit, reverse)
    }

    fn set(&mut self, key: &[u8], value: &[u8]) -> Result<()> {
        self.renew_if_old()?;
        self.tx.set(key, value)?;
        self.journal.push(Entry::Set(key.to_vec(), value.to_vec()));
        Ok(())
    }

    fn clear(&mut self, key: &[u8]) -> Result<()> {
        self.renew_if_old()?;
        self.tx.clear(key)?;
        self.journal.push(Entry::Clear(key.to_vec()));
        Ok(())
    }

    fn clear_range(&mut self, start: &[u8], end: &[u8]) -> Result<()> {
        self.renew_if_old()?;
        self.tx.clear_range(start, end)?;
        self.journal.push(Entry::ClearRange(start.to_vec(), end.to_vec()));
        Ok(())
    }

    fn atomic_add(&mut self, key: &[u8], delta: i64) -> Result<()> {
        self.renew_if_old()?;
        self.tx.atomic_add(key, delta)?;
        self.journal.push(Entry::Add(key.to_vec(), delta));
        Ok(())
    }

    fn atomic_max(&mut self, key: &[u8], value: u64) -> Result<()> {
        self.renew_if_old()?;
        self.tx.atomic_max(key, value)?;
        self.journal.push(Entry::Max(key.to_vec(), value));
        Ok(())
    }

    fn set_versionstamped_key(&mut self, prefix: &[u8], value: &[u8]) -> Result<()> {
        self.renew_if_old()?;
        self.tx.set_versionstamped_key(prefix, value)?;
        self.journal.push(Entry::Stamped(prefix.to_vec(), value.to_vec()));
        Ok(())
    }

    fn commit(mut self: Box<Self>, durable: bool) -> Result<()> {
        self.renew_if_old()?;
        self.tx.commit(durable)
    }

    fn refresh(&mut self) -> Result<()> {
        self.renew()
    }
}
