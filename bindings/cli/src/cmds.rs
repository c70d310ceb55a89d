//! The commands that work on single files and small trees, and the store-opening rules.

use crate::args::{Command, SnapshotAction};
use crate::copy::{copy_out, stdout_err, with_buffer, write_out};
use crate::dirs::{join, list};
use crate::error::{CliError, CliResult};
use crate::progress::Progress;
use crate::{fsck, transfer};
use std::collections::HashSet;
use std::ffi::OsString;
use std::io::Write;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::time::Duration;
use txvfs::{ErrorKind, FileSystem, FileType, OpenOptions, Options, Stat, Store};

/// Opens the store at `uri`, which must exist: only `init` creates stores (a `memory:` store
/// is new and empty at every open, so it is made here).
fn open_store(uri: &str, options: Options) -> CliResult<Store> {
    let opened = if uri.starts_with("memory:") {
        Store::open_with(uri, options)
    } else {
        Store::open_existing(uri, options)
    };
    opened.map_err(no_store_hint)
}

/// A core error, with the way out when it says there is no store.
pub fn no_store_hint(e: txvfs::Error) -> CliError {
    if e.kind() == ErrorKind::NotFound {
        return CliError { msg: format!("{e} (create one with `txvfs init`)"), code: e.code() };
    }
    e.into()
}

