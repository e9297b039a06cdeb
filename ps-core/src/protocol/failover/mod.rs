//! Scheduler failover (issue 11) as pure state machines: which scheduler candidate is
//! active, under which term, when a standby takes over, when an old active steps down,
//! and which standbys the active must wait for before it acts.
//!
//! The design, in one place:
//! - `PS_SCHEDULERS=host:port,host:port,…` lists every scheduler candidate; each
//!   process knows every candidate. The first scheduler starts active at term 1; the
//!   others run with `PS_SCHEDULER_STANDBY=1` and follow it.
//! - An [`Epoch`] (term, candidate) is carried on every message a scheduler sends.
//!   A higher term wins; at equal terms the lower candidate index wins. Nodes follow
//!   the best epoch they have heard ([`ActiveView`]) and drop messages of lower ones
//!   (fencing), so an old active cut off by a partition cannot hand out work.
//! - The active streams its whole state (node table, the master's queues) to the
//!   standbys with a sequence number and waits for their acks before it acts
//!   ([`Replicas`]); a standby silent for the heartbeat timeout is not waited for, and
//!   is caught up with the full state when it is heard again.
//! - Every message the active sends carries that sequence number; nodes report the
//!   highest one they saw, and how long the active has been silent, in heartbeats to
//!   every candidate. A standby ([`Candidate`]) takes over only when it has not heard
//!   the active for the timeout, a majority of nodes report the same silence, and no
//!   node saw a state newer than the one it holds: a standby that was merely cut off
//!   from a living active, or missed writes, never takes over.
//! - Barrier counts are not carried: a stale count could release a later barrier
//!   early. Nodes repeat their pending barrier requests to the new active instead.

mod candidate;
mod election;
mod replicas;
mod view;

pub use candidate::{Candidate, Decision, Refusal};
pub use election::{Election, Facts, Leased, Lock, Majority, Vote};
pub use replicas::Replicas;
pub use view::{ActiveView, Heard};

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
    }
}
