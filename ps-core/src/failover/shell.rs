//! The failover shell: feeds the van's messages and clock to the pure machines
//! ([`super::Candidacy`] on a scheduler under the embedded election, [`LockCandidate`]
//! under a lock service, [`super::Follower`] on a node) and carries out what they
//! decide. Only wiring: every rule is in the machines, which the simulator drives
//! too. The van calls it and lends it a [`Host`].

use super::candidacy::Out;
use super::epoch::{candidate_key, Epoch};
use super::error::FailoverError;
use super::follower::Heard;
use super::host::Host;
use super::leased::lock_view;
use super::locked::LockDecision;
use super::state::{Failover, SchedFailover};
use super::view::{self, fingerprint, View};
use crate::message::{Command, Message};
use crate::node::SCHEDULER;
use bytes::Bytes;
use std::sync::atomic::Ordering;
/// The Unix time (ms) of the van clock's `at_ms`, read at van time `now_ms`: what
/// the log lines of acting name, so that two schedulers' lines compare.
fn unix_ms(host: &dyn Host, at_ms: u64, now_ms: u64) -> u64 {
    host.unix_ms().saturating_sub(now_ms.saturating_sub(at_ms))
}

/// A scheduler candidate's failover state, read-only.
#[derive(Clone, Debug)]
pub struct StateView {
    /// The epoch it follows (its own while active).
    pub epoch: Epoch,
    /// It is the active scheduler (with or without its lease).
    pub active: bool,
    /// The epoch the state it holds was made under.
    pub state_epoch: Epoch,
    /// The sequence of the state it holds.
    pub seq: u64,
    /// The node table it holds (`SchedulerCore::export`; empty before one formed).
    pub core: Bytes,
    /// It may act now (active, and holding its lease when it needs one).
    pub acting: bool,
}

impl Failover {
    fn multi(&self) -> bool {
        self.schedulers.len() > 1
    }

    /// This node's view of the voters' processes ([`super::view`]).
    fn node_view(&self, host: &dyn Host) -> View {
        view::view_of(&self.voters, |id| host.holder(id))
    }

    /// The epoch this process follows (its own while it is the active scheduler), and
    /// whether this process is the active scheduler.
    pub fn scheduler_epoch(&self) -> (Epoch, bool) {
        match &self.sched {
            Some(s) => match &*s.lock() {
                SchedFailover::Embedded(c) => (c.epoch(), c.is_active()),
                SchedFailover::Locked { cand, .. } => (cand.epoch(), cand.is_active()),
            },
            None => (self.view.lock().epoch(), false),
        }
    }

    /// A scheduler's state under the embedded election, as an observer (a
    /// simulator's checker) reads it; None on a node or under a lock service.
    pub fn state_view(&self, now: u64) -> Option<StateView> {
        match &*self.sched.as_ref()?.lock() {
            SchedFailover::Embedded(c) => Some(StateView {
                epoch: c.epoch(),
                active: c.is_active(),
                state_epoch: c.state_epoch(),
                seq: c.seq(),
                core: c.core().clone(),
                acting: c.may_act(now),
            }),
            SchedFailover::Locked { .. } => None,
        }
    }

    /// With standby schedulers, on a node: the address of the candidate it follows
    /// (where its link to the scheduler points).
    pub fn followed_scheduler(&self) -> Option<(String, u16)> {
        if !self.multi() || self.sched.is_some() {
            return None;
        }
        let i = self.view.lock().heard_active();
        self.schedulers.get(i).cloned()
    }

    /// The address of scheduler candidate `i`.
    pub fn scheduler_addr(&self, i: usize) -> String {
        self.schedulers
            .get(i)
            .map_or_else(|| "?".into(), |(h, p)| format!("{h}:{p}"))
    }

    /// Connects to every other scheduler candidate (at start); the first active
    /// scheduler logs that it acts.
    pub fn connect_candidates(&self, host: &dyn Host) {
        if !self.multi() {
            return;
        }
        if let (e, true) = self.scheduler_epoch() {
            let now = host.now_ms();
            log::warn!(
                "acting as the active scheduler under {e} since {} (Unix ms)",
                unix_ms(host, now, now)
            );
        }
        let me = self.is_scheduler.then_some(self.me);
        for (i, (h, p)) in self.schedulers.iter().enumerate() {
            if Some(i) != me {
                if let Err(e) = host.connect(candidate_key(i), h, *p) {
                    log::warn!("cannot connect to scheduler #{i} at {h}:{p}: {e}");
                }
            }
        }
    }

