//! The failover shell: stamps the epoch on outgoing messages, fences incoming ones,
//! streams the active scheduler's state to its standbys and carries out the decisions
//! of the rules ([`super::candidate`], [`super::view`], [`super::replicas`]). Only
//! wiring: every rule is there. The van calls it and lends it a [`Host`].

use super::candidacy::is_act;
use super::candidate::Decision;
use super::epoch::{candidate_key, Epoch};
use super::gate::LeaseChange;
use super::host::Host;
use super::leased::{load_external, lock_view};
use super::replicas::Replicas;
use super::state::{Failover, SchedFailover};
use super::view::Heard;
use crate::message::{Command, Message};
use crate::node::{ALL_GROUP, SCHEDULER};
use crate::protocol::membership::Membership;
use bytes::Bytes;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

impl Failover {
    fn multi(&self) -> bool {
        self.schedulers.len() > 1
    }

    fn me_index(&self) -> usize {
        self.me
    }

    fn beat_ms(&self) -> u64 {
        match self.heartbeat_interval.as_millis() as u64 {
            0 => 200,
            ms => ms,
        }
    }

    /// The epoch this process follows (its own while it is the active scheduler), and
    /// whether this process is the active scheduler.
    pub fn scheduler_epoch(&self) -> (Epoch, bool) {
        match &self.sched {
            Some(s) => {
                let s = s.lock();
                (s.cand.epoch(), s.cand.is_active())
            }
            None => (self.view.lock().epoch(), false),
        }
    }

    /// The address of scheduler candidate `i`.
    pub fn scheduler_addr(&self, i: usize) -> String {
        self.schedulers
            .get(i)
            .map_or_else(|| "?".into(), |(h, p)| format!("{h}:{p}"))
    }

    /// Connects to every other scheduler candidate (at start).
    pub fn connect_candidates(&self, host: &dyn Host) {
        if !self.multi() {
            return;
        }
        let me = if self.is_scheduler { Some(self.me_index()) } else { None };
        for (i, (h, p)) in self.schedulers.iter().enumerate() {
            if Some(i) != me {
                if let Err(e) = host.connect(candidate_key(i), h, *p) {
                    log::warn!("cannot connect to scheduler #{i} at {h}:{p}: {e}");
                }
            }
        }
    }

    /// Fills in the failover fields of an outgoing message.
    pub fn stamp(&self, host: &dyn Host, msg: &mut Message) {
        let c = &mut msg.meta.control;
        if self.sched.is_some() {
            c.term = self.term.load(Ordering::Relaxed);
            c.candidate = self.active.load(Ordering::Relaxed);
            c.origin = self.me_index() as u32;
            c.seq = self.seq.load(Ordering::Relaxed);
            // the send time a node echoes back (the lease)
            c.lease_ms = host.now_ms();
        } else if c.cmd == Command::Heartbeat {
            let v = self.view.lock();
            c.term = v.epoch().term;
            c.candidate = v.epoch().candidate;
            c.silence_ms = v.silence_ms(host.now_ms());
            c.seq = v.seen_seq();
            c.lease_ms = v.echo_ms();
        }
    }

    /// Sends `m` (a copy each) to every scheduler candidate but this one; on a single
    /// scheduler, to [`SCHEDULER`].
    pub fn send_to_schedulers(&self, host: &dyn Host, m: Message) {
        if !self.multi() {
            let _ = host.send(m);
            return;
        }
        let me = self.is_scheduler.then(|| self.me_index());
        for i in (0..self.schedulers.len()).filter(|i| Some(*i) != me) {
            let mut c = m.clone();
            c.meta.recver = candidate_key(i);
            if let Err(e) = host.send(c) {
                log::debug!("{:?} to scheduler #{i} not sent: {e}", m.meta.control.cmd);
            }
        }
    }

    /// True once the node has lost its active scheduler (silent past the timeout).
    pub fn scheduler_lost(&self, now_ms: u64) -> bool {
        self.view.lock().lost(now_ms)
    }

