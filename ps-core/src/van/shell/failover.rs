//! The van's failover shell (issue 11): stamps the epoch on outgoing messages, fences
//! incoming ones, streams the active scheduler's state to its standbys and carries out
//! the decisions of [`crate::protocol::failover`]. Only wiring: every rule is there.

use super::leased::{load_external, lock_view};
use super::{control, Van};
use crate::message::{Command, Message};
use crate::node::{Role, ALL_GROUP, SCHEDULER};
use crate::protocol::failover::{
    candidate_key, ActiveView, Candidate, Decision, ElectionMode, Epoch, Heard, Leased, Majority, Replicas,
};
use crate::protocol::membership::Membership;
use bytes::Bytes;
use parking_lot::{Condvar, Mutex};
use std::cell::Cell;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

thread_local! {
    /// True on a transport's receiving thread: it must not wait for acks that only it
    /// could deliver.
    pub(super) static IN_RECV: Cell<bool> = const { Cell::new(false) };
}

/// A scheduler candidate's failover state (scheduler processes only).
pub(super) struct SchedFailover {
    pub(super) cand: Candidate,
    pub(super) replicas: Replicas,
    /// The newest node table and application state (own when active, followed when not).
    pub(super) core: Bytes,
    pub(super) app: Bytes,
    live_nodes: usize,
    next_beat_ms: u64,
    refusal: String,
}

/// Failover state of a van.
pub(super) struct Failover {
    pub(super) sched: Option<Mutex<SchedFailover>>,
    /// The external lock service (`PS_ELECTION=etcd`), set before the van starts.
    pub(super) lock: parking_lot::RwLock<Option<std::sync::Arc<dyn crate::van::LockService>>>,
    /// Serializes saves to the lock service, so they land in the order taken.
    pub(super) persist: Mutex<()>,
    pub(super) acked: Condvar,
    view: Mutex<ActiveView>,
    term: AtomicU64,
    active: AtomicU32,
    seq: AtomicU64,
}

impl Failover {
    /// The failover state for a van of `cfg`'s role at `now_ms`.
    pub(super) fn new(cfg: &crate::config::Config, now_ms: u64) -> Failover {
        let timeout = cfg.heartbeat_timeout.as_millis() as u64;
        let me = cfg.scheduler_index().unwrap_or(0);
        let n = cfg.schedulers.len();
        let sched = (cfg.role == Role::Scheduler).then(|| {
            let rule: Box<dyn crate::protocol::failover::Election> = match cfg.election {
                ElectionMode::Embedded => Box::new(Majority),
                ElectionMode::Etcd { .. } => Box::new(Leased::new(!cfg.scheduler_standby)),
            };
            let cand = Candidate::with_rule(me, n, timeout, cfg.scheduler_standby, now_ms, rule);
            // with the state in the lock service, nothing is streamed to standbys
            let streamed = !cand.external_state();
            let peers = (0..n).filter(|&i| i != me && streamed);
            Mutex::new(SchedFailover {
                replicas: Replicas::new(peers, timeout, now_ms),
                cand,
                core: Bytes::new(),
                app: Bytes::new(),
                live_nodes: 0,
                next_beat_ms: 0,
                refusal: String::new(),
            })
        });
        let f = Failover {
            sched,
            lock: parking_lot::RwLock::new(None),
            persist: Mutex::new(()),
            acked: Condvar::new(),
            view: Mutex::new(ActiveView::new(me, timeout, now_ms)),
            term: AtomicU64::new(0),
            active: AtomicU32::new(me as u32),
            seq: AtomicU64::new(0),
        };
        if let Some(s) = &f.sched {
            f.publish(&s.lock().cand);
        }
        f
    }

    pub(super) fn publish(&self, c: &Candidate) {
        self.term.store(c.epoch().term, Ordering::Relaxed);
        self.active.store(c.epoch().candidate, Ordering::Relaxed);
        self.seq.store(c.seq(), Ordering::Relaxed);
    }
}

impl Van {
    pub(super) fn multi(&self) -> bool {
        self.cfg.schedulers.len() > 1
    }

    pub(super) fn me_index(&self) -> usize {
        self.cfg.scheduler_index().unwrap_or(0)
    }

    pub(super) fn beat_ms(&self) -> u64 {
        match self.cfg.heartbeat_interval.as_millis() as u64 {
            0 => 200,
            ms => ms,
        }
    }

