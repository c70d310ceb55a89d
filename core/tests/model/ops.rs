//! The random operations: generating them, applying them to the model and to txvfs.

use super::handles::{Mode, STORE_SLOTS};
use super::{Model, Val, NAMES, R};
use rand::rngs::SmallRng;
use rand::Rng;
use std::io::SeekFrom;
use txvfs::{Error, FallocateMode, File, FileSystem, OpenOptions, Options, RenameFlags};

/// One random operation: path calls, and calls through the handle in a slot.
#[derive(Clone, Debug)]
pub enum Op {
    Mkdir(Vec<u8>),
    Rmdir(Vec<u8>),
    WriteFile(Vec<u8>, Vec<u8>),
    Pwrite(Vec<u8>, u64, Vec<u8>),
    Truncate(Vec<u8>, u64),
    Read(Vec<u8>),
    Stat(Vec<u8>),
    Lstat(Vec<u8>),
    Readdir(Vec<u8>),
    Unlink(Vec<u8>),
    Rename(Vec<u8>, Vec<u8>, RenameFlags),
    Link(Vec<u8>, Vec<u8>),
    Symlink(Vec<u8>, Vec<u8>),
    Readlink(Vec<u8>),
    HOpen(usize, Vec<u8>, Mode),
    HClose(usize),
    /// Dropping the handle without `close` (it flushes write-back data too).
    HDrop(usize),
    HRead(usize, usize),
    HPread(usize, u64, usize),
    HWrite(usize, Vec<u8>),
    HPwrite(usize, u64, Vec<u8>),
    HSeek(usize, SeekFrom),
    HSetLen(usize, u64),
    HAllocate(usize, FallocateMode, u64, u64),
    HStat(usize),
    HSync(usize),
}

/// What the generator may produce.
#[derive(Clone, Debug)]
pub struct Gen {
    /// Every path lives below this directory (empty: the root). With a prefix, no operation
    /// names the subtree's root and no symlink target climbs out of it with `..`.
    pub prefix: Vec<u8>,
    /// Handle operations on (and opens into) these slots.
    pub slots: std::ops::Range<usize>,
}

impl Gen {
    fn root_ok(&self) -> bool {
        self.prefix.is_empty()
    }
}

/// A path of 1 to 3 names (or rarely `/`). Directories are mostly named `a` or `b` and files
/// mostly `c` or `d`, with enough overlap that file and directory operations collide often.
pub fn gen_path(rng: &mut SmallRng, allow_root: bool, dir: bool) -> Vec<u8> {
    if allow_root && rng.gen_ratio(1, 40) {
        return b"/".to_vec();
    }
    let depth = match (rng.gen_range(0..10), dir) {
        (0..=4, true) | (0..=2, false) => 1,
        (5..=8, true) | (3..=6, false) => 2,
        _ => 3,
    };
    let mut p = Vec::new();
    for i in 0..depth {
        let dir_like = if i + 1 < depth { true } else { dir };
        let k = if rng.gen_ratio(4, 5) { 0 } else { 2 };
        let k = k + rng.gen_range(0..2);
        let k = if dir_like { k } else { 3 - k };
        p.push(b'/');
        p.extend_from_slice(NAMES[k].as_bytes());
    }
    p
}

fn gen_target(rng: &mut SmallRng, g: &Gen) -> Vec<u8> {
    let name = |rng: &mut SmallRng| NAMES[rng.gen_range(0..NAMES.len())].as_bytes().to_vec();
    match rng.gen_range(0..10) {
        0..=3 => {
            let dir = rng.gen();
            gen_path(rng, false, dir)
        }
        4..=5 => name(rng),
        6 if g.root_ok() => [b"../".to_vec(), name(rng)].concat(),
        7 => [name(rng), b"/".to_vec(), name(rng)].concat(),
        8 => b".".to_vec(),
        _ if g.root_ok() => b"..".to_vec(),
        _ => name(rng),
    }
}

