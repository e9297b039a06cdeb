//! Deterministic parameter initialisation: a small seeded generator (SplitMix64), so
//! the same seed gives the same parameters on every machine and in every process.

/// A SplitMix64 stream of uniform numbers.
pub(crate) struct SeededRng(u64);

impl SeededRng {
    /// A stream determined by `seed` alone.
    pub(crate) fn new(seed: u64) -> SeededRng {
        SeededRng(seed ^ 0x5851_F42D_4C95_7F2D)
    }

    /// The next 64 random bits.
    pub(crate) fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `[-1, 1)`.
    pub(crate) fn symmetric(&mut self) -> f32 {
        (self.next_u64() >> 40) as f32 / (1u64 << 23) as f32 - 1.0
    }

    /// Uniform in `0..n` (`n > 0`; the tiny modulo bias is irrelevant here).
    pub(crate) fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }
}

/// Appends `n` weights uniform in `±sqrt(6 / fan)`: variance `2 / fan`, which is He
/// initialisation for `fan` = fan-in and Glorot for `fan` = fan-in + fan-out.
pub(crate) fn uniform_scaled(out: &mut Vec<f32>, n: usize, fan: f32, rng: &mut SeededRng) {
    let a = (6.0 / fan.max(1.0)).sqrt();
    out.extend((0..n).map(|_| rng.symmetric() * a));
}

/// Shuffles `v` in place (Fisher–Yates), deterministic in `seed`: the order of the
/// examples of an epoch.
pub fn shuffle<T>(v: &mut [T], seed: u64) {
    let mut rng = SeededRng::new(seed);
    for i in (1..v.len()).rev() {
        v.swap(i, rng.below(i + 1));
    }
}

/// A random permutation of `0..n`, deterministic in `seed` (as [`shuffle`]).
pub fn shuffled_indices(n: usize, seed: u64) -> Vec<usize> {
    let mut v: Vec<usize> = (0..n).collect();
    shuffle(&mut v, seed);
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deterministic_and_scaled() {
        let (mut a, mut b) = (Vec::new(), Vec::new());
        uniform_scaled(&mut a, 10_000, 6.0, &mut SeededRng::new(3));
        uniform_scaled(&mut b, 10_000, 6.0, &mut SeededRng::new(3));
        assert_eq!(a, b);
        assert!(a.iter().all(|v| v.abs() <= 1.0));
        let var = a.iter().map(|v| v * v).sum::<f32>() / a.len() as f32;
        assert!((var - 1.0 / 3.0).abs() < 0.02, "{var}");
        let mut p = shuffled_indices(100, 9);
        assert_eq!(p, shuffled_indices(100, 9));
        assert_ne!(p, shuffled_indices(100, 10));
        p.sort_unstable();
        assert_eq!(p, (0..100).collect::<Vec<_>>());
    }
}
