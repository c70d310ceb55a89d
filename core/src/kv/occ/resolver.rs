//! The resolver: the conflict check and version assignment of every commit, in one short
//! critical section (the shape of FoundationDB's resolvers).

use super::ranges::{ranges_contain, ranges_overlap, ReadKeys};
use crate::error::{Error, ErrorKind, Result};
use std::collections::VecDeque;

/// Keys and ranges written by one committed transaction.
#[derive(Default)]
pub(super) struct WriteSet {
    pub(super) points: Vec<Vec<u8>>,
    pub(super) ranges: Vec<(Vec<u8>, Vec<u8>)>,
}

/// The resolver's state: the conflict check and version assignment happen under its lock.
pub(super) struct Resolver {
    /// The last version given to a commit (applied or not yet).
    pub(super) assigned: u64,
    /// Write sets of commits newer than the oldest live snapshot.
    pub(super) log: VecDeque<(u64, WriteSet)>,
}

impl Resolver {
    pub(super) fn new() -> Self {
        Resolver { assigned: 0, log: VecDeque::new() }
    }

    /// Fails with a conflict if a commit after `read_version` wrote anything a transaction
    /// read: its points, or its `read_ranges` (sorted and disjoint, see `coalesce`).
    pub(super) fn check(
        &self,
        read_version: u64,
        read_points: &ReadKeys,
        read_ranges: &[(Vec<u8>, Vec<u8>)],
    ) -> Result<()> {
        // The log is in version order; skip what the snapshot already saw without a scan
        // (a shared store's owner keeps hundreds of versions for its clients).
        let first = self.log.partition_point(|(v, _)| *v <= read_version);
        if first == self.log.len() || (read_points.is_empty() && read_ranges.is_empty()) {
            return Ok(());
        }
        let points = read_points.sorted();
        for (_, other) in self.log.range(first..) {
            let hit = other.points.iter().any(|k| {
                points.binary_search(&k.as_slice()).is_ok() || ranges_contain(read_ranges, k)
            }) || other.ranges.iter().any(|(s, e)| {
                let i = points.partition_point(|k| *k < s.as_slice());
                (i < points.len() && points[i] < e.as_slice()) || ranges_overlap(read_ranges, s, e)
            });
            if hit {
                return Err(Error::new(
                    ErrorKind::Conflict,
                    "transaction conflict: data it read was changed by a concurrent commit",
                ));
            }
        }
        Ok(())
    }

    /// Takes the next version for a commit that passed [`Resolver::check`] and logs its
    /// write set, dropping write sets no live snapshot can conflict with (`oldest` and older).
    /// The version must then reach the pipeline, or the pipeline waits for it forever.
    pub(super) fn assign(&mut self, ws: WriteSet, oldest: u64) -> u64 {
        self.assigned += 1;
        let version = self.assigned;
        self.log.push_back((version, ws));
        while self.log.front().is_some_and(|(v, _)| *v <= oldest) {
            self.log.pop_front();
        }
        version
    }
}
