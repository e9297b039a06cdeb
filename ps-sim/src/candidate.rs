//! A scheduler candidate's failover wiring as the van's failover shell does it today:
//! the epoch and state sequence stamped on every scheduler message, node heartbeats
//! counted as witnesses, `Sync` / `PeerBeat` between candidates, the state streamed to
//! the standbys, and the candidate's tick deciding takeovers. The rules are ps-core's
//! [`Candidate`] and [`Replicas`]; this mirrors `van/shell/failover.rs`.

use crate::host::control;
use bytes::Bytes;
use ps_core::message::{Command, Message};
use ps_core::node::{ALL_GROUP, SCHEDULER};
use ps_core::protocol::failover::{candidate_key, Candidate, Decision, Epoch, Replicas};
use ps_core::protocol::membership::Membership;

/// A candidate's failover state.
pub struct CandidateState {
    n: usize,
    me: usize,
    beat_ms: u64,
    timeout_ms: u64,
    /// Role and epoch.
    pub cand: Candidate,
    replicas: Replicas,
    /// The newest node table (own when active, followed when not).
    pub core: Bytes,
    /// The newest application state.
    pub app: Bytes,
    live_nodes: usize,
    next_beat_ms: u64,
}

/// What a tick decided besides the messages to send.
pub enum Turn {
    /// Nothing more.
    Nothing,
    /// This standby is now active under this epoch: adopt `core`.
    TakeOver(Epoch),
}

impl CandidateState {
    /// Candidate `me` of `n`, a standby unless `active`, at `now`.
    pub fn new(me: usize, n: usize, active: bool, beat_ms: u64, timeout_ms: u64, now: u64) -> CandidateState {
        CandidateState {
            n,
            me,
            beat_ms,
            timeout_ms,
            cand: Candidate::new(me, n, timeout_ms, !active, now),
            replicas: Replicas::new((0..n).filter(|&i| i != me), timeout_ms, now),
            core: Bytes::new(),
            app: Bytes::new(),
            live_nodes: 0,
            next_beat_ms: 0,
        }
    }

    /// True while active.
    pub fn is_active(&self) -> bool {
        self.cand.is_active()
    }

    /// The failover fields of a message this scheduler sends: term, candidate,
    /// origin, state sequence.
    pub fn stamp_fields(&self) -> (u64, u32, u32, u64) {
        let e = self.cand.epoch();
        (e.term, e.candidate, self.me as u32, self.cand.seq())
    }

    /// Stamps a message this scheduler sends.
    pub fn stamp(&self, msg: &mut Message) {
        let c = &mut msg.meta.control;
        (c.term, c.candidate, c.origin, c.seq) = self.stamp_fields();
    }

    /// Screens an incoming message: false = consumed or fenced. Replies to send are
    /// appended to `out`.
    pub fn screen(&mut self, msg: &Message, now: u64, out: &mut Vec<Message>) -> bool {
        let c = &msg.meta.control;
        let from = Epoch {
            term: c.term,
            candidate: c.candidate,
        };
        if matches!(c.cmd, Command::Sync | Command::PeerBeat) {
            self.on_peer(msg, from, now, out);
            return false;
        }
        if msg.meta.sender == SCHEDULER {
            return c.origin as usize == self.me && self.cand.is_active();
        }
        if c.cmd == Command::Heartbeat && self.n > 1 {
            self.cand.on_witness(msg.meta.sender, from, c.silence_ms, c.seq, now);
        }
        self.cand.is_active()
    }

    fn on_peer(&mut self, msg: &Message, from: Epoch, now: u64, out: &mut Vec<Message>) {
        let c = &msg.meta.control;
        let origin = c.origin as usize;
        self.cand.on_peer(from, origin, now);
        match c.cmd {
            Command::Sync => {
                if self.cand.on_state(from, c.seq) {
                    self.core = msg.data.first().cloned().unwrap_or_default();
                    self.app = msg.data.get(1).cloned().unwrap_or_default();
                    self.live_nodes = live_nodes(&self.core);
                    out.push(control(candidate_key(origin), Command::PeerBeat));
                }
            }
            _ => {
                if self.cand.is_active() {
                    self.replicas.on_ack(origin, c.seq, now);
                }
            }
        }
    }

    fn sync_msg(&self, to: usize) -> Message {
        let mut m = control(candidate_key(to), Command::Sync);
        m.data = vec![self.core.clone(), self.app.clone()];
        m
    }

    fn stream(&self) -> Vec<Message> {
        self.replicas.peers().into_iter().map(|p| self.sync_msg(p)).collect()
    }

    /// Active only: the application's new state, streamed to the standbys (the
    /// messages to send). The van waits a bounded time for their acks; the simulator
    /// cannot block, which is the same as that wait running out.
    pub fn replicate_app(&mut self, state: Bytes) -> Result<Vec<Message>, String> {
        if !self.cand.is_active() {
            return Err(format!("this scheduler is not active ({} is)", self.cand.epoch()));
        }
        self.app = state;
        self.cand.next_seq();
        Ok(self.stream())
    }

    /// Active only: the node table changed.
    pub fn replicate_core(&mut self, core: Bytes) -> Vec<Message> {
        if self.n <= 1 || !self.cand.is_active() {
            return Vec::new();
        }
        self.core = core;
        self.cand.next_seq();
        self.stream()
    }

    /// The tick: beats to the other candidates, standbys caught up, takeovers.
    pub fn tick(&mut self, now: u64, out: &mut Vec<Message>) -> Turn {
        if self.n <= 1 {
            return Turn::Nothing;
        }
        if now >= self.next_beat_ms {
            self.next_beat_ms = now + self.beat_ms;
            if self.cand.is_active() {
                for p in self.replicas.behind(self.cand.seq()) {
                    out.push(self.sync_msg(p));
                }
            }
            for i in (0..self.n).filter(|&i| i != self.me) {
                out.push(control(candidate_key(i), Command::PeerBeat));
            }
        }
        match self.cand.tick(now, self.live_nodes) {
            Decision::TakeOver(e) => {
                self.replicas = Replicas::new((0..self.n).filter(|&i| i != self.me), self.timeout_ms, now);
                for i in (0..self.n).filter(|&i| i != self.me) {
                    let mut m = control(candidate_key(i), Command::PeerBeat);
                    m.meta.recver = candidate_key(i);
                    out.push(m);
                }
                Turn::TakeOver(e)
            }
            _ => Turn::Nothing,
        }
    }
}

/// Live nodes (not the scheduler) in an exported node table.
fn live_nodes(core: &[u8]) -> usize {
    if core.is_empty() {
        return 0;
    }
    bincode::deserialize::<Membership>(core)
        .map(|m| {
            m.alive_members(ALL_GROUP)
                .into_iter()
                .filter(|&id| id != SCHEDULER)
                .count()
        })
        .unwrap_or(0)
}