    /// The epoch this process follows (its own while it is the active scheduler), and
    /// whether this process is the active scheduler.
    pub fn scheduler_epoch(&self) -> (Epoch, bool) {
        match &self.fo.sched {
            Some(s) => {
                let s = s.lock();
                (s.cand.epoch(), s.cand.is_active())
            }
            None => (self.fo.view.lock().epoch(), false),
        }
    }

    /// The address of scheduler candidate `i`.
    pub fn scheduler_addr(&self, i: usize) -> String {
        self.cfg
            .schedulers
            .get(i)
            .map_or_else(|| "?".into(), |(h, p)| format!("{h}:{p}"))
    }

    /// Connects to every other scheduler candidate (at start).
    pub(super) fn connect_candidates(&self) {
        if !self.multi() {
            return;
        }
        let me = if self.cfg.role == Role::Scheduler {
            Some(self.me_index())
        } else {
            None
        };
        for (i, (h, p)) in self.cfg.schedulers.iter().enumerate() {
            if Some(i) != me {
                if let Err(e) = self.transport.connect(candidate_key(i), h, *p) {
                    log::warn!("cannot connect to scheduler #{i} at {h}:{p}: {e}");
                }
            }
        }
    }

    /// Fills in the failover fields of an outgoing message.
    pub(super) fn stamp(&self, msg: &mut Message) {
        let c = &mut msg.meta.control;
        if self.fo.sched.is_some() {
            c.term = self.fo.term.load(Ordering::Relaxed);
            c.candidate = self.fo.active.load(Ordering::Relaxed);
            c.origin = self.me_index() as u32;
            c.seq = self.fo.seq.load(Ordering::Relaxed);
        } else if c.cmd == Command::Heartbeat {
            let v = self.fo.view.lock();
            c.term = v.epoch().term;
            c.candidate = v.epoch().candidate;
            c.silence_ms = v.silence_ms(self.now_ms());
            c.seq = v.seen_seq();
        }
    }

    /// Sends `m` (a copy each) to every scheduler candidate but this one; on a single
    /// scheduler, to [`SCHEDULER`].
    pub(super) fn send_to_schedulers(&self, m: Message) {
        if !self.multi() {
            let _ = self.send(m);
            return;
        }
        let me = (self.cfg.role == Role::Scheduler).then(|| self.me_index());
        for i in (0..self.cfg.schedulers.len()).filter(|i| Some(*i) != me) {
            let mut c = m.clone();
            c.meta.recver = candidate_key(i);
            if let Err(e) = self.send(c) {
                log::debug!("{:?} to scheduler #{i} not sent: {e}", m.meta.control.cmd);
            }
        }
    }

    /// True once the node has lost its active scheduler (silent past the timeout).
    pub(super) fn scheduler_lost(&self) -> bool {
        self.fo.view.lock().lost(self.now_ms())
    }

    /// Screens an incoming message: false = consumed or fenced (drop it).
    pub(super) fn screen(&self, msg: &Message) -> bool {
        let c = &msg.meta.control;
        let from = Epoch {
            term: c.term,
            candidate: c.candidate,
        };
        let Some(s) = &self.fo.sched else {
            if msg.meta.sender != SCHEDULER {
                return true;
            }
            let heard = self.fo.view.lock().on_message(from, c.seq, self.now_ms());
            return match heard {
                Heard::Current => true,
                Heard::Fenced => {
                    log::debug!("dropped {msg}: {from} is not the active scheduler");
                    false
                }
                Heard::Switched { from: old } => {
                    let i = from.candidate as usize;
                    if old.candidate != from.candidate && self.multi() {
                        let (h, p) = self.cfg.schedulers.get(i).cloned().unwrap_or_default();
                        if let Err(e) = self.transport.connect(SCHEDULER, &h, p) {
                            log::warn!("cannot connect to scheduler #{i} at {h}:{p}: {e}");
                        }
                    }
                    if old.term > 0 || old.candidate != from.candidate {
                        log::warn!(
                            "active scheduler: #{i} at {}, {from} (was {old})",
                            self.scheduler_addr(i)
                        );
                    }
                    true
                }
            };
        };
        let now = self.now_ms();
        if matches!(c.cmd, Command::Sync | Command::PeerBeat) {
            self.on_peer(msg, from, now);
            return false;
        }
        if msg.meta.sender == SCHEDULER {
            // our own messages pass; other candidates only talk Sync and PeerBeat
            return c.origin as usize == self.me_index() && s.lock().cand.is_active();
        }
        let mut g = s.lock();
        if c.cmd == Command::Heartbeat && self.multi() {
            let d = g.cand.on_witness(msg.meta.sender, from, c.silence_ms, c.seq, now);
            self.fo.publish(&g.cand);
            if let Decision::StepDown(e) = d {
                log::warn!("node {} follows {e}: this scheduler steps down", msg.meta.sender);
            }
        }
        g.cand.is_active()
    }

