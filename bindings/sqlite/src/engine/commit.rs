//! Commits: the overlays of one or several databases applied and committed as one txvfs
//! transaction. Several databases commit together when they are in one explicit commit group
//! (`group=NAME`), or when SQLite commits a transaction over attached databases with a
//! super-journal: it names the super-journal to each database at phase one
//! (`SQLITE_FCNTL_SYNC`) and deletes it at its commit point, where the set commits.
//! A write transaction whose connection asked for its file transaction (`PRAGMA txvfs_files`,
//! a [`Files`]) commits its pages in that transaction, with the files the application changed
//! through it: rows and files in one commit.

use super::overlay::Overlay;
use super::stats;
use super::stores::StoreRef;
use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::{Arc, OnceLock, Weak};
use txvfs::{Error, ErrorKind, FileSystem, OpenOptions, Published, Result, Transaction};

/// The part of a database handle that a commit of several databases reaches.
pub struct Member {
    /// The database's store.
    pub store: StoreRef,
    /// Its canonical path.
    pub path: String,
    /// Uncommitted writes.
    pub overlay: Overlay,
    /// xSync was called since the transaction began.
    pub synced: bool,
    /// `PRAGMA synchronous=OFF` was seen: commits do not wait for durability.
    pub sync_off: bool,
    /// SQLite finished phase one of its commit (SQLITE_FCNTL_SYNC): the overlay is complete.
    pub ready: bool,
    /// The super-journal SQLite named at phase one, if any.
    pub super_journal: Option<String>,
    /// The explicit commit group.
    pub group: Option<Arc<Group>>,
    /// The file transaction of this write transaction, once asked for.
    pub files: Option<Files>,
}

/// The file transaction of a SQLite write transaction, published for the store's API
/// ([`Transaction::joined`]). Dropped (rolled back) with the SQLite transaction unless it
/// commits with it.
pub struct Files {
    /// Withdrawn first (fields drop in order), then the transaction rolls back if still open.
    published: Published,
    tx: Transaction,
}

impl Files {
    /// A new file transaction on `store`.
    pub fn begin(store: &txvfs::Store) -> Result<Files> {
        let tx = store.begin()?;
        Ok(Files { published: tx.publish(), tx })
    }

    /// Its token for [`Transaction::joined`].
    pub fn token(&self) -> &str {
        self.published.token()
    }
}

impl Member {
    /// A member with nothing to commit.
    pub fn new(store: StoreRef, path: &str) -> Member {
        Member {
            store,
            path: path.to_string(),
            overlay: Overlay::default(),
            synced: false,
            sync_off: false,
            ready: false,
            super_journal: None,
            group: None,
            files: None,
        }
    }

    /// Forgets the transaction's state (after a commit, or when SQLite abandons it).
    pub fn reset(&mut self) {
        self.overlay = Overlay::default();
        self.synced = false;
        self.ready = false;
        self.super_journal = None;
        self.files = None;
    }
}

/// Shared handle on a [`Member`].
pub type MemberRef = Arc<Mutex<Member>>;

/// An explicit commit group: databases whose SQLite transactions commit in one txvfs
/// transaction.
pub struct Group {
    /// Its name.
    pub name: String,
    members: Mutex<Vec<Weak<Mutex<Member>>>>,
}

/// Commit groups by (store identity, group name).
type Groups = Mutex<HashMap<(String, String), Weak<Group>>>;

fn groups() -> &'static Groups {
    static S: OnceLock<Groups> = OnceLock::new();
    S.get_or_init(Default::default)
}

impl Group {
    /// The group `name` of store `store_id`, created on first use.
    pub fn join(store_id: &str, name: &str, m: &MemberRef) -> Arc<Group> {
        let key = (store_id.to_string(), name.to_string());
        let g = {
            let mut map = groups().lock();
            map.retain(|_, w| w.strong_count() > 0);
            match map.get(&key).and_then(Weak::upgrade) {
                Some(g) => g,
                None => {
                    let g =
                        Arc::new(Group { name: name.to_string(), members: Mutex::new(Vec::new()) });
                    map.insert(key, Arc::downgrade(&g));
                    g
                }
            }
        };
        g.members.lock().push(Arc::downgrade(m));
        g
    }

