//! The active scheduler's lease under the embedded election: the active scheduler may
//! act only while a majority of the cluster's nodes (the voters) have recently taken a
//! message from it. Every message the active one sends carries its clock (`lease_ms`);
//! a node's heartbeats echo the newest such time it took from the scheduler it
//! follows. A node that took a message sent at `t` votes for no other candidate
//! before it has heard nothing for the vote timeout after that (see
//! [`super::Follower`]), so while a majority's echoes are younger than the lease
//! (shorter than the vote timeout) no other candidate can win a majority: two
//! schedulers never act at once. Pure: times are the active scheduler's own clock.

use std::collections::{BTreeMap, BTreeSet};

/// Echoes from the voters, and whether they add up to a lease.
#[derive(Clone, Debug)]
pub struct Lease {
    duration_ms: u64,
    voters: BTreeSet<i32>,
    echoes: BTreeMap<i32, u64>,
}

impl Lease {
    /// A lease over `voters` (node ids) lasting `duration_ms` from each echo.
    pub fn new(voters: BTreeSet<i32>, duration_ms: u64) -> Lease {
        Lease {
            duration_ms,
            voters,
            echoes: BTreeMap::new(),
        }
    }

    /// Voters needed: a majority (none without voters).
    pub fn need(&self) -> usize {
        match self.voters.len() {
            0 => 0,
            n => n / 2 + 1,
        }
    }

    /// Voter `id` took a message this scheduler sent at `sent_ms` (its echo, or its
    /// vote for a campaign sent then). Other ids count for nothing.
    pub fn on_echo(&mut self, id: i32, sent_ms: u64) {
        if self.voters.contains(&id) {
            let e = self.echoes.entry(id).or_insert(sent_ms);
            *e = (*e).max(sent_ms);
        }
    }

    /// Until when (ms) the lease holds: the time a majority's echoes still cover;
    /// `None` without a majority of echoes at all. With no voters, forever.
    pub fn until_ms(&self) -> Option<u64> {
        let need = self.need();
        if need == 0 {
            return Some(u64::MAX);
        }
        let mut stamps: Vec<u64> = self.echoes.values().copied().collect();
        stamps.sort_unstable_by(|a, b| b.cmp(a));
        stamps.get(need - 1).map(|t| t.saturating_add(self.duration_ms))
    }

    /// True while the lease holds at `now_ms`.
    pub fn holds(&self, now_ms: u64) -> bool {
        self.until_ms().is_some_and(|u| now_ms < u)
    }

    /// Forgets every echo (a new term starts counting afresh).
    pub fn clear(&mut self) {
        self.echoes.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lease() -> Lease {
        Lease::new([8, 9, 10, 11, 13].into_iter().collect(), 400)
    }

    #[test]
    fn a_majority_of_fresh_echoes_holds_it() {
        let mut l = lease();
        assert_eq!(l.need(), 3);
        assert!(!l.holds(0));
        l.on_echo(8, 100);
        l.on_echo(9, 120);
        l.on_echo(42, 500); // not a voter
        assert!(!l.holds(130), "two of five");
        l.on_echo(10, 90);
        assert_eq!(l.until_ms(), Some(490), "the third freshest echo bounds it");
        assert!(l.holds(489) && !l.holds(490));
        // an older echo never shortens it
        l.on_echo(10, 50);
        assert!(l.holds(489));
        l.on_echo(11, 300);
        assert_eq!(l.until_ms(), Some(500));
        l.clear();
        assert!(!l.holds(200));
    }

    #[test]
    fn without_voters_it_always_holds() {
        let l = Lease::new(BTreeSet::new(), 400);
        assert!(l.holds(u64::MAX - 1));
    }
}
