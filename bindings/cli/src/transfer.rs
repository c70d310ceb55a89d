//! Moving files between the host and the store: `put`, `get`, `import`, `export`.

use crate::copy::{copy_out, pump};
use crate::dirs::{join, list};
use crate::error::{CliError, CliResult};
use crate::progress::Progress;
use std::collections::HashMap;
use std::ffi::{CString, OsStr};
use std::fs::Metadata;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use txvfs::{
    ErrorKind, FileSystem, FileType, OpenOptions, SetTime, Stat, Store, Transaction, XattrFlags,
};

fn is_dash(p: &Path) -> bool {
    p.as_os_str() == "-"
}

/// `put`: one host file (or standard input) into the store, in one transaction.
pub fn put(store: &Store, host: &Path, path: &[u8]) -> CliResult {
    let tx = store.begin()?;
    let (reader, mode): (Box<dyn std::io::Read>, u32) = if is_dash(host) {
        (Box::new(std::io::stdin().lock()), 0o644)
    } else {
        let f = std::fs::File::open(host).map_err(|e| CliError::io(host, e))?;
        let mode = f.metadata().map_err(|e| CliError::io(host, e))?.permissions().mode() & 0o7777;
        (Box::new(f), mode)
    };
    let f =
        tx.open(path, &OpenOptions::new().write(true).create(true).truncate(true).mode(mode))?;
    pump(reader, host, |b| {
        f.write(b)?;
        Ok(())
    })?;
    f.close()?;
    Ok(tx.commit()?)
}

/// `get`: one store file to a host file (or standard output).
pub fn get(store: &Store, path: &[u8], host: &Path) -> CliResult {
    let f = store.open(path, &OpenOptions::new().read(true))?;
    let read = |b: &mut [u8]| Ok(f.read(b)?);
    if is_dash(host) {
        let out = &mut std::io::stdout().lock();
        copy_out(read, out, host)?;
        std::io::Write::flush(out).map_err(|e| CliError::io(host, e))
    } else {
        let mut out = std::fs::File::create(host).map_err(|e| CliError::io(host, e))?;
        copy_out(read, &mut out, host)
    }
}

/// One host entry to import: its host path, store path and attributes.
struct Entry {
    host: PathBuf,
    path: Vec<u8>,
    meta: Metadata,
}

fn mtime_ns(m: &Metadata) -> i64 {
    m.mtime() * 1_000_000_000 + m.mtime_nsec()
}

fn atime_ns(m: &Metadata) -> i64 {
    m.atime() * 1_000_000_000 + m.atime_nsec()
}

/// Lists the host tree in a stable pre-order (names sorted), so that reruns see it alike.
fn scan(host: &Path, path: &[u8]) -> CliResult<Vec<Entry>> {
    let meta = std::fs::symlink_metadata(host).map_err(|e| CliError::io(host, e))?;
    if !meta.is_dir() {
        return Err(CliError {
            msg: format!("{}: not a directory", host.display()),
            code: libc::ENOTDIR,
        });
    }
    let mut out = vec![Entry { host: host.to_path_buf(), path: path.to_vec(), meta }];
    let mut i = 0;
    while i < out.len() {
        if out[i].meta.is_dir() {
            let dir = out[i].host.clone();
            let mut names: Vec<_> = std::fs::read_dir(&dir)
                .map_err(|e| CliError::io(&dir, e))?
                .map(|d| d.map(|d| d.file_name()))
                .collect::<Result<_, _>>()
                .map_err(|e| CliError::io(&dir, e))?;
            names.sort();
            let mut children = Vec::with_capacity(names.len());
            for n in names {
                let h = dir.join(&n);
                let meta = std::fs::symlink_metadata(&h).map_err(|e| CliError::io(&h, e))?;
                children.push(Entry { path: join(&out[i].path, n.as_bytes()), host: h, meta });
            }
            out.splice(i + 1..i + 1, children);
        }
        i += 1;
    }
    Ok(out)
}

