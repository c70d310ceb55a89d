//! The change feed: `txvfs_set_change_feed`, and watchers (`txvfs_watch_open`, `_poll`,
//! `_wait`, `_cursor`, `_free`) that hand out a store's committed changes one at a time, in
//! commit order, with a cursor string to resume from.

use crate::boundary::{boundary, boundary_or, cstr, fill, obj_mut, Fail, Out, R};
use crate::store::{store_ref, txvfs_store};
use crate::types::dt;
use std::collections::VecDeque;
use std::ffi::{c_char, c_int};
use std::time::Duration;
use txvfs::{Change, ChangeKind, Cursor, WatchOptions, Watcher};

/// Change kind (and `kinds` filter bit): a file, directory, symlink or special file was created.
pub const TXVFS_CHANGE_CREATED: u32 = 1;
/// Change kind: a file's data changed (written or truncated).
pub const TXVFS_CHANGE_WRITTEN: u32 = 2;
/// Change kind: a name was removed (a directory's whole subtree with it, for a tree removal).
pub const TXVFS_CHANGE_REMOVED: u32 = 4;
/// Change kind: a name was moved to `to` (replacing what was there).
pub const TXVFS_CHANGE_RENAMED: u32 = 8;
/// Change kind: attributes changed (mode, owner, times).
pub const TXVFS_CHANGE_ATTRS: u32 = 16;
/// Change kind: extended attributes changed.
pub const TXVFS_CHANGE_XATTRS: u32 = 32;
/// Change kind: a hard link was added at `path`.
pub const TXVFS_CHANGE_LINKED: u32 = 64;
/// Room for a cursor string with its NUL (`txvfs-c1-<32 hex>-<20 hex>`).
pub const TXVFS_CURSOR_MAX: usize = 63;

fn bit(k: ChangeKind) -> u32 {
    match k {
        ChangeKind::Created => TXVFS_CHANGE_CREATED,
        ChangeKind::Written => TXVFS_CHANGE_WRITTEN,
        ChangeKind::Removed => TXVFS_CHANGE_REMOVED,
        ChangeKind::Renamed => TXVFS_CHANGE_RENAMED,
        ChangeKind::Attrs => TXVFS_CHANGE_ATTRS,
        ChangeKind::Xattrs => TXVFS_CHANGE_XATTRS,
        ChangeKind::Linked => TXVFS_CHANGE_LINKED,
    }
}

/// One change, as `txvfs_watch_poll` and `txvfs_watch_wait` hand it out.
///
/// Ownership: `path` and `to` belong to the watcher and stay valid until its next
/// `txvfs_watch_poll`, `txvfs_watch_wait` or `txvfs_watch_free`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct txvfs_change {
    /// One `TXVFS_CHANGE_*` value.
    pub kind: u32,
    /// The file's type: `TXVFS_DT_REG`, `TXVFS_DT_DIR`, `TXVFS_DT_LNK`, ...
    pub r#type: u8,
    /// 1 when this is the last change of its transaction: the watcher's cursor now stands
    /// after that transaction. 0 otherwise.
    pub last_in_transaction: u8,
    /// The inode changed (for a removal, the inode the name referred to).
    pub ino: u64,
    /// When the transaction committed, in ms since the Unix epoch (the committer's clock).
    pub time_ms: u64,
    /// The path, NUL-terminated (for a rename, the old one). Empty for a file changed through
    /// its inode alone (the FUSE mount), whose path the store cannot know.
    pub path: *const c_char,
    /// Length of `path` in bytes (without the NUL).
    pub path_len: usize,
    /// A rename's new path, NUL-terminated; NULL for every other kind.
    pub to: *const c_char,
    /// Length of `to` in bytes (0 when NULL).
    pub to_len: usize,
}

