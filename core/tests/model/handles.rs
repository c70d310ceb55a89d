//! Open handles in the model: position, access mode, append, write-back, and the inode they
//! keep alive (an unlinked file stays readable and writable through its handles).

use super::{Kind, Model, Val, EBADF, EEXIST, EINVAL, R};
use std::io::SeekFrom;
use txvfs::FallocateMode;

/// Handle slots: 0..STORE_SLOTS for handles opened on the store (held across everything),
/// the rest for handles opened inside an explicit transaction (closed when it ends).
pub const STORE_SLOTS: usize = 4;
pub const SLOTS: usize = 7;

/// How a handle is opened.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Mode {
    pub read: bool,
    pub write: bool,
    pub append: bool,
    pub create: bool,
    pub create_new: bool,
    pub truncate: bool,
    pub write_back: bool,
}

impl Mode {
    pub fn options(&self) -> txvfs::OpenOptions {
        let o = txvfs::OpenOptions::new()
            .read(self.read)
            .write(self.write)
            .append(self.append)
            .create(self.create)
            .create_new(self.create_new)
            .truncate(self.truncate)
            .write_back(self.write_back);
        // Files opened to write get their own block sizes (1 KiB, 4 KiB), so one tree mixes
        // them with the store's; what the files hold must not depend on it.
        match (self.create_new, self.create) {
            _ if !self.write => o,
            (true, _) => o.block_size(1024),
            (false, true) => o.block_size(4096),
            _ => o,
        }
    }
}

#[derive(Clone, Debug)]
pub struct MHandle {
    pub ino: u64,
    pub mode: Mode,
    pub pos: u64,
    /// Buffers writes (a store handle opened write-back, not append).
    pub buffers: bool,
    /// Written through since its last sync or close: others may not see these bytes yet.
    pub dirty: bool,
}

fn write_into(d: &mut Vec<u8>, at: u64, data: &[u8]) {
    if data.is_empty() {
        return;
    }
    let end = at as usize + data.len();
    if d.len() < end {
        d.resize(end, 0);
    }
    d[at as usize..end].copy_from_slice(data);
}

impl Model {
    fn handle(&self, slot: usize) -> &MHandle {
        self.handles[slot].as_ref().expect("the generator uses open slots only")
    }

    fn file(&self, ino: u64) -> &Vec<u8> {
        match &self.nodes[&ino].kind {
            Kind::File(d) => d,
            _ => panic!("handles are kept on files only"),
        }
    }

    /// Inodes whose data others may not see yet (written through a write-back handle).
    pub fn dirty(&self) -> std::collections::BTreeSet<u64> {
        self.handles.iter().flatten().filter(|h| h.dirty).map(|h| h.ino).collect()
    }

    /// open(2): a directory opened read-only succeeds but is not kept (`slot` stays empty).
    pub fn h_open(&mut self, slot: usize, p: &[u8], mode: Mode) -> R {
        let ino = if mode.create_new {
            // O_CREAT|O_EXCL follows no final symlink: anything there is EEXIST.
            let (parent, name) =
                self.for_create(p).map_err(|e| if e == EEXIST { EEXIST } else { e })?;
            let ino = self.alloc(Kind::File(Vec::new()));
            self.dir_mut(parent).insert(name, ino);
            ino
        } else {
            self.open(p, mode.write, mode.create)?
        };
        if self.is_dir(ino) {
            return Ok(Val::Unit);
        }
        if mode.truncate && mode.write {
            self.data(ino).clear();
        }
        *self.open.entry(ino).or_default() += 1;
        let buffers = mode.write_back && !mode.append && slot < STORE_SLOTS;
        self.handles[slot] = Some(MHandle { ino, mode, pos: 0, buffers, dirty: false });
        Ok(Val::Unit)
    }

    pub fn h_close(&mut self, slot: usize) -> R {
        let h = self.handles[slot].take().unwrap();
        let n = self.open.get_mut(&h.ino).unwrap();
        *n -= 1;
        if *n == 0 {
            self.open.remove(&h.ino);
            if self.nodes[&h.ino].links == 0 {
                self.nodes.remove(&h.ino);
            }
        }
        Ok(Val::Unit)
    }

