//! What the active scheduler says waits until the state it depends on is safe: each
//! message the active scheduler sends to the nodes is stamped with the state sequence
//! it was decided on, and leaves only once every standby heard within the standby
//! timeout acknowledged that state (so a standby taking over holds everything a node
//! was told) and the scheduler holds its lease. Messages leave in the order they were
//! decided. A message waits for a standby at most that timeout too: a standby that is
//! heard but does not acknowledge (its stream stalled: a link that dropped packets
//! backs off for seconds after it heals) is not waited for until it acknowledged the
//! state held when it was given up on, as a silent one is not; either catches up, and
//! no node votes for a standby missing state the node saw meanwhile. The standby
//! timeout outlasts the lease, so an active scheduler cut off from its standbys and
//! the nodes alike loses its lease before any message leaves without them. Pure:
//! messages are of type `M`, times in ms.

use std::collections::{BTreeMap, VecDeque};

#[derive(Clone, Copy, Debug)]
struct Standby {
    acked: u64,
    heard_ms: u64,
    /// Given up on as too slow: not waited for until it acknowledged this state.
    lagging: Option<u64>,
}

/// The active scheduler's standbys and held messages.
#[derive(Clone, Debug)]
pub struct Outbox<M> {
    live_ms: u64,
    standbys: BTreeMap<usize, Standby>,
    /// Held messages: the state each was decided on, when it was held, the message.
    held: VecDeque<(u64, u64, M)>,
}

impl<M> Outbox<M> {
    /// Standbys `peers` (candidate indices), heard at `now_ms`; a standby silent for
    /// longer than `live_ms` is not waited for (it catches up when heard again).
    pub fn new(peers: impl IntoIterator<Item = usize>, live_ms: u64, now_ms: u64) -> Outbox<M> {
        Outbox {
            live_ms,
            standbys: peers
                .into_iter()
                .map(|p| {
                    (
                        p,
                        Standby {
                            acked: 0,
                            heard_ms: now_ms,
                            lagging: None,
                        },
                    )
                })
                .collect(),
            held: VecDeque::new(),
        }
    }

    /// Standby `peer` holds the state up to `seq` (an ack or a beat) at `now_ms`.
    /// Unknown peers are ignored.
    pub fn on_ack(&mut self, peer: usize, seq: u64, now_ms: u64) {
        if let Some(s) = self.standbys.get_mut(&peer) {
            s.acked = s.acked.max(seq);
            s.heard_ms = s.heard_ms.max(now_ms);
            if s.lagging.is_some_and(|q| s.acked >= q) {
                s.lagging = None;
            }
        }
    }

    /// Gives up on every standby a held message has waited for longer than the
    /// standby timeout at `now_ms` (this scheduler holding `seq`): it is not waited
    /// for until it acknowledged `seq`. Returns the standbys given up on now.
    pub fn give_up_on_slow(&mut self, seq: u64, now_ms: u64) -> Vec<usize> {
        let (held, live_ms) = (&self.held, self.live_ms);
        let mut slow = Vec::new();
        for (&p, s) in self.standbys.iter_mut().filter(|(_, s)| s.lagging.is_none()) {
            // (held in order of their states: the first it lacks waited longest)
            let waited = held
                .iter()
                .find(|(q, _, _)| *q > s.acked)
                .is_some_and(|(_, at, _)| now_ms.saturating_sub(*at) > live_ms);
            if waited {
                s.lagging = Some(seq);
                slow.push(p);
            }
        }
        slow
    }

    /// The newest state every live standby holds, given that this scheduler holds
    /// `seq`: what a message may depend on to leave.
    pub fn committed(&self, seq: u64, now_ms: u64) -> u64 {
        self.standbys
            .values()
            .filter(|s| now_ms.saturating_sub(s.heard_ms) <= self.live_ms && s.lagging.is_none())
            .map(|s| s.acked.min(seq))
            .min()
            .unwrap_or(seq)
    }

    /// The newest state every standby, live or silent, acknowledged (`u64::MAX`
    /// without standbys).
    pub fn acked_by_all(&self) -> u64 {
        self.standbys.values().map(|s| s.acked).min().unwrap_or(u64::MAX)
    }

    /// Standbys not known to hold `seq`: sent the whole state again.
    pub fn behind(&self, seq: u64) -> Vec<usize> {
        self.standbys
            .iter()
            .filter(|(_, s)| s.acked < seq)
            .map(|(&p, _)| p)
            .collect()
    }

