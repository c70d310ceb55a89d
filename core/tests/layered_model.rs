//! `LayeredBackend` against a plain backend holding the same data: random sets, clears,
//! clear_ranges (overlapping range whiteouts), atomic adds and reads (points, ranges forward
//! and reverse, with limits), over a lower layer full of keys, must give the same results.
//! Fixed seeds (printed); `TXVFS_SEED=N` runs one.

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use std::sync::Arc;
use txvfs::kv::{Backend, LayeredBackend, Limits, MemoryBackend, Txn};

fn key(rng: &mut SmallRng) -> Vec<u8> {
    // A small space of short keys, so ranges, whiteouts and lower keys collide often.
    let len = rng.gen_range(1..=3);
    (0..len).map(|_| b"abcdef"[rng.gen_range(0..6)]).collect()
}

fn run(seed: u64) {
    eprintln!("layered_model: seed {seed}");
    let mut rng = SmallRng::seed_from_u64(seed);
    let lower = MemoryBackend::new(Limits::UNLIMITED);
    let plain: Arc<dyn Backend> = Arc::new(MemoryBackend::new(Limits::UNLIMITED));
    {
        let (mut a, mut b) = (lower.begin().unwrap(), plain.begin().unwrap());
        for _ in 0..120 {
            let (k, v) = (key(&mut rng), vec![rng.gen::<u8>(); 8]);
            a.set(&k, &v).unwrap();
            b.set(&k, &v).unwrap();
        }
        a.commit(false).unwrap();
        b.commit(false).unwrap();
    }
    let upper: Arc<dyn Backend> = Arc::new(MemoryBackend::new(Limits::UNLIMITED));
    let layered = LayeredBackend::new(upper, lower.snapshot().unwrap()).unwrap();
    for step in 0..400 {
        let (mut a, mut b): (Box<dyn Txn>, Box<dyn Txn>) = (layered.begin().unwrap(), plain.begin().unwrap());
        for op in 0..rng.gen_range(1..6) {
            let ctx = format!("seed {seed} step {step} op {op}");
            match rng.gen_range(0..8) {
                0 => {
                    let (k, v) = (key(&mut rng), vec![rng.gen::<u8>(); 3]);
                    a.set(&k, &v).unwrap();
                    b.set(&k, &v).unwrap();
                }
                1 => {
                    let k = key(&mut rng);
                    a.clear(&k).unwrap();
                    b.clear(&k).unwrap();
                }
                2 => {
                    let (s, e) = (key(&mut rng), key(&mut rng));
                    a.clear_range(&s, &e).unwrap();
                    b.clear_range(&s, &e).unwrap();
                }
                3 => {
                    let (k, d) = (key(&mut rng), rng.gen_range(-5..5));
                    a.atomic_add(&k, d).unwrap();
                    b.atomic_add(&k, d).unwrap();
                }
                4 | 5 => {
                    let k = key(&mut rng);
                    assert_eq!(a.get(&k).unwrap(), b.get(&k).unwrap(), "{ctx}: get {k:?}");
                }
                _ => {
                    let (s, e) = (key(&mut rng), key(&mut rng));
                    let (limit, rev) = (rng.gen_range(0..6), rng.gen_bool(0.5));
                    assert_eq!(
                        a.get_range(&s, &e, limit, rev).unwrap(),
                        b.get_range(&s, &e, limit, rev).unwrap(),
                        "{ctx}: get_range {s:?}..{e:?} limit {limit} reverse {rev}"
                    );
                }
            }
        }
        if rng.gen_bool(0.8) {
            a.commit(false).unwrap();
            b.commit(false).unwrap();
        }
    }
    // The whole key space agrees at the end.
    let all = |b: &dyn Backend| b.begin().unwrap().get_range(b"", &[0xff], 0, false).unwrap();
    assert_eq!(all(&*layered), all(&*plain), "seed {seed}: final contents");
}

#[test]
fn layered_backend_matches_a_plain_backend() {
    let seeds: Vec<u64> = match std::env::var("TXVFS_SEED") {
        Ok(s) => vec![s.parse().expect("TXVFS_SEED must be a number")],
        Err(_) => (1..=20).collect(),
    };
    for seed in seeds {
        run(seed);
    }
}
