//! Locks shared between processes through the backend, held under leases.
//!
//! On a backend that several processes use at once (FoundationDB), a lock taken in one process
//! must stop the others. Each holder (an open file handle) keeps one record per file, under
//! `L ino process owner`, listing its locks and a lease expiry. Taking or changing locks is one
//! transaction: read the file's records, check the live ones of other processes for a conflict,
//! write the holder's new record. Records whose lease ran out are deleted on the way.
//!
//! A thread renews the leases of held locks every third of the lease. A crashed process stops
//! renewing, so its locks lapse after one lease and others can take them. A process that cannot
//! renew in time (paused, cut off) loses its locks the same way; [`LeaseTable::renew`] reports
//! them and keeps them in a list of lost locks, which the lock table (`locks.rs`) consults so
//! that the holder's next call on that handle fails with a clear error (as NFS reports lost
//! locks), rather than leaving it to believe it still holds them. Where the backend itself tells live processes from dead ones at once (a shared RocksDB
//! store: the kernel's lock on `txvfs.alive`), liveness comes from it, not from the lease: a
//! live holder's locks never lapse, however long it could not renew (a failover), and a dead
//! one's are free at once. Within one process the in-process table (`locks.rs`) decides, as
//! before.

use crate::error::Result;
use crate::kv::Backend;
use crate::schema::{self, LockRecord, LockSpec};
use parking_lot::Mutex;
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

/// How long a lock outlives its holder's last renewal.
pub const DEFAULT_LEASE: Duration = Duration::from_secs(10);

/// Wall-clock time for leases. Every process sharing a store must agree on it to within a
/// small fraction of the lease (NTP does).
pub trait Clock: Send + Sync + 'static {
    /// Milliseconds since the Unix epoch.
    fn now_ms(&self) -> u64;
}

/// The system clock.
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_ms(&self) -> u64 {
        crate::clock::now_ms()
    }
}

/// A clock that moves only when told to (for tests).
pub struct ManualClock(AtomicU64);

impl ManualClock {
    /// A clock standing at `ms`.
    pub fn new(ms: u64) -> ManualClock {
        ManualClock(AtomicU64::new(ms))
    }
    /// Moves the clock forward.
    pub fn advance(&self, by: Duration) {
        self.0.fetch_add(by.as_millis() as u64, Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now_ms(&self) -> u64 {
        self.0.load(Ordering::SeqCst)
    }
}

/// A lock of another holder that stands in the way.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Blocker {
    /// The holder's process.
    pub process: u64,
    /// The holder (a handle id in its process).
    pub owner: u64,
    /// The lock.
    pub lock: LockSpec,
}

/// This process's view of the shared lock records of one store.
pub struct LeaseTable {
    backend: Arc<dyn Backend>,
    clock: Arc<dyn Clock>,
    lease_ms: u64,
    process: u64,
    /// The locks this process holds, by (ino, owner), to renew.
    held: Mutex<HashMap<(u64, u64), Vec<LockSpec>>>,
    /// Holders (owner to ino) whose locks lapsed before a renewal, until they close.
    lost: Mutex<HashMap<u64, u64>>,
    /// Whether `lost` may hold anything (read on every handle call without a lock).
    any_lost: AtomicBool,
    /// Holders whose record a data transaction of this process rewrites with its commit
    /// ([`LeaseTable::write_in`]): the renewal leaves them alone until the commit ends.
    /// Added to only under `held`, which a renewal holds throughout.
    in_commit: Mutex<HashSet<(u64, u64)>>,
    /// Run once by the next renewal, holding `held`, before it renews anything (tests stop
    /// it there).
    #[cfg(test)]
    renew_pause: Mutex<Option<Box<dyn FnOnce() + Send>>>,
}

impl LeaseTable {
    /// A table for one process on `backend`, with leases of `lease` measured by `clock`.
    pub fn new(
        backend: Arc<dyn Backend>,
        clock: Arc<dyn Clock>,
        lease: Duration,
    ) -> Arc<LeaseTable> {
        Arc::new(LeaseTable {
            backend,
            clock,
            lease_ms: lease.as_millis().max(1) as u64,
            process: random_id(),
            held: Mutex::new(HashMap::new()),
            lost: Mutex::new(HashMap::new()),
            any_lost: AtomicBool::new(false),
            in_commit: Mutex::new(HashSet::new()),
            #[cfg(test)]
            renew_pause: Mutex::new(None),
        })
    }

