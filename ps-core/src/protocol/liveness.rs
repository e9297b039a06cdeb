//! Dead-node detection from heartbeats: a node silent for longer than the timeout is
//! declared dead once. Silence counts only from when the watcher could hear: a
//! scheduler that starts acting (it took over, or its lease holds again after it was
//! cut off) heard nothing meanwhile because it could not, not because the nodes died,
//! so [`Liveness::check`] measures every silence from that moment at the earliest.

use std::collections::{BTreeMap, BTreeSet};

/// Last heartbeat time of every watched node.
#[derive(Debug, Clone)]
pub struct Liveness {
    timeout_ms: u64,
    last_seen: BTreeMap<i32, u64>,
    dead: BTreeSet<i32>,
}

impl Liveness {
    /// Watches nodes with the given silence timeout (0 disables detection).
    pub fn new(timeout_ms: u64) -> Liveness {
        Liveness {
            timeout_ms,
            last_seen: BTreeMap::new(),
            dead: BTreeSet::new(),
        }
    }

    /// Records a sign of life from `id` at `now_ms`. A dead node stays dead until
    /// [`Liveness::revive`] (its id may have been handed to a replacement).
    pub fn beat(&mut self, id: i32, now_ms: u64) {
        if !self.dead.contains(&id) {
            self.last_seen.insert(id, now_ms);
        }
    }

    /// Starts watching `id` afresh (a node joined or a replacement took the id).
    pub fn revive(&mut self, id: i32, now_ms: u64) {
        self.dead.remove(&id);
        self.last_seen.insert(id, now_ms);
    }

    /// Nodes that became dead at `now_ms` (each reported once), by their silence
    /// since their last heartbeat or since `watching_since_ms` (when the watcher
    /// started acting), whichever is later.
    pub fn check(&mut self, now_ms: u64, watching_since_ms: u64) -> Vec<i32> {
        if self.timeout_ms == 0 {
            return Vec::new();
        }
        let newly: Vec<i32> = self
            .last_seen
            .iter()
            .filter(|(_, &t)| now_ms.saturating_sub(t.max(watching_since_ms)) > self.timeout_ms)
            .map(|(&id, _)| id)
            .collect();
        for id in &newly {
            self.last_seen.remove(id);
            self.dead.insert(*id);
        }
        newly
    }

    /// True if `id` was declared dead.
    pub fn is_dead(&self, id: i32) -> bool {
        self.dead.contains(&id)
    }

    /// Milliseconds since `id`'s last heartbeat, if watched and alive.
    pub fn silence_ms(&self, id: i32, now_ms: u64) -> Option<u64> {
        self.last_seen.get(&id).map(|t| now_ms.saturating_sub(*t))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn silent_nodes_die_once() {
        let mut l = Liveness::new(1000);
        l.revive(9, 0);
        l.revive(11, 0);
        l.beat(9, 800);
        assert_eq!(l.check(1000, 0), Vec::<i32>::new());
        assert_eq!(l.check(1001, 0), vec![11]);
        assert_eq!(l.check(1500, 0), Vec::<i32>::new());
        assert!(l.is_dead(11));
        l.beat(11, 1600);
        assert!(l.is_dead(11), "a beat does not raise the dead");
        assert_eq!(l.check(1801, 0), vec![9]);
        l.revive(11, 2000);
        assert!(!l.is_dead(11));
        assert_eq!(l.silence_ms(11, 2500), Some(500));
    }

    #[test]
    fn silence_before_the_watcher_could_hear_does_not_count() {
        let mut l = Liveness::new(1000);
        for id in [8, 9, 11] {
            l.revive(id, 0);
        }
        l.beat(9, 5500);
        // cut off from 0 to 5000, acting again from 5000: nobody silent for a timeout
        assert!(l.check(5900, 5000).is_empty());
        assert_eq!(l.check(6001, 5000), vec![8, 11]);
        assert_eq!(l.check(6002, 5000), Vec::<i32>::new(), "each once");
        // 9 was heard after that: from its beat
        assert_eq!(l.check(6500, 5000), Vec::<i32>::new());
        assert_eq!(l.check(6501, 5000), vec![9]);
    }

    #[test]
    fn zero_timeout_disables() {
        let mut l = Liveness::new(0);
        l.revive(9, 0);
        assert!(l.check(u64::MAX, 0).is_empty());
    }
}
