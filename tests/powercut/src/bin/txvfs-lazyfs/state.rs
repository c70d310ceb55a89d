//! The state of txvfs-lazyfs: the files' unsynced changes, the names not yet durable, and
//! the power cut that forgets them (see main.rs for the model).

use fuser::{Errno, FileAttr, FileType, INodeNo};
use std::collections::HashMap;
use std::ffi::OsStr;
use std::fs::{self, File, OpenOptions};
use std::io;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

pub const ROOT: u64 = 1;
pub const CTL_NAME: &str = ".powercut";
pub const CTL_INO: u64 = u64::MAX >> 1;
/// The stash, in the backing root, hidden from the mount.
pub const STASH_NAME: &str = ".lazyfs-stash";

/// One unsynced change to a file's data, oldest first.
pub enum Op {
    Write { off: u64, data: Vec<u8> },
    Truncate(u64),
}

/// The file size after `ops`, starting from the backing file's size.
pub fn logical_size(mut size: u64, ops: &[Op]) -> u64 {
    for op in ops {
        size = match op {
            Op::Write { off, data } => size.max(off + data.len() as u64),
            Op::Truncate(len) => *len,
        };
    }
    size
}

/// Applies `ops` to the backing file `f` (what a sync does).
pub fn persist(f: &File, ops: &[Op]) -> io::Result<()> {
    for op in ops {
        match op {
            Op::Write { off, data } => f.write_all_at(data, *off)?,
            Op::Truncate(len) => f.set_len(*len)?,
        }
    }
    Ok(())
}

/// xorshift64*: the cut's random choices come from the seed the harness gives.
pub struct Rng(u64);
impl Rng {
    /// The next pseudo-random number.
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545f4914f6cdd1d)
    }
}

/// Everything the file system knows, behind one lock.
#[derive(Default)]
pub struct State {
    /// Inode number -> backing path. Unlinked files keep their (stale) path here.
    pub paths: HashMap<u64, PathBuf>,
    /// Backing path -> inode number, for the names that exist.
    pub inos: HashMap<PathBuf, u64>,
    pub next_ino: u64,
    /// Open file handle -> backing file (opened read-write when allowed).
    pub files: HashMap<u64, File>,
    pub next_fh: u64,
    /// Unsynced data changes per inode.
    pub pending: HashMap<u64, Vec<Op>>,
    /// Directory changes not yet made durable, oldest first, each with the directories it
    /// changed (an fsync of either makes it durable).
    pub names: Vec<(NameOp, [u64; 2])>,
    /// Where unlinked and replaced files wait until their removal is durable.
    pub stash: PathBuf,
    pub stashed: u64,
    pub cuts: u64,
    /// File and directory syncs since the last cut (for the cut's log line).
    pub syncs: (u64, u64),
}

/// A change to a directory that a cut undoes unless a directory sync made it durable.
pub enum NameOp {
    /// A new file or directory (undone: removed, with what it holds).
    Created(PathBuf),
    /// An unlinked file, moved to the stash (undone: moved back).
    Unlinked { path: PathBuf, stash: PathBuf },
    /// A rename; the file it replaced waits in the stash (undone: both moved back).
    Renamed { from: PathBuf, to: PathBuf, replaced: Option<PathBuf> },
}

impl NameOp {
    /// The change is durable: what waits in the stash goes for good.
    fn finish(self) {
        match self {
            NameOp::Unlinked { stash, .. } | NameOp::Renamed { replaced: Some(stash), .. } => {
                let _ = remove_any(&stash);
            }
            _ => {}
        }
    }

    /// The power cut: back to what the directories held at their last sync.
    fn undo(self) -> io::Result<()> {
        match self {
            NameOp::Created(path) => remove_any(&path),
            NameOp::Unlinked { path, stash } => fs::rename(stash, path),
            NameOp::Renamed { from, to, replaced } => {
                fs::rename(&to, from)?;
                replaced.map_or(Ok(()), |stash| fs::rename(stash, to))
            }
        }
    }
}

fn remove_any(path: &Path) -> io::Result<()> {
    if fs::symlink_metadata(path)?.is_dir() {
        fs::remove_dir_all(path)
    } else {
        fs::remove_file(path)
    }
}

fn short(p: &Path) -> String {
    p.file_name().unwrap_or_default().to_string_lossy().into_owned()
}

/// The errno the kernel gets for an I/O error of the backing directory.
pub fn err(e: io::Error) -> Errno {
    Errno::from_i32(e.raw_os_error().unwrap_or(libc::EIO))
}

