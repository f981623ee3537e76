//! A tiny seeded generator (SplitMix64) for the bounded random runs in `tests/`, so they
//! are reproducible without another dependency.

/// SplitMix64.
#[derive(Debug, Clone)]
pub struct SplitMix(pub u64);

impl SplitMix {
    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// `len` random bytes.
    pub fn bytes(&mut self, len: usize) -> Vec<u8> {
        (0..len).map(|_| self.next_u64() as u8).collect()
    }

    /// A random length in `lo..=hi`, then that many bytes.
    pub fn case(&mut self, lo: usize, hi: usize) -> Vec<u8> {
        let len = lo + (self.next_u64() as usize) % (hi - lo + 1);
        self.bytes(len)
    }
}
