//! Dead-node detection from heartbeats: a node silent for longer than the timeout is
//! declared dead once. Silence counts only while the watcher itself runs: a gap of
//! more than half a timeout between two checks is the watching process not being run
//! (its host or the process stalled), when nobody could be heard, so it is not held
//! against the nodes (see [`Liveness::check`]).

use std::collections::{BTreeMap, BTreeSet};

/// Last heartbeat time of every watched node.
#[derive(Debug, Clone)]
pub struct Liveness {
    timeout_ms: u64,
    last_seen: BTreeMap<i32, u64>,
    dead: BTreeSet<i32>,
    /// When [`Liveness::check`] last ran.
    last_check_ms: Option<u64>,
}

impl Liveness {
    /// Watches nodes with the given silence timeout (0 disables detection).
    pub fn new(timeout_ms: u64) -> Liveness {
        Liveness {
            timeout_ms,
            last_seen: BTreeMap::new(),
            dead: BTreeSet::new(),
            last_check_ms: None,
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

    /// Nodes that became dead at `now_ms` (each reported once). The caller checks
    /// often (every few milliseconds); when more than half a timeout passed since the
    /// last check, this process was not running in between (a loaded or suspended
    /// host): the heartbeats sent meanwhile wait unread, so every node's silence is
    /// moved on by the gap instead of declaring nodes dead before their waiting
    /// heartbeats are read.
    pub fn check(&mut self, now_ms: u64) -> Vec<i32> {
        if self.timeout_ms == 0 {
            return Vec::new();
        }
        let gap = self.last_check_ms.map_or(0, |t| now_ms.saturating_sub(t));
        self.last_check_ms = Some(now_ms);
        if gap > self.timeout_ms / 2 {
            for t in self.last_seen.values_mut() {
                *t = t.saturating_add(gap).min(now_ms);
            }
        }
        let newly: Vec<i32> = self
            .last_seen
            .iter()
            .filter(|(_, &t)| now_ms.saturating_sub(t) > self.timeout_ms)
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
        assert_eq!(l.check(1000), Vec::<i32>::new());
        assert_eq!(l.check(1001), vec![11]);
        assert_eq!(l.check(1500), Vec::<i32>::new());
        assert!(l.is_dead(11));
        l.beat(11, 1600);
        assert!(l.is_dead(11), "a beat does not raise the dead");
        assert_eq!(l.check(1801), vec![9]);
        l.revive(11, 2000);
        assert!(!l.is_dead(11));
        assert_eq!(l.silence_ms(11, 2500), Some(500));
    }

    /// The watcher itself did not run for 1.5 timeouts (a stalled host): the nodes'
    /// heartbeats of that time wait unread, so nobody is declared dead at the first
    /// check after it; a node that stays silent afterwards is, a timeout later.
    #[test]
    fn a_stall_of_the_watcher_is_not_held_against_the_nodes() {
        let mut l = Liveness::new(1000);
        l.revive(9, 0);
        l.revive(11, 0);
        for now in (20..=900).step_by(20) {
            assert!(l.check(now).is_empty());
        }
        // no check from 900 to 2400: silence 2400 by the clock, 900 while watching
        assert_eq!(l.check(2400), Vec::<i32>::new());
        assert_eq!(l.silence_ms(9, 2400), Some(900));
        l.beat(9, 2410); // its heartbeat, read once the process runs again
        for now in (2420..=2500).step_by(20) {
            assert!(l.check(now).is_empty());
        }
        assert_eq!(l.check(2520), vec![11], "silent for a timeout of watching");
        assert!(!l.is_dead(9));
        // gaps shorter than half a timeout count in full
        let mut l = Liveness::new(1000);
        l.revive(9, 0);
        let mut dead = Vec::new();
        for now in (400..=1200).step_by(400) {
            dead.extend(l.check(now));
        }
        assert_eq!(dead, vec![9]);
    }

    #[test]
    fn zero_timeout_disables() {
        let mut l = Liveness::new(0);
        l.revive(9, 0);
        assert!(l.check(u64::MAX).is_empty());
    }
}