/// The FUSE file type of a backing file.
pub fn kind_of(ft: fs::FileType) -> FileType {
    if ft.is_dir() {
        FileType::Directory
    } else if ft.is_symlink() {
        FileType::Symlink
    } else {
        FileType::RegularFile
    }
}

fn time(secs: i64, nsecs: i64) -> SystemTime {
    if secs >= 0 {
        UNIX_EPOCH + Duration::new(secs as u64, nsecs as u32)
    } else {
        UNIX_EPOCH
    }
}

/// Attributes of the control file.
pub fn ctl_attr() -> FileAttr {
    FileAttr {
        ino: INodeNo(CTL_INO),
        size: 0,
        blocks: 0,
        atime: UNIX_EPOCH,
        mtime: UNIX_EPOCH,
        ctime: UNIX_EPOCH,
        crtime: UNIX_EPOCH,
        kind: FileType::RegularFile,
        perm: 0o600,
        nlink: 1,
        uid: 0,
        gid: 0,
        rdev: 0,
        blksize: 4096,
        flags: 0,
    }
}

impl State {
    /// The backing path of inode `ino`.
    pub fn path(&self, ino: u64) -> Result<PathBuf, Errno> {
        self.paths.get(&ino).cloned().ok_or(Errno::ENOENT)
    }

    /// The backing path of `name` in directory `parent`.
    pub fn child(&self, parent: u64, name: &OsStr) -> Result<PathBuf, Errno> {
        Ok(self.path(parent)?.join(name))
    }

    /// The inode number of an existing backing path (a new one the first time).
    pub fn ino_for(&mut self, path: PathBuf) -> u64 {
        if let Some(&ino) = self.inos.get(&path) {
            return ino;
        }
        let ino = self.next_ino;
        self.next_ino += 1;
        self.paths.insert(ino, path.clone());
        self.inos.insert(path, ino);
        ino
    }

    /// A name that no longer exists: later files at `path` get a new inode.
    pub fn forget_name(&mut self, path: &Path) {
        self.inos.remove(path);
    }

    /// Moves `path` to the stash (an unlink or a replacing rename that a cut may undo).
    pub fn stash_away(&mut self, path: &Path) -> Result<PathBuf, Errno> {
        self.stashed += 1;
        let to = self.stash.join(self.stashed.to_string());
        fs::rename(path, &to).map_err(err)?;
        Ok(to)
    }

    /// An fsync of directory `dir`: every change to it is durable.
    pub fn dir_synced(&mut self, dir: u64) {
        self.syncs.1 += 1;
        let (done, keep) =
            std::mem::take(&mut self.names).into_iter().partition(|(_, dirs)| dirs.contains(&dir));
        self.names = keep;
        for (op, _) in done {
            op.finish();
        }
    }

    /// Attributes as the mount shows them: the size includes unsynced writes.
    pub fn attr(&self, ino: u64, fh: Option<u64>) -> Result<FileAttr, Errno> {
        if ino == CTL_INO {
            return Ok(ctl_attr());
        }
        let md = match fh.and_then(|h| self.files.get(&h)) {
            Some(f) => f.metadata(),
            None => fs::symlink_metadata(self.path(ino)?),
        }
        .map_err(err)?;
        let size = match self.pending.get(&ino) {
            Some(ops) if md.is_file() => logical_size(md.len(), ops),
            _ => md.len(),
        };
        Ok(FileAttr {
            ino: INodeNo(ino),
            size,
            blocks: size.div_ceil(512),
            atime: time(md.atime(), md.atime_nsec()),
            mtime: time(md.mtime(), md.mtime_nsec()),
            ctime: time(md.ctime(), md.ctime_nsec()),
            crtime: time(md.ctime(), md.ctime_nsec()),
            kind: kind_of(md.file_type()),
            perm: (md.mode() & 0o7777) as u16,
            nlink: md.nlink() as u32,
            uid: md.uid(),
            gid: md.gid(),
            rdev: md.rdev() as u32,
            blksize: 4096,
            flags: 0,
        })
    }

    /// Registers an open backing file; returns its handle number.
    pub fn add_handle(&mut self, f: File) -> u64 {
        self.next_fh += 1;
        self.files.insert(self.next_fh, f);
        self.next_fh
    }

    /// What `fsync` does: the file's unsynced changes reach the backing file.
    pub fn sync_file(&mut self, ino: u64, fh: u64) -> Result<(), Errno> {
        self.syncs.0 += 1;
        let Some(ops) = self.pending.remove(&ino) else { return Ok(()) };
        let f = self.files.get(&fh).ok_or(Errno::EBADF)?;
        persist(f, &ops).map_err(err)
    }