    /// The inode on which holder `owner` (a handle) lost its locks (their lease ran out before
    /// a renewal: another process may hold them now), if it did.
    pub fn lost_lock(&self, owner: u64) -> Option<u64> {
        if !self.any_lost.load(Ordering::SeqCst) {
            return None;
        }
        self.lost.lock().get(&owner).copied()
    }

    /// Forgets that `owner` lost its locks (it closed).
    pub fn forget_lost(&self, owner: u64) {
        if self.any_lost.load(Ordering::SeqCst) {
            let mut lost = self.lost.lock();
            lost.remove(&owner);
            self.any_lost.store(!lost.is_empty(), Ordering::SeqCst);
        }
    }

    /// This process's id in lock records (random per table).
    pub fn process_id(&self) -> u64 {
        self.process
    }

    /// Replaces `owner`'s locks on `ino` by `locks`, unless a live lock of another process
    /// conflicts with one of them: then nothing changes and that lock is returned.
    ///
    /// While the backend says this process is alone on it ([`Sharing::alone`](crate::kv::Sharing::alone)), nothing is
    /// written: the locks are only noted, and [`LeaseTable::publish_all`] writes them when
    /// another process first arrives (the `held` lock orders the two).
    pub fn publish(&self, ino: u64, owner: u64, locks: &[LockSpec]) -> Result<Option<Blocker>> {
        let mut held = self.held.lock();
        if self.backend.alone() {
            if locks.is_empty() {
                held.remove(&(ino, owner));
            } else {
                held.insert((ino, owner), locks.to_vec());
            }
            return Ok(None);
        }
        let blocker = match self.served(false, ino, owner, locks) {
            Some(r) => r?,
            None => self.transact(|tx, now| {
                let alive = |p| self.backend.process_alive(p);
                publish_in(tx, &alive, self.process, ino, owner, locks, now, self.lease_ms)
            })?,
        };
        if blocker.is_none() {
            if locks.is_empty() {
                held.remove(&(ino, owner));
            } else {
                held.insert((ino, owner), locks.to_vec());
            }
        }
        Ok(blocker)
    }

    /// Writes `owner`'s locks on `ino` as `locks`, a subset of what it holds (a release needs
    /// no check), into `tx`, a data transaction of this process, whose commit then carries
    /// them instead of a transaction of their own (on a client of a shared store, a round trip
    /// fewer). False, and nothing written, while this process is alone on the backend (the
    /// locks are only noted there: see [`LeaseTable::publish`]). Once the commit's outcome is
    /// known, [`LeaseTable::written_in_commit`] must be called.
    pub(crate) fn write_in(
        &self,
        tx: &mut dyn crate::kv::Txn,
        ino: u64,
        owner: u64,
        locks: &[LockSpec],
    ) -> Result<bool> {
        if self.backend.alone() {
            return Ok(false);
        }
        // A renewal from now on would write the record back (or find it gone and call the
        // lock lost) under the commit's feet. One under way read which holders to leave
        // alone when it began: it ends first (it holds `held` throughout).
        {
            let _renewal = self.held.lock();
            self.in_commit.lock().insert((ino, owner));
        }
        let key = schema::lock_key(ino, self.process, owner);
        let r = if locks.is_empty() {
            tx.clear(&key)
        } else {
            let expires_ms = self.clock.now_ms().saturating_add(self.lease_ms);
            tx.set(&key, &LockRecord { expires_ms, locks: locks.to_vec() }.encode())
        };
        if let Err(e) = r {
            self.in_commit.lock().remove(&(ino, owner));
            return Err(e);
        }
        Ok(true)
    }