/// Sizes around the interesting boundaries of the store used (inline limit, block size).
pub fn gen_size(rng: &mut SmallRng, o: &Options) -> u64 {
    let (il, bs) = (o.inline_limit as u64, o.block_size as u64);
    match rng.gen_range(0..10) {
        0..=3 => rng.gen_range(0..8),
        4..=5 => rng.gen_range(il.saturating_sub(8)..il + 8),
        6..=7 => rng.gen_range(bs - 8..bs + 8),
        _ => rng.gen_range(0..3 * bs),
    }
}

/// `n` bytes, none zero (so holes and zeroed ranges show), different for each `base`.
pub fn data_of(n: usize, base: u8) -> Vec<u8> {
    (0..n)
        .map(|i| base.wrapping_add((i as u8).wrapping_mul(7)).wrapping_add((i >> 8) as u8) | 1)
        .collect()
}

pub fn gen_data(rng: &mut SmallRng, o: &Options) -> Vec<u8> {
    let n = gen_size(rng, o) as usize;
    data_of(n, rng.gen())
}

/// A path operation.
pub fn gen_path_op(rng: &mut SmallRng, o: &Options, g: &Gen) -> Op {
    let root = g.root_ok();
    match rng.gen_range(0..100) {
        0..=7 => Op::Mkdir(gen_path(rng, root, true)),
        8..=12 => Op::Rmdir(gen_path(rng, root, true)),
        13..=28 => Op::WriteFile(gen_path(rng, root, false), gen_data(rng, o)),
        29..=38 => Op::Pwrite(gen_path(rng, false, false), gen_size(rng, o), gen_data(rng, o)),
        39..=43 => Op::Truncate(gen_path(rng, false, false), gen_size(rng, o)),
        44..=52 => Op::Read(gen_path(rng, false, false)),
        53..=56 => Op::Stat(gen_path(rng, root, false)),
        57..=60 => Op::Lstat(gen_path(rng, false, false)),
        61..=64 => Op::Readdir(gen_path(rng, root, true)),
        65..=71 => Op::Unlink(gen_path(rng, root, false)),
        72..=85 => {
            let flags = match rng.gen_range(0..10) {
                0 => RenameFlags { no_replace: true, exchange: false },
                1 => RenameFlags { no_replace: false, exchange: true },
                _ => RenameFlags::default(),
            };
            let dir = rng.gen_ratio(1, 3);
            Op::Rename(gen_path(rng, false, dir), gen_path(rng, false, dir), flags)
        }
        86..=91 => Op::Link(gen_path(rng, false, false), gen_path(rng, false, false)),
        92..=96 => Op::Symlink(gen_target(rng, g), gen_path(rng, false, false)),
        _ => Op::Readlink(gen_path(rng, false, false)),
    }
}

fn gen_mode(rng: &mut SmallRng, slot: usize) -> Mode {
    let mut m = Mode::default();
    match rng.gen_range(0..4) {
        0 => m.read = true,
        1 => m.write = true,
        _ => (m.read, m.write) = (true, true),
    }
    m.append = m.write && rng.gen_ratio(1, 5);
    m.create = rng.gen_ratio(1, 2);
    m.create_new = rng.gen_ratio(1, 8);
    m.truncate = m.write && rng.gen_ratio(1, 6);
    // A transaction's handles ignore write-back (they write into the transaction).
    m.write_back = m.write && rng.gen_ratio(1, if slot < STORE_SLOTS { 2 } else { 4 });
    m
}

