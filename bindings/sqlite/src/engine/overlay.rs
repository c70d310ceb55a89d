//! The writes of one SQLite write transaction, not yet committed: extents over the committed
//! file, applied to the store in one txvfs transaction at commit.

use std::collections::BTreeMap;
use txvfs::{File, Result};

/// Bytes written since the transaction began, as non-overlapping extents, and the file's
/// logical size once anything changed it.
#[derive(Clone, Default)]
pub struct Overlay {
    ext: BTreeMap<u64, Vec<u8>>,
    size: Option<u64>,
    /// The smallest size the file was cut to: committed bytes from there on are gone, even
    /// where a later write extended the file again (they read as zeros).
    cut: Option<u64>,
}

impl Overlay {
    /// True when nothing changed.
    pub fn is_empty(&self) -> bool {
        self.ext.is_empty() && self.size.is_none()
    }

    /// Records a write; `base` is the committed size (asked for once).
    pub fn write(
        &mut self,
        off: u64,
        data: &[u8],
        base: impl FnOnce() -> Result<u64>,
    ) -> Result<()> {
        if data.is_empty() {
            return Ok(());
        }
        let end = off + data.len() as u64;
        let size = match self.size {
            Some(s) => s,
            None => base()?,
        };
        self.size = Some(size.max(end));
        // Fast paths: inside one extent, or appending to the extent that ends at `off`.
        if let Some((&s, v)) = self.ext.range_mut(..=off).next_back() {
            let e = s + v.len() as u64;
            if off >= s && end <= e {
                v[(off - s) as usize..(end - s) as usize].copy_from_slice(data);
                return Ok(());
            }
            if e == off && self.ext.range(off + 1..=end).next().is_none() {
                let v = self.ext.get_mut(&s).expect("extent");
                v.extend_from_slice(data);
                if let Some(next) = self.ext.remove(&end) {
                    self.ext.get_mut(&s).expect("extent").extend_from_slice(&next);
                }
                return Ok(());
            }
        }
        // General case: merge every extent that overlaps or touches [off, end].
        let touching: Vec<u64> = self
            .ext
            .range(..=end)
            .rev()
            .take_while(|(&s, v)| s + v.len() as u64 >= off)
            .map(|(&s, _)| s)
            .collect();
        let mut start = off;
        let mut stop = end;
        for &s in &touching {
            start = start.min(s);
            stop = stop.max(s + self.ext[&s].len() as u64);
        }
        let mut buf = vec![0u8; (stop - start) as usize];
        for s in touching {
            let v = self.ext.remove(&s).expect("extent");
            buf[(s - start) as usize..(s - start) as usize + v.len()].copy_from_slice(&v);
        }
        buf[(off - start) as usize..(end - start) as usize].copy_from_slice(data);
        self.ext.insert(start, buf);
        Ok(())
    }

    /// Records a truncation to `size`.
    pub fn truncate(&mut self, size: u64) {
        self.size = Some(size);
        self.cut = Some(self.cut.map_or(size, |c| c.min(size)));
        let beyond: Vec<u64> = self.ext.range(size..).map(|(&s, _)| s).collect();
        for s in beyond {
            self.ext.remove(&s);
        }
        if let Some((&s, v)) = self.ext.range_mut(..size).next_back() {
            if s + v.len() as u64 > size {
                v.truncate((size - s) as usize);
            }
        }
    }

    /// The smallest size the transaction cut the file to, if it cut it.
    pub fn cut(&self) -> Option<u64> {
        self.cut
    }

    /// The logical size, if the overlay changed it.
    pub fn size(&self) -> Option<u64> {
        self.size
    }

