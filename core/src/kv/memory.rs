//! The memory backend: a multi-version ordered map. For tests and ephemeral stores; it can
//! enforce FoundationDB's limits so that code which would fail there fails here too.

use super::occ::{Engine, Mutation, OccStore};
use super::{Backend, CacheWatch, Limits, ReadCacheControl, Snapshots, Txn};
use crate::error::{Error, ErrorKind, Result};
use parking_lot::{Mutex, RwLock};
use std::collections::{BTreeMap, VecDeque};
use std::ops::Bound;
use std::sync::Arc;

type Versions = Vec<(u64, Option<Arc<[u8]>>)>;

#[derive(Default)]
struct MemEngine {
    /// Each key's versions, oldest first; `None` is a deletion.
    map: RwLock<BTreeMap<Vec<u8>, Versions>>,
    /// Keys deleted at a version, dropped from the map once no snapshot can see them.
    tombstones: Mutex<VecDeque<(u64, Vec<Vec<u8>>)>>,
    /// Most bytes of live keys and values the backend holds, like a disk's size.
    capacity: Option<u64>,
    /// Bytes of live keys and values (latest versions).
    live_bytes: Mutex<u64>,
}

fn visible(versions: &Versions, at: u64) -> Option<&Arc<[u8]>> {
    versions.iter().rev().find(|(v, _)| *v <= at).and_then(|(_, val)| val.as_ref())
}

impl MemEngine {
    fn write(
        map: &mut BTreeMap<Vec<u8>, Versions>,
        key: Vec<u8>,
        val: Option<Arc<[u8]>>,
        version: u64,
        oldest: u64,
    ) {
        let versions = map.entry(key).or_default();
        // Keep the newest version visible to the oldest snapshot, and everything newer.
        if let Some(keep_from) = versions.iter().rposition(|(v, _)| *v <= oldest) {
            versions.drain(..keep_from);
        }
        versions.push((version, val));
    }
}

impl Engine for MemEngine {
    type Snapshot = u64;

    fn snapshot(&self, version: u64) -> u64 {
        version
    }

    fn get(&self, snap: &u64, key: &[u8]) -> Result<Option<Vec<u8>>> {
        Ok(self.map.read().get(key).and_then(|vs| visible(vs, *snap)).map(|v| v.to_vec()))
    }

    fn get_latest(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.get(&u64::MAX, key)
    }

    fn scan(
        &self,
        snap: &u64,
        start: &[u8],
        end: &[u8],
        reverse: bool,
        visit: &mut dyn FnMut(&[u8], &[u8]) -> bool,
    ) -> Result<()> {
        let map = self.map.read();
        let range = map.range::<[u8], _>((Bound::Included(start), Bound::Excluded(end)));
        let mut step = |(k, vs): (&Vec<u8>, &Versions)| match visible(vs, *snap) {
            Some(v) => visit(k, v),
            None => true,
        };
        if reverse {
            for kv in range.rev() {
                if !step(kv) {
                    break;
                }
            }
        } else {
            for kv in range {
                if !step(kv) {
                    break;
                }
            }
        }
        Ok(())
    }

