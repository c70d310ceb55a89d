//! Runs random operations on txvfs and the model together and compares every result.

use super::handles::{Mode, SLOTS, STORE_SLOTS};
use super::ops::*;
use super::tree::compare_trees;
use super::{Model, R};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use txvfs::kv::Backend;
use txvfs::{ErrorKind, File, FileSystem, Options, Store};

/// Counts of one run, per operation kind: how many succeeded, and how often each errno came
/// back (as the model says).
#[derive(Default)]
pub struct Stats {
    pub ops: usize,
    pub commits: usize,
    pub rollbacks: usize,
    /// Explicit transactions that failed to commit with a retryable conflict (threads only).
    pub conflicts: usize,
    /// Transactions that wrote data ahead (staged chunks), and how many bytes they wrote.
    pub staged: usize,
    /// Calls through a handle whose file had no name left (unlinked or renamed over).
    pub orphan_calls: usize,
    /// Writes buffered by write-back handles, and syncs forced before another call used the file.
    pub buffered_writes: usize,
    pub settles: usize,
    /// Store handles closed during a transaction that had unlinked their file.
    pub orphans_closed_in_tx: usize,
    pub outcomes: BTreeMap<&'static str, (usize, BTreeMap<i32, usize>)>,
}

impl Stats {
    pub fn summary(&self) -> String {
        let s: Vec<String> = self
            .outcomes
            .iter()
            .map(|(k, (ok, errs))| {
                let errs: Vec<String> = errs.iter().map(|(e, n)| format!("e{e}:{n}")).collect();
                format!("{k} ok:{ok} {}", errs.join(" "))
            })
            .collect();
        s.join("; ")
    }
}

/// Keys of the write-ahead machinery: chunks (`C`), staging records (`T`), their index (`U`).
pub fn staging_keys(b: &dyn Backend) -> [BTreeSet<Vec<u8>>; 3] {
    let mut tx = b.begin().unwrap();
    [b'C', b'T', b'U'].map(|scope| {
        tx.get_range(&[scope], &[scope + 1], 0, false)
            .unwrap()
            .into_iter()
            .map(|(k, _)| k)
            .collect()
    })
}

pub struct Runner {
    pub store: Store,
    pub options: Options,
    pub seed: u64,
    /// The `TXVFS_SEED` that reruns this (a thread's seed derives from its run's).
    pub rerun: u64,
    pub gen: Gen,
    pub m: Model,
    files: Vec<Option<File>>,
    rng: SmallRng,
    pub stats: Stats,
    pub mismatches: Vec<String>,
    /// Op number.
    pub i: usize,
    /// With a backend to inspect: some transactions write several MB (staged writes).
    pub big: Option<Arc<dyn Backend>>,
    /// Several runners share the store: explicit commits may conflict; statfs is global.
    pub shared: bool,
}

impl Runner {
    pub fn new(store: &Store, options: &Options, seed: u64, prefix: &[u8]) -> Runner {
        Runner {
            store: store.clone(),
            options: options.clone(),
            seed,
            rerun: seed,
            gen: Gen { prefix: prefix.to_vec(), slots: 0..STORE_SLOTS },
            m: Model::new(),
            files: (0..SLOTS).map(|_| None).collect(),
            rng: SmallRng::seed_from_u64(seed),
            stats: Stats::default(),
            mismatches: Vec::new(),
            i: 0,
            big: None,
            shared: false,
        }
    }

    fn ctx(&self, what: &str) -> String {
        format!("seed {} op {}{what} (rerun with TXVFS_SEED={})", self.seed, self.i, self.rerun)
    }

    /// Runs `op` on the model and on `fs` and compares the results. Write-back data that
    /// another call would read or overwrite is synced first (through its own handle), since
    /// until then others may or may not see it.
    fn step<F: FileSystem>(&mut self, fs: &F, op: &Op) {
        let touched = data_touched(&self.m, op);
        let own = handle_slot(op);
        for s in 0..STORE_SLOTS {
            let settle =
                self.m.handles[s].as_ref().is_some_and(|h| h.dirty && touched.contains(&h.ino));
            if settle && own != Some(s) {
                self.stats.settles += 1;
                let store = self.store.clone();
                self.step(&store, &Op::HSync(s));
            }
        }
        if let Some(h) = own.and_then(|s| self.m.handles[s].as_ref()) {
            self.stats.orphan_calls += (self.m.nodes[&h.ino].links == 0) as usize;
            self.stats.buffered_writes += (h.buffers && matches!(op, Op::HWrite(..))) as usize;
        }
        let want = model_apply(&mut self.m, op);
        let got = fs_apply(fs, &mut self.files, &self.gen.prefix, op).map_err(|e| e.code());
        self.count(op, &want);
        if want != got {
            self.mismatches.push(format!(
                "{}: {}: model {} txvfs {}",
                self.ctx(""),
                show_op(op),
                show_val(&want),
                show_val(&got)
            ));
            if let Some(s) = handle_slot(op) {
                // Keep the slots in step, so one mismatch does not cascade.
                if self.m.handles[s].is_some() != self.files[s].is_some() {
                    if self.m.handles[s].is_some() {
                        let _ = self.m.h_close(s);
                    }
                    self.files[s] = None;
                }
            }
        }
        self.i += 1;
    }

