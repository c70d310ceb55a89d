//! The change feed's records in a RocksDB column family of their own (`feed`), the rest of a
//! store in the default one.
//!
//! Every recording commit adds one key in the feed's scope (`W`), far from the commit's other
//! keys. In one memtable, that key threw RocksDB's sequential insertion hint away twice per
//! commit (inserting it, and the next commit's first key), and every read and scan of the
//! memtable met the records: about two thirds of the feed's cost. In a family of their own the
//! records only grow at the end, and the default family is as it is with the feed off. One
//! write batch spans both families and one WAL holds it, so a commit stays atomic and its
//! durability is unchanged.
//!
//! The split is by key, below the optimistic layer: the layers above see one ordered key
//! space. A store written before the family existed keeps its records in the default family;
//! opening it as its owner moves them over ([`move_records`]); its named snapshots (read-only)
//! are read where their records are.

use crate::schema::scope;
use rocksdb::{ColumnFamily, DBRawIteratorWithThreadMode, ReadOptions, WriteBatch, DB};

/// The column family of the change feed's records.
pub(crate) const FEED_CF: &str = "feed";

const LO: &[u8] = &[scope::FEED];
const HI: &[u8] = &[scope::FEED + 1];

/// True when `key` is a change feed record's (kept in the feed's column family).
#[inline]
pub(crate) fn in_feed(key: &[u8]) -> bool {
    key.first() == Some(&scope::FEED)
}

/// The parts of `[start, end)` in key order, each with whether it is in the feed's scope.
pub(crate) fn split<'a>(start: &'a [u8], end: &'a [u8]) -> Vec<(bool, &'a [u8], &'a [u8])> {
    let parts = [
        (false, start, end.min(LO)),
        (true, start.max(LO), end.min(HI)),
        (false, start.max(HI), end),
    ];
    parts.into_iter().filter(|(_, s, e)| s < e).collect()
}

/// Visits `[start, end)` in order (or in reverse) across the families: `part` visits one part
/// (in the feed's family or not) with the visitor, which stops the whole scan when it returns
/// false.
pub(crate) fn scan<E>(
    start: &[u8],
    end: &[u8],
    reverse: bool,
    visit: &mut dyn FnMut(&[u8], &[u8]) -> bool,
    mut part: impl FnMut(bool, &[u8], &[u8], &mut dyn FnMut(&[u8], &[u8]) -> bool) -> Result<(), E>,
) -> Result<(), E> {
    let mut parts = split(start, end);
    if reverse {
        parts.reverse();
    }
    let mut go = true;
    for (feed, s, e) in parts {
        part(feed, s, e, &mut |k, v| {
            go = visit(k, v);
            go
        })?;
        if !go {
            break;
        }
    }
    Ok(())
}

/// Visits `[start, end)` of one database or snapshot (see [`scan`]): `iter` opens a raw
/// iterator with the options given, in the feed's family (`Some`) or the default one.
pub(crate) fn scan_db<'a>(
    feed_cf: Option<&'a ColumnFamily>,
    start: &[u8],
    end: &[u8],
    reverse: bool,
    visit: &mut dyn FnMut(&[u8], &[u8]) -> bool,
    mut iter: impl FnMut(Option<&'a ColumnFamily>, ReadOptions) -> DBRawIteratorWithThreadMode<'a, DB>,
) -> Result<(), rocksdb::Error> {
    scan(start, end, reverse, visit, |feed, s, e, visit| {
        let mut ro = ReadOptions::default();
        ro.set_iterate_lower_bound(s);
        ro.set_iterate_upper_bound(e);
        super::rocks::visit_range(iter(feed_cf.filter(|_| feed), ro), reverse, visit)
    })
}

/// Clears `[start, end)` through `delete_range(family, start, end)`, each part in its family
/// (`feed_cf`, or the default one).
pub(crate) fn delete_range<'a>(
    feed_cf: Option<&'a ColumnFamily>,
    start: &[u8],
    end: &[u8],
    mut delete_range: impl FnMut(Option<&'a ColumnFamily>, &[u8], &[u8]),
) {
    match feed_cf {
        Some(cf) => {
            for (feed, s, e) in split(start, end) {
                delete_range(feed.then_some(cf), s, e);
            }
        }
        None => delete_range(None, start, end),
    }
}

/// Moves the records that a store written before the feed's family kept in the default family
/// into it, a few thousand per write batch (each batch moves its records atomically, so an
/// interruption leaves every record in one family or the other, and the next open goes on).
/// Returns how many it moved.
pub(crate) fn move_records(db: &DB) -> Result<u64, rocksdb::Error> {
    let Some(cf) = db.cf_handle(FEED_CF) else { return Ok(0) };
    let mut moved = 0;
    loop {
        let mut wb = WriteBatch::default();
        let mut n = 0;
        {
            let mut ro = ReadOptions::default();
            ro.set_iterate_lower_bound(LO);
            ro.set_iterate_upper_bound(HI);
            let mut it = db.raw_iterator_opt(ro);
            it.seek_to_first();
            while let Some((k, v)) = it.item() {
                wb.put_cf(cf, k, v);
                wb.delete(k);
                n += 1;
                if n == 4096 {
                    break;
                }
                it.next();
            }
            it.status()?;
        }
        if n == 0 {
            return Ok(moved);
        }
        db.write(wb)?;
        moved += n;
    }
}