    fn apply(&self, batch: &[Mutation], version: u64, oldest: u64) -> Result<()> {
        let mut map = self.map.write();
        let mut live = self.live_bytes.lock();
        if let Some(capacity) = self.capacity {
            // Counts every set as new bytes: a full backend refuses a little early, never late.
            let added: u64 = batch
                .iter()
                .map(|m| if let Mutation::Set(k, v) = m { (k.len() + v.len()) as u64 } else { 0 })
                .sum();
            if added > 0 && *live + added > capacity {
                return Err(Error::new(
                    ErrorKind::NoSpace,
                    format!("memory backend is full ({capacity} bytes)"),
                ));
            }
        }
        let live_size = |map: &BTreeMap<Vec<u8>, Versions>, k: &[u8]| {
            map.get(k)
                .and_then(|vs| vs.last())
                .and_then(|(_, v)| v.as_ref())
                .map_or(0, |v| (k.len() + v.len()) as u64)
        };
        let mut deleted = Vec::new();
        for m in batch {
            *live -= match m {
                Mutation::Set(k, _) | Mutation::Clear(k) => live_size(&map, k),
                Mutation::ClearRange(..) => 0,
            };
            match m {
                Mutation::Set(k, v) => {
                    *live += (k.len() + v.len()) as u64;
                    Self::write(&mut map, k.clone(), Some(v.clone().into()), version, oldest)
                }
                Mutation::Clear(k) => {
                    if map.contains_key(k) {
                        deleted.push(k.clone());
                        Self::write(&mut map, k.clone(), None, version, oldest);
                    }
                }
                Mutation::ClearRange(s, e) => {
                    let keys: Vec<Vec<u8>> = map
                        .range::<[u8], _>((
                            Bound::Included(s.as_slice()),
                            Bound::Excluded(e.as_slice()),
                        ))
                        .filter(|(_, vs)| vs.last().is_some_and(|(_, v)| v.is_some()))
                        .map(|(k, _)| k.clone())
                        .collect();
                    for k in keys {
                        *live -= live_size(&map, &k);
                        deleted.push(k.clone());
                        Self::write(&mut map, k, None, version, oldest);
                    }
                }
            }
        }
        let mut tomb = self.tombstones.lock();
        if !deleted.is_empty() {
            tomb.push_back((version, deleted));
        }
        // Drop keys whose deletion no live snapshot predates.
        while tomb.front().is_some_and(|(v, _)| *v <= oldest) {
            let (v, keys) = tomb.pop_front().unwrap();
            for k in keys {
                if map
                    .get(&k)
                    .and_then(|vs| vs.last())
                    .is_some_and(|(lv, val)| *lv == v && val.is_none())
                {
                    map.remove(&k);
                }
            }
        }
        Ok(())
    }

    fn sync(&self) -> Result<()> {
        Ok(())
    }
}

/// An in-memory backend. Its data lives as long as the backend object.
pub struct MemoryBackend {
    occ: Arc<OccStore<MemEngine>>,
}

impl MemoryBackend {
    /// A new, empty memory backend enforcing `limits` (use [`Limits::FOUNDATIONDB`] to test
    /// code that must run on FoundationDB).
    pub fn new(limits: Limits) -> MemoryBackend {
        MemoryBackend::with_capacity(limits, None)
    }

    /// Like [`MemoryBackend::new`], holding at most `capacity` bytes of keys and values: a
    /// commit that would exceed it fails with `NoSpace`, as on a full disk.
    pub fn with_capacity(limits: Limits, capacity: Option<u64>) -> MemoryBackend {
        let engine = MemEngine { capacity, ..MemEngine::default() };
        MemoryBackend { occ: OccStore::new(engine, limits) }
    }
}

impl Backend for MemoryBackend {
    fn begin(&self) -> Result<Box<dyn Txn>> {
        self.occ.begin()
    }
    fn begin_cached(&self) -> Option<Box<dyn Txn>> {
        self.occ.begin_cached()
    }
    fn read_cache(&self) -> Option<&dyn ReadCacheControl> {
        Some(&*self.occ)
    }
    fn cache_watch(&self) -> Option<Box<dyn CacheWatch>> {
        Some(self.occ.cache_watch())
    }
    fn snapshots(&self) -> Option<&dyn Snapshots> {
        Some(self)
    }
    fn limits(&self) -> Limits {
        self.occ.limits()
    }
    fn sync(&self) -> Result<()> {
        self.occ.sync_all()
    }
    fn sync_through(&self, read_version: Option<u64>) -> Result<()> {
        self.occ.sync_through(read_version)
    }
    fn describe(&self) -> String {
        let mut params = Vec::new();
        if self.occ.limits() == Limits::FOUNDATIONDB {
            params.push("limits=foundationdb".to_string());
        }
        if let Some(c) = self.occ.engine().capacity {
            params.push(format!("capacity={c}"));
        }
        if params.is_empty() {
            "memory:".into()
        } else {
            format!("memory:?{}", params.join("&"))
        }
    }
}

impl Snapshots for MemoryBackend {
    fn snapshot(&self) -> Result<Arc<dyn Backend>> {
        let view = Arc::new(self.occ.pin()?);
        let what = format!("{} (snapshot)", self.describe());
        Ok(Arc::new(super::frozen::FrozenBackend::new(view, self.limits(), what, None)))
    }
}
