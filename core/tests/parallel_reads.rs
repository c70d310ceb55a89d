//! Large reads from a backend with latency per request keep several range reads in flight
//! (`Txn::parallel_reader`, `fs/ops/fetch.rs`), and read exactly what a sequential read
//! would: the snapshot's bytes, holes as zeros, a transaction's own writes merged in, a
//! concurrent commit into the range failing the reader's commit. The remote is the memory
//! backend behind `FaultyBackend` (which counts the reads in flight); no test asserts a time.

use std::sync::Arc;
use std::time::Duration;
use txvfs::kv::{Backend, FaultPlan, FaultyBackend, Limits, MemoryBackend};
use txvfs::{ErrorKind, FileSystem, Options, Store};

const MIB: usize = 1 << 20;

fn remote(latency_us: u64) -> (Store, Arc<FaultPlan>) {
    let (b, plan) = FaultyBackend::new(Arc::new(MemoryBackend::new(Limits::UNLIMITED)));
    plan.set_read_latency(Duration::from_micros(latency_us));
    let backend: Arc<dyn Backend> = b;
    (Store::with_backend(backend, Options::default(), None).unwrap(), plan)
}

fn pattern(n: usize, seed: u8) -> Vec<u8> {
    (0..n).map(|i| (i / 4096) as u8 ^ (i as u8).wrapping_mul(31) ^ seed).collect()
}

#[test]
fn a_large_read_keeps_several_requests_in_flight_and_reads_the_same_bytes() {
    let (store, plan) = remote(200);
    let data = pattern(9 * MIB + 12345, 1);
    store.write_file("/big", &data).unwrap();
    let before = plan.max_in_flight();
    assert!(before <= 1, "writing read one at a time: {before}");
    assert_eq!(store.read_file("/big").unwrap(), data);
    assert!(plan.max_in_flight() > 1, "max in flight {}", plan.max_in_flight());
    // Reads at offsets that are not block aligned, and past the end.
    let f = store.open("/big", &txvfs::OpenOptions::new().read(true)).unwrap();
    let mut buf = vec![0u8; 5 * MIB + 7];
    assert_eq!(f.read_at(&mut buf, 777).unwrap(), buf.len());
    assert_eq!(buf, data[777..777 + buf.len()]);
    let n = f.read_at(&mut buf, (data.len() - 3 * MIB) as u64).unwrap();
    assert_eq!(&buf[..n], &data[data.len() - 3 * MIB..]);
}

#[test]
fn one_request_at_a_time_when_asked() {
    let (store, plan) = remote(100);
    plan.set_parallel_reads(1);
    let data = pattern(4 * MIB, 2);
    store.write_file("/big", &data).unwrap();
    assert_eq!(store.read_file("/big").unwrap(), data);
    assert_eq!(plan.max_in_flight(), 1);
}

#[test]
fn holes_read_as_zeros() {
    let (store, _plan) = remote(100);
    let f = store
        .open("/sparse", &txvfs::OpenOptions::new().read(true).write(true).create(true))
        .unwrap();
    f.write_at(&[1u8; 1000], 0).unwrap();
    f.write_at(&[2u8; 1000], (6 * MIB) as u64).unwrap();
    f.close().unwrap();
    let got = store.read_file("/sparse").unwrap();
    let mut want = vec![0u8; 6 * MIB + 1000];
    want[..1000].fill(1);
    want[6 * MIB..].fill(2);
    assert_eq!(got, want);
}

#[test]
fn a_transaction_reads_its_own_writes_in_a_large_read() {
    let (store, _plan) = remote(100);
    let data = pattern(4 * MIB, 3);
    store.write_file("/big", &data).unwrap();
    let mut want = data.clone();
    want[2 * MIB..2 * MIB + 10].fill(9);
    let got = store
        .transact(|tx| {
            let f = tx.open("/big", &txvfs::OpenOptions::new().read(true).write(true))?;
            f.write_at(&[9u8; 10], (2 * MIB) as u64)?;
            let mut buf = vec![0u8; 4 * MIB];
            f.read_at(&mut buf, 0)?;
            Ok(buf)
        })
        .unwrap();
    assert_eq!(got, want);
}

#[test]
fn a_commit_into_the_range_read_fails_the_readers_commit() {
    let (store, _plan) = remote(100);
    let data = pattern(4 * MIB, 4);
    store.write_file("/big", &data).unwrap();
    store.write_file("/other", b"x").unwrap();
    let tx = store.begin().unwrap();
    assert_eq!(tx.read_file("/big").unwrap(), data, "the snapshot's bytes");
    // Another transaction changes a block in the middle after the read.
    let f = store.open("/big", &txvfs::OpenOptions::new().write(true)).unwrap();
    f.write_at(b"changed", (3 * MIB) as u64).unwrap();
    f.close().unwrap();
    assert_eq!(tx.read_file("/big").unwrap(), data, "still the snapshot's bytes");
    tx.write_file("/other", b"y").unwrap();
    assert_eq!(tx.commit().unwrap_err().kind(), ErrorKind::Conflict);
    assert_eq!(store.read_file("/other").unwrap(), b"x");
}