/// Runs one command on the store at `uri`.
pub fn dispatch(uri: &str, cmd: Command) -> CliResult {
    if let Command::Init { block_size, inline_limit } = cmd {
        match Store::open_existing(uri, Options::default()) {
            Ok(_) => {
                return Err(CliError {
                    msg: format!("{uri}: a store exists there already"),
                    code: libc::EEXIST,
                })
            }
            Err(e) if e.kind() == ErrorKind::NotFound => {}
            Err(e) => return Err(e.into()),
        }
        let opts = Options { block_size, inline_limit, ..Options::default() };
        Store::open_with(uri, opts)?;
        return Ok(());
    }
    if let Command::Fsck { repair } = cmd {
        return fsck::run(uri, repair);
    }
    if let Command::Mount { mountpoint, read_only, allow_other, cache_ttl } = cmd {
        let store = open_store(uri, Options { read_only, ..Options::default() })?;
        // Checked here so that a bad mountpoint gives one line, not libfuse's messages too.
        let on = |msg: String, code| CliError {
            msg: format!("mount on {}: {msg}", mountpoint.display()),
            code,
        };
        match std::fs::metadata(&mountpoint) {
            Ok(m) if m.is_dir() => {}
            Ok(_) => return Err(on("not a directory".into(), libc::ENOTDIR)),
            Err(e) => return Err(on(e.to_string(), e.raw_os_error().unwrap_or(libc::EIO))),
        }
        let ttl = Duration::try_from_secs_f64(cache_ttl).map_err(|_| CliError {
            msg: format!("--cache-ttl {cache_ttl}: not a duration"),
            code: libc::EINVAL,
        })?;
        let options =
            txvfs_fuse::MountOptions { read_only, allow_other, ttl, ..Default::default() };
        return txvfs_fuse::mount(store, &mountpoint, &options).map_err(|e| CliError {
            msg: format!("mount on {}: {e}", mountpoint.display()),
            code: e.raw_os_error().unwrap_or(libc::EIO),
        });
    }
    let store = open_store(uri, Options::default())?;
    let out = &mut std::io::stdout().lock();
    match cmd {
        Command::Ls { long, recursive, paths } => {
            let paths = default_root(paths);
            for (i, p) in paths.iter().enumerate() {
                if i > 0 {
                    write_out(out, b"\n")?;
                }
                ls(&store, out, p.as_bytes(), long, recursive, paths.len() > 1)?;
            }
        }
        Command::Cat { paths } => {
            for p in paths {
                let f = store.open(p.as_bytes(), &OpenOptions::new().read(true))?;
                copy_out(|b| Ok(f.read(b)?), out, Path::new("-"))?;
            }
        }
        Command::Put { host, path } => transfer::put(&store, &host, path.as_bytes())?,
        Command::Get { path, host } => transfer::get(&store, path.as_bytes(), &host)?,
        Command::Import { host, path, atomic, batch } => {
            transfer::import(&store, &host, path.as_bytes(), atomic, batch)?
        }
        Command::Export { path, host } => transfer::export(&store, path.as_bytes(), &host)?,
        Command::Mkdir { parents, mode, paths } => {
            for p in paths {
                if parents {
                    store.mkdir_all(p.as_bytes(), mode)?;
                } else {
                    store.mkdir(p.as_bytes(), mode)?;
                }
            }
        }
        Command::Rm { recursive, paths } => {
            for p in paths {
                let st = store.lstat(p.as_bytes())?;
                match (st.is_dir(), recursive) {
                    (true, true) => remove_tree(&store, p.as_bytes())?,
                    (true, false) => {
                        return Err(CliError {
                            msg: format!("{}: is a directory (use rm -r)", p.to_string_lossy()),
                            code: libc::EISDIR,
                        })
                    }
                    _ => store.unlink(p.as_bytes())?,
                }
            }
        }
        Command::Mv { src, dst } => {
            let dst = into_dir(&store, src.as_bytes(), dst.as_bytes())?;
            store.rename(src.as_bytes(), dst)?;
        }
        Command::Cp { recursive, src, dst } => {
            let dst = into_dir(&store, src.as_bytes(), dst.as_bytes())?;
            let st = store.lstat(src.as_bytes())?;
            if st.is_dir() && !recursive {
                return Err(CliError {
                    msg: format!("{}: is a directory (use cp -r)", src.to_string_lossy()),
                    code: libc::EISDIR,
                });
            }
            copy_tree(&store, src.as_bytes(), &dst, &st)?;
        }
        Command::Ln { symbolic, target, link } => {
            if symbolic {
                store.symlink(target.as_bytes(), link.as_bytes())?;
            } else {
                store.link(target.as_bytes(), link.as_bytes())?;
            }
        }
        Command::Stat { paths } => {
            for p in paths {
                let st = store.lstat(p.as_bytes())?;
                print_stat(out, p.as_bytes(), &st)?;
            }
        }
        Command::Tree { path } => {
            let root = path.map(|p| p.as_bytes().to_vec()).unwrap_or_else(|| b"/".to_vec());
            store.lstat(&root)?;
            write_out(out, &root)?;
            write_out(out, b"\n")?;
            let (mut dirs, mut files) = (0, 0);
            tree(&store, out, &root, "", &mut dirs, &mut files)?;
            writeln!(out, "\n{dirs} directories, {files} files").map_err(stdout_err)?;
        }
        Command::Du { summary, paths } => {
            for p in default_root(paths) {
                let mut seen = HashSet::new();
                du(&store, out, p.as_bytes(), summary, true, &mut seen)?;
            }
        }
        Command::Df => {
            let s = store.statfs()?;
            writeln!(
                out,
                "{:<24} {:>10} {:>14} {:>14} {:>14} {:>12} {:>12}",
                "Store", "Block", "Blocks", "Used", "Free", "Inodes", "IFree"
            )
            .map_err(stdout_err)?;
            writeln!(
                out,
                "{:<24} {:>10} {:>14} {:>14} {:>14} {:>12} {:>12}",
                store.describe(),
                s.block_size,
                s.blocks,
                s.blocks - s.blocks_free,
                s.blocks_free,
                s.files,
                s.files_free
            )
            .map_err(stdout_err)?;
        }
        Command::Quota { action } => crate::quota::run(&store, out, action)?,
        Command::Watch { path, since, json, count, idle } => crate::watch::watch(
            &store,
            path.as_ref().map(|p| p.as_bytes()),
            since.as_deref(),
            json,
            count,
            idle,
        )?,
        Command::Feed { state } => {
            store.set_change_feed(state == "on")?;
            if state == "on" {
                // Where the feed stands: `watch --since` it to miss nothing from here.
                let now = store.watch(txvfs::WatchOptions::default())?.cursor();
                writeln!(out, "{now}").map_err(stdout_err)?;
            }
        }
        Command::Snapshot { action } => match action {
            SnapshotAction::Create { name } => {
                store.create_named_snapshot(&name)?;
                writeln!(out, "{}", store.named_snapshot_uri(&name)?).map_err(stdout_err)?;
            }
            SnapshotAction::List => {
                for name in store.named_snapshots()? {
                    writeln!(out, "{name}\t{}", store.named_snapshot_uri(&name)?)
                        .map_err(stdout_err)?;
                }
            }
            SnapshotAction::Delete { name } => store.delete_named_snapshot(&name)?,
        },
        Command::Init { .. }
        | Command::Fsck { .. }
        | Command::Mount { .. }
        | Command::Clone { .. }
        | Command::Pack { .. } => {
            unreachable!("handled above (Clone and Pack in main)")
        }
    }
    out.flush().map_err(stdout_err)
}