    /// Removes `m` from the group.
    pub fn leave(&self, m: &MemberRef) {
        self.members.lock().retain(|w| w.upgrade().is_some_and(|x| !Arc::ptr_eq(&x, m)));
    }

    fn ready_members(&self) -> Vec<MemberRef> {
        let mut list = self.members.lock();
        list.retain(|w| w.strong_count() > 0);
        list.iter().filter_map(Weak::upgrade).filter(|m| m.lock().ready).collect()
    }
}

/// The databases that named each super-journal at phase one.
type SuperSets = Mutex<HashMap<String, Vec<Weak<Mutex<Member>>>>>;

fn super_sets() -> &'static SuperSets {
    static S: OnceLock<SuperSets> = OnceLock::new();
    S.get_or_init(Default::default)
}

/// Phase one of a commit with super-journal `name` is complete for `m`.
pub fn join_super(name: &str, m: &MemberRef) {
    m.lock().super_journal = Some(name.to_string());
    super_sets().lock().entry(name.to_string()).or_default().push(Arc::downgrade(m));
}

/// `m` leaves the super-journal set `name` (its transaction was abandoned).
pub fn leave_super(name: &str, m: &MemberRef) {
    let mut sets = super_sets().lock();
    if let Some(list) = sets.get_mut(name) {
        list.retain(|w| w.upgrade().is_some_and(|x| !Arc::ptr_eq(&x, m)));
        if list.is_empty() {
            sets.remove(name);
        }
    }
}

/// SQLite deletes super-journal `name`: its commit point. Commits every database that named
/// it (with the ready members of their commit groups), one txvfs transaction per store.
/// Returns false when no database named it.
pub fn commit_super(name: &str) -> Result<bool> {
    let Some(list) = super_sets().lock().remove(name) else { return Ok(false) };
    let members: Vec<MemberRef> = list.iter().filter_map(Weak::upgrade).collect();
    let all = with_groups(&members);
    let mut by_store: HashMap<String, Vec<MemberRef>> = HashMap::new();
    for m in all {
        let id = m.lock().store.id.clone();
        by_store.entry(id).or_default().push(m);
    }
    for set in by_store.values() {
        let durable = set.iter().any(|m| m.lock().synced);
        commit_members(set, durable)?;
    }
    Ok(true)
}

/// `first` and the ready members of their explicit commit groups, each once.
pub fn with_groups(first: &[MemberRef]) -> Vec<MemberRef> {
    let mut out: Vec<MemberRef> = Vec::new();
    let add = |m: MemberRef, out: &mut Vec<MemberRef>| {
        if !out.iter().any(|x| Arc::ptr_eq(x, &m)) {
            out.push(m);
        }
    };
    for m in first {
        add(m.clone(), &mut out);
        let group = m.lock().group.clone();
        if let Some(g) = group {
            for r in g.ready_members() {
                add(r, &mut out);
            }
        }
    }
    out
}

/// Applies the overlays of `members` (all in one store) in one txvfs transaction and commits
/// it, retrying conflicts with other txvfs writers ([`txvfs::Store::transact_durable`]).
/// Success or failure, the members' states are reset: after a failure the store still holds
/// the last committed state, which SQLite re-reads.
pub fn commit_members(members: &[MemberRef], durable: bool) -> Result<()> {
    let mut guards: Vec<_> = {
        let mut sorted: Vec<&MemberRef> = members.iter().collect();
        sorted.sort_by_key(|m| Arc::as_ptr(m) as usize);
        sorted.into_iter().map(|m| m.lock()).collect()
    };
    let dirty = guards.iter().filter(|m| !m.overlay.is_empty()).count();
    let mut files: Vec<Files> = guards.iter_mut().filter_map(|m| m.files.take()).collect();
    if dirty == 0 && files.is_empty() {
        for m in guards.iter_mut() {
            m.reset();
        }
        return Ok(());
    }
    let apply = |tx: &Transaction| apply_overlays(tx, &guards).map(|_| ());
    let result = match files.pop() {
        // The pages join the application's file transaction, which commits once: a conflict
        // fails SQLite's COMMIT, and the application runs the whole unit again.
        Some(f) if files.is_empty() => {
            let r = apply(&f.tx).and_then(|()| f.tx.commit_durable(durable));
            if let Err(e) = &r {
                f.published.commit_failed(e);
            }
            r
        }
        Some(_) => Err(Error::new(
            ErrorKind::Invalid,
            "two databases committing together each have a file transaction (PRAGMA \
             txvfs_files): take it on one of them only",
        )),
        // The core's retry loop: conflicts with other txvfs writers (SQLite connections are
        // serialized by the locks) run the transaction again.
        None => guards[0].store.store.transact_durable(durable, apply),
    };
    for m in guards.iter_mut() {
        m.reset();
    }
    if result.is_ok() {
        count_commit(durable, dirty > 1);
    }
    result
}