    /// Reads `buf.len()` bytes at `off` through the overlay; `base` reads committed bytes
    /// (zero-filling what it does not return). Returns how many bytes lie before the end of
    /// file; the rest of `buf` is zeros.
    pub fn read(
        &self,
        off: u64,
        buf: &mut [u8],
        base: impl FnOnce(&mut [u8]) -> Result<()>,
    ) -> Result<usize> {
        let end = off + buf.len() as u64;
        let covered =
            self.ext.range(..=off).next_back().is_some_and(|(&s, v)| s + v.len() as u64 >= end);
        if !covered {
            base(buf)?;
            if let Some(cut) = self.cut {
                let gone = cut.saturating_sub(off).min(buf.len() as u64) as usize;
                buf[gone..].fill(0);
            }
        }
        for (&s, v) in self.ext.range(..end).rev() {
            let e = s + v.len() as u64;
            if e <= off {
                break;
            }
            let from = s.max(off);
            let to = e.min(end);
            buf[(from - off) as usize..(to - off) as usize]
                .copy_from_slice(&v[(from - s) as usize..(to - s) as usize]);
        }
        let valid = match self.size {
            Some(size) => size.saturating_sub(off).min(buf.len() as u64) as usize,
            None => buf.len(),
        };
        buf[valid..].fill(0);
        Ok(valid)
    }

    /// True when a read of `[off, end)` comes from the committed file alone: no extent
    /// overlaps it and the overlay's size (if it set one) does not cut it short.
    pub fn passes_through(&self, off: u64, end: u64) -> bool {
        self.size.is_none_or(|s| end <= s)
            && self.cut.is_none_or(|c| end <= c)
            && self.ext.range(..end).next_back().is_none_or(|(&s, v)| s + v.len() as u64 <= off)
    }

    /// The page size in the database header when this overlay writes one (a database's first
    /// page: "SQLite format 3", then the page size at bytes 16..18, big-endian, 1 for 65536).
    pub fn page_size(&self) -> Option<u32> {
        let first = self.ext.get(&0)?;
        if first.len() < 18 || !first.starts_with(b"SQLite format 3\0") {
            return None;
        }
        let size = match u16::from_be_bytes([first[16], first[17]]) {
            1 => 65536,
            n => n as u32,
        };
        (size.is_power_of_two() && (512..=65536).contains(&size)).then_some(size)
    }