/// `txvfs clone LOWER UPPER`.
pub fn clone(lower: &str, upper: &str) -> CliResult {
    Store::create_clone(lower, upper, Options::default())?;
    Ok(())
}

fn default_root(paths: Vec<OsString>) -> Vec<OsString> {
    if paths.is_empty() {
        vec![OsString::from("/")]
    } else {
        paths
    }
}

/// `dst`, or `dst/<last name of src>` when `dst` is an existing directory.
fn into_dir(store: &Store, src: &[u8], dst: &[u8]) -> CliResult<Vec<u8>> {
    match store.stat(dst) {
        Ok(st) if st.is_dir() => {
            let name = src.rsplit(|&b| b == b'/').find(|n| !n.is_empty()).unwrap_or(src);
            Ok(join(dst, name))
        }
        _ => Ok(dst.to_vec()),
    }
}

fn ls(
    store: &Store,
    out: &mut impl Write,
    path: &[u8],
    long: bool,
    recursive: bool,
    header: bool,
) -> CliResult {
    let st = store.lstat(path)?;
    if !st.is_dir() {
        return ls_line(store, out, path, path, &st, long);
    }
    if header || recursive {
        write_out(out, path)?;
        write_out(out, b":\n")?;
    }
    let entries = list(store, path)?;
    let mut subdirs = Vec::new();
    for e in &entries {
        let p = join(path, &e.name);
        let st = if long { store.lstat(&p)? } else { Stat { kind: e.kind, ..st.clone() } };
        ls_line(store, out, &p, &e.name, &st, long)?;
        if e.kind == FileType::Dir {
            subdirs.push(p);
        }
    }
    if recursive {
        for d in subdirs {
            write_out(out, b"\n")?;
            ls(store, out, &d, long, true, true)?;
        }
    }
    Ok(())
}

fn ls_line(
    store: &Store,
    out: &mut impl Write,
    path: &[u8],
    name: &[u8],
    st: &Stat,
    long: bool,
) -> CliResult {
    if long {
        let line = format!(
            "{} {:>3} {:>5} {:>5} {:>10} {} ",
            mode_string(st.mode),
            st.nlink,
            st.uid,
            st.gid,
            st.size,
            time_string(st.mtime_ns)
        );
        write_out(out, line.as_bytes())?;
    }
    write_out(out, name)?;
    if long && st.is_symlink() {
        write_out(out, b" -> ")?;
        write_out(out, &store.readlink(path)?)?;
    }
    write_out(out, b"\n")
}

/// `drwxr-xr-x` for a mode.
pub fn mode_string(mode: u32) -> String {
    let mut s = String::with_capacity(10);
    s.push(match mode & libc::S_IFMT {
        libc::S_IFDIR => 'd',
        libc::S_IFLNK => 'l',
        _ => '-',
    });
    for (i, c) in "rwxrwxrwx".chars().enumerate() {
        s.push(if mode & (0o400 >> i) != 0 { c } else { '-' });
    }
    let mut b: Vec<char> = s.chars().collect();
    for (bit, pos, lower) in [(0o4000, 3, 's'), (0o2000, 6, 's'), (0o1000, 9, 't')] {
        if mode & bit != 0 {
            b[pos] = if b[pos] == 'x' { lower } else { lower.to_ascii_uppercase() };
        }
    }
    b.into_iter().collect()
}

/// `YYYY-MM-DD HH:MM:SS.nnnnnnnnn` in UTC for ns since the epoch.
pub fn time_string(ns: i64) -> String {
    let secs = ns.div_euclid(1_000_000_000);
    let nanos = ns.rem_euclid(1_000_000_000);
    let (days, rem) = (secs.div_euclid(86400), secs.rem_euclid(86400));
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02}.{nanos:09}",
        rem / 3600,
        rem / 60 % 60,
        rem % 60
    )
}

