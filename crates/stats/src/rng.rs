//! The one seeded generator of wattio: SplitMix64 (Steele, Lea & Flood, "Fast splittable
//! pseudorandom number generators", OOPSLA 2014, section 3). Ours rather than a crate so that a
//! seed gives the same sequence on every platform and every dependency version: a shuffled run
//! order or a generated trace is reproducible from its seed alone. Not for cryptography, and
//! not meant to feed the statistics themselves.

/// SplitMix64: a 64-bit state advanced by the golden-ratio increment, output through a
/// 64-bit finaliser.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SplitMix64 {
    state: u64,
}

impl SplitMix64 {
    /// The generator whose state starts at `seed` (the first output is that of `seed + γ`).
    pub fn new(seed: u64) -> Self {
        SplitMix64 { state: seed }
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1), from the top 53 bits.
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// An integer in [0, n) (0 when `n` is 0). Plain modulo: the bias is below n / 2⁶⁴,
    /// nothing for the lengths wattio shuffles.
    pub fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            0
        } else {
            self.next_u64() % n
        }
    }

    /// Shuffles `items` in place (Fisher–Yates, last position first).
    pub fn shuffle<T>(&mut self, items: &mut [T]) {
        for i in (1..items.len()).rev() {
            let j = self.below(i as u64 + 1) as usize;
            items.swap(i, j);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_the_reference_outputs() {
        // The published first five outputs for seed 1234567 (Rosetta Code, "Pseudo-random
        // numbers/Splitmix64", https://rosettacode.org/wiki/Pseudo-random_numbers/Splitmix64).
        let mut r = SplitMix64::new(1234567);
        let want = [
            6457827717110365317u64,
            3203168211198807973,
            9817491932198370423,
            4593380528125082431,
            16408922859458223821,
        ];
        for w in want {
            assert_eq!(r.next_u64(), w);
        }
    }

    #[test]
    fn same_seed_same_stream_and_shuffles_are_permutations() {
        let (mut a, mut b) = (SplitMix64::new(7), SplitMix64::new(7));
        for _ in 0..100 {
            assert_eq!(a.next_u64(), b.next_u64());
        }
        assert_ne!(SplitMix64::new(7).next_u64(), SplitMix64::new(8).next_u64());
        let mut v: Vec<u32> = (0..50).collect();
        SplitMix64::new(3).shuffle(&mut v);
        assert_ne!(v, (0..50).collect::<Vec<_>>());
        let mut sorted = v.clone();
        sorted.sort();
        assert_eq!(sorted, (0..50).collect::<Vec<_>>());
        assert_eq!(SplitMix64::new(3).below(0), 0);
        let mut r = SplitMix64::new(1);
        let m: f64 = (0..100_000).map(|_| r.next_f64()).sum::<f64>() / 100_000.0;
        assert!((m - 0.5).abs() < 0.01, "{m}");
    }
}
