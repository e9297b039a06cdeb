//! The simulated network between process slots: every message is delayed (usually a
//! few milliseconds, sometimes hundreds, which reorders it), may be lost or
//! duplicated, and is dropped when a partition separates its ends at sending or at
//! delivery. A process always reaches itself.

use crate::rng::SimRng;

/// Link behaviour and the current partition.
#[derive(Clone, Debug)]
pub struct Net {
    /// Partition side of each slot: two slots talk only when on the same side.
    side: Vec<u32>,
    /// Probability that a message is lost.
    pub loss: f64,
    /// Probability that a message is delivered twice.
    pub dup: f64,
    /// Probability that a message takes a long detour (10-400 ms): reordering.
    pub slow: f64,
}

impl Net {
    /// A healthy network of `slots` processes.
    pub fn new(slots: usize) -> Net {
        Net {
            side: vec![0; slots],
            loss: 0.0,
            dup: 0.0,
            slow: 0.0,
        }
    }

    /// True when `a` and `b` can talk.
    pub fn connected(&self, a: usize, b: usize) -> bool {
        a == b || self.side[a] == self.side[b]
    }

    /// Cuts the slots into the groups `sides` gives (slot → side).
    pub fn partition(&mut self, sides: Vec<u32>) {
        assert_eq!(sides.len(), self.side.len());
        self.side = sides;
    }

    /// The partition side of `slot`.
    pub fn side(&self, slot: usize) -> u32 {
        self.side[slot]
    }

    /// True while some slots cannot reach others.
    pub fn partitioned(&self) -> bool {
        self.side.iter().any(|&s| s != self.side[0])
    }

    /// Every slot reaches every other again; loss, duplication and detours stop.
    pub fn heal(&mut self) {
        self.side.iter_mut().for_each(|s| *s = 0);
        self.loss = 0.0;
        self.dup = 0.0;
        self.slow = 0.0;
    }

    /// The delays (ms) after which a message from `from` to `to` arrives: none if it
    /// is lost or cut off, two if it is duplicated.
    pub fn delays(&self, rng: &mut SimRng, from: usize, to: usize) -> Vec<u64> {
        if from == to {
            return vec![0];
        }
        if !self.connected(from, to) || rng.chance(self.loss) {
            return Vec::new();
        }
        let slow = self.slow;
        let one = |rng: &mut SimRng| {
            if rng.chance(slow) {
                rng.between(10, 400)
            } else {
                rng.between(1, 4)
            }
        };
        let first = one(rng);
        if rng.chance(self.dup) {
            vec![first, one(rng)]
        } else {
            vec![first]
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partitions_cut_and_healing_joins() {
        let mut n = Net::new(4);
        let mut rng = SimRng::new(1);
        assert_eq!(n.delays(&mut rng, 0, 1).len(), 1);
        n.partition(vec![1, 1, 0, 0]);
        assert!(n.partitioned());
        assert!(n.connected(0, 1) && !n.connected(1, 2));
        assert!(n.delays(&mut rng, 1, 2).is_empty());
        assert_eq!(n.delays(&mut rng, 2, 2), vec![0], "a process reaches itself");
        n.loss = 1.0;
        assert!(n.delays(&mut rng, 0, 1).is_empty());
        n.heal();
        assert!(!n.partitioned());
        assert_eq!(n.delays(&mut rng, 1, 2).len(), 1);
    }
}
