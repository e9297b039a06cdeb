//! The simulated cluster: every process in its slot (scheduler candidates first,
//! then servers, then workers), the network between them, one clock and one agenda.
//! A process is psrs's own postoffice and van ([`crate::process`]) with its role's
//! application on top; [`World::step`] runs the next event (a delivery, a van's tick,
//! a heartbeat round) and hands what the process sent to the network.

use crate::config::SimConfig;
use crate::events::Agenda;
use crate::fault::Fault;
use crate::net::Net;
use crate::process::{self, NodeLink, ProcClock, Shape, SimClock};
use crate::rng::SimRng;
use crate::scheduler::Scheduler;
use crate::server::{PushKey, Server};
use crate::transport::SimTransport;
use crate::worker::Worker;
use parking_lot::Mutex;
use ps_apps::train::coordinator::MASTER_APP;
use ps_core::failover::{is_act, StateView};
use ps_core::message::Message;
use ps_core::node::{Role, SCHEDULER};
use ps_core::protocol::join_backoff::JoinBackoff;
use ps_core::protocol::resender::signature;
use ps_core::van::Transport;
use ps_core::Postoffice;
use std::collections::BTreeSet;
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// The van's tick period (ms), as its ticker thread runs it.
pub const TICK_MS: u64 = ps_core::van::TICK_EVERY.as_millis() as u64;

/// A process's application.
pub enum App {
    /// A scheduler candidate's coordinator.
    Sched(Arc<Mutex<Scheduler>>),
    /// A server.
    Server(Arc<Mutex<Server>>),
    /// A worker.
    Worker(Arc<Mutex<Worker>>),
}

/// A running process.
pub struct Proc {
    /// Its postoffice (and van).
    pub po: Arc<Postoffice>,
    /// Its end of the network.
    pub net: Arc<SimTransport>,
    /// Its application.
    pub app: App,
    /// Its clock.
    pub clock: Arc<ProcClock>,
    /// What its heartbeats last found of the scheduler it follows.
    watch: ps_core::van::SchedulerWatch,
    /// When a node without its table asks to join next, and the pace of its asking
    /// (as the van's start loop paces it).
    next_join_ms: u64,
    join: JoinBackoff,
}

/// A slot: what runs there and how many processes ran there before.
pub struct Slot {
    /// The role of the processes of this slot.
    pub role: Role,
    /// The running process (None while down).
    pub proc: Option<Proc>,
    /// Bumped at every crash and start: timers of an earlier process are ignored.
    pub life: u64,
    /// Processes started here so far.
    pub starts: u64,
}

/// A scheduled event.
pub enum Ev {
    /// A message's frames reach `to`.
    Deliver {
        /// The sending slot.
        from: usize,
        /// The receiving slot.
        to: usize,
        /// The message's frames.
        frames: Vec<bytes::Bytes>,
    },
    /// A process's van tick.
    Tick {
        /// The slot.
        slot: usize,
        /// The process's life.
        life: u64,
    },
    /// A node's heartbeat round.
    Beat {
        /// The slot.
        slot: usize,
        /// The process's life.
        life: u64,
    },
    /// A fault (or its end).
    Fault(Fault),
}

/// What one act of a scheduler was, for the invariants.
#[derive(Clone, Debug)]
pub struct Act {
    /// The term it acted under.
    pub term: u64,
    /// The command (or `Empty` for a master reply).
    pub what: String,
}

/// What a step produced for the invariants.
#[derive(Default)]
pub struct Effects {
    /// Scheduler acts: (slot, process incarnation, act).
    pub acts: Vec<(usize, u64, Act)>,
    /// Pushes workers saw answered.
    pub acked: Vec<(PushKey, i64)>,
    /// Tasks the master counted from a worker's attempt.
    pub counted: Vec<u64>,
    /// Deaths a scheduler declared: (slot, since when it acted, if it did).
    pub declared: Vec<(usize, Option<u64>)>,
    /// Failures of a scheduler's master ticker: (slot, why).
    pub tick_failures: Vec<(usize, String)>,
    /// A fault that came due: the caller applies it before anything else runs.
    pub fault: Option<Fault>,
}

