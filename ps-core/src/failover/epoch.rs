//! Which scheduler is active: the epoch carried on every message a scheduler sends.

use serde::{Deserialize, Serialize};
use std::cmp::Ordering;

/// Which scheduler is active: the term and the candidate that won it. Ordered so that
/// the greater epoch wins: higher term first, then the lower candidate index.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
pub struct Epoch {
    /// Bumped by every takeover; 0 = none known yet.
    pub term: u64,
    /// Index of the active scheduler in the candidate list.
    pub candidate: u32,
}

impl Ord for Epoch {
    fn cmp(&self, other: &Epoch) -> Ordering {
        self.term
            .cmp(&other.term)
            .then_with(|| other.candidate.cmp(&self.candidate))
    }
}

impl PartialOrd for Epoch {
    fn partial_cmp(&self, other: &Epoch) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl std::fmt::Display for Epoch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "term {} (scheduler #{})", self.term, self.candidate)
    }
}

/// The transport key under which a van connects to scheduler candidate `i` (apart from
/// the key of the active scheduler, [`crate::node::SCHEDULER`]). Far below the keys of
/// nodes and of refused joiners.
pub fn candidate_key(i: usize) -> i32 {
    -1_000_000 - i as i32
}

/// True when transport key `key` is a scheduler candidate's ([`candidate_key`]).
pub fn is_candidate_key(key: i32) -> bool {
    key <= candidate_key(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn higher_term_then_lower_index_wins() {
        let e = |term, candidate| Epoch { term, candidate };
        assert!(e(2, 1) > e(1, 0));
        assert!(e(2, 0) > e(2, 1));
        assert!(e(0, 0) < e(1, 5));
        assert_eq!(e(3, 2).max(e(3, 1)), e(3, 1));
    }

    #[test]
    fn candidate_keys_are_distinct_and_far_below_node_keys() {
        assert_ne!(candidate_key(0), candidate_key(1));
        assert!(candidate_key(15) < -65_537);
        assert!(is_candidate_key(candidate_key(0)) && is_candidate_key(candidate_key(15)));
        assert!(!is_candidate_key(-65_537) && !is_candidate_key(8));
    }
}