/// Any operation: path calls, opens, and calls through the handles open in `g.slots`.
pub fn gen_op(rng: &mut SmallRng, o: &Options, g: &Gen, m: &Model) -> Op {
    let open: Vec<usize> = g.slots.clone().filter(|&s| m.handles[s].is_some()).collect();
    let r = rng.gen_range(0..100);
    if r < 12 {
        let slot = rng.gen_range(g.slots.clone());
        if m.handles[slot].is_some() {
            return Op::HClose(slot);
        }
        return Op::HOpen(slot, gen_path(rng, g.root_ok(), false), gen_mode(rng, slot));
    }
    if r >= 55 || open.is_empty() {
        return gen_path_op(rng, o, g);
    }
    let s = open[rng.gen_range(0..open.len())];
    if rng.gen_ratio(1, 12) {
        // Take the name of an open file away: unlink it, rename it, or rename over it.
        if let Some(p) = m.path_of(m.handles[s].as_ref().unwrap().ino) {
            return match rng.gen_range(0..3) {
                0 => Op::Unlink(p),
                1 => Op::Rename(p, gen_path(rng, false, false), RenameFlags::default()),
                _ => Op::Rename(gen_path(rng, false, false), p, RenameFlags::default()),
            };
        }
    }
    let small = |rng: &mut SmallRng| gen_size(rng, o) as usize;
    match rng.gen_range(0..100) {
        0..=14 => Op::HRead(s, small(rng)),
        15..=22 => Op::HPread(s, gen_size(rng, o), small(rng)),
        23..=44 => Op::HWrite(s, gen_data(rng, o)),
        45..=54 => Op::HPwrite(s, gen_size(rng, o), gen_data(rng, o)),
        55..=64 => Op::HSeek(
            s,
            match rng.gen_range(0..3) {
                0 => SeekFrom::Start(gen_size(rng, o)),
                1 => SeekFrom::Current(rng.gen_range(-600..600)),
                _ => SeekFrom::End(rng.gen_range(-600..600)),
            },
        ),
        65..=70 => Op::HSetLen(s, gen_size(rng, o)),
        71..=80 => {
            let mode = [FallocateMode::Allocate, FallocateMode::KeepSize, FallocateMode::PunchHole]
                [rng.gen_range(0..3)];
            Op::HAllocate(s, mode, gen_size(rng, o), gen_size(rng, o))
        }
        81..=86 => Op::HStat(s),
        87..=93 => Op::HSync(s),
        94..=97 => Op::HClose(s),
        _ => Op::HDrop(s),
    }
}

pub fn model_apply(m: &mut Model, op: &Op) -> R {
    match op {
        Op::Mkdir(p) => m.mkdir(p),
        Op::Rmdir(p) => m.rmdir(p),
        Op::WriteFile(p, d) => m.write_file(p, d),
        Op::Pwrite(p, off, d) => m.pwrite(p, *off, d),
        Op::Truncate(p, n) => m.truncate(p, *n),
        Op::Read(p) => m.read(p),
        Op::Stat(p) => m.stat(p, true),
        Op::Lstat(p) => m.stat(p, false),
        Op::Readdir(p) => m.readdir(p),
        Op::Unlink(p) => m.unlink(p),
        Op::Rename(a, b, f) => m.rename(a, b, *f),
        Op::Link(a, b) => m.link(a, b),
        Op::Symlink(t, l) => m.symlink(t, l),
        Op::Readlink(p) => m.readlink(p),
        Op::HOpen(s, p, mode) => m.h_open(*s, p, *mode),
        Op::HClose(s) | Op::HDrop(s) => m.h_close(*s),
        Op::HRead(s, n) => m.h_read(*s, *n),
        Op::HPread(s, off, n) => m.h_pread(*s, *off, *n),
        Op::HWrite(s, d) => m.h_write(*s, None, d),
        Op::HPwrite(s, off, d) => m.h_write(*s, Some(*off), d),
        Op::HSeek(s, to) => m.h_seek(*s, *to),
        Op::HSetLen(s, n) => m.h_set_len(*s, *n),
        Op::HAllocate(s, mode, off, len) => m.h_allocate(*s, *mode, *off, *len),
        Op::HStat(s) => m.h_stat(*s),
        Op::HSync(s) => m.h_sync(*s),
    }
}

/// Inodes whose data (or size) `op` reads or writes, as the model sees them before it runs.
pub fn data_touched(m: &Model, op: &Op) -> Vec<u64> {
    let at = |p: &[u8], follow: bool| {
        m.resolve(p, follow).ok().and_then(|r| r.entry).into_iter().collect()
    };
    let h = |s: &usize| m.handles[*s].iter().map(|h| h.ino).collect();
    match op {
        Op::WriteFile(p, _)
        | Op::Pwrite(p, ..)
        | Op::Truncate(p, _)
        | Op::Read(p)
        | Op::Stat(p) => at(p, true),
        Op::Lstat(p) => at(p, false),
        Op::HOpen(_, p, mode) if mode.truncate => at(p, true),
        Op::HRead(s, _) | Op::HPread(s, ..) | Op::HWrite(s, _) | Op::HPwrite(s, ..) => h(s),
        Op::HSeek(s, _) | Op::HSetLen(s, _) | Op::HAllocate(s, ..) | Op::HStat(s) => h(s),
        _ => Vec::new(),
    }
}