    /// The commit that carried [`LeaseTable::write_in`]'s `locks` ended: `committed`, they
    /// are what `owner` holds on `ino` now; else nothing changed.
    pub(crate) fn written_in_commit(
        &self,
        ino: u64,
        owner: u64,
        locks: &[LockSpec],
        committed: bool,
    ) {
        let mut held = self.held.lock();
        if committed {
            if locks.is_empty() {
                held.remove(&(ino, owner));
            } else {
                held.insert((ino, owner), locks.to_vec());
            }
        }
        self.in_commit.lock().remove(&(ino, owner));
    }

    /// Writes every lock this process holds to the backend: called when the backend stops
    /// being this process's alone (another process connected), before it is served.
    pub fn publish_all(&self) {
        let held = self.held.lock();
        for (&(ino, owner), locks) in held.iter() {
            let key = schema::lock_key(ino, self.process, owner);
            let _ = self.transact(|tx, now| {
                tx.set(
                    &key,
                    &LockRecord { expires_ms: now + self.lease_ms, locks: locks.clone() }.encode(),
                )
            });
        }
    }

    /// The first live lock of another process on `ino` that conflicts with `lock`.
    pub fn test(&self, ino: u64, lock: &LockSpec) -> Result<Option<Blocker>> {
        if self.backend.alone() {
            return Ok(None);
        }
        let locks = std::slice::from_ref(lock);
        if let Some(r) = self.served(true, ino, 0, locks) {
            return r;
        }
        self.transact(|tx, now| {
            let alive = |p| self.backend.process_alive(p);
            find_blocker(tx, &alive, self.process, ino, locks, now, false)
        })
    }

    /// Extends the lease of every lock this process holds. Returns the (ino, owner) pairs
    /// whose locks were lost because their lease ran out first; they are no longer held, and
    /// [`LeaseTable::lost_lock`] reports them until their holder closes.
    pub fn renew(&self) -> Result<Vec<(u64, u64)>> {
        if self.backend.alone() {
            return Ok(Vec::new());
        }
        // Held throughout, as `publish` holds it: a lock released (its record deleted) or
        // taken again between a copy of the list and its renewal would be taken for lost.
        let mut held = self.held.lock();
        let mut lost = Vec::new();
        let in_commit = self.in_commit.lock().clone();
        #[cfg(test)]
        if let Some(pause) = self.renew_pause.lock().take() {
            pause();
        }
        for (&(ino, owner), locks) in held.iter() {
            if in_commit.contains(&(ino, owner)) {
                continue;
            }
            let key = schema::lock_key(ino, self.process, owner);
            let kept = self.transact(|tx, now| {
                // Where the backend tells liveness, nobody takes a live holder's lock, so its
                // record is still there and holds; elsewhere it holds until its lease ran out.
                let kernel = self.backend.process_alive(self.process).is_some();
                let alive = match tx.get(&key)? {
                    Some(v) => kernel || LockRecord::decode(&v)?.expires_ms > now,
                    None => false,
                };
                if alive {
                    tx.set(
                        &key,
                        &LockRecord { expires_ms: now + self.lease_ms, locks: locks.clone() }
                            .encode(),
                    )?;
                } else {
                    tx.clear(&key)?;
                }
                Ok(alive)
            })?;
            if !kept {
                lost.push((ino, owner));
            }
        }
        for (ino, owner) in &lost {
            held.remove(&(*ino, *owner));
            self.lost.lock().insert(*owner, *ino);
            self.any_lost.store(true, Ordering::SeqCst);
        }
        Ok(lost)
    }

    /// Starts the thread that renews this table's leases every third of the lease, until the
    /// table is dropped.
    pub fn start_renewer(self: &Arc<Self>) {
        let weak: Weak<LeaseTable> = Arc::downgrade(self);
        let period = Duration::from_millis(self.lease_ms / 3);
        let _ = std::thread::Builder::new().name("txvfs-lease".into()).spawn(move || loop {
            std::thread::sleep(period);
            let Some(table) = weak.upgrade() else { return };
            // A failed renewal is retried next period; a lease that lapses meanwhile is lost.
            let _ = table.renew();
        });
    }