/// The whole simulated cluster.
pub struct World {
    /// The run's shape.
    pub cfg: SimConfig,
    /// Every slot.
    pub slots: Vec<Slot>,
    /// The network.
    pub net: Net,
    /// The generator.
    pub rng: SimRng,
    /// Now (ms).
    pub now: u64,
    /// The clock every van reads.
    pub clock: Arc<SimClock>,
    /// The agenda.
    pub agenda: Agenda<Ev>,
    /// A short log of what happened (faults, takeovers), for the report.
    pub log: Vec<String>,
    /// Every delivery is logged too (a replayed seed's full story).
    pub trace: bool,
    /// The fault window is over.
    pub calm: bool,
    /// Acts seen (slot, incarnation, signature): a resend is no new act.
    acts_seen: BTreeSet<(usize, u64, u64)>,
    /// Since when (world ms) each scheduler candidate acts, while it does.
    acting_since: Vec<Option<u64>>,
}

impl World {
    /// A cluster of `cfg`'s shape, every process started at time 0.
    pub fn new(cfg: SimConfig, seed: u64) -> World {
        let n = cfg.schedulers + cfg.servers + cfg.workers;
        let mut w = World {
            slots: (0..n)
                .map(|i| Slot {
                    role: if i < cfg.schedulers {
                        Role::Scheduler
                    } else if i < cfg.schedulers + cfg.servers {
                        Role::Server
                    } else {
                        Role::Worker
                    },
                    proc: None,
                    life: 0,
                    starts: 0,
                })
                .collect(),
            net: Net::new(n),
            rng: SimRng::new(seed),
            now: 0,
            clock: Arc::new(SimClock::default()),
            agenda: Agenda::default(),
            log: Vec::new(),
            trace: false,
            calm: false,
            acts_seen: BTreeSet::new(),
            acting_since: vec![None; cfg.schedulers],
            cfg,
        };
        for slot in 0..n {
            w.start(slot);
        }
        w
    }

    fn shape(&self) -> Shape {
        let c = &self.cfg;
        Shape {
            schedulers: c.schedulers,
            servers: c.servers,
            workers: c.workers,
            replicas: c.replicas,
            heartbeat_ms: c.heartbeat_ms,
            timeout_ms: c.timeout_ms,
            resend_ms: c.resend_ms,
        }
    }

    /// Starts a fresh process in `slot` (a restarted candidate is a standby).
    pub fn start(&mut self, slot: usize) {
        let now = self.now;
        self.clock.set(now);
        let inc = self.rng.u64() | 1;
        let app_seed = self.rng.u64();
        let shape = self.shape();
        let s = &mut self.slots[slot];
        s.life += 1;
        s.starts += 1;
        let first = s.starts == 1;
        let life = s.life;
        let role = s.role;
        let standby = role == Role::Scheduler && !(first && slot == 0);
        let mut cfg = process::config(&shape, slot, role, standby);
        cfg.planted = self.cfg.plant.scheduler.node;
        let clock = Arc::new(ProcClock::new(Arc::clone(&self.clock)));
        let (po, net) = process::postoffice(cfg, Arc::clone(&clock), inc);
        let link = NodeLink::new(Arc::clone(&po));
        let app = match role {
            Role::Scheduler => {
                let a = Arc::new(Mutex::new(Scheduler::new(
                    link,
                    Arc::clone(&net),
                    slot,
                    (self.cfg.tasks, self.cfg.passes),
                    self.cfg.plant.scheduler,
                )));
                let a2 = Arc::clone(&a);
                po.on_node_dead(move |_| a2.lock().declared += 1);
                App::Sched(a)
            }
            Role::Server => App::Server(Arc::new(Mutex::new(Server::new(link, self.cfg.plant.server)))),
            Role::Worker => App::Worker(Arc::new(Mutex::new(Worker::new(link, SimRng::new(app_seed))))),
        };
        s.proc = Some(Proc {
            po,
            net,
            app,
            clock,
            watch: Default::default(),
            next_join_ms: now,
            join: JoinBackoff::default(),
        });
        let jitter = self.rng.between(0, TICK_MS);
        self.agenda.at(now + jitter, Ev::Tick { slot, life });
        if role != Role::Scheduler {
            let jitter = self.rng.between(0, self.cfg.heartbeat_ms);
            self.agenda.at(now + jitter, Ev::Beat { slot, life });
        }
        if !first {
            self.log.push(format!("{now} ms: slot {slot} ({role}) restarted"));
        }
    }

