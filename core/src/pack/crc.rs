//! CRC-32C (Castagnoli), the checksum of every part of a pack image: the SSE 4.2 instruction
//! in three lanes where the CPU has it, a table otherwise.

/// CRC-32C (Castagnoli) of `data`.
pub fn crc32c(data: &[u8]) -> u32 {
    !crc32c_update(!0, data)
}

/// Continues a CRC-32C over `data` (without the final inversion): the SSE 4.2 instruction in
/// three lanes where the CPU has it (close to 8 bytes a cycle, so checking a small file costs
/// less than copying it), else a table.
pub fn crc32c_update(crc: u32, data: &[u8]) -> u32 {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("sse4.2") {
        // SAFETY: the CPU supports SSE 4.2 (checked just above).
        return unsafe { crc32c_sse42(crc, data) };
    }
    crc32c_table(crc, data)
}

/// Bytes per lane of the three-lane CRC (long and short rounds).
const LANE_LONG: usize = 1024;
const LANE_SHORT: usize = 128;

/// Tables that append `n` zero bytes to a raw CRC-32C register (a linear map, applied a byte
/// of the register at a time): how the three lanes' CRCs are joined.
struct Shift([[u32; 256]; 4]);

impl Shift {
    fn new(n: usize) -> Shift {
        let one = |mut c: u32| {
            for _ in 0..n * 8 {
                c = if c & 1 != 0 { 0x82F6_3B78 ^ (c >> 1) } else { c >> 1 };
            }
            c
        };
        // The map is linear: shift each of the 32 register bits once, combine the rest.
        let bits: Vec<u32> = (0..32).map(|j| one(1 << j)).collect();
        let mut t = [[0u32; 256]; 4];
        for (k, row) in t.iter_mut().enumerate() {
            for (b, e) in row.iter_mut().enumerate() {
                *e = (0..8).filter(|j| b >> j & 1 != 0).fold(0, |acc, j| acc ^ bits[8 * k + j]);
            }
        }
        Shift(t)
    }

    fn apply(&self, c: u32) -> u32 {
        let t = &self.0;
        t[0][(c & 0xff) as usize]
            ^ t[1][((c >> 8) & 0xff) as usize]
            ^ t[2][((c >> 16) & 0xff) as usize]
            ^ t[3][(c >> 24) as usize]
    }
}

fn shifts() -> &'static (Shift, Shift) {
    static SHIFTS: std::sync::OnceLock<(Shift, Shift)> = std::sync::OnceLock::new();
    SHIFTS.get_or_init(|| (Shift::new(LANE_LONG), Shift::new(LANE_SHORT)))
}

/// The SSE 4.2 CRC in three independent lanes (the instruction's latency is three times its
/// throughput), joined by [`Shift`]: about three times the speed of one lane on a record.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "sse4.2")]
unsafe fn crc32c_sse42(crc: u32, mut data: &[u8]) -> u32 {
    use std::arch::x86_64::{_mm_crc32_u64, _mm_crc32_u8};
    let word = |b: &[u8], i: usize| u64::from_le_bytes(b[i..i + 8].try_into().unwrap());
    let mut c0 = crc as u64;
    let (long, short) = shifts();
    for (lane, shift) in [(LANE_LONG, long), (LANE_SHORT, short)] {
        while data.len() >= 3 * lane {
            let (mut c1, mut c2) = (0u64, 0u64);
            for i in (0..lane).step_by(8) {
                c0 = _mm_crc32_u64(c0, word(data, i));
                c1 = _mm_crc32_u64(c1, word(data, lane + i));
                c2 = _mm_crc32_u64(c2, word(data, 2 * lane + i));
            }
            c0 = (shift.apply(c0 as u32) ^ c1 as u32) as u64;
            c0 = (shift.apply(c0 as u32) ^ c2 as u32) as u64;
            data = &data[3 * lane..];
        }
    }
    let mut chunks = data.chunks_exact(8);
    for ch in &mut chunks {
        c0 = _mm_crc32_u64(c0, u64::from_le_bytes(ch.try_into().unwrap()));
    }
    let mut c = c0 as u32;
    for &b in chunks.remainder() {
        c = _mm_crc32_u8(c, b);
    }
    c
}

/// The portable CRC-32C, one byte at a time (also checks the SSE 4.2 path in tests).
pub fn crc32c_table(mut crc: u32, data: &[u8]) -> u32 {
    static TABLE: std::sync::OnceLock<[u32; 256]> = std::sync::OnceLock::new();
    let t = TABLE.get_or_init(|| {
        let mut t = [0u32; 256];
        for (i, e) in t.iter_mut().enumerate() {
            let mut c = i as u32;
            for _ in 0..8 {
                c = if c & 1 != 0 { 0x82F6_3B78 ^ (c >> 1) } else { c >> 1 };
            }
            *e = c;
        }
        t
    });
    for &b in data {
        crc = t[((crc ^ b as u32) & 0xff) as usize] ^ (crc >> 8);
    }
    crc
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crc32c_known_value_and_paths_agree() {
        assert_eq!(crc32c(b"123456789"), 0xE306_9283);
        let data: Vec<u8> =
            (0..20_000u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8).collect();
        // Around the three-lane rounds (3 x 128, 3 x 1024 bytes) and misaligned starts.
        let mut lens = vec![
            0, 1, 7, 8, 9, 383, 384, 385, 999, 1000, 3071, 3072, 3073, 3456, 4096, 6527, 19_000,
        ];
        lens.extend((0..200).map(|i| i * 97 % 10_000));
        for n in lens {
            for start in [0, 1, 5] {
                let d = &data[start..start + n];
                assert_eq!(crc32c_update(!0, d), crc32c_table(!0, d), "length {n} from {start}");
                assert_eq!(
                    crc32c_update(0x1234_5678, d),
                    crc32c_table(0x1234_5678, d),
                    "length {n} from {start}, other seed"
                );
            }
        }
    }
}