    /// Runs a change (`test` false) or test of `owner`'s locks on `ino` in the process that
    /// serves the backend, in one request ([`Sharing::serve_locks`](crate::kv::Sharing::serve_locks)): None where this process
    /// runs it itself.
    fn served(
        &self,
        test: bool,
        ino: u64,
        owner: u64,
        locks: &[LockSpec],
    ) -> Option<Result<Option<Blocker>>> {
        let request = Request {
            test,
            process: self.process,
            ino,
            owner,
            lease_ms: self.lease_ms,
            now: self.clock.now_ms(),
            locks: locks.to_vec(),
        };
        let reply = self.backend.sharing()?.serve_locks(&request.encode())?;
        Some(reply.and_then(|r| decode_blocker(&r)))
    }

    /// Runs `f` in a backend transaction at the clock's current time and commits it,
    /// retrying conflicts.
    fn transact<R>(
        &self,
        mut f: impl FnMut(&mut dyn crate::kv::Txn, u64) -> Result<R>,
    ) -> Result<R> {
        crate::kv::run_with_retries(&*self.backend, 20, false, |tx| f(tx, self.clock.now_ms()))
    }
}

/// A process id that is unique in practice: the time, the pid and the std hasher's random keys.
pub(crate) fn random_id() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0),
    );
    h.write_u32(std::process::id());
    h.finish()
}

/// The first live lock of a process other than `me` on `ino` that conflicts with one of
/// `locks`; `alive` tells whether a process is alive where the backend can tell at once.
/// `collect_lapsed`: delete the records of dead holders on the way.
fn find_blocker(
    tx: &mut dyn crate::kv::Txn,
    alive: &dyn Fn(u64) -> Option<bool>,
    me: u64,
    ino: u64,
    locks: &[LockSpec],
    now: u64,
    collect_lapsed: bool,
) -> Result<Option<Blocker>> {
    let (s, e) = schema::lock_range(ino);
    for (k, v) in tx.get_range(&s, &e, 0, false)? {
        let (process, owner) = schema::lock_holder(&k)?;
        if process == me {
            continue; // the in-process table decides between our own handles
        }
        let record = LockRecord::decode(&v)?;
        // Lapsed: the backend knows its process died, or, where the backend cannot tell,
        // its lease ran out. A live holder's lock never lapses on a backend that can tell
        // (a shared RocksDB store), however long a failover kept it from renewing.
        let lapsed = match alive(process) {
            Some(alive) => !alive,
            None => record.expires_ms <= now,
        };
        if lapsed {
            if collect_lapsed {
                tx.clear(&k)?;
            }
            continue;
        }
        let hit =
            record.locks.iter().find(|theirs| locks.iter().any(|ours| ours.conflicts(theirs)));
        if let Some(&lock) = hit {
            return Ok(Some(Blocker { process, owner, lock }));
        }
    }
    Ok(None)
}

/// Replaces the record of holder `owner` of process `me` on `ino` by `locks` (none: clears
/// it), unless a live lock of another process conflicts: then that lock, and nothing changes.
#[allow(clippy::too_many_arguments)]
fn publish_in(
    tx: &mut dyn crate::kv::Txn,
    alive: &dyn Fn(u64) -> Option<bool>,
    me: u64,
    ino: u64,
    owner: u64,
    locks: &[LockSpec],
    now: u64,
    lease_ms: u64,
) -> Result<Option<Blocker>> {
    if let Some(b) = find_blocker(tx, alive, me, ino, locks, now, true)? {
        return Ok(Some(b));
    }
    let key = schema::lock_key(ino, me, owner);
    if locks.is_empty() {
        tx.clear(&key)?;
    } else {
        let expires_ms = now.saturating_add(lease_ms);
        tx.set(&key, &LockRecord { expires_ms, locks: locks.to_vec() }.encode())?;
    }
    Ok(None)
}

/// A change or test of one holder's lock records, sent by a client of a shared store to the
/// process that serves it ([`serve_request`]): one request instead of a transaction's read
/// of the records and its commit.
struct Request {
    test: bool,
    process: u64,
    ino: u64,
    owner: u64,
    lease_ms: u64,
    /// The client's clock when it asked: sent, but the serving process uses its own.
    now: u64,
    locks: Vec<LockSpec>,
}