/// Counts a commit that succeeded in `PRAGMA txvfs_stats`.
fn count_commit(durable: bool, grouped: bool) {
    let s = stats();
    s.commits.fetch_add(1, Ordering::Relaxed);
    if durable {
        s.durable.fetch_add(1, Ordering::Relaxed);
    }
    if grouped {
        s.grouped.fetch_add(1, Ordering::Relaxed);
    }
}

/// Writes the overlays of `members` into `tx`; returns the version of the last file written
/// as `tx` leaves it: (modification time, size).
fn apply_overlays(
    tx: &Transaction,
    members: &[impl std::ops::Deref<Target = Member>],
) -> Result<Option<(i64, u64)>> {
    let mut version = None;
    for m in members.iter().filter(|m| !m.overlay.is_empty()) {
        // A database file's blocks are its pages: a page write then stores one page, not a
        // 64 KiB block (the core keeps the size once the file has blocks).
        let mut o = OpenOptions::new().read(true).write(true).create(true);
        if let Some(page) = m.overlay.page_size() {
            o = o.block_size(page);
        }
        let f = tx.open(&m.path, &o)?;
        m.overlay.apply(&f)?;
        // Its own inode, which the transaction wrote: no read of the store.
        let s = f.stat()?;
        version = Some((s.mtime_ns, s.size));
        f.close()?;
    }
    Ok(version)
}

/// How many times a commit runs again after a conflict with another txvfs writer (the store's
/// default `max_retries`, which [`txvfs::Store::transact_durable`] uses).
const COMMIT_RETRIES: u32 = 100;

/// What a commit that released its database's write locks with it left ([`commit_releasing`]).
pub struct Released {
    /// A transaction reading exactly the commit's state, where the store gave one.
    pub pinned: Option<Transaction>,
    /// The database file's version as the commit left it: (modification time, size).
    pub version: (i64, u64),
}

/// Commits `member` (one database, no commit group, no file transaction, a non-empty overlay)
/// as [`commit_members`] does, and where the store can pin a transaction at the commit's
/// version ([`Transaction::pins_commit`], a client of a shared store) releases the write
/// locks with the same commit: `release` writes their release into the transaction (true
/// when it did). Ok(None): committed, the locks still held (release them as usual).
pub fn commit_releasing(
    member: &MemberRef,
    durable: bool,
    release: impl Fn(&Transaction) -> Result<bool>,
) -> Result<Option<Released>> {
    let mut m = member.lock();
    let store = m.store.store.clone();
    let result = txvfs::retry(COMMIT_RETRIES, || {
        let tx = store.begin()?;
        let version = apply_overlays(&tx, std::slice::from_ref(&&*m))?;
        let Some(version) = version.filter(|_| tx.pins_commit()) else {
            return tx.commit_durable(durable).map(|()| None);
        };
        if !release(&tx)? {
            return tx.commit_durable(durable).map(|()| None);
        }
        let pinned = tx.commit_pinned(durable)?;
        Ok(Some(Released { pinned, version }))
    });
    m.reset();
    if result.is_ok() {
        count_commit(durable, false);
    }
    result
}