pub fn handle_slot(op: &Op) -> Option<usize> {
    match op {
        Op::HOpen(s, ..)
        | Op::HClose(s)
        | Op::HRead(s, _)
        | Op::HPread(s, ..)
        | Op::HWrite(s, _) => Some(*s),
        Op::HPwrite(s, ..)
        | Op::HSeek(s, _)
        | Op::HSetLen(s, _)
        | Op::HAllocate(s, ..)
        | Op::HStat(s) => Some(*s),
        Op::HSync(s) | Op::HDrop(s) => Some(*s),
        _ => None,
    }
}

pub fn fs_stat(st: txvfs::Stat) -> Val {
    let size = if st.is_dir() { 0 } else { st.size };
    Val::Stat(st.kind, size, st.nlink)
}

/// `lstat` as the model sees it: below a prefix, a symlink's size is that of its target
/// without the prefix added to absolute targets.
pub fn fs_lstat<F: FileSystem>(fs: &F, prefix: &[u8], path: &[u8]) -> Result<(u64, Val), Error> {
    let st = fs.lstat(path)?;
    let ino = st.ino;
    let mut v = fs_stat(st);
    if let Val::Stat(txvfs::FileType::Symlink, size, _) = &mut v {
        if !prefix.is_empty() {
            *size = target_out(prefix, fs.readlink(path)?).len() as u64;
        }
    }
    Ok((ino, v))
}

/// A symlink target as stored below `prefix` (absolute targets stay inside the subtree).
pub fn target_in(prefix: &[u8], t: &[u8]) -> Vec<u8> {
    if t.first() == Some(&b'/') {
        [prefix, t].concat()
    } else {
        t.to_vec()
    }
}

/// A target read back, as the model stores it.
pub fn target_out(prefix: &[u8], t: Vec<u8>) -> Vec<u8> {
    if !prefix.is_empty() && t.starts_with(prefix) && t.get(prefix.len()) == Some(&b'/') {
        t[prefix.len()..].to_vec()
    } else {
        t
    }
}

fn file(files: &[Option<File>], s: usize) -> &File {
    files[s].as_ref().expect("slot open in txvfs as in the model")
}

pub fn fs_apply<F: FileSystem>(
    fs: &F,
    files: &mut [Option<File>],
    prefix: &[u8],
    op: &Op,
) -> Result<Val, Error> {
    let unit = |r: Result<(), Error>| r.map(|()| Val::Unit);
    let p = |x: &[u8]| [prefix, x].concat();
    match op {
        Op::Mkdir(a) => unit(fs.mkdir(p(a), 0o755)),
        Op::Rmdir(a) => unit(fs.rmdir(p(a))),
        Op::WriteFile(a, d) => unit(fs.write_file(p(a), d)),
        Op::Pwrite(a, off, d) => {
            let f = fs.open(p(a), &OpenOptions::new().write(true))?;
            f.write_at(d, *off)?;
            f.close().map(|()| Val::Unit)
        }
        Op::Truncate(a, n) => unit(fs.truncate(p(a), *n)),
        Op::Read(a) => fs.read_file(p(a)).map(Val::Bytes),
        Op::Stat(a) => fs.stat(p(a)).map(fs_stat),
        Op::Lstat(a) => fs_lstat(fs, prefix, &p(a)).map(|(_, v)| v),
        Op::Readdir(a) => fs
            .readdir(p(a), None, 0)
            .map(|es| Val::Names(es.into_iter().map(|e| (e.name.into_vec(), e.kind)).collect())),
        Op::Unlink(a) => unit(fs.unlink(p(a))),
        Op::Rename(a, b, f) => unit(fs.rename_with(p(a), p(b), *f)),
        Op::Link(a, b) => unit(fs.link(p(a), p(b))),
        Op::Symlink(t, l) => unit(fs.symlink(target_in(prefix, t), p(l))),
        Op::Readlink(a) => fs.readlink(p(a)).map(|t| Val::Bytes(target_out(prefix, t))),
        Op::HOpen(s, a, mode) => {
            let f = fs.open(p(a), &mode.options())?;
            if f.kind() == txvfs::FileType::Dir {
                f.close()?;
            } else {
                files[*s] = Some(f);
            }
            Ok(Val::Unit)
        }
        Op::HClose(s) => unit(files[*s].take().unwrap().close()),
        Op::HDrop(s) => {
            drop(files[*s].take());
            Ok(Val::Unit)
        }
        Op::HRead(s, n) => {
            let mut buf = vec![0; *n];
            let got = file(files, *s).read(&mut buf)?;
            buf.truncate(got);
            Ok(Val::Bytes(buf))
        }
        Op::HPread(s, off, n) => {
            let mut buf = vec![0; *n];
            let got = file(files, *s).read_at(&mut buf, *off)?;
            buf.truncate(got);
            Ok(Val::Bytes(buf))
        }
        Op::HWrite(s, d) => file(files, *s).write(d).map(|_| Val::Unit),
        Op::HPwrite(s, off, d) => file(files, *s).write_at(d, *off).map(|_| Val::Unit),
        Op::HSeek(s, to) => file(files, *s).seek(*to).map(Val::Num),
        Op::HSetLen(s, n) => unit(file(files, *s).set_len(*n)),
        Op::HAllocate(s, mode, off, len) => unit(file(files, *s).allocate(*mode, *off, *len)),
        Op::HStat(s) => file(files, *s).stat().map(fs_stat),
        Op::HSync(s) => unit(file(files, *s).sync()),
    }
}