impl Request {
    fn encode(&self) -> Vec<u8> {
        let mut v = vec![self.test as u8];
        for n in [self.process, self.ino, self.owner, self.lease_ms] {
            v.extend_from_slice(&n.to_le_bytes());
        }
        v.extend_from_slice(
            &LockRecord { expires_ms: self.now, locks: self.locks.clone() }.encode(),
        );
        v
    }

    fn decode(v: &[u8]) -> Result<Request> {
        let bad = || crate::Error::new(crate::ErrorKind::Invalid, "malformed lock request");
        if v.len() < 33 {
            return Err(bad());
        }
        let n = |i: usize| u64::from_le_bytes(v[1 + 8 * i..9 + 8 * i].try_into().unwrap());
        let record = LockRecord::decode(&v[33..])?;
        Ok(Request {
            test: match v[0] {
                0 => false,
                1 => true,
                _ => return Err(bad()),
            },
            process: n(0),
            ino: n(1),
            owner: n(2),
            lease_ms: n(3),
            now: record.expires_ms,
            locks: record.locks,
        })
    }
}

fn encode_blocker(b: Option<Blocker>) -> Vec<u8> {
    let Some(b) = b else { return Vec::new() };
    let mut v = b.process.to_le_bytes().to_vec();
    v.extend_from_slice(&b.owner.to_le_bytes());
    v.extend_from_slice(&LockRecord { expires_ms: 0, locks: vec![b.lock] }.encode());
    v
}

fn decode_blocker(v: &[u8]) -> Result<Option<Blocker>> {
    if v.is_empty() {
        return Ok(None);
    }
    let bad = || crate::Error::new(crate::ErrorKind::Invalid, "malformed lock reply");
    if v.len() < 16 {
        return Err(bad());
    }
    let record = LockRecord::decode(&v[16..])?;
    let lock = *record.locks.first().ok_or_else(bad)?;
    Ok(Some(Blocker {
        process: u64::from_le_bytes(v[..8].try_into().unwrap()),
        owner: u64::from_le_bytes(v[8..16].try_into().unwrap()),
        lock,
    }))
}

/// The longest lease a client's lock request may ask the serving process for.
const MAX_LEASE_MS: u64 = 10 * 60 * 1000;

/// Runs a client's lock request (see [`Sharing::serve_locks`](crate::kv::Sharing::serve_locks)) on `backend`, in the process
/// that serves it; `alive` tells whether a process is alive. The reply encodes the blocker,
/// if any. A publication is idempotent: a client whose connection broke sends it again to
/// the next owner.
///
/// The serving process trusts none of the request's claims: it acts only for a process id
/// `holds` says the client proved its own (else `Access`, and nothing changes), at the
/// serving process's own clock (the client's is ignored), with a lease of at most
/// 10 minutes.
pub(crate) fn serve_request(
    backend: &dyn Backend,
    alive: &dyn Fn(u64) -> Option<bool>,
    holds: &mut dyn FnMut(u64) -> bool,
    request: &[u8],
) -> Result<Vec<u8>> {
    let r = Request::decode(request)?;
    if !holds(r.process) {
        return Err(crate::Error::new(
            crate::ErrorKind::Access,
            format!(
                "a lock request for process id {:#x}, which the requesting process does not \
                 hold (its lock on txvfs.alive): refused, nothing changed",
                r.process
            ),
        ));
    }
    let lease_ms = r.lease_ms.clamp(1, MAX_LEASE_MS);
    let blocker = crate::kv::run_with_retries(backend, 20, false, |tx| {
        let now = SystemClock.now_ms();
        if r.test {
            find_blocker(tx, alive, r.process, r.ino, &r.locks, now, false)
        } else {
            publish_in(tx, alive, r.process, r.ino, r.owner, &r.locks, now, lease_ms)
        }
    })?;
    Ok(encode_blocker(blocker))
}

#[cfg(test)]
#[path = "leases_tests.rs"]
mod tests;