    /// Screens an incoming message: false = consumed or fenced (drop it).
    pub fn screen(&self, host: &dyn Host, msg: &Message) -> bool {
        let c = &msg.meta.control;
        let from = Epoch {
            term: c.term,
            candidate: c.candidate,
        };
        let Some(s) = &self.sched else {
            if msg.meta.sender != SCHEDULER {
                return true;
            }
            let heard = {
                let mut v = self.view.lock();
                let heard = v.on_message(from, c.seq, host.now_ms());
                v.took(heard, c.lease_ms);
                heard
            };
            return match heard {
                Heard::Current => true,
                Heard::Fenced => {
                    log::debug!("dropped {msg}: {from} is not the active scheduler");
                    false
                }
                Heard::Switched { from: old } => {
                    let i = from.candidate as usize;
                    if old.candidate != from.candidate && self.multi() {
                        let (h, p) = self.schedulers.get(i).cloned().unwrap_or_default();
                        if let Err(e) = host.connect(SCHEDULER, &h, p) {
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
        let now = host.now_ms();
        if matches!(c.cmd, Command::Sync | Command::PeerBeat) {
            self.on_peer(host, msg, from, now);
            return false;
        }
        if msg.meta.sender == SCHEDULER {
            // our own messages pass; other candidates only talk Sync and PeerBeat
            return c.origin as usize == self.me_index() && s.lock().cand.is_active();
        }
        let mut g = s.lock();
        if c.cmd == Command::Heartbeat && self.multi() {
            let d = g.cand.on_witness(msg.meta.sender, from, c.silence_ms, c.seq, now);
            if g.cand.is_active() && from == g.cand.epoch() {
                if let Some(gate) = g.gate.as_mut() {
                    gate.on_echo(msg.meta.sender, c.lease_ms);
                }
            }
            self.publish(&g.cand);
            if let Decision::StepDown(e) = d {
                log::warn!("node {} follows {e}: this scheduler steps down", msg.meta.sender);
            }
        }
        g.cand.is_active()
    }

    fn on_peer(&self, host: &dyn Host, msg: &Message, from: Epoch, now: u64) {
        let Some(s) = &self.sched else { return };
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
                    ack = Some(Message::control(candidate_key(origin), Command::PeerBeat));
                }
            }
            _ => {
                if g.cand.is_active() {
                    g.replicas.on_ack(origin, c.seq, now);
                    self.acked.notify_all();
                }
            }
        }
        self.publish(&g.cand);
        drop(g);
        if let Some(m) = ack {
            let _ = host.send(m);
        }
    }

    fn sync_msg(&self, g: &SchedFailover, to: usize) -> Message {
        let mut m = Message::control(candidate_key(to), Command::Sync);
        m.data = vec![g.core.clone(), g.app.clone()];
        m
    }

    /// Streams the state (sequence `seq`) to every standby; with `wait`, waits up to a
    /// bound for the live ones to acknowledge it.
    fn stream(&self, host: &dyn Host, g: parking_lot::MutexGuard<'_, SchedFailover>, seq: u64, wait: bool) {
        let s = self.sched.as_ref().expect("scheduler");
        let msgs: Vec<Message> = g.replicas.peers().into_iter().map(|p| self.sync_msg(&g, p)).collect();
        drop(g);
        for m in msgs {
            let _ = host.send(m);
        }
        if !wait || host.on_receiving_thread() {
            return;
        }
        host.flush();
        let deadline = Instant::now() + Duration::from_millis(self.beat_ms().max(100));
        let mut g = s.lock();
        while !g.replicas.waiting_for(seq, host.now_ms()).is_empty() {
            if self.acked.wait_until(&mut g, deadline).timed_out() {
                log::debug!(
                    "standbys {:?} did not acknowledge state {seq} in time",
                    g.replicas.waiting_for(seq, host.now_ms())
                );
                break;
            }
        }
    }

    /// Active scheduler: the application's new state (the master's queues) reaches the
    /// live standbys before this returns. Fails if this scheduler is not active.
    pub fn replicate_app(&self, host: &dyn Host, state: Bytes) -> Result<(), String> {
        let Some(s) = &self.sched else {
            return Err("only a scheduler replicates state".into());
        };
        if let Some(ls) = self.lock_service() {
            return self.persist(&ls, |g| g.app = state);
        }
        let mut g = s.lock();
        if !g.cand.is_active() {
            return Err(format!("this scheduler is not active ({} is)", g.cand.epoch()));
        }
        if g.gate.as_ref().is_some_and(|gate| !gate.may_act(host.now_ms())) {
            // without the lease a standby may be taking over: no change is made
            return Err(format!(
                "this scheduler ({}) has not heard a majority of the nodes within its lease",
                g.cand.epoch()
            ));
        }
        g.app = state;
        let seq = g.cand.next_seq();
        self.publish(&g.cand);
        self.stream(host, g, seq, true);
        Ok(())
    }

    /// The application state last received from the active scheduler (a standby that
    /// took over resumes from it), if any.
    pub fn replicated_app_state(&self) -> Option<Bytes> {
        let g = self.sched.as_ref()?.lock();
        (!g.app.is_empty()).then(|| g.app.clone())
    }

    /// Active scheduler: the node table changed; stream it to the standbys.
    pub fn replicate_core(&self, host: &dyn Host) {
        let Some(s) = &self.sched else {
            return;
        };
        if !self.multi() {
            return;
        }
        let Some(core) = host.export_core() else {
            return;
        };
        let core = Bytes::from(core);
        if let Some(ls) = self.lock_service() {
            if let Err(e) = self.persist(&ls, |g| g.core = core) {
                log::error!("{e}");
            }
            return;
        }
        let mut g = s.lock();
        if !g.cand.is_active() {
            return;
        }
        g.core = core;
        let seq = g.cand.next_seq();
        self.publish(&g.cand);
        self.stream(host, g, seq, false);
    }

    /// True while this process may act as the scheduler (always on a single one).
    pub fn is_active_scheduler(&self) -> bool {
        self.sched.as_ref().is_some_and(|s| s.lock().cand.is_active())
    }

    /// True while this active scheduler holds its lease (or keeps none: one
    /// candidate, the etcd election): it may declare nodes dead.
    pub fn holds_lease(&self, now: u64) -> bool {
        self.sched
            .as_ref()
            .is_some_and(|s| s.lock().gate.as_ref().is_none_or(|g| g.may_act(now)))
    }

    /// An act this scheduler sends to a node (see [`is_act`]) passes the lease gate:
    /// `Some` to send it now, `None` when it waits for the lease (it leaves from
    /// [`Failover::tick`] once the lease holds again, or is dropped when this
    /// scheduler stops being the active one).
    pub fn lease_gate(&self, host: &dyn Host, msg: Message) -> Option<Message> {
        let Some(s) = &self.sched else { return Some(msg) };
        if !is_act(&msg) || msg.meta.recver == SCHEDULER || msg.meta.recver < 0 {
            return Some(msg);
        }
        let now = host.now_ms();
        let mut g = s.lock();
        match g.gate.as_mut() {
            Some(gate) => gate.gate(msg, now),
            None => Some(msg),
        }
    }

    /// Scheduler tick: beats to the other candidates, catches standbys up, and lets a
    /// standby take over.
    pub fn tick(&self, host: &dyn Host, now: u64) {
        let Some(s) = &self.sched else { return };
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
            for i in (0..self.schedulers.len()).filter(|&i| i != g.cand.me()) {
                out.push(Message::control(candidate_key(i), Command::PeerBeat));
            }
        }
        let ls = self.lock_service();
        if let Some(ls) = &ls {
            let lock = lock_view(&g.cand, ls.as_ref());
            g.cand.on_lock(lock);
        }
        // the lease: acts that waited for it leave; an active scheduler without it
        // stops acting; one that is not active drops what waited
        let (mut released, mut resumed) = (Vec::new(), false);
        if g.cand.is_active() {
            if let Some(gate) = g.gate.as_mut() {
                let (change, out) = gate.tick(now);
                released = out;
                match change {
                    Some(LeaseChange::Lost) => log::warn!(
                        "the active scheduler ({}) has not heard a majority of the nodes within its lease: it stops acting",
                        g.cand.epoch()
                    ),
                    Some(LeaseChange::Resumed) => {
                        log::warn!("the active scheduler ({}) holds its lease again", g.cand.epoch());
                        resumed = true;
                    }
                    None => {}
                }
            }
        } else if let Some(gate) = g.gate.as_mut() {
            let dropped = gate.restart();
            if dropped > 0 {
                log::warn!("not the active scheduler any more: {dropped} messages that waited for the lease dropped");
            }
        }
        let live = g.live_nodes;
        // the first candidate winning the lock of a new cluster: nothing to take over
        let first = ls.is_some() && g.cand.epoch().term == 0;
        let decision = g.cand.tick(now, live);
        self.publish(&g.cand);
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
                    (0..self.schedulers.len()).filter(|&i| i != g.cand.me()),
                    self.heartbeat_timeout.as_millis() as u64,
                    now,
                );
                g.refusal.clear();
                if let Some(gate) = g.gate.as_mut() {
                    gate.restart();
                }
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
        if resumed {
            host.resume_watch(now);
        }
        for m in out.into_iter().chain(released) {
            let _ = host.send(m);
        }
        if let Some((e, core)) = take_over {
            log::warn!(
                "taking over as the active scheduler: #{} at {}, {e}",
                e.candidate,
                self.scheduler_addr(e.candidate as usize)
            );
            host.take_over(&core, now);
            self.send_to_schedulers(host, Message::control(SCHEDULER, Command::PeerBeat));
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