/// A consumer of a store's change feed (`txvfs_watch_open`). Use it from one thread at a
/// time. It keeps the store open by itself: it may outlive `txvfs_store_free`.
pub struct txvfs_watcher {
    watcher: Watcher,
    /// Changes read but not handed out: (the transaction's cursor, its time, the change, last
    /// of its transaction).
    queue: VecDeque<(Cursor, u64, Change, bool)>,
    /// The change handed out last, with NULs after its paths (what `txvfs_change` points to).
    current: (Vec<u8>, Option<Vec<u8>>),
    /// After every transaction whose changes were all handed out.
    cursor: Cursor,
}

impl txvfs_watcher {
    fn refill(&mut self, batches: Vec<txvfs::Batch>) {
        for b in batches {
            let n = b.changes.len();
            for (i, c) in b.changes.into_iter().enumerate() {
                self.queue.push_back((b.cursor, b.time_ms, c, i + 1 == n));
            }
        }
    }

    /// Hands out the next queued change, if any.
    fn next(&mut self, out: Out<txvfs_change>, has: Out<c_int>) {
        let Some((cursor, time_ms, c, last)) = self.queue.pop_front() else {
            self.cursor = self.watcher.cursor();
            has.set(0);
            return;
        };
        if last {
            self.cursor = cursor;
        }
        let mut path = c.path;
        path.push(0);
        let to = c.to.map(|mut t| {
            t.push(0);
            t
        });
        self.current = (path, to);
        let (path, to) = &self.current;
        out.set(txvfs_change {
            kind: bit(c.kind),
            r#type: dt(c.file_type),
            last_in_transaction: last as u8,
            ino: c.ino,
            time_ms,
            path: path.as_ptr().cast(),
            path_len: path.len() - 1,
            to: to.as_ref().map_or(std::ptr::null(), |t| t.as_ptr().cast()),
            to_len: to.as_ref().map_or(0, |t| t.len() - 1),
        });
        has.set(1);
    }
}

/// Turns the change feed of `store` on (`on` non-zero) or off. Off by default: recording
/// costs each writing transaction one more key. The setting is kept in the store and read by
/// each process when it opens the store: turn it on before the writers open it.
/// Errors: -EINVAL (NULL `store`, a backend without versionstamped keys), -EROFS,
/// -TXVFS_ECONFLICT, -TXVFS_EBACKEND.
#[no_mangle]
pub unsafe extern "C" fn txvfs_set_change_feed(store: *mut txvfs_store, on: c_int) -> c_int {
    boundary("txvfs_set_change_feed", || {
        let s = store_ref(store)?;
        Ok(s.store.set_change_feed(on != 0)?)
    })
}

/// Opens a watcher of `store`'s change feed (turn it on first: `txvfs_set_change_feed`).
/// Every transaction committed after the start is handed out once, in commit order, one
/// change at a time. `prefix` (NULL or "" for everything) keeps only changes at or below a
/// path (`/a` matches `/a` and `/a/...`; a rename matches by either path); `kinds` (0 for
/// every kind) is an OR of `TXVFS_CHANGE_*` bits; `since_cursor` (NULL: start after the
/// newest commit) is a cursor string from `txvfs_watch_cursor`, to resume after it.
///
/// Ownership: the caller owns the watcher in `*out` and frees it with `txvfs_watch_free`.
/// Errors: -EINVAL (NULL `store` or `out`, the feed is off, unknown `kinds` bits, a cursor
/// that is garbage, of another store or from the future: the message says which), -ENODATA
/// (retention dropped changes after `since_cursor`: rescan, then watch from a fresh cursor),
/// -TXVFS_EBACKEND.
#[no_mangle]
pub unsafe extern "C" fn txvfs_watch_open(
    store: *mut txvfs_store,
    prefix: *const c_char,
    kinds: u32,
    since_cursor: *const c_char,
    out: *mut *mut txvfs_watcher,
) -> c_int {
    boundary("txvfs_watch_open", || {
        let s = store_ref(store)?;
        let out = Out::new(out, "out")?;
        let mut options = WatchOptions::default();
        if !prefix.is_null() {
            let p = cstr(prefix, "prefix")?;
            if !p.is_empty() {
                options.prefixes.push(p.to_vec());
            }
        }
        if kinds & !0x7f != 0 {
            return Err(Fail::invalid(format!("kinds {kinds:#x} has bits of no TXVFS_CHANGE_*")));
        }
        options.kinds = ChangeKind::ALL.into_iter().filter(|k| kinds & bit(*k) != 0).collect();
        if !since_cursor.is_null() {
            let c = std::str::from_utf8(cstr(since_cursor, "since_cursor")?)
                .map_err(|_| Fail::invalid("since_cursor is not a cursor (not UTF-8)"))?;
            options.since = Some(Cursor::parse(c)?);
        }
        let watcher = s.store.watch(options)?;
        let cursor = watcher.cursor();
        let w = Box::new(txvfs_watcher {
            watcher,
            queue: VecDeque::new(),
            current: (Vec::new(), None),
            cursor,
        });
        out.set(Box::into_raw(w));
        Ok(())
    })
}