    /// Fills in the failover fields of a message sent as it is (not through
    /// [`Failover::outgoing`]).
    pub fn stamp(&self, host: &dyn Host, msg: &mut Message) {
        let now = host.now_ms();
        match self.sched.as_ref().map(|s| s.lock()) {
            Some(g) => match &*g {
                SchedFailover::Embedded(c) => c.stamp(msg, now),
                SchedFailover::Locked { cand, .. } => {
                    let c = &mut msg.meta.control;
                    c.term = cand.epoch().term;
                    c.candidate = cand.epoch().candidate;
                    c.origin = self.me as u32;
                    c.seq = cand.seq();
                    c.lease_ms = now;
                }
            },
            None if msg.meta.control.cmd == Command::Heartbeat => {
                // (only candidates read it: none to compute for a single scheduler)
                let view = if self.multi() {
                    fingerprint(&self.node_view(host))
                } else {
                    0
                };
                let v = self.view.lock();
                let c = &mut msg.meta.control;
                c.view = view;
                c.term = v.epoch().term;
                c.candidate = v.epoch().candidate;
                c.silence_ms = v.silence_ms(now);
                c.seq = v.seen_seq();
                c.lease_ms = v.echo_ms();
            }
            None => {}
        }
    }

    /// A message the van is about to send, stamped: `Some` to send it now, `None`
    /// when the active scheduler holds it (an act waiting for its state to reach the
    /// live standbys, or for the lease: it leaves later through [`Failover::tick`] or
    /// a standby's acknowledgement) or drops it (an act of a candidate that is not
    /// active). See [`super::Candidacy::outgoing`].
    pub fn outgoing(&self, host: &dyn Host, mut msg: Message) -> Option<Message> {
        if let Some(s) = &self.sched {
            if let SchedFailover::Embedded(c) = &mut *s.lock() {
                return c.outgoing(msg, host.now_ms());
            }
        }
        self.stamp(host, &mut msg);
        Some(msg)
    }

