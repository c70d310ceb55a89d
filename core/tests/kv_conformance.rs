//! The kv conformance suite: every backend must pass every case here. A new backend is done
//! when its `backend_suite!` line passes.

use std::sync::Arc;
use txvfs::kv::{self, Backend, Limits, MemoryBackend, Snapshots};
use txvfs::ErrorKind;

mod conformance;
use conformance::*;

macro_rules! backend_suite {
    ($name:ident, $make:expr $(, #[$attr:meta])*) => {
        mod $name {
            use super::*;
            /// The backend under test, or `None` when it cannot run here (reported as skipped).
            /// The second element keeps what the backend needs alive (a directory, a process).
            fn make() -> Option<(Arc<dyn Backend>, Option<Box<dyn std::any::Any>>)> {
                $make
            }
            #[test]
            $(#[$attr])*
            fn get_set_clear() {
                let Some((b, _d)) = make() else { return };
                super::get_set_clear(&*b)
            }
            #[test]
            $(#[$attr])*
            fn ranges() {
                let Some((b, _d)) = make() else { return };
                super::ranges(&*b)
            }
            #[test]
            $(#[$attr])*
            fn read_your_writes() {
                let Some((b, _d)) = make() else { return };
                super::read_your_writes(&*b)
            }
            #[test]
            $(#[$attr])*
            fn atomic_ops() {
                let Some((b, _d)) = make() else { return };
                super::atomic_ops(&*b)
            }
            #[test]
            $(#[$attr])*
            fn snapshot_isolation() {
                let Some((b, _d)) = make() else { return };
                super::snapshot_isolation(&*b)
            }
            #[test]
            $(#[$attr])*
            fn read_write_conflict() {
                let Some((b, _d)) = make() else { return };
                super::read_write_conflict(&*b)
            }
            #[test]
            $(#[$attr])*
            fn write_skew() {
                let Some((b, _d)) = make() else { return };
                super::write_skew(&*b)
            }
            #[test]
            $(#[$attr])*
            fn phantoms() {
                let Some((b, _d)) = make() else { return };
                super::phantoms(&*b)
            }
            #[test]
            $(#[$attr])*
            fn snapshot_reads_add_no_conflict() {
                let Some((b, _d)) = make() else { return };
                super::snapshot_reads_add_no_conflict(&*b)
            }
            #[test]
            $(#[$attr])*
            fn rollback_and_drop() {
                let Some((b, _d)) = make() else { return };
                super::rollback_and_drop(&*b)
            }
            #[test]
            $(#[$attr])*
            fn durable_commit_and_sync() {
                let Some((b, _d)) = make() else { return };
                super::durable_commit_and_sync(&*b)
            }
            #[test]
            $(#[$attr])*
            fn concurrent_counters() {
                let Some((b, _d)) = make() else { return };
                super::concurrent_counters(b)
            }
            #[test]
            $(#[$attr])*
            fn commits_become_visible_in_order() {
                let Some((b, _d)) = make() else { return };
                super::commits_become_visible_in_order(b)
            }
            #[test]
            $(#[$attr])*
            fn reads_after_commits_see_them() {
                let Some((b, _d)) = make() else { return };
                super::reads_after_commits_see_them(&*b)
            }
            #[test]
            $(#[$attr])*
            fn batched_snapshot_reads() {
                let Some((b, _d)) = make() else { return };
                super::batched_snapshot_reads(&*b)
            }
        }
    };
}

backend_suite!(memory, Some((Arc::new(MemoryBackend::new(Limits::UNLIMITED)), None)));
backend_suite!(memory_fdb_limits, Some((Arc::new(MemoryBackend::new(Limits::FOUNDATIONDB)), None)));
// The fault wrapper with a read latency (the disk cache's "slow remote") keeps the contract.
backend_suite!(slow_memory, {
    let (b, plan) = txvfs::kv::FaultyBackend::new(Arc::new(MemoryBackend::new(Limits::UNLIMITED)));
    plan.set_read_latency(std::time::Duration::from_micros(200));
    Some((b as Arc<dyn Backend>, None))
});
backend_suite!(rocksdb, {
    let d = tempfile::tempdir().unwrap();
    Some((kv::open(d.path().to_str().unwrap()).unwrap(), Some(Box::new(d))))
});
// A client of a store whose owner is another process (kv/shared): every transaction runs in
// the owner's resolver, over the store's socket.
#[cfg(feature = "rocksdb")]
backend_suite!(rocksdb_client, {
    let d = tempfile::tempdir().unwrap();
    let uri = d.path().to_str().unwrap().to_string();
    let owner = agent::Agent::start(&uri, "agent_main");
    assert_eq!(owner.role, "owner");
    let b = kv::open(&uri).unwrap();
    assert!(!kv::SharedBackend::open(&d.path().canonicalize().unwrap(), false).unwrap().is_owner());
    // Dropped in order: the owner process first, then its directory.
    Some((b, Some(Box::new((owner, d)))))
});

mod agent;

#[test]
fn agent_main() {
    agent::agent_main();
}
/// A backend with its read cache set to `bytes` (the suites above run without one).
fn cached(b: Arc<dyn Backend>, bytes: u64) -> Arc<dyn Backend> {
    b.read_cache().expect("a backend with a read cache").set_capacity(bytes);
    b
}
/// Enough for a handful of small entries: the cache evicts on nearly every fill.
const TINY_CACHE: u64 = 2048;
backend_suite!(
    memory_cached,
    Some((cached(Arc::new(MemoryBackend::new(Limits::UNLIMITED)), 64 << 20), None))
);
backend_suite!(
    memory_tiny_cache,
    Some((cached(Arc::new(MemoryBackend::new(Limits::UNLIMITED)), TINY_CACHE), None))
);
backend_suite!(rocksdb_cached, {
    let d = tempfile::tempdir().unwrap();
    Some((cached(kv::open(d.path().to_str().unwrap()).unwrap(), 64 << 20), Some(Box::new(d))))
});
backend_suite!(rocksdb_tiny_cache, {
    let d = tempfile::tempdir().unwrap();
    Some((cached(kv::open(d.path().to_str().unwrap()).unwrap(), TINY_CACHE), Some(Box::new(d))))
});
/// A backend under test and what keeps it alive beside it (a temporary directory, an owner
/// process).
type Made = Option<(Arc<dyn Backend>, Option<Box<dyn std::any::Any>>)>;

/// A client of an owner in another process (as `rocksdb_client`) with its read cache on:
/// reads it answers from the cache must keep the same contract (kv/shared/client_cache.rs).
#[cfg(feature = "rocksdb")]
fn cached_client(bytes: u64) -> Made {
    let d = tempfile::tempdir().unwrap();
    let uri = d.path().to_str().unwrap().to_string();
    let owner = agent::Agent::start(&uri, "agent_main");
    assert_eq!(owner.role, "owner");
    let b = cached(kv::open(&uri).unwrap(), bytes);
    Some((b, Some(Box::new((owner, d)))))
}
#[cfg(feature = "rocksdb")]
backend_suite!(rocksdb_client_cached, cached_client(64 << 20));
#[cfg(feature = "rocksdb")]
backend_suite!(rocksdb_client_tiny_cache, cached_client(TINY_CACHE));
backend_suite!(
    foundationdb,
    Some((fdb_store(), None)),
    #[ignore = "needs a FoundationDB cluster: tests/foundationdb/run"]
);
backend_suite!(
    layered_range_whiteouts,
    Some((layered(Arc::new(MemoryBackend::new(Limits::UNLIMITED)), false), None))
);
backend_suite!(
    layered_point_whiteouts,
    Some((layered(Arc::new(MemoryBackend::new(Limits::UNLIMITED)), true), None))
);
backend_suite!(layered_rocksdb_over_lower, {
    let d = tempfile::tempdir().unwrap();
    Some((layered(kv::open(d.path().to_str().unwrap()).unwrap(), false), Some(Box::new(d))))
});

/// A clone (`LayeredBackend`) with `upper` over a lower layer full of data, all of it deleted
/// in the clone (whiteouts) except keys after every key the suite uses (`~...`), so the suite
/// starts from an empty view and every key it touches has a lower value underneath. The
/// lower keys are deleted one by one (`points`: point whiteouts) or by one `clear_range`.
fn layered(upper: Arc<dyn Backend>, points: bool) -> Arc<dyn Backend> {
    let lower = MemoryBackend::new(Limits::UNLIMITED);
    let mut tx = lower.begin().unwrap();
    let alphabet: Vec<u8> = (b'a'..=b'z').chain(b'0'..=b'9').chain([b'/']).collect();
    for &a in &alphabet {
        tx.set(&[a], b"lower").unwrap();
        for &b in &alphabet {
            tx.set(&[a, b], b"lower").unwrap();
            tx.set(&[a, b, b'1'], b"lower").unwrap();
        }
    }
    for k in [
        "alice", "bob", "ctr", "out", "mine", "hot", "gone", "count", "dir/a", "dir/b", "r/1",
        "r/2", "p/0", "p/4", "p/5", "~tail1", "~tail2",
    ] {
        tx.set(k.as_bytes(), b"lower").unwrap();
    }
    tx.commit(false).unwrap();
    let layered = kv::LayeredBackend::new(upper, lower.snapshot().unwrap()).unwrap();
    let mut tx = layered.begin().unwrap();
    if points {
        for (k, _) in tx.get_range(b"", b"~", 0, false).unwrap() {
            tx.clear(&k).unwrap();
        }
    } else {
        tx.clear_range(b"", b"~").unwrap();
    }
    tx.commit(false).unwrap();
    let mut tx = layered.begin().unwrap();
    assert!(tx.get_range(b"", b"~", 0, false).unwrap().is_empty());
    assert_eq!(tx.get_range(b"", &[0xff], 0, false).unwrap().len(), 2);
    layered
}

/// A fresh, empty store in the FoundationDB cluster named by `TXVFS_FDB_CLUSTER_FILE`, under a
/// prefix of its own. These tests are `#[ignore]`d: `tests/foundationdb/run` starts a cluster
/// and runs them with `--ignored`; run without a cluster named, they fail (never a silent pass).
fn fdb_store() -> Arc<dyn Backend> {
    use std::sync::atomic::{AtomicU32, Ordering};
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let cluster = std::env::var("TXVFS_FDB_CLUSTER_FILE")
        .expect("the FoundationDB tests need a cluster: run tests/foundationdb/run");
    let prefix = format!("test-{}-{}", std::process::id(), NEXT.fetch_add(1, Ordering::Relaxed));
    let b = kv::open(&format!("fdb:{cluster}?prefix={prefix}")).unwrap();
    let mut tx = b.begin().unwrap();
    tx.clear_range(b"", &[0xff]).unwrap();
    tx.commit(true).unwrap();
    b
}

mod limits {
    use super::*;

    #[test]
    fn foundationdb_limits_are_enforced() {
        let b = MemoryBackend::new(Limits::FOUNDATIONDB);
        let mut tx = b.begin().unwrap();
        assert_eq!(tx.set(&vec![1; 10_001], b"").unwrap_err().kind(), ErrorKind::TooLarge);
        assert_eq!(tx.get(&vec![1; 10_001]).unwrap_err().kind(), ErrorKind::TooLarge);
        assert_eq!(tx.set(b"k", &vec![0; 100_001]).unwrap_err().kind(), ErrorKind::TooLarge);
        tx.set(&vec![1; 10_000], &vec![0; 100_000]).unwrap();
        let mut tx = b.begin().unwrap();
        let mut err = None;
        for i in 0u32..200 {
            if let Err(e) = tx.set(&i.to_be_bytes(), &vec![0; 99_000]) {
                err = Some((i, e));
                break;
            }
        }
        let (i, e) = err.expect("10 MB limit");
        assert_eq!(e.kind(), ErrorKind::TooLarge);
        assert_eq!(i, 101, "the 102nd value of 99 kB crosses 10,000,000 bytes");
        assert_eq!(b.limits().max_txn_duration, Some(std::time::Duration::from_secs(5)));
    }

    #[test]
    fn foundationdb_duration_limit() {
        let b = MemoryBackend::new(Limits::FOUNDATIONDB);
        let mut tx = b.begin().unwrap();
        tx.set(b"k", b"v").unwrap();
        std::thread::sleep(std::time::Duration::from_millis(5100));
        let e = tx.commit(false).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::TooOld);
        assert!(e.is_retryable());
        assert_eq!(get(&b, b"k"), None);
    }

    #[test]
    fn unlimited_backends_take_big_values() {
        let b = MemoryBackend::new(Limits::UNLIMITED);
        set(&b, &[(b"big", &vec![7; 1 << 20])]);
        assert_eq!(get(&b, b"big").unwrap().len(), 1 << 20);
    }
}

mod rocksdb_store {
    use super::*;

    #[test]
    fn data_survives_reopen() {
        let d = tempfile::tempdir().unwrap();
        let uri = format!("rocksdb:{}", d.path().display());
        {
            let b = kv::open(&uri).unwrap();
            set(&*b, &[(b"persist", b"yes")]);
            b.sync().unwrap();
        }
        let b = kv::open(&uri).unwrap();
        assert_eq!(get(&*b, b"persist").as_deref(), Some(&b"yes"[..]));
    }

    #[test]
    fn one_process_shares_one_instance() {
        let d = tempfile::tempdir().unwrap();
        let b1 = kv::open(d.path().to_str().unwrap()).unwrap();
        let b2 = kv::open(&format!("rocksdb:{}/.", d.path().display())).unwrap();
        assert!(Arc::ptr_eq(&b1, &b2));
        // Conflict detection spans both handles.
        set(&*b1, &[(b"k", b"1")]);
        let mut t1 = b1.begin().unwrap();
        t1.get(b"k").unwrap();
        t1.set(b"x", b"").unwrap();
        set(&*b2, &[(b"k", b"2")]);
        expect_conflict(t1.commit(false));
    }

    #[test]
    fn second_process_gets_a_clear_lock_error_from_an_exclusive_store() {
        if let Ok(path) = std::env::var("TXVFS_CHILD_OPEN") {
            // Child: report what opening gives.
            match kv::open(&path) {
                Ok(_) => std::process::exit(3),
                // The holder is named: txvfs's own owner lock (kv/owner.rs) answers first.
                Err(e)
                    if e.kind() == ErrorKind::Busy
                        && e.message().contains(&format!(
                            "exclusive use by process {}",
                            std::env::var("TXVFS_PARENT").unwrap()
                        )) =>
                {
                    std::process::exit(0)
                }
                Err(e) => {
                    eprintln!("unexpected error: {e}");
                    std::process::exit(4)
                }
            }
        }
        let d = tempfile::tempdir().unwrap();
        let _held = kv::open(&format!("rocksdb:{}?mode=exclusive", d.path().display())).unwrap();
        let status = std::process::Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "rocksdb_store::second_process_gets_a_clear_lock_error_from_an_exclusive_store",
                "--nocapture",
            ])
            .env("TXVFS_CHILD_OPEN", d.path())
            .env("TXVFS_PARENT", std::process::id().to_string())
            .status()
            .unwrap();
        assert_eq!(status.code(), Some(0), "child should see the store locked");
    }

    #[test]
    fn a_full_memory_backend_refuses_commits_and_changes_nothing() {
        let b = kv::open("memory:?limits=foundationdb&capacity=1000").unwrap();
        assert_eq!(b.describe(), "memory:?limits=foundationdb&capacity=1000");
        set(&*b, &[(b"a", &[1; 500])]);
        let mut tx = b.begin().unwrap();
        tx.set(b"b", &[2; 600]).unwrap();
        assert_eq!(tx.commit(false).unwrap_err().kind(), ErrorKind::NoSpace);
        assert_eq!(get(&*b, b"b"), None);
        // Freeing space makes room again.
        let mut tx = b.begin().unwrap();
        tx.clear(b"a").unwrap();
        tx.commit(false).unwrap();
        set(&*b, &[(b"b", &[2; 600])]);
        assert_eq!(get(&*b, b"b").map(|v| v.len()), Some(600));
    }

    #[test]
    fn bad_uris_are_refused() {
        assert_eq!(kv::open("memory:?capacity=lots").unwrap_err().kind(), ErrorKind::Invalid);
        assert_eq!(kv::open("memory:limits").unwrap_err().kind(), ErrorKind::Invalid);
        assert_eq!(kv::open("").unwrap_err().kind(), ErrorKind::Invalid);
        assert_eq!(kv::open("memory:?what").unwrap_err().kind(), ErrorKind::Invalid);
        assert_eq!(kv::open("fdb:?color=red").unwrap_err().kind(), ErrorKind::Invalid);
    }
}