    /// Applies the overlay to `f` (a handle inside the committing transaction).
    pub(super) fn apply(&self, f: &File) -> Result<()> {
        if let Some(size) = self.size {
            let mut now = f.stat()?.size;
            if let Some(cut) = self.cut.filter(|&c| c < now && c < size) {
                // Cut, then extended: the bytes between are zeros, not the committed ones.
                f.set_len(cut)?;
                now = cut;
            }
            if now != size {
                f.set_len(size)?;
            }
        }
        for (&s, v) in &self.ext {
            f.write_at(v, s)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn page_size_comes_from_a_database_header_only() {
        let mut header = b"SQLite format 3\0".to_vec();
        header.extend_from_slice(&[0x10, 0x00, 1, 1]);
        let mut o = Overlay::default();
        o.write(0, &header, || Ok(0)).unwrap();
        assert_eq!(o.page_size(), Some(4096));
        header[16..18].copy_from_slice(&[0, 1]);
        let mut big = Overlay::default();
        big.write(0, &header, || Ok(0)).unwrap();
        assert_eq!(big.page_size(), Some(65536));
        let mut journal = Overlay::default();
        journal
            .write(
                0,
                &[
                    0xd9, 0xd5, 0x05, 0xf9, 0x20, 0xa1, 0x63, 0xd7, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
                    0, 0,
                ],
                || Ok(0),
            )
            .unwrap();
        assert_eq!(journal.page_size(), None);
        let mut later = Overlay::default();
        later.write(4096, &[1; 4096], || Ok(8192)).unwrap();
        assert_eq!(later.page_size(), None);
    }

    fn base_zero(b: &mut [u8]) -> Result<()> {
        b.fill(7);
        Ok(())
    }

    #[test]
    fn overlay_merges_and_reads_through() {
        let mut o = Overlay::default();
        o.write(4096, &[1; 4096], || Ok(8192)).unwrap();
        o.write(0, &[2; 4096], || Ok(8192)).unwrap();
        o.write(8192, &[3; 100], || Ok(8192)).unwrap();
        assert_eq!(o.ext.len(), 1, "adjacent writes merge into one extent");
        assert_eq!(o.size(), Some(8292));
        let mut buf = vec![0; 200];
        assert_eq!(o.read(8192, &mut buf, base_zero).unwrap(), 100);
        assert!(buf[..100].iter().all(|&b| b == 3) && buf[100..].iter().all(|&b| b == 0));
        o.write(100, &[9; 10], || Ok(0)).unwrap();
        let mut b2 = vec![0; 20];
        o.read(95, &mut b2, base_zero).unwrap();
        assert_eq!(&b2[..5], &[2; 5]);
        assert_eq!(&b2[5..15], &[9; 10]);
    }

    #[test]
    fn overlay_truncate_hides_base_and_extents() {
        let mut o = Overlay::default();
        o.write(10, &[1; 20], || Ok(100)).unwrap();
        o.truncate(15);
        let mut buf = vec![0; 10];
        assert_eq!(o.read(10, &mut buf, base_zero).unwrap(), 5);
        assert_eq!(buf, [1, 1, 1, 1, 1, 0, 0, 0, 0, 0]);
        let mut b = vec![0; 4];
        assert_eq!(o.read(0, &mut b, base_zero).unwrap(), 4);
        assert_eq!(b, [7; 4], "bytes the overlay does not cover come from the base");
    }

    #[test]
    fn a_file_cut_then_extended_reads_zeros_where_it_was_cut() {
        // Committed: 16 bytes of 7. Cut to 4, then written at 12: bytes 4..12 are zeros now,
        // not the committed bytes the cut removed (they read as 7 before the fix).
        let mut o = Overlay::default();
        o.truncate(4);
        o.write(12, &[1; 4], || Ok(16)).unwrap();
        assert_eq!(o.size(), Some(16));
        let mut buf = vec![9; 16];
        assert_eq!(o.read(0, &mut buf, base_zero).unwrap(), 16);
        assert_eq!(buf, [7, 7, 7, 7, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1]);
        assert!(o.passes_through(0, 4) && !o.passes_through(0, 8) && !o.passes_through(4, 8));
        // A later, larger cut keeps the first one: bytes past 4 stay gone.
        o.truncate(14);
        o.write(20, &[2; 2], || Ok(16)).unwrap();
        let mut buf = vec![9; 22];
        o.read(0, &mut buf, base_zero).unwrap();
        assert_eq!(&buf[..4], &[7; 4]);
        assert_eq!(&buf[4..12], &[0; 8]);
        assert_eq!(&buf[12..14], &[1; 2]);
        assert_eq!(&buf[14..20], &[0; 6]);
        assert_eq!(o.cut(), Some(4));
    }

    #[test]
    fn passes_through_only_where_a_read_would_use_the_base_alone() {
        let mut o = Overlay::default();
        assert!(o.passes_through(0, 4096), "an empty overlay");
        o.write(4096, &[1; 4096], || Ok(16384)).unwrap();
        assert!(o.passes_through(0, 4096) && o.passes_through(8192, 12288));
        assert!(!o.passes_through(4095, 4097) && !o.passes_through(8191, 8192));
        assert!(!o.passes_through(0, 16384), "an extent inside the range");
        o.truncate(12288);
        assert!(o.passes_through(8192, 12288));
        assert!(!o.passes_through(12288, 16384), "past the overlay's size");
    }

    #[test]
    fn overlay_overlapping_writes() {
        let mut o = Overlay::default();
        o.write(0, &[1; 10], || Ok(0)).unwrap();
        o.write(20, &[2; 10], || Ok(0)).unwrap();
        o.write(5, &[3; 20], || Ok(0)).unwrap();
        assert_eq!(o.ext.len(), 1);
        let v = &o.ext[&0];
        assert_eq!(v.len(), 30);
        assert_eq!(&v[..5], &[1; 5]);
        assert_eq!(&v[5..25], &[3; 20]);
        assert_eq!(&v[25..], &[2; 5]);
    }
}