    fn count(&mut self, op: &Op, want: &R) {
        self.stats.ops += 1;
        let o = self.stats.outcomes.entry(op_name(op)).or_default();
        match want {
            Ok(_) => o.0 += 1,
            Err(e) => *o.1.entry(*e).or_default() += 1,
        }
    }

    /// Syncs every write-back handle with unsynced writes.
    fn sync_all(&mut self) {
        let store = self.store.clone();
        for s in 0..STORE_SLOTS {
            if self.m.handles[s].as_ref().is_some_and(|h| h.dirty) {
                self.step(&store, &Op::HSync(s));
            }
        }
    }

    fn compare(&self, what: &str) {
        compare_trees(&self.m, &self.store, &self.gen.prefix, &self.ctx(what), !self.shared);
    }

    /// Runs at least `n` more operations: single calls on the store (and its handles) and
    /// now and then a group in an explicit transaction, which commits or rolls back.
    pub fn run(&mut self, n: usize) {
        let end = self.i + n;
        while self.i < end && self.mismatches.len() < 20 {
            if self.rng.gen_ratio(1, if self.big.is_some() { 4 } else { 8 }) {
                self.transaction();
            } else {
                let open: Vec<usize> =
                    (0..STORE_SLOTS).filter(|&s| self.m.handles[s].is_some()).collect();
                let op = if self.big.is_some() && !open.is_empty() && self.rng.gen_ratio(1, 4) {
                    // Large writes through store handles: write-back ones pass their 4 MiB
                    // flush point. At most 2.5 MB each, so buffer and write fit in one
                    // backend transaction (see `write_back_large_write_after_buffered_data`).
                    let n = self.rng.gen_range(500_000..2_500_000);
                    Op::HWrite(open[self.rng.gen_range(0..open.len())], data_of(n, self.rng.gen()))
                } else if self.big.is_some() && open.is_empty() && self.rng.gen_ratio(1, 8) {
                    // A handle for those, on a name no other call uses (so the open succeeds).
                    let wb = self.rng.gen_ratio(2, 3);
                    Op::HOpen(
                        0,
                        b"/e".to_vec(),
                        Mode {
                            read: true,
                            write: true,
                            create: true,
                            write_back: wb,
                            ..Mode::default()
                        },
                    )
                } else {
                    gen_op(&mut self.rng, &self.options, &self.gen, &self.m)
                };
                let store = self.store.clone();
                self.step(&store, &op);
                if self.i % 50 == 0 {
                    self.compare("");
                }
            }
        }
    }

    fn big_write(&mut self) -> Op {
        let n = self.rng.gen_range(1_000_000..1_400_000);
        let data = data_of(n, self.rng.gen());
        let open: Vec<usize> =
            (STORE_SLOTS..SLOTS).filter(|&s| self.m.handles[s].is_some()).collect();
        if !open.is_empty() && self.rng.gen_ratio(1, 2) {
            return Op::HWrite(open[self.rng.gen_range(0..open.len())], data);
        }
        // Mostly a name no other call uses, so that most big writes succeed.
        let path = if self.rng.gen_ratio(2, 3) {
            b"/e".to_vec()
        } else {
            gen_path(&mut self.rng, false, false)
        };
        Op::WriteFile(path, data)
    }

    /// In a big transaction: calls on `/e` (which the big writes fill) through a handle of the
    /// transaction, at offsets across its megabytes, so that blocks written ahead are
    /// overwritten, truncated and punched before the transaction ends.
    fn on_big_file(&mut self) -> Op {
        let slot = STORE_SLOTS;
        if self.m.handles[slot].is_none() {
            return Op::HOpen(
                slot,
                b"/e".to_vec(),
                Mode { read: true, write: true, create: true, ..Mode::default() },
            );
        }
        let off = self.rng.gen_range(0..3_000_000);
        match self.rng.gen_range(0..5) {
            0 => Op::HSetLen(slot, off),
            1 => Op::HAllocate(
                slot,
                txvfs::FallocateMode::PunchHole,
                off,
                self.rng.gen_range(1..1_500_000),
            ),
            2 => Op::HPwrite(slot, off, data_of(self.rng.gen_range(1..300_000), self.rng.gen())),
            3 => Op::HPread(slot, off, self.rng.gen_range(1..300_000)),
            _ => Op::HAllocate(
                slot,
                txvfs::FallocateMode::Allocate,
                off,
                self.rng.gen_range(1..1_000_000),
            ),
        }
    }

