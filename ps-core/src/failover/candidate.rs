//! One scheduler candidate's failover role: active, or a standby following the active
//! one; when a standby takes over and when an active one steps down.

use super::election::{Election, Facts, Lock, Majority, Refusal, Vote};
use super::epoch::Epoch;
use std::collections::BTreeMap;

/// What a candidate must do after [`Candidate::tick`] or a message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Decision {
    /// Nothing changes.
    Nothing,
    /// This standby is now the active scheduler under this epoch: take the state
    /// followed so far, announce the epoch to every node and candidate.
    TakeOver(Epoch),
    /// This active scheduler heard a better epoch: it is a standby now and must not
    /// act any more.
    StepDown(Epoch),
    /// The active one is silent but this standby may not take over.
    Refused(Refusal),
}

#[derive(Clone, Debug)]
struct Witness {
    silence_ms: u64,
    seen_seq: u64,
    at_ms: u64,
}

/// A scheduler candidate's failover state.
#[derive(Debug)]
pub struct Candidate {
    rule: Box<dyn Election>,
    me: usize,
    n: usize,
    timeout_ms: u64,
    active: bool,
    epoch: Epoch,
    state_epoch: Epoch,
    last_heard_ms: u64,
    seq: u64,
    witnesses: BTreeMap<i32, Witness>,
}

impl Candidate {
    /// Candidate `me` of `n` under the embedded rule ([`Majority`]), active at term 1
    /// unless `standby`, losing the active one after `timeout_ms` of silence (0 = never
    /// takes over), at `now_ms`.
    pub fn new(me: usize, n: usize, timeout_ms: u64, standby: bool, now_ms: u64) -> Candidate {
        Candidate::with_rule(me, n, timeout_ms, standby, now_ms, Box::new(Majority))
    }

    /// As [`Candidate::new`] under election rule `rule`. A lock-based rule starts every
    /// candidate as a standby (`standby` is ignored): the lock makes one active.
    pub fn with_rule(
        me: usize,
        n: usize,
        timeout_ms: u64,
        standby: bool,
        now_ms: u64,
        rule: Box<dyn Election>,
    ) -> Candidate {
        let standby = standby || rule.external_state();
        let epoch = if standby {
            Epoch::default()
        } else {
            Epoch {
                term: 1,
                candidate: me as u32,
            }
        };
        Candidate {
            rule,
            me,
            n: n.max(1),
            timeout_ms,
            active: !standby,
            epoch,
            state_epoch: epoch,
            last_heard_ms: now_ms,
            seq: 0,
            witnesses: BTreeMap::new(),
        }
    }

    /// True while this candidate is the active scheduler.
    pub fn is_active(&self) -> bool {
        self.active
    }

    /// The epoch followed (this candidate's own while active).
    pub fn epoch(&self) -> Epoch {
        self.epoch
    }

    /// This candidate's index.
    pub fn me(&self) -> usize {
        self.me
    }

    /// The state sequence held (the last one produced while active).
    pub fn seq(&self) -> u64 {
        self.seq
    }

    /// Active only: the sequence number of a new state about to be streamed.
    pub fn next_seq(&mut self) -> u64 {
        self.seq += 1;
        self.seq
    }

    /// A message (heartbeat or state) at `now_ms` from scheduler candidate `origin`,
    /// which follows (or, if it is `from.candidate`, leads) epoch `from`. An active
    /// candidate steps down before a better epoch; a standby follows the best epoch it
    /// hears and ignores worse ones. Only a message from the active one itself counts
    /// as hearing it: standbys must not keep each other from noticing its death.
    pub fn on_peer(&mut self, from: Epoch, origin: usize, now_ms: u64) -> Decision {
        let from_leader = origin == from.candidate as usize;
        if self.active {
            if from > self.epoch {
                self.active = false;
                self.epoch = from;
                if from_leader {
                    self.last_heard_ms = now_ms;
                }
                return Decision::StepDown(from);
            }
            return Decision::Nothing;
        }
        if from >= self.epoch {
            self.epoch = from;
            if from_leader {
                self.last_heard_ms = now_ms;
            }
        }
        Decision::Nothing
    }

