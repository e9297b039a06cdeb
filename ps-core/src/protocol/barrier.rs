//! Barrier bookkeeping at the scheduler: which nodes wait at which group's barrier,
//! released once every live member has arrived. Dead nodes do not hold a barrier.

use std::collections::{BTreeMap, BTreeSet};

/// Nodes waiting at each group's barrier.
#[derive(Debug, Default, Clone)]
pub struct Barriers {
    waiting: BTreeMap<i32, BTreeSet<i32>>,
}

impl Barriers {
    /// An empty set of barriers.
    pub fn new() -> Barriers {
        Barriers::default()
    }

    /// `node` arrived at `group`'s barrier; `alive` are the group's live members.
    /// Returns the nodes to release if the barrier is now complete. Arriving twice
    /// (a resent request) counts once.
    pub fn arrive(&mut self, group: i32, node: i32, alive: &[i32]) -> Option<Vec<i32>> {
        self.waiting.entry(group).or_default().insert(node);
        self.complete(group, alive)
    }

    /// Re-evaluates `group` after membership changed (a node died); returns the nodes
    /// to release if it is now complete.
    pub fn complete(&mut self, group: i32, alive: &[i32]) -> Option<Vec<i32>> {
        let w = self.waiting.get(&group)?;
        if w.is_empty() || !alive.iter().all(|id| w.contains(id)) {
            return None;
        }
        let released = self.waiting.remove(&group).unwrap_or_default();
        Some(released.into_iter().filter(|id| alive.contains(id)).collect())
    }

    /// Groups with at least one node waiting.
    pub fn open_groups(&self) -> Vec<i32> {
        self.waiting.keys().copied().collect()
    }

    /// True if `node` waits at `group`'s barrier.
    pub fn has_arrived(&self, group: i32, node: i32) -> bool {
        self.waiting.get(&group).is_some_and(|w| w.contains(&node))
    }

    /// Number of nodes waiting at `group`'s barrier.
    pub fn count(&self, group: i32) -> usize {
        self.waiting.get(&group).map_or(0, |w| w.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn releases_when_all_arrive() {
        let mut b = Barriers::new();
        let alive = [1, 8, 9];
        assert_eq!(b.arrive(7, 9, &alive), None);
        assert_eq!(b.arrive(7, 9, &alive), None, "resent request counts once");
        assert_eq!(b.count(7), 1);
        assert_eq!(b.arrive(7, 1, &alive), None);
        assert_eq!(b.arrive(7, 8, &alive), Some(vec![1, 8, 9]));
        assert_eq!(b.count(7), 0);
        assert_eq!(b.arrive(7, 8, &alive), None, "next round starts empty");
    }

    #[test]
    fn groups_are_independent() {
        let mut b = Barriers::new();
        assert_eq!(b.arrive(4, 9, &[9, 11]), None);
        assert_eq!(b.arrive(2, 8, &[8]), Some(vec![8]));
        assert_eq!(b.arrive(4, 11, &[9, 11]), Some(vec![9, 11]));
    }

    #[test]
    fn a_dead_node_does_not_hold_the_barrier() {
        let mut b = Barriers::new();
        assert_eq!(b.arrive(7, 1, &[1, 8, 9, 11]), None);
        assert_eq!(b.arrive(7, 9, &[1, 8, 9, 11]), None);
        assert_eq!(b.complete(7, &[1, 8, 9]), None);
        assert_eq!(b.complete(7, &[1, 9]), Some(vec![1, 9]));
        assert_eq!(b.open_groups(), Vec::<i32>::new());
    }
}
