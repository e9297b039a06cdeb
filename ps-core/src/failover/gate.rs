//! The active scheduler's lease as a gate on what it says: an act (see
//! [`super::is_act`]) leaves only while the [`Lease`] holds, and waits, in order,
//! while it does not; what waited leaves when the lease holds again, or is dropped
//! when this scheduler stops being the active one. The lease is armed once a majority
//! of the voters echoed a message of the current term: before that (a cluster
//! forming, or the first moments after a takeover, when the old active one's lease
//! ran out already) acts pass. Pure: messages are of type `M`, times in ms.

use super::lease::Lease;
use std::collections::{BTreeSet, VecDeque};

/// At most this many acts wait for the lease; beyond it the oldest is dropped (the
/// resender and the nodes' own retries cover what a long partition dropped).
pub const MAX_HELD: usize = 65_536;

/// A change of the lease seen by [`LeaseGate::tick`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LeaseChange {
    /// The lease ran out: this scheduler stops acting.
    Lost,
    /// The lease holds again: nodes silent meanwhile were not heard because this
    /// scheduler could not hear a majority, so their silence starts afresh.
    Resumed,
}

/// The lease and the acts waiting for it.
#[derive(Clone, Debug)]
pub struct LeaseGate<M> {
    lease: Lease,
    armed: bool,
    had: bool,
    held: VecDeque<M>,
}

impl<M> LeaseGate<M> {
    /// A gate over `voters` (node ids) with a lease of `duration_ms` from each echo.
    pub fn new(voters: BTreeSet<i32>, duration_ms: u64) -> LeaseGate<M> {
        LeaseGate {
            lease: Lease::new(voters, duration_ms),
            armed: false,
            had: true,
            held: VecDeque::new(),
        }
    }

    /// Voter `id` took a message of the current term sent at `sent_ms`.
    pub fn on_echo(&mut self, id: i32, sent_ms: u64) {
        self.lease.on_echo(id, sent_ms);
        if self.lease.until_ms().is_some() {
            self.armed = true;
        }
    }

    /// True while acts may leave at `now_ms`.
    pub fn may_act(&self, now_ms: u64) -> bool {
        !self.armed || self.lease.holds(now_ms)
    }

    /// An act to send at `now_ms`: `Some` to send it now, `None` when it waits (behind
    /// earlier ones, or for the lease).
    pub fn gate(&mut self, msg: M, now_ms: u64) -> Option<M> {
        if self.held.is_empty() && self.may_act(now_ms) {
            return Some(msg);
        }
        if self.held.len() >= MAX_HELD {
            self.held.pop_front();
        }
        self.held.push_back(msg);
        None
    }

    /// The periodic step: the lease's change since the last tick, if any, and the
    /// acts that may leave now, in order.
    pub fn tick(&mut self, now_ms: u64) -> (Option<LeaseChange>, Vec<M>) {
        let holds = self.may_act(now_ms);
        let change = match (self.had, holds) {
            (true, false) => Some(LeaseChange::Lost),
            (false, true) => Some(LeaseChange::Resumed),
            _ => None,
        };
        self.had = holds;
        let out = if holds {
            self.held.drain(..).collect()
        } else {
            Vec::new()
        };
        (change, out)
    }

    /// A new term, or this scheduler is not the active one any more: the echoes are
    /// forgotten, the lease disarmed and the waiting acts dropped (returns how many).
    pub fn restart(&mut self) -> usize {
        self.lease.clear();
        self.armed = false;
        self.had = true;
        let n = self.held.len();
        self.held.clear();
        n
    }

    /// Acts waiting.
    pub fn held(&self) -> usize {
        self.held.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gate() -> LeaseGate<&'static str> {
        LeaseGate::new([8, 9, 10].into_iter().collect(), 400)
    }

    #[test]
    fn acts_pass_until_armed_then_only_under_the_lease() {
        let mut g = gate();
        assert_eq!(g.gate("a", 0), Some("a"), "not armed yet");
        g.on_echo(8, 100);
        assert_eq!(g.gate("b", 5000), Some("b"), "one echo of three is no majority");
        g.on_echo(9, 120);
        assert!(g.may_act(499) && !g.may_act(500));
        assert_eq!(g.gate("c", 499), Some("c"));
        assert_eq!(g.tick(500), (Some(LeaseChange::Lost), vec![]));
        assert_eq!(g.gate("d", 500), None);
        assert_eq!(g.gate("e", 600), None);
        assert_eq!(g.held(), 2);
        g.on_echo(10, 650);
        // 8 echoed at 100, 9 at 120, 10 at 650: the second freshest (120) bounds it
        assert_eq!(g.tick(660), (None, vec![]));
        g.on_echo(8, 700);
        assert_eq!(g.gate("f", 710), None, "behind the held ones");
        assert_eq!(g.tick(710), (Some(LeaseChange::Resumed), vec!["d", "e", "f"]));
        assert_eq!(g.gate("g", 720), Some("g"));
    }

    #[test]
    fn a_new_term_drops_what_waited_and_disarms() {
        let mut g = gate();
        g.on_echo(8, 0);
        g.on_echo(9, 0);
        assert_eq!(g.gate("x", 1000), None);
        assert_eq!(g.restart(), 1);
        assert_eq!(
            g.gate("y", 1000),
            Some("y"),
            "a new term acts until a majority echoed it"
        );
        assert_eq!(g.tick(1000), (None, vec![]));
    }
}