    /// The state with sequence `seq` from the active scheduler under `from` (after
    /// [`Candidate::on_peer`]). Returns true if this standby keeps it: it comes from the
    /// epoch followed and is not older than the state held (any state of a newer
    /// epoch replaces the one held).
    pub fn on_state(&mut self, from: Epoch, seq: u64) -> bool {
        if self.active || from != self.epoch || (from == self.state_epoch && seq < self.seq) {
            return false;
        }
        self.state_epoch = from;
        self.seq = seq;
        true
    }

    /// Node `node` reports, at `now_ms`, that the scheduler it follows (under `epoch`)
    /// has been silent for `silence_ms`, and the newest state sequence it has seen. A
    /// better epoch than this candidate's makes an active one step down.
    pub fn on_witness(&mut self, node: i32, epoch: Epoch, silence_ms: u64, seen_seq: u64, now_ms: u64) -> Decision {
        self.witnesses.insert(
            node,
            Witness {
                silence_ms,
                seen_seq,
                at_ms: now_ms,
            },
        );
        if self.active && epoch > self.epoch {
            self.active = false;
            self.epoch = epoch;
            self.last_heard_ms = now_ms;
            return Decision::StepDown(epoch);
        }
        Decision::Nothing
    }

    /// How long this standby waits, beyond the timeout, before it considers taking over:
    /// standbys further from the lost active in the candidate order wait longer, so the
    /// nearest one normally wins and the others follow it.
    fn extra_wait_ms(&self) -> u64 {
        let rank = (self.me + self.n - self.epoch.candidate as usize) % self.n;
        rank.saturating_sub(1) as u64 * self.timeout_ms / 2
    }

    /// The external lock as the shell sees it (see [`Election::on_lock`]).
    pub fn on_lock(&mut self, lock: Lock) {
        self.rule.on_lock(lock);
    }

    /// True when the shell should hold or seek the external lock now.
    pub fn wants_lock(&self) -> bool {
        self.rule.wants_lock(self.epoch)
    }

    /// True when the state is kept by the lock service rather than streamed.
    pub fn external_state(&self) -> bool {
        self.rule.external_state()
    }

    /// Periodic check at `now_ms`; `live_nodes` is how many nodes the node table
    /// followed so far holds alive (a majority of them must report the active one
    /// silent, under the embedded rule). An active candidate whose rule forbids acting
    /// (its lock is lost) steps down.
    pub fn tick(&mut self, now_ms: u64, live_nodes: usize) -> Decision {
        if self.active {
            if self.rule.may_act() {
                return Decision::Nothing;
            }
            self.active = false;
            return Decision::StepDown(self.epoch);
        }
        let facts = Facts {
            silence_ms: now_ms.saturating_sub(self.last_heard_ms),
            wait_ms: if self.timeout_ms == 0 {
                0
            } else {
                self.timeout_ms + self.extra_wait_ms()
            },
            followed: self.epoch,
            held_seq: self.seq,
            seen_seq: self.witnesses.values().map(|w| w.seen_seq).max().unwrap_or(0),
            silent_witnesses: self
                .witnesses
                .values()
                .filter(|w| now_ms.saturating_sub(w.at_ms) <= self.timeout_ms && w.silence_ms > self.timeout_ms)
                .count(),
            live_nodes,
        };
        match self.rule.standby(&facts) {
            Vote::Wait => Decision::Nothing,
            Vote::Refuse(r) => Decision::Refused(r),
            Vote::Win(term) => {
                self.active = true;
                self.epoch = Epoch {
                    term,
                    candidate: self.me as u32,
                };
                self.state_epoch = self.epoch;
                self.witnesses.clear();
                Decision::TakeOver(self.epoch)
            }
        }
    }
}

#[cfg(test)]
#[path = "candidate_tests.rs"]
mod tests;