    /// Queues `msg`, decided on state `seq`, at `now_ms`.
    pub fn hold(&mut self, seq: u64, now_ms: u64, msg: M) {
        self.held.push_back((seq, now_ms, msg));
    }

    /// True while messages wait.
    pub fn waiting(&self) -> bool {
        !self.held.is_empty()
    }

    /// The held messages whose state is `committed` now, in order (a message waits
    /// behind an earlier one still held).
    pub fn release(&mut self, committed: u64) -> Vec<M> {
        let mut out = Vec::new();
        while self.held.front().is_some_and(|(seq, _, _)| *seq <= committed) {
            out.push(self.held.pop_front().expect("checked").2);
        }
        out
    }

    /// Drops every held message (this scheduler stepped down: they must not leave).
    pub fn clear(&mut self) -> usize {
        let n = self.held.len();
        self.held.clear();
        n
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_leave_once_every_live_standby_holds_their_state() {
        let mut o: Outbox<&str> = Outbox::new([1, 2], 1000, 0);
        assert_eq!(o.committed(3, 0), 0);
        o.hold(1, 0, "a");
        o.hold(2, 0, "b");
        o.hold(1, 0, "c");
        assert!(o.release(o.committed(2, 10)).is_empty());
        o.on_ack(1, 2, 10);
        o.on_ack(2, 1, 10);
        o.on_ack(9, 5, 10);
        assert_eq!(o.committed(2, 10), 1);
        assert_eq!(o.release(1), vec!["a"], "c waits behind b");
        o.on_ack(2, 2, 20);
        assert_eq!(o.release(o.committed(2, 20)), vec!["b", "c"]);
        assert!(!o.waiting());
        assert_eq!(o.behind(3), vec![1, 2]);
        assert_eq!(o.acked_by_all(), 2);
        assert_eq!(Outbox::<&str>::new([], 1000, 0).acked_by_all(), u64::MAX);
    }

    #[test]
    fn a_silent_standby_is_not_waited_for_and_clear_drops_everything() {
        let mut o: Outbox<&str> = Outbox::new([1, 2], 1000, 0);
        o.on_ack(1, 4, 500);
        o.hold(4, 500, "x");
        assert_eq!(o.committed(4, 1000), 0, "standby 2 was heard at 0: still live");
        assert_eq!(o.committed(4, 1001), 4, "standby 2 is silent past the timeout");
        assert_eq!(o.release(o.committed(4, 1001)), vec!["x"]);
        o.hold(5, 1001, "y");
        assert_eq!(o.clear(), 1);
        let none: Outbox<&str> = Outbox::new([], 1000, 0);
        assert_eq!(none.committed(7, 0), 7, "no standbys: everything is committed");
    }

    #[test]
    fn a_standby_heard_but_not_acknowledging_is_waited_for_one_timeout_then_until_it_catches_up() {
        let mut o: Outbox<&str> = Outbox::new([1, 2], 1000, 0);
        o.on_ack(1, 3, 0);
        o.on_ack(2, 3, 0);
        o.hold(4, 100, "x");
        // standby 2 keeps beating (heard) but its acknowledgements stay at 3
        for t in (200..=1100).step_by(100) {
            o.on_ack(1, 4, t);
            o.on_ack(2, 3, t);
            assert!(o.give_up_on_slow(4, t).is_empty(), "x has waited {} ms", t - 100);
            assert_eq!(o.committed(4, t), 3);
        }
        assert_eq!(o.give_up_on_slow(5, 1101), vec![2], "x waited longer than the timeout");
        assert_eq!(o.release(o.committed(5, 1101)), vec!["x"]);
        // what comes next does not wait for standby 2 until it holds state 5
        o.hold(5, 1150, "y");
        o.on_ack(1, 5, 1160);
        assert_eq!(o.release(o.committed(5, 1160)), vec!["y"]);
        o.hold(6, 1200, "z");
        o.on_ack(1, 6, 1210);
        o.on_ack(2, 4, 1210);
        assert_eq!(o.committed(6, 1210), 6, "standby 2 holds 4 of 5");
        o.on_ack(2, 5, 1220);
        assert_eq!(o.committed(6, 1220), 5, "standby 2 caught up: waited for again");
        assert!(o.give_up_on_slow(6, 1220).is_empty());
        assert_eq!(o.release(o.committed(6, 1220)), Vec::<&str>::new());
    }
}