pub fn show_op(op: &Op) -> String {
    let s = |p: &[u8]| String::from_utf8_lossy(p).into_owned();
    match op {
        Op::WriteFile(p, d) => format!("write_file {} ({} bytes)", s(p), d.len()),
        Op::Pwrite(p, off, d) => format!("pwrite {} at {off} ({} bytes)", s(p), d.len()),
        Op::Symlink(t, l) => format!("symlink {} -> {}", s(l), s(t)),
        Op::Rename(a, b, f) => format!("rename {} {} {:?}", s(a), s(b), f),
        Op::Link(a, b) => format!("link {} {}", s(a), s(b)),
        Op::HOpen(slot, p, m) => format!("open #{slot} {} {m:?}", s(p)),
        Op::HWrite(slot, d) => format!("write #{slot} ({} bytes)", d.len()),
        Op::HPwrite(slot, off, d) => format!("pwrite #{slot} at {off} ({} bytes)", d.len()),
        other => {
            let dbg = format!("{other:?}");
            dbg.chars().take(200).collect()
        }
    }
}

pub fn show_val(r: &R) -> String {
    match r {
        Ok(Val::Bytes(b)) if b.len() > 40 => format!("Ok({} bytes)", b.len()),
        other => format!("{other:?}"),
    }
}

pub fn op_name(op: &Op) -> &'static str {
    match op {
        Op::Mkdir(..) => "mkdir",
        Op::Rmdir(..) => "rmdir",
        Op::WriteFile(..) => "write_file",
        Op::Pwrite(..) => "pwrite",
        Op::Truncate(..) => "truncate",
        Op::Read(..) => "read",
        Op::Stat(..) => "stat",
        Op::Lstat(..) => "lstat",
        Op::Readdir(..) => "readdir",
        Op::Unlink(..) => "unlink",
        Op::Rename(..) => "rename",
        Op::Link(..) => "link",
        Op::Symlink(..) => "symlink",
        Op::Readlink(..) => "readlink",
        Op::HOpen(..) => "h_open",
        Op::HClose(..) => "h_close",
        Op::HDrop(..) => "h_drop",
        Op::HRead(..) => "h_read",
        Op::HPread(..) => "h_pread",
        Op::HWrite(..) => "h_write",
        Op::HPwrite(..) => "h_pwrite",
        Op::HSeek(..) => "h_seek",
        Op::HSetLen(..) => "h_set_len",
        Op::HAllocate(..) => "h_allocate",
        Op::HStat(..) => "h_stat",
        Op::HSync(..) => "h_sync",
    }
}
