//! The simulator's one source of randomness: every choice of a run (delays, losses,
//! faults, incarnations, task times) is drawn from one seeded ChaCha8 generator, so a
//! seed replays the same run exactly.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// A seeded generator with the draws the simulator needs.
pub struct SimRng(ChaCha8Rng);

impl SimRng {
    /// The generator of run `seed`.
    pub fn new(seed: u64) -> SimRng {
        SimRng(ChaCha8Rng::seed_from_u64(seed))
    }

    /// True with probability `p` (0 never draws).
    pub fn chance(&mut self, p: f64) -> bool {
        p > 0.0 && self.0.gen::<f64>() < p
    }

    /// A number in `lo..=hi`.
    pub fn between(&mut self, lo: u64, hi: u64) -> u64 {
        if hi <= lo {
            return lo;
        }
        self.0.gen_range(lo..=hi)
    }

    /// An index below `n` (0 when `n` is 0).
    pub fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            return 0;
        }
        self.0.gen_range(0..n)
    }

    /// A random 64-bit number (a process incarnation).
    pub fn u64(&mut self) -> u64 {
        self.0.gen()
    }

    /// A fraction in `0.0..1.0`.
    pub fn unit(&mut self) -> f64 {
        self.0.gen()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_seed_replays_its_draws() {
        let draws = |seed| {
            let mut r = SimRng::new(seed);
            (0..50).map(|_| r.between(0, 1000)).collect::<Vec<_>>()
        };
        assert_eq!(draws(7), draws(7));
        assert_ne!(draws(7), draws(8));
        let mut r = SimRng::new(1);
        assert!(!r.chance(0.0));
        assert!(r.chance(1.0));
        assert_eq!(r.between(5, 5), 5);
        assert_eq!(r.below(0), 0);
    }
}