/// Hands out the next change without blocking: `*has` is 1 and `*out` filled, or `*has` is
/// 0 when there is none yet. See `txvfs_change` for how long its paths stay valid.
/// Errors: -EINVAL (NULL argument), -ENODATA (retention dropped changes the watcher had not
/// read yet: rescan), -TXVFS_EBACKEND.
#[no_mangle]
pub unsafe extern "C" fn txvfs_watch_poll(
    watcher: *mut txvfs_watcher,
    out: *mut txvfs_change,
    has: *mut c_int,
) -> c_int {
    boundary("txvfs_watch_poll", || {
        let w = obj_mut(watcher, "watcher")?;
        let (out, has) = (Out::new(out, "out")?, Out::new(has, "has")?);
        if w.queue.is_empty() {
            let batches = w.watcher.poll()?;
            w.refill(batches);
        }
        w.next(out, has);
        Ok(())
    })
}

/// Like `txvfs_watch_poll`, but blocks up to `timeout_ms` milliseconds for a change
/// (committed by this or another process); `*has` is 0 if none came in time.
/// Errors: as `txvfs_watch_poll`.
#[no_mangle]
pub unsafe extern "C" fn txvfs_watch_wait(
    watcher: *mut txvfs_watcher,
    timeout_ms: u32,
    out: *mut txvfs_change,
    has: *mut c_int,
) -> c_int {
    boundary("txvfs_watch_wait", || {
        let w = obj_mut(watcher, "watcher")?;
        let (out, has) = (Out::new(out, "out")?, Out::new(has, "has")?);
        if w.queue.is_empty() {
            let batches = w.watcher.wait(Duration::from_millis(timeout_ms.into()))?;
            w.refill(batches);
        }
        w.next(out, has);
        Ok(())
    })
}

/// Copies the watcher's cursor into `buf` (`cap` bytes; `TXVFS_CURSOR_MAX` is enough), NUL
/// terminated, and its length into `*len`: the position after every transaction whose
/// changes were all handed out (and past those the filters dropped). Save it; pass it to
/// `txvfs_watch_open` to resume with no change lost and none repeated. `buf` NULL with `cap`
/// 0 asks for the length.
/// Errors: -EINVAL (NULL `watcher` or `len`), -ERANGE (`buf` too small).
#[no_mangle]
pub unsafe extern "C" fn txvfs_watch_cursor(
    watcher: *mut txvfs_watcher,
    buf: *mut c_char,
    cap: usize,
    len: *mut usize,
) -> c_int {
    boundary("txvfs_watch_cursor", || -> R {
        let w = obj_mut(watcher, "watcher")?;
        let len = Out::new(len, "len")?;
        fill(buf.cast(), cap, w.cursor.to_string().as_bytes(), true, len)
    })
}

/// Frees a watcher (NULL: nothing). The changes it handed out are invalid afterwards.
#[no_mangle]
pub unsafe extern "C" fn txvfs_watch_free(watcher: *mut txvfs_watcher) {
    boundary_or((), || {
        if !watcher.is_null() {
            drop(Box::from_raw(watcher));
        }
    })
}