fn cstr(p: &Path) -> CliResult<CString> {
    CString::new(p.as_os_str().as_bytes())
        .map_err(|_| CliError::msg(format!("{}: path holds a NUL byte", p.display())))
}

/// The host file's extended attributes (not following symlinks).
fn host_xattrs(p: &Path) -> CliResult<Vec<(Vec<u8>, Vec<u8>)>> {
    let c = cstr(p)?;
    let err = || CliError::io(p, std::io::Error::last_os_error());
    // SAFETY: c is a valid C string; a null buffer of size 0 asks for the needed size.
    let n = unsafe { libc::llistxattr(c.as_ptr(), std::ptr::null_mut(), 0) };
    if n < 0 {
        let e = std::io::Error::last_os_error();
        return if e.raw_os_error() == Some(libc::ENOTSUP) {
            Ok(Vec::new())
        } else {
            Err(CliError::io(p, e))
        };
    }
    let mut names = vec![0u8; n as usize];
    // SAFETY: the buffer holds names.len() bytes.
    let n = unsafe { libc::llistxattr(c.as_ptr(), names.as_mut_ptr().cast(), names.len()) };
    if n < 0 {
        return Err(err());
    }
    names.truncate(n as usize);
    let mut out = Vec::new();
    for name in names.split(|&b| b == 0).filter(|n| !n.is_empty()) {
        let cn = CString::new(name).unwrap();
        // SAFETY: valid C strings; size query with a null buffer.
        let len = unsafe { libc::lgetxattr(c.as_ptr(), cn.as_ptr(), std::ptr::null_mut(), 0) };
        if len < 0 {
            return Err(err());
        }
        let mut v = vec![0u8; len as usize];
        // SAFETY: the buffer holds v.len() bytes.
        let len =
            unsafe { libc::lgetxattr(c.as_ptr(), cn.as_ptr(), v.as_mut_ptr().cast(), v.len()) };
        if len < 0 {
            return Err(err());
        }
        v.truncate(len as usize);
        out.push((name.to_vec(), v));
    }
    Ok(out)
}

fn set_host_xattr(p: &Path, name: &[u8], value: &[u8]) -> CliResult {
    let (c, cn) =
        (cstr(p)?, CString::new(name).map_err(|_| CliError::msg("xattr name holds a NUL byte"))?);
    // SAFETY: valid C strings and a buffer of value.len() bytes.
    let r =
        unsafe { libc::lsetxattr(c.as_ptr(), cn.as_ptr(), value.as_ptr().cast(), value.len(), 0) };
    if r < 0 && name.starts_with(b"user.") {
        return Err(CliError::io(p, std::io::Error::last_os_error()));
    }
    Ok(())
}

fn set_host_times(p: &Path, atime: i64, mtime: i64) -> CliResult {
    let c = cstr(p)?;
    let ts = |ns: i64| libc::timespec {
        tv_sec: ns.div_euclid(1_000_000_000),
        tv_nsec: ns.rem_euclid(1_000_000_000),
    };
    let times = [ts(atime), ts(mtime)];
    // SAFETY: valid C string and a two-element array.
    let r = unsafe {
        libc::utimensat(libc::AT_FDCWD, c.as_ptr(), times.as_ptr(), libc::AT_SYMLINK_NOFOLLOW)
    };
    if r < 0 {
        return Err(CliError::io(p, std::io::Error::last_os_error()));
    }
    Ok(())
}

/// Maps an I/O error on host path `h`.
fn io(h: &Path) -> impl Fn(std::io::Error) -> CliError + '_ {
    move |e| CliError::io(h, e)
}