    /// A clean unmount: everything unsynced reaches the backing directory, as a real file
    /// system writes its dirty pages back when it is unmounted.
    pub fn write_back_all(&mut self) -> io::Result<()> {
        for (ino, ops) in std::mem::take(&mut self.pending) {
            let path = &self.paths[&ino];
            if self.inos.get(path) == Some(&ino) {
                persist(&OpenOptions::new().write(true).open(path)?, &ops)?;
            }
        }
        for (op, _) in self.names.drain(..) {
            op.finish();
        }
        Ok(())
    }

    /// The power cut. Returns the line to log.
    pub fn cut(&mut self, seed: u64, tear: bool) -> String {
        self.cuts += 1;
        let mut rng = Rng(seed.wrapping_mul(0x9e3779b97f4a7c15) | 1);
        let mut torn = Vec::new();
        if tear {
            // Each file's write-back got a random way through its unsynced changes, in order,
            // and stopped inside a write. Inode order: the seed decides the same way each time.
            let mut inos: Vec<u64> = self.pending.keys().copied().collect();
            inos.sort();
            for ino in inos {
                let ops = self.pending.get_mut(&ino).unwrap();
                let (n, i) = (ops.len(), (rng.next() % ops.len() as u64) as usize);
                let mut kept: Vec<Op> = ops.drain(..=i).collect();
                let path = self.paths[&ino].clone();
                let mut note = format!(
                    "{} kept {} of {n} changes",
                    path.file_name().unwrap_or_default().to_string_lossy(),
                    i + 1
                );
                if let Some(Op::Write { data, .. }) = kept.last_mut() {
                    let len = data.len();
                    data.truncate((rng.next() % len.max(1) as u64) as usize);
                    note += &format!(", the last cut to {} of {len} bytes", data.len());
                }
                // Only if the name still exists (an unlinked file has nowhere to go).
                if self.inos.get(&path) == Some(&ino) {
                    if let Err(e) =
                        OpenOptions::new().write(true).open(&path).and_then(|f| persist(&f, &kept))
                    {
                        note += &format!(" (could not write them: {e})");
                    }
                }
                torn.push(note);
            }
        }
        let (mut writes, mut bytes, mut truncates) = (0, 0, 0);
        let files = self.pending.len();
        for op in self.pending.drain().flat_map(|(_, ops)| ops) {
            match op {
                Op::Write { data, .. } => {
                    writes += 1;
                    bytes += data.len();
                }
                Op::Truncate(_) => truncates += 1,
            }
        }
        // Directory changes never made durable are undone, newest first.
        let (mut undone, mut failed) = (Vec::new(), Vec::new());
        for (op, _) in std::mem::take(&mut self.names).into_iter().rev() {
            let what = match &op {
                NameOp::Created(p) => format!("create {}", short(p)),
                NameOp::Unlinked { path, .. } => format!("unlink {}", short(path)),
                NameOp::Renamed { from, to, .. } => format!("rename {} {}", short(from), short(to)),
            };
            match op.undo() {
                Ok(()) => undone.push(what),
                Err(e) => failed.push(format!("{what}: {e}")),
            }
        }
        // Names moved: every path gets a fresh inode at its next lookup.
        self.inos.retain(|_, ino| *ino == ROOT);
        let (fsyncs, dirsyncs) = std::mem::take(&mut self.syncs);
        format!(
            "lazyfs: cut {} seed={seed} tear={}: dropped {writes} writes ({bytes} bytes) and {truncates} truncations \
             in {files} files; undid {} directory changes [{}]{}; torn: [{}]; since the last cut: {fsyncs} file syncs, \
             {dirsyncs} directory syncs",
            self.cuts,
            tear as u8,
            undone.len(),
            undone.join(", "),
            if failed.is_empty() { String::new() } else { format!(" (COULD NOT UNDO: {})", failed.join(", ")) },
            torn.join(", ")
        )
    }

    /// A command written to the control file.
    pub fn control(&mut self, data: &[u8]) -> Result<(), Errno> {
        let text = String::from_utf8_lossy(data);
        let words: Vec<&str> = text.split_whitespace().collect();
        match words.as_slice() {
            ["cut", seed, tear] => {
                let seed = seed.parse().map_err(|_| Errno::EINVAL)?;
                let line = self.cut(seed, *tear == "1");
                eprintln!("{line}");
                Ok(())
            }
            _ => {
                eprintln!("lazyfs: unknown control command {text:?} (want: cut SEED TEAR)");
                Err(Errno::EINVAL)
            }
        }
    }
}