    /// Stops the process in `slot` (a crash: nothing more is sent or received).
    pub fn crash(&mut self, slot: usize, why: &str) {
        let s = &mut self.slots[slot];
        if let Some(p) = s.proc.take() {
            p.net.close();
            s.life += 1;
            self.log
                .push(format!("{} ms: slot {slot} ({}) {why}", self.now, s.role));
        }
    }

    /// True if a process runs in `slot`.
    pub fn up(&self, slot: usize) -> bool {
        self.slots[slot].proc.is_some()
    }

    /// Runs the next event; None when nothing is left.
    pub fn step(&mut self) -> Option<Effects> {
        let (at, ev) = self.agenda.pop()?;
        self.now = at;
        self.clock.set(at);
        let now = at;
        let mut fx = Effects::default();
        let slot = match ev {
            Ev::Deliver { from, to, frames } => {
                if !self.net.connected(from, to) {
                    return Some(fx);
                }
                let Some(p) = self.slots[to].proc.as_ref() else {
                    return Some(fx);
                };
                if self.trace {
                    self.log.push(format!("{now} ms: {from} -> {to}: {}", story(&frames)));
                }
                let net = Arc::clone(&p.net);
                crate::context::enter(now, to);
                if !(self.cfg.plant.scheduler.no_lease && self.answered_around(to, &frames)) {
                    net.deliver(frames);
                }
                to
            }
            Ev::Tick { slot, life } => {
                if self.slots[slot].life != life {
                    return Some(fx);
                }
                let role = self.slots[slot].role;
                let Some(p) = self.slots[slot].proc.as_mut() else {
                    return Some(fx);
                };
                let van = Arc::clone(p.po.van());
                crate::context::enter(now, slot);
                if role != Role::Scheduler && !van.is_ready() && now >= p.next_join_ms {
                    let reached = van.join_step().is_ok();
                    p.next_join_ms = now + p.join.after(reached).as_millis() as u64;
                }
                let pnow = ps_core::van::Clock::now_ms(&*p.clock);
                van.tick(pnow);
                match &p.app {
                    App::Sched(a) => a.lock().tick(pnow),
                    App::Server(_) => {}
                    App::Worker(a) => a.lock().tick(pnow),
                }
                self.agenda.at(now + TICK_MS, Ev::Tick { slot, life });
                slot
            }
            Ev::Beat { slot, life } => {
                if self.slots[slot].life != life {
                    return Some(fx);
                }
                let Some(p) = self.slots[slot].proc.as_mut() else {
                    return Some(fx);
                };
                crate::context::enter(now, slot);
                // (the heartbeat thread starts once the node joined)
                if p.po.van().is_ready() {
                    p.po.van().heartbeat_step(&mut p.watch);
                }
                self.agenda.at(now + self.cfg.heartbeat_ms, Ev::Beat { slot, life });
                slot
            }
            Ev::Fault(f) => {
                // the caller applies it (see `crate::faults::apply`)
                fx.fault = Some(f);
                return Some(fx);
            }
        };
        self.collect(slot, &mut fx);
        crate::context::leave();
        // (a lease runs out with time alone: every candidate is looked at)
        for s in 0..self.cfg.schedulers {
            let acting = self.sched_state(s).is_some_and(|v| v.acting);
            match (self.acting_since[s], acting) {
                (None, true) => self.acting_since[s] = Some(now),
                (Some(_), false) => self.acting_since[s] = None,
                _ => {}
            }
        }
        Some(fx)
    }