fn is_root() -> bool {
    // SAFETY: geteuid cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// Removes whatever is at `p` in the transaction, if anything.
fn remove_existing(tx: &Transaction, p: &[u8], st: &Stat) -> CliResult {
    if st.is_dir() {
        return Err(CliError {
            msg: format!("{}: is a directory", String::from_utf8_lossy(p)),
            code: libc::EISDIR,
        });
    }
    Ok(tx.unlink(p)?)
}

/// Imports one entry in `tx`; returns false when it was already there (a resumed import).
fn import_entry(
    tx: &Transaction,
    e: &Entry,
    links: &mut HashMap<(u64, u64), Vec<u8>>,
) -> CliResult<bool> {
    let p = e.path.as_slice();
    let m = &e.meta;
    let existing = match tx.lstat(p) {
        Ok(st) => Some(st),
        Err(err) if err.kind() == ErrorKind::NotFound => None,
        Err(err) => return Err(err.into()),
    };
    let perm = m.permissions().mode() & 0o7777;
    if m.is_dir() {
        match &existing {
            Some(st) if st.is_dir() => tx.chmod(p, perm)?,
            Some(st) => {
                remove_existing(tx, p, st)?;
                tx.mkdir(p, perm)?;
            }
            None => tx.mkdir(p, perm)?,
        }
    } else if !m.file_type().is_symlink() && !m.is_file() {
        eprintln!("txvfs: {}: skipped (not a file, directory or symlink)", e.host.display());
        return Ok(false);
    } else {
        if m.nlink() > 1 && !m.is_dir() {
            let key = (m.dev(), m.ino());
            if let Some(first) = links.get(&key) {
                let first_ino = tx.lstat(first)?.ino;
                if let Some(st) = &existing {
                    if st.ino == first_ino {
                        return Ok(false);
                    }
                    remove_existing(tx, p, st)?;
                }
                tx.link(first.as_slice(), p)?;
                return Ok(true);
            }
            links.insert(key, p.to_vec());
        }
        if m.file_type().is_symlink() {
            let target = std::fs::read_link(&e.host).map_err(|err| CliError::io(&e.host, err))?;
            if let Some(st) = &existing {
                if st.is_symlink() && tx.readlink(p)? == target.as_os_str().as_bytes() {
                    return Ok(false);
                }
                remove_existing(tx, p, st)?;
            }
            tx.symlink(target.as_os_str().as_bytes(), p)?;
            return Ok(true);
        }
        if let Some(st) = &existing {
            if st.is_file() && st.size == m.len() && st.mtime_ns == mtime_ns(m) {
                return Ok(false);
            }
            if !st.is_file() {
                remove_existing(tx, p, st)?;
            }
        }
        let f =
            tx.open(p, &OpenOptions::new().write(true).create(true).truncate(true).mode(perm))?;
        let hf = std::fs::File::open(&e.host).map_err(|err| CliError::io(&e.host, err))?;
        pump(hf, &e.host, |b| {
            f.write(b)?;
            Ok(())
        })?;
        f.close()?;
        tx.chmod(p, perm)?;
    }
    for (name, value) in host_xattrs(&e.host)? {
        tx.setxattr(p, &name, &value, XattrFlags::Any)?;
    }
    if is_root() {
        tx.chown(p, Some(m.uid()), Some(m.gid()))?;
    }
    if !m.is_dir() {
        tx.utimens(p, SetTime::At(atime_ns(m)), SetTime::At(mtime_ns(m)))?;
    }
    Ok(true)
}

/// Sets directory times last, deepest first (creating children changes a directory's mtime).
fn set_dir_times(tx: &Transaction, dirs: &[&Entry]) -> CliResult {
    for e in dirs {
        tx.utimens(&e.path, SetTime::At(atime_ns(&e.meta)), SetTime::At(mtime_ns(&e.meta)))?;
    }
    Ok(())
}

/// Runs `f` in a transaction and commits it through `Store::transact` (its retries and
/// backoff), for the CLI's error type: a host error from `f` ends the retries and is
/// returned as it was.
fn in_tx<R>(store: &Store, mut f: impl FnMut(&Transaction) -> CliResult<R>) -> CliResult<R> {
    let mut failed: Option<CliError> = None;
    let r = store.transact(|tx| {
        failed = None;
        f(tx).map_err(|e| {
            // Keep a retryable core error retryable; anything else stops transact at once.
            let kind = ErrorKind::from_code(e.code)
                .filter(|k| matches!(k, ErrorKind::Conflict | ErrorKind::TooOld));
            let stop = txvfs::Error::new(kind.unwrap_or(ErrorKind::Invalid), e.msg.clone());
            failed = Some(e);
            stop
        })
    });
    r.map_err(|e| failed.take().unwrap_or_else(|| e.into()))
}

/// `import`: the host tree at `host` becomes the store tree at `path`.
pub fn import(store: &Store, host: &Path, path: &[u8], atomic: bool, batch: u64) -> CliResult {
    if let Some(parent) = Path::new(OsStr::from_bytes(path)).parent() {
        store.mkdir_all(parent.as_os_str().as_bytes(), 0o755)?;
    }
    let entries = scan(host, path)?;
    let mut dirs: Vec<&Entry> = entries.iter().filter(|e| e.meta.is_dir()).collect();
    dirs.reverse();
    let mut progress = Progress::new("import", entries.len() as u64);
    let mut links = HashMap::new();
    if atomic {
        let tx = store.begin()?;
        for e in &entries {
            import_entry(&tx, e, &mut links)?;
            progress.add(1);
        }
        set_dir_times(&tx, &dirs)?;
        tx.commit()?;
    } else {
        for chunk in entries.chunks(batch as usize) {
            links = in_tx(store, |tx| {
                let mut l = links.clone();
                chunk.iter().try_for_each(|e| import_entry(tx, e, &mut l).map(drop))?;
                Ok(l)
            })?;
            progress.add(chunk.len() as u64);
        }
        for chunk in dirs.chunks(batch as usize) {
            in_tx(store, |tx| set_dir_times(tx, chunk))?;
        }
    }
    progress.finish();
    Ok(())
}

/// `export`: the store tree at `path` becomes the host tree at `host`.
pub fn export(store: &Store, path: &[u8], host: &Path) -> CliResult {
    let root = store.lstat(path)?;
    if !root.is_dir() {
        return Err(CliError {
            msg: format!("{}: not a directory", String::from_utf8_lossy(path)),
            code: libc::ENOTDIR,
        });
    }
    // Pre-order list of (store path, host path, attributes).
    let mut entries = vec![(path.to_vec(), host.to_path_buf(), root)];
    let mut i = 0;
    while i < entries.len() {
        if entries[i].2.is_dir() {
            let (p, h) = (entries[i].0.clone(), entries[i].1.clone());
            let mut children = Vec::new();
            for e in list(store, &p)? {
                let cp = join(&p, &e.name);
                let st = store.lstat(&cp)?;
                children.push((cp, h.join(OsStr::from_bytes(&e.name)), st));
            }
            entries.splice(i + 1..i + 1, children);
        }
        i += 1;
    }
    let mut progress = Progress::new("export", entries.len() as u64);
    let mut links: HashMap<u64, PathBuf> = HashMap::new();
    for (p, h, st) in &entries {
        let h = h.as_path();
        let existing = std::fs::symlink_metadata(h).ok();
        if existing.as_ref().is_some_and(|m| !m.is_dir() || !st.is_dir()) {
            if existing.as_ref().is_some_and(|m| m.is_dir()) {
                std::fs::remove_dir_all(h).map_err(io(h))?;
            } else {
                std::fs::remove_file(h).map_err(io(h))?;
            }
        }
        match st.kind {
            FileType::Dir => {
                std::fs::create_dir_all(h).map_err(io(h))?;
                // Writable until the final pass sets the real mode.
                std::fs::set_permissions(h, std::fs::Permissions::from_mode(0o700))
                    .map_err(io(h))?;
            }
            FileType::Symlink => {
                std::os::unix::fs::symlink(OsStr::from_bytes(&store.readlink(p)?), h)
                    .map_err(io(h))?;
            }
            kind if kind.is_special() => {
                let c = cstr(h)?;
                // SAFETY: valid C string; mknod copies nothing from us but the arguments.
                if unsafe {
                    libc::mknod(
                        c.as_ptr(),
                        kind.mode_bits() | (st.mode & 0o7777),
                        st.rdev as libc::dev_t,
                    )
                } < 0
                {
                    return Err(CliError::io(h, std::io::Error::last_os_error()));
                }
            }
            _ => {
                if st.nlink > 1 {
                    if let Some(first) = links.get(&st.ino) {
                        std::fs::hard_link(first, h).map_err(io(h))?;
                        progress.add(1);
                        continue;
                    }
                    links.insert(st.ino, h.to_path_buf());
                }
                let f = store.open(p, &OpenOptions::new().read(true))?;
                let mut out = std::fs::File::create(h).map_err(io(h))?;
                copy_out(|b| Ok(f.read(b)?), &mut out, h)?;
                std::fs::set_permissions(h, std::fs::Permissions::from_mode(st.mode & 0o7777))
                    .map_err(io(h))?;
            }
        }
        if !st.is_symlink() {
            for name in store.listxattr(p)? {
                set_host_xattr(h, &name, &store.getxattr(p, &name)?)?;
            }
        }
        if is_root() {
            let c = cstr(h)?;
            // SAFETY: valid C string.
            if unsafe { libc::lchown(c.as_ptr(), st.uid, st.gid) } < 0 {
                return Err(CliError::io(h, std::io::Error::last_os_error()));
            }
        }
        if !st.is_dir() {
            set_host_times(h, st.atime_ns, st.mtime_ns)?;
        }
        progress.add(1);
    }
    for (_, h, st) in entries.iter().rev().filter(|e| e.2.is_dir()) {
        std::fs::set_permissions(h, std::fs::Permissions::from_mode(st.mode & 0o7777))
            .map_err(io(h))?;
        set_host_times(h, st.atime_ns, st.mtime_ns)?;
    }
    progress.finish();
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn in_tx_retries_conflicts_and_returns_host_errors_as_they_are() {
        let store = Store::open("memory:").unwrap();
        // A conflict is retried (through Store::transact); the retry commits.
        let mut runs = 0;
        let r = in_tx(&store, |tx| {
            runs += 1;
            tx.write_file("/f", b"x")?;
            if runs == 1 {
                return Err(txvfs::Error::new(ErrorKind::Conflict, "conflict").into());
            }
            Ok(runs)
        });
        assert_eq!(r.unwrap(), 2);
        assert_eq!(store.read_file("/f").unwrap(), b"x");
        // A host error stops at once, keeps its message and errno, and commits nothing.
        let mut runs = 0;
        let e = in_tx(&store, |tx| -> CliResult {
            runs += 1;
            tx.write_file("/g", b"y")?;
            Err(CliError::io(
                Path::new("/host/file"),
                std::io::Error::from_raw_os_error(libc::EACCES),
            ))
        })
        .unwrap_err();
        assert_eq!((runs, e.code), (1, libc::EACCES));
        assert!(e.msg.starts_with("/host/file: "), "{}", e.msg);
        assert!(!store.exists("/g").unwrap());
        // A core error from the closure keeps its code; a plain message its code 0.
        let e = in_tx(&store, |tx| -> CliResult { Ok(tx.unlink("/missing")?) }).unwrap_err();
        assert_eq!(e.code, libc::ENOENT);
        let e = in_tx(&store, |_| -> CliResult { Err(CliError::msg("plain")) }).unwrap_err();
        assert_eq!((e.code, e.msg.as_str()), (0, "plain"));
    }
}