    fn transaction(&mut self) {
        // Write-back data goes out first: its flush would otherwise land after the group.
        self.sync_all();
        let snapshot = self.m.clone();
        let big = self.big.clone().filter(|_| self.rng.gen_ratio(1, 2));
        let before = big.as_ref().map(|b| staging_keys(&**b));
        let tx = self.store.begin().unwrap();
        let k = self.rng.gen_range(1..20);
        let mut bigs = if big.is_some() { self.rng.gen_range(3..5) } else { 0 };
        let store_slots = std::mem::replace(&mut self.gen.slots, STORE_SLOTS..SLOTS);
        let total = k + bigs;
        // Store handles closed meanwhile: outside the transaction, so a rollback keeps that.
        let mut closed_outside = Vec::new();
        for j in 0..total {
            let open: Vec<usize> =
                (0..STORE_SLOTS).filter(|&s| self.m.handles[s].is_some()).collect();
            if !open.is_empty() && self.rng.gen_ratio(1, 8) {
                // The last handle of a file the transaction unlinked may close before the
                // commit: the commit must then free the file.
                let s = open[self.rng.gen_range(0..open.len())];
                let ino = self.m.handles[s].as_ref().unwrap().ino;
                self.stats.orphans_closed_in_tx += (self.m.nodes[&ino].links == 0) as usize;
                let store = self.store.clone();
                let op = if self.rng.gen() { Op::HClose(s) } else { Op::HDrop(s) };
                self.step(&store, &op);
                closed_outside.push(s);
                continue;
            }
            let op = if bigs > 0 && self.rng.gen_ratio(bigs, (total - j).max(bigs)) {
                bigs -= 1;
                self.big_write()
            } else if big.is_some() && self.rng.gen_ratio(1, 4) {
                self.on_big_file()
            } else {
                gen_op(&mut self.rng, &self.options, &self.gen, &self.m)
            };
            self.step(&tx, &op);
        }
        self.gen.slots = store_slots;
        if self.rng.gen_ratio(1, 4) {
            compare_trees(
                &self.m,
                &tx,
                &self.gen.prefix,
                &self.ctx(" (inside a transaction)"),
                false,
            );
        }
        let staged = big.as_ref().is_some_and(|b| !staging_keys(&**b)[1].is_empty());
        self.stats.staged += staged as usize;
        // Handles opened in the transaction close before it ends, except now and then one
        // that must then fail with EBADF.
        let mut kept = None;
        for s in STORE_SLOTS..SLOTS {
            if self.m.handles[s].is_some() {
                if kept.is_none() && self.rng.gen_ratio(1, 4) {
                    kept = Some(s);
                } else {
                    self.step(&tx, &Op::HClose(s));
                }
            }
        }
        let commit = self.rng.gen_ratio(2, 3);
        let committed = if commit {
            match tx.commit() {
                Ok(()) => true,
                Err(e) if self.shared && e.kind() == ErrorKind::Conflict => {
                    self.stats.conflicts += 1;
                    false
                }
                Err(e) => panic!("{}: commit: {e}", self.ctx("")),
            }
        } else {
            tx.rollback();
            false
        };
        if let Some(s) = kept {
            let f = self.files[s].take().unwrap();
            let r = f.read_at(&mut [0; 4], 0).map_err(|e| e.code());
            assert_eq!(r, Err(super::EBADF), "{}: a handle of an ended transaction", self.ctx(""));
            drop(f);
            if committed {
                let _ = self.m.h_close(s);
            }
        }
        if committed {
            self.stats.commits += 1;
        } else {
            self.m = snapshot;
            for s in closed_outside {
                let _ = self.m.h_close(s);
            }
            self.stats.rollbacks += 1;
        }
        // Other threads' transactions stage too: then only the end of the run checks chunks.
        if let (Some(b), Some([chunks, ..]), false) = (big, before, self.shared) {
            let [c, t, u] = staging_keys(&*b);
            assert_eq!(
                (t.len(), u.len()),
                (0, 0),
                "{}: staging records left after the transaction ended",
                self.ctx("")
            );
            if !committed {
                // (A handle closed meanwhile may have freed an unlinked file's chunks.)
                assert!(
                    c.is_subset(&chunks),
                    "{}: a rolled-back transaction left chunks",
                    self.ctx("")
                );
            }
        }
        self.compare(" (after a transaction)");
    }

    /// Closes every handle (through the calls, compared) and compares the whole tree.
    pub fn finish(&mut self) {
        let store = self.store.clone();
        for s in 0..STORE_SLOTS {
            if self.m.handles[s].is_some() {
                self.step(&store, &Op::HClose(s));
            }
        }
        self.compare(" (end)");
    }

    pub fn check(&self) {
        assert!(
            self.mismatches.is_empty(),
            "seed {} (rerun with TXVFS_SEED={}): {} mismatches:\n{}",
            self.seed,
            self.rerun,
            self.mismatches.len(),
            self.mismatches.join("\n")
        );
    }
}