    /// Lets the application of `slot` see what changed, takes what the process sent
    /// and produced, and stops it if it was evicted.
    fn collect(&mut self, slot: usize, fx: &mut Effects) {
        let now = self.now;
        let Some(p) = self.slots[slot].proc.as_ref() else {
            return;
        };
        let pnow = ps_core::van::Clock::now_ms(&*p.clock);
        let evicted = match &p.app {
            App::Sched(a) => {
                let mut a = a.lock();
                a.after_step();
                for _ in 0..std::mem::take(&mut a.declared) {
                    fx.declared.push((slot, self.acting_since[slot]));
                }
                for why in std::mem::take(&mut a.tick_failures) {
                    fx.tick_failures.push((slot, why));
                }
                false
            }
            App::Server(a) => {
                let mut a = a.lock();
                a.after_step();
                if let Some(why) = a.failed.take() {
                    drop(a);
                    self.crash(slot, &format!("stopped: {why}"));
                    self.restart_later(slot);
                    return;
                }
                a.node.evicted.load(Ordering::Relaxed)
            }
            App::Worker(a) => {
                let mut a = a.lock();
                a.after_step(pnow);
                fx.acked.append(&mut a.acked);
                fx.counted.append(&mut a.counted);
                if let Some(why) = a.failed.take() {
                    drop(a);
                    self.crash(slot, &format!("stopped: {why}"));
                    self.restart_later(slot);
                    return;
                }
                a.node.evicted.load(Ordering::Relaxed)
            }
        };
        let scheduler = matches!(p.app, App::Sched(_));
        let inc = p.po.van().my_node().incarnation;
        let refused = p.po.van().join_refusal().is_some();
        for (to, frames) in p.net.take_out() {
            if scheduler {
                self.observe(slot, inc, &frames, fx);
            }
            for d in self.net.delays(&mut self.rng, slot, to) {
                self.agenda.at(
                    now + d,
                    Ev::Deliver {
                        from: slot,
                        to,
                        frames: frames.clone(),
                    },
                );
            }
        }
        if evicted {
            self.crash(slot, "stopped: the scheduler declared it dead");
            self.restart_later(slot);
        } else if refused {
            // (its start fails: the process ends)
            self.crash(slot, "stopped: the scheduler refused it");
            self.restart_later(slot);
        }
    }

    /// A message a scheduler's process sent: an act is recorded for the invariants
    /// (a resend of one is no new act).
    fn observe(&mut self, slot: usize, inc: u64, frames: &[bytes::Bytes], fx: &mut Effects) {
        let Ok(msg) = Message::decode(frames.to_vec()) else {
            return;
        };
        if msg.meta.sender != SCHEDULER || msg.meta.recver == SCHEDULER || !is_act(&msg) {
            return;
        }
        if self.acts_seen.insert((slot, inc, signature(&msg.meta))) {
            fx.acts.push((
                slot,
                inc,
                Act {
                    term: msg.meta.control.term,
                    what: format!("{:?} to {}", msg.meta.control.cmd, msg.meta.recver),
                },
            ));
        }
    }

    /// Restarts the process of `slot` after a random delay (at the end of the fault
    /// window at the latest).
    pub fn restart_later(&mut self, slot: usize) {
        let end = if self.calm {
            self.now
        } else {
            self.cfg.fault_ms.max(self.now)
        };
        let at = (self.now + self.rng.between(100, 4000)).min(end);
        self.agenda.at(at, Ev::Fault(Fault::Restart(slot)));
    }

    /// The planted bug of a scheduler without a lease: a request to the master app
    /// delivered to the candidate in `slot` is answered around its van (true), not
    /// handed to the van.
    fn answered_around(&self, slot: usize, frames: &[bytes::Bytes]) -> bool {
        let Some(a) = self.scheduler(slot) else { return false };
        match Message::decode(frames.to_vec()) {
            Ok(m) if !m.meta.is_control() && m.meta.request && m.meta.app_id == MASTER_APP => {
                a.lock().answer_around(&m)
            }
            _ => false,
        }
    }