fn print_stat(out: &mut impl Write, path: &[u8], st: &Stat) -> CliResult {
    let kind = match st.kind {
        FileType::File => "regular file",
        FileType::Dir => "directory",
        FileType::Symlink => "symbolic link",
        FileType::Fifo => "fifo",
        FileType::CharDevice => "character special file",
        FileType::BlockDevice => "block special file",
        FileType::Socket => "socket",
    };
    write_out(out, b"  File: ")?;
    write_out(out, path)?;
    let text = format!(
        "\n  Size: {}\tBlocks: {}\tIO Block: {}\t{kind}\n Inode: {}\tLinks: {}\n  Mode: ({:04o}/{})\tUid: {}\tGid: {}\nAccess: {}\nModify: {}\nChange: {}\n",
        st.size, st.blocks, st.blksize, st.ino, st.nlink, st.mode & 0o7777, mode_string(st.mode), st.uid, st.gid,
        time_string(st.atime_ns), time_string(st.mtime_ns), time_string(st.ctime_ns)
    );
    write_out(out, text.as_bytes())
}

fn tree(
    store: &Store,
    out: &mut impl Write,
    dir: &[u8],
    prefix: &str,
    dirs: &mut u64,
    files: &mut u64,
) -> CliResult {
    let entries = list(store, dir)?;
    for (i, e) in entries.iter().enumerate() {
        let last = i + 1 == entries.len();
        write_out(out, format!("{prefix}{}", if last { "└── " } else { "├── " }).as_bytes())?;
        write_out(out, &e.name)?;
        let p = join(dir, &e.name);
        if e.kind == FileType::Symlink {
            write_out(out, b" -> ")?;
            write_out(out, &store.readlink(&p)?)?;
        }
        write_out(out, b"\n")?;
        if e.kind == FileType::Dir {
            *dirs += 1;
            let sub = format!("{prefix}{}", if last { "    " } else { "│   " });
            tree(store, out, &p, &sub, dirs, files)?;
        } else {
            *files += 1;
        }
    }
    Ok(())
}

/// Prints and returns the bytes of files under `path`, counting hard links once.
fn du(
    store: &Store,
    out: &mut impl Write,
    path: &[u8],
    summary: bool,
    top: bool,
    seen: &mut HashSet<u64>,
) -> CliResult<u64> {
    let st = store.lstat(path)?;
    let mut total = if seen.insert(st.ino) && !st.is_dir() { st.size } else { 0 };
    if st.is_dir() {
        for e in list(store, path)? {
            total += du(store, out, &join(path, &e.name), summary, false, seen)?;
        }
    }
    if top || (!summary && st.is_dir()) {
        write_out(out, format!("{total}\t").as_bytes())?;
        write_out(out, path)?;
        write_out(out, b"\n")?;
    }
    Ok(total)
}

/// `rm -r` of one tree, with the progress display (entries removed; the total is not known).
fn remove_tree(store: &Store, path: &[u8]) -> CliResult {
    let mut progress = Progress::new("rm: removed", 0);
    let mut shown = 0;
    let r = store.remove_all_with(path, &mut |n| {
        progress.add(n - shown);
        shown = n;
    });
    progress.finish();
    Ok(r?)
}

/// Copies one file's data inside the store, as one transaction.
fn copy_file(store: &Store, src: &[u8], dst: &[u8], mode: u32) -> CliResult {
    let tx = store.begin()?;
    let from = tx.open(src, &OpenOptions::new().read(true))?;
    let to =
        tx.open(dst, &OpenOptions::new().write(true).create(true).truncate(true).mode(mode))?;
    with_buffer(|buf| -> CliResult {
        loop {
            let n = from.read(buf)?;
            if n == 0 {
                return Ok(());
            }
            to.write(&buf[..n])?;
        }
    })?;
    from.close()?;
    to.close()?;
    Ok(tx.commit()?)
}

/// `cp -r`: copies files (with their modes), symlinks and directories.
fn copy_tree(store: &Store, src: &[u8], dst: &[u8], st: &Stat) -> CliResult {
    match st.kind {
        FileType::File => copy_file(store, src, dst, st.mode & 0o7777),
        FileType::Symlink => Ok(store.symlink(store.readlink(src)?, dst)?),
        kind if kind.is_special() => Ok(store.mknod(dst, kind, st.mode & 0o7777, st.rdev)?),
        _ => {
            if dst.starts_with(src) && dst.get(src.len()) == Some(&b'/') {
                return Err(CliError {
                    msg: format!("cannot copy {} into itself", String::from_utf8_lossy(src)),
                    code: libc::EINVAL,
                });
            }
            store.mkdir(dst, st.mode & 0o7777)?;
            for e in list(store, src)? {
                let s = join(src, &e.name);
                copy_tree(store, &s, &join(dst, &e.name), &store.lstat(&s)?)?;
            }
            Ok(())
        }
    }
}