    /// Sends `m` (a copy each) to every scheduler candidate but this one; on a single
    /// scheduler, to [`SCHEDULER`].
    pub fn send_to_schedulers(&self, host: &dyn Host, m: Message) {
        if !self.multi() {
            let _ = host.send(m);
            return;
        }
        let me = self.is_scheduler.then_some(self.me);
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

    /// True when no scheduler has been heard for longer than `wait_ms`
    /// ([`Follower::given_up`]).
    pub fn scheduler_given_up(&self, now_ms: u64, wait_ms: u64) -> bool {
        self.view.lock().given_up(now_ms, wait_ms)
    }

    /// Screens an incoming message: false = consumed or fenced (drop it).
    pub fn screen(&self, host: &dyn Host, msg: &Message) -> bool {
        match &self.sched {
            Some(_) => self.screen_scheduler(host, msg),
            None => self.screen_node(host, msg),
        }
    }

    fn screen_node(&self, host: &dyn Host, msg: &Message) -> bool {
        let c = &msg.meta.control;
        let from = Epoch {
            term: c.term,
            candidate: c.candidate,
        };
        let now = host.now_ms();
        if c.cmd == Command::Campaign {
            // a candidate asks for this node's vote: the answer goes back to it
            if c.origin as usize >= self.schedulers.len() {
                return false;
            }
            // (`request`: a pre-vote, answered without taking the candidate's term)
            let pre = msg.meta.request;
            let b = if pre {
                self.view.lock().on_pre_campaign(from, c.seq, now)
            } else {
                self.view.lock().on_campaign(from, c.seq, c.lease_ms, now)
            };
            let mut v = b.reply(c.origin as usize, pre);
            // (the voter's view: the candidate counts no id it names another process for)
            v.data = vec![view::encode(&self.node_view(host))];
            if b.granted && !pre {
                log::warn!("voted for scheduler #{} as the active one at {from}", c.origin);
            }
            if let Err(e) = host.send(v) {
                log::debug!("vote to scheduler #{} not sent: {e}", c.origin);
            }
            return false;
        }
        if msg.meta.sender != SCHEDULER {
            return true;
        }
        let heard = self.view.lock().on_message(from, c.seq, c.lease_ms, now);
        match heard {
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
        }
    }

    fn screen_scheduler(&self, host: &dyn Host, msg: &Message) -> bool {
        let Some(s) = &self.sched else { return true };
        let c = &msg.meta.control;
        let from = Epoch {
            term: c.term,
            candidate: c.candidate,
        };
        let now = host.now_ms();
        let consumed = matches!(c.cmd, Command::Sync | Command::PeerBeat | Command::Vote);
        let heartbeat = c.cmd == Command::Heartbeat && msg.meta.sender != SCHEDULER;
        let mut g = s.lock();
        let (outs, active) = match &mut *g {
            SchedFailover::Embedded(cand) => {
                let outs = match c.cmd {
                    Command::Sync | Command::PeerBeat => cand.on_peer(msg, now),
                    Command::Vote => {
                        let m = &msg.meta;
                        let view = view::decode(msg.data.first()).unwrap_or_default();
                        cand.on_vote(m.sender, m.incarnation, c.granted, from, c.seq, m.request, &view, now)
                    }
                    Command::Heartbeat if heartbeat && self.multi() => {
                        let m = &msg.meta;
                        cand.on_view(m.sender, m.incarnation, c.view);
                        cand.on_heartbeat(m.sender, m.incarnation, from, c.seq, c.lease_ms, now)
                    }
                    _ => Vec::new(),
                };
                (outs, (cand.is_active(), cand.may_act(now)))
            }
            SchedFailover::Locked { cand, .. } => {
                if consumed || heartbeat {
                    if let LockDecision::StepDown(e) = cand.on_epoch(from) {
                        log::warn!("{e} is active: this scheduler steps down");
                    }
                }
                (Vec::new(), (cand.is_active(), cand.is_active()))
            }
        };
        let (active, acting) = active;
        // a takeover decided here is carried out below, outside the lock: until it
        // is, no other thread takes a node's message (the node table and the
        // application's state are not this scheduler's yet)
        let takes_over = outs.iter().any(|o| matches!(o, Out::TakeOver { .. }));
        if takes_over {
            self.taking_over.store(true, Ordering::SeqCst);
        }
        let acting = acting && !self.taking_over.load(Ordering::SeqCst);
        drop(g);
        // (nothing here waits on the network: sends never wait for a connection)
        self.run(host, outs, now);
        if takes_over {
            self.taking_over.store(false, Ordering::SeqCst);
        }
        if consumed {
            return false;
        }
        if msg.meta.sender == SCHEDULER {
            // our own messages pass; other candidates only talk Sync and PeerBeat
            return c.origin as usize == self.me && active;
        }
        // a node's message waits (unacknowledged, so it is sent again) while this
        // scheduler has no lease: it records nothing it could not answer (heartbeats
        // pass: who is alive is watched all the same)
        active && (acting || c.cmd == Command::Heartbeat)
    }

    /// Carries out what the embedded election decided.
    fn run(&self, host: &dyn Host, outs: Vec<Out>, now: u64) {
        for o in outs {
            match o {
                Out::Send(m) => {
                    if let Err(e) = host.send_stamped(m) {
                        log::debug!("failover message not sent: {e}");
                    }
                }
                Out::Connect(n) => {
                    if let Err(e) = host.connect(n.id, &n.hostname, n.port) {
                        log::warn!("cannot connect to {n}: {e}");
                    }
                }
                Out::TakeOver { epoch, core, app } => {
                    log::warn!(
                        "taking over as the active scheduler: #{} at {}, {epoch}",
                        epoch.candidate,
                        self.scheduler_addr(epoch.candidate as usize)
                    );
                    host.take_over(&core, &app, now);
                }
                Out::StepDown(e) => log::warn!("{e} is active: this scheduler steps down"),
                Out::Acting(e) => {
                    log::warn!("acting as the active scheduler under {e} since {} (Unix ms)", unix_ms(host, now, now))
                }
                Out::Stopped { epoch, at_ms } => log::warn!(
                    "not acting under {epoch} since {} (Unix ms): no majority of the nodes echoed it within its lease, or it stepped down",
                    unix_ms(host, at_ms, now)
                ),
            }
        }
    }

    /// Active scheduler: the application's new state (the master's queues). Under
    /// the embedded election it is streamed to the standbys, and every act decided
    /// on it (the reply) waits until the live standbys hold it; under a lock service
    /// it is saved before this returns. Fails with [`FailoverError::NotActive`] if
    /// this scheduler is not active.
    pub fn replicate_app(&self, host: &dyn Host, state: Bytes) -> Result<(), FailoverError> {
        let Some(s) = &self.sched else {
            return Err(FailoverError::NotScheduler("replicates state"));
        };
        if let Some(ls) = self.lock_service() {
            return self.persist(&ls, |app, _| *app = state);
        }
        let now = host.now_ms();
        let outs = match &mut *s.lock() {
            SchedFailover::Embedded(c) => c.replicate(None, Some(state), now)?,
            SchedFailover::Locked { .. } => return Err(FailoverError::WrongElection("the lock service is missing")),
        };
        self.run(host, outs, now);
        Ok(())
    }

    /// The application state last received from the active scheduler (a standby that
    /// took over resumes from it), if any.
    pub fn replicated_app_state(&self) -> Option<Bytes> {
        let g = self.sched.as_ref()?.lock();
        let app = match &*g {
            SchedFailover::Embedded(c) => c.app().clone(),
            SchedFailover::Locked { app, .. } => app.clone(),
        };
        (!app.is_empty()).then_some(app)
    }

    /// Active scheduler: the node table changed; stream it to the standbys (or save
    /// it under the lock).
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
            if let Err(e) = self.persist(&ls, |_, c| *c = core) {
                log::error!("{e}");
            }
            return;
        }
        let now = host.now_ms();
        let outs = match &mut *s.lock() {
            SchedFailover::Embedded(c) => c.replicate(Some(core), None, now).unwrap_or_default(),
            SchedFailover::Locked { .. } => Vec::new(),
        };
        self.run(host, outs, now);
    }

    /// True while this process may act as the scheduler (always on a single one).
    pub fn is_active_scheduler(&self) -> bool {
        self.scheduler_epoch().1 && self.is_scheduler
    }

    /// True while this active scheduler may act at `now`: under the embedded
    /// election, while it holds its lease; under a lock service, while it holds the
    /// lock. It may declare nodes dead only then.
    pub fn may_act(&self, now: u64) -> bool {
        self.sched.as_ref().is_some_and(|s| match &*s.lock() {
            SchedFailover::Embedded(c) => c.may_act(now),
            SchedFailover::Locked { cand, .. } => cand.is_active(),
        })
    }

    /// Since when (ms) this scheduler acts, while it may act at `now`: its liveness
    /// counts no silence from before (see [`super::Candidacy::acting_since`]; under a
    /// lock service, its takeover watched every node afresh). None while it may not.
    pub fn acting_since(&self, now: u64) -> Option<u64> {
        let s = self.sched.as_ref()?;
        match &*s.lock() {
            SchedFailover::Embedded(c) => c.acting_since(now),
            SchedFailover::Locked { cand, .. } => cand.is_active().then_some(0),
        }
    }

    /// Scheduler tick: beats to the other candidates, standbys caught up, held acts
    /// released, the lease watched, elections run (or the lock watched).
    pub fn tick(&self, host: &dyn Host, now: u64) {
        let Some(s) = &self.sched else { return };
        if !self.multi() {
            return;
        }
        let ls = self.lock_service();
        let mut g = s.lock();
        match (&mut *g, ls) {
            (SchedFailover::Embedded(c), _) => {
                let outs = c.tick(now);
                let takes_over = outs.iter().any(|o| matches!(o, Out::TakeOver { .. }));
                if takes_over {
                    self.taking_over.store(true, Ordering::SeqCst);
                }
                drop(g);
                self.run(host, outs, now);
                if takes_over {
                    self.taking_over.store(false, Ordering::SeqCst);
                }
            }
            (SchedFailover::Locked { .. }, None) => {}
            (SchedFailover::Locked { cand, core, app }, Some(ls)) => {
                let lock = lock_view(cand, ls.as_ref());
                cand.on_lock(lock);
                // the first candidate winning the lock of a new cluster: nothing to take over
                let first = cand.epoch().term == 0;
                let mut take_over = None;
                match cand.tick() {
                    LockDecision::TakeOver(e) if first => log::info!("holding the scheduler lock: active at {e}"),
                    LockDecision::TakeOver(e) => {
                        match ls.load() {
                            Ok((c, a)) => {
                                *core = Bytes::from(c);
                                *app = Bytes::from(a);
                            }
                            Err(e) => log::error!("{e}; waiting for the nodes to register again"),
                        }
                        take_over = Some((e, core.clone(), app.clone()));
                    }
                    LockDecision::StepDown(e) => {
                        log::warn!("lost the scheduler lock: this scheduler ({e}) steps down")
                    }
                    LockDecision::Nothing => {}
                }
                drop(g);
                if let Some((e, core, app)) = take_over {
                    log::warn!(
                        "taking over as the active scheduler: #{} at {}, {e}",
                        e.candidate,
                        self.scheduler_addr(e.candidate as usize)
                    );
                    host.take_over(&core, &app, now);
                }
                self.beat_peers(host, now);
            }
        }
    }

    /// Under a lock service: a beat to every other candidate every interval, so a
    /// standby follows the active one's epoch (and may seek the lock).
    fn beat_peers(&self, host: &dyn Host, now: u64) {
        let due = {
            let mut next = self.next_peer_beat_ms.lock();
            let due = now >= *next;
            if due {
                *next = now + self.beat_ms;
            }
            due
        };
        if due {
            for i in (0..self.schedulers.len()).filter(|&i| i != self.me) {
                let mut m = Message::control(candidate_key(i), Command::PeerBeat);
                self.stamp(host, &mut m);
                let _ = host.send_stamped(m);
            }
        }
    }
}