    /// The failover state of the scheduler candidate in `slot`, if one runs there.
    pub fn sched_state(&self, slot: usize) -> Option<StateView> {
        match &self.slots[slot].proc {
            Some(p @ Proc { app: App::Sched(_), .. }) => p.po.van().failover_state(),
            _ => None,
        }
    }

    /// The slot of the scheduler candidate acting with the best epoch, if any.
    pub fn active(&self) -> Option<usize> {
        (0..self.cfg.schedulers)
            .filter_map(|s| self.sched_state(s).filter(|v| v.active).map(|v| (v.epoch, s)))
            .max()
            .map(|(_, s)| s)
    }

    /// The scheduler application in `slot`.
    pub fn scheduler(&self, slot: usize) -> Option<&Arc<Mutex<Scheduler>>> {
        match &self.slots[slot].proc {
            Some(Proc { app: App::Sched(a), .. }) => Some(a),
            _ => None,
        }
    }
}

/// A delivery, for the trace of a replayed seed.
fn story(frames: &[bytes::Bytes]) -> String {
    let Ok(msg) = Message::decode(frames.to_vec()) else {
        return "(malformed)".into();
    };
    let c = &msg.meta.control;
    if !msg.meta.is_control() {
        return msg.to_string();
    }
    let mut s = format!(
        "{msg} [term {} cand {} origin {} seq {} lease {}{}{}]",
        c.term,
        c.candidate,
        c.origin,
        c.seq,
        c.lease_ms,
        if msg.meta.request { " request" } else { "" },
        if c.granted { " granted" } else { "" }
    );
    if !c.nodes.is_empty() {
        let nodes: Vec<_> = c.nodes.iter().map(|n| (n.id, n.incarnation % 1000)).collect();
        s += &format!(" nodes {nodes:?}");
    }
    s
}

impl World {
    /// One line per slot: what runs there and how far it got (for a failure report).
    pub fn describe(&self) -> Vec<String> {
        self.slots
            .iter()
            .enumerate()
            .map(|(i, s)| {
                let what = match &s.proc {
                    None => "down".to_string(),
                    Some(p) => {
                        let me = p.po.van().my_node();
                        let (epoch, active) = p.po.van().scheduler_epoch();
                        let head = format!("id {} inc {}", me.id, me.incarnation % 1000);
                        match &p.app {
                            App::Sched(a) => {
                                let a = a.lock();
                                format!(
                                    "scheduler {head}: {} {epoch}, master {}, finished {}",
                                    if active { "active" } else { "standby" },
                                    a.coordinator
                                        .as_ref()
                                        .map_or("none".to_string(), |c| format!("{:?}", c.master().snapshot())),
                                    a.finished()
                                )
                            }
                            App::Server(a) => {
                                let a = a.lock();
                                format!(
                                    "server {head}: ready {}, catching up {}, finished {}, follows {epoch}",
                                    a.node.ready(),
                                    a.catching_up(),
                                    a.finished()
                                )
                            }
                            App::Worker(a) => {
                                let a = a.lock();
                                format!(
                                    "worker {head}: ready {}, {}, finished {}, follows {epoch}",
                                    a.node.ready(),
                                    a.phase_name(),
                                    a.finished()
                                )
                            }
                        }
                    }
                };
                format!("slot {i}: {what}")
            })
            .collect()
    }

    /// The node table of the newest scheduler state (the candidate holding the state
    /// of the newest epoch, and of that the highest sequence), if any holds one.
    pub fn newest_table(&self) -> Option<ps_core::protocol::membership::Membership> {
        let newest = (0..self.cfg.schedulers)
            .filter_map(|s| self.sched_state(s))
            .max_by_key(|v| (v.state_epoch, v.seq, v.active))?;
        bincode::deserialize(&newest.core).ok()
    }
}