    pub(super) fn on_peer(&self, msg: &Message, from: Epoch, now: u64) {
        let Some(s) = &self.fo.sched else { return };
        let c = &msg.meta.control;
        let origin = c.origin as usize;
        let mut g = s.lock();
        if let Decision::StepDown(e) = g.cand.on_peer(from, origin, now) {
            log::warn!("scheduler #{origin} is active at {e}: this scheduler steps down");
        }
        let mut ack = None;
        match c.cmd {
            Command::Sync => {
                if g.cand.on_state(from, c.seq) {
                    g.core = msg.data.first().cloned().unwrap_or_default();
                    g.app = msg.data.get(1).cloned().unwrap_or_default();
                    g.live_nodes = live_nodes(&g.core);
                    ack = Some(control(candidate_key(origin), Command::PeerBeat));
                }
            }
            _ => {
                if g.cand.is_active() {
                    g.replicas.on_ack(origin, c.seq, now);
                    self.fo.acked.notify_all();
                }
            }
        }
        self.fo.publish(&g.cand);
        drop(g);
        if let Some(m) = ack {
            let _ = self.send(m);
        }
    }

    /// True while this process may act as the scheduler (always on a single one).
    pub(super) fn is_active_scheduler(&self) -> bool {
        self.fo.sched.as_ref().is_some_and(|s| s.lock().cand.is_active())
    }

    /// Scheduler tick: beats to the other candidates, catches standbys up, and lets a
    /// standby take over.
    pub(super) fn failover_tick(&self, now: u64) {
        let Some(s) = &self.fo.sched else { return };
        if !self.multi() {
            return;
        }
        let mut g = s.lock();
        let mut out = Vec::new();
        if now >= g.next_beat_ms {
            g.next_beat_ms = now + self.beat_ms();
            if g.cand.is_active() {
                for p in g.replicas.behind(g.cand.seq()) {
                    out.push(self.sync_msg(&g, p));
                }
            }
            for i in (0..self.cfg.schedulers.len()).filter(|&i| i != g.cand.me()) {
                out.push(control(candidate_key(i), Command::PeerBeat));
            }
        }
        let ls = self.lock_service();
        if let Some(ls) = &ls {
            let lock = lock_view(&g.cand, ls.as_ref());
            g.cand.on_lock(lock);
        }
        let live = g.live_nodes;
        // the first candidate winning the lock of a new cluster: nothing to take over
        let first = ls.is_some() && g.cand.epoch().term == 0;
        let decision = g.cand.tick(now, live);
        self.fo.publish(&g.cand);
        let mut take_over = None;
        match (decision, &ls) {
            (Decision::TakeOver(e), Some(_)) if first => log::info!("holding the scheduler lock: active at {e}"),
            (Decision::TakeOver(e), Some(ls)) => {
                load_external(&mut g, ls.as_ref());
                take_over = Some((e, g.core.clone()));
            }
            (Decision::StepDown(e), _) => log::warn!("lost the scheduler lock: this scheduler ({e}) steps down"),
            (Decision::TakeOver(e), None) => {
                g.replicas = Replicas::new(
                    (0..self.cfg.schedulers.len()).filter(|&i| i != g.cand.me()),
                    self.cfg.heartbeat_timeout.as_millis() as u64,
                    now,
                );
                g.refusal.clear();
                take_over = Some((e, g.core.clone()));
            }
            (Decision::Refused(r), _) => {
                let r = r.to_string();
                if r != g.refusal {
                    log::warn!("the active scheduler is silent, but this standby does not take over: {r}");
                    g.refusal = r;
                }
            }
            _ => {}
        }
        drop(g);
        for m in out {
            let _ = self.send(m);
        }
        if let Some((e, core)) = take_over {
            log::warn!(
                "taking over as the active scheduler: #{} at {}, {e}",
                e.candidate,
                self.scheduler_addr(e.candidate as usize)
            );
            self.me.write().is_recovery = true;
            let me = self.my_node();
            let adopted = self.sched.as_ref().map(|c| c.lock().adopt(&core, me, now));
            match adopted {
                Some(Ok(actions)) => self.execute(actions),
                Some(Err(e)) => log::error!("{e}; waiting for the nodes to register again"),
                None => {}
            }
            self.send_to_schedulers(control(SCHEDULER, Command::PeerBeat));
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