    pub fn h_pread(&self, slot: usize, off: u64, len: usize) -> R {
        let h = self.handle(slot);
        if !h.mode.read {
            return Err(EBADF);
        }
        let d = self.file(h.ino);
        let start = (off as usize).min(d.len());
        let end = (start + len).min(d.len());
        Ok(Val::Bytes(d[start..end].to_vec()))
    }

    pub fn h_read(&mut self, slot: usize, len: usize) -> R {
        let r = self.h_pread(slot, self.handle(slot).pos, len)?;
        let Val::Bytes(b) = &r else { unreachable!() };
        self.handles[slot].as_mut().unwrap().pos += b.len() as u64;
        Ok(r)
    }

    /// write(2) at the position, or pwrite(2) at `off` (with append both go to the end).
    pub fn h_write(&mut self, slot: usize, off: Option<u64>, data: &[u8]) -> R {
        let h = self.handle(slot).clone();
        if !h.mode.write {
            return Err(EBADF);
        }
        let at = if h.mode.append { self.file(h.ino).len() as u64 } else { off.unwrap_or(h.pos) };
        write_into(self.data(h.ino), at, data);
        let h = self.handles[slot].as_mut().unwrap();
        if off.is_none() {
            h.pos = at + data.len() as u64;
        }
        h.dirty |= h.buffers && !data.is_empty();
        Ok(Val::Unit)
    }

    pub fn h_seek(&mut self, slot: usize, to: SeekFrom) -> R {
        let h = self.handle(slot);
        let new = match to {
            SeekFrom::Start(n) => Some(n),
            SeekFrom::Current(d) => h.pos.checked_add_signed(d),
            SeekFrom::End(d) => (self.file(h.ino).len() as u64).checked_add_signed(d),
        }
        .ok_or(EINVAL)?;
        self.handles[slot].as_mut().unwrap().pos = new;
        Ok(Val::Num(new))
    }

    pub fn h_set_len(&mut self, slot: usize, size: u64) -> R {
        let h = self.handle(slot).clone();
        if !h.mode.write {
            return Err(EBADF);
        }
        self.data(h.ino).resize(size as usize, 0);
        Ok(Val::Unit)
    }

    /// fallocate(2): mode 0 grows the file to cover the range, KEEP_SIZE changes nothing
    /// visible, PUNCH_HOLE zeros the range within the file.
    pub fn h_allocate(&mut self, slot: usize, mode: FallocateMode, off: u64, len: u64) -> R {
        let h = self.handle(slot).clone();
        if !h.mode.write {
            return Err(EBADF);
        }
        if len == 0 {
            return Err(EINVAL);
        }
        let d = self.data(h.ino);
        let end = (off + len) as usize;
        match mode {
            FallocateMode::Allocate if end > d.len() => d.resize(end, 0),
            FallocateMode::Allocate | FallocateMode::KeepSize => {}
            FallocateMode::PunchHole => {
                let end = end.min(d.len());
                if (off as usize) < end {
                    d[off as usize..end].fill(0);
                }
            }
        }
        Ok(Val::Unit)
    }

    pub fn h_stat(&self, slot: usize) -> R {
        Ok(self.stat_val(self.handle(slot).ino))
    }

    pub fn h_sync(&mut self, slot: usize) -> R {
        self.handles[slot].as_mut().unwrap().dirty = false;
        Ok(Val::Unit)
    }

    /// A path naming `ino` (the first found), if it has a name left.
    pub fn path_of(&self, ino: u64) -> Option<Vec<u8>> {
        let mut stack = vec![(Vec::new(), super::ROOT)];
        while let Some((path, dir)) = stack.pop() {
            for (name, &e) in self.dir(dir) {
                let p = [path.as_slice(), b"/", name].concat();
                if e == ino {
                    return Some(p);
                }
                if self.is_dir(e) {
                    stack.push((p, e));
                }
            }
        }
        None
    }
}
