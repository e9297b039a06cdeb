//! The simulated cluster: every process in its slot (scheduler candidates first,
//! then servers, then workers), the network between them, one clock and one agenda.
//! [`World::step`] runs the next event and hands what it sent to the network.

use crate::config::SimConfig;
use crate::events::Agenda;
use crate::fault::Fault;
use crate::host::{Host, Outgoing};
use crate::net::Net;
use crate::node::NodeShell;
use crate::rng::SimRng;
use crate::scheduler::{Act, Scheduler};
use crate::server::{PushKey, Server};
use crate::worker::Worker;
use ps_core::message::Message;
use ps_core::node::{Role, EMPTY_ID, SCHEDULER};

/// The van's tick period (ms).
pub const TICK_MS: u64 = 20;

/// A process.
pub enum Proc {
    /// A scheduler candidate.
    Sched(Box<Scheduler>),
    /// A server.
    Server(Box<Server>),
    /// A worker.
    Worker(Box<Worker>),
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
    /// A message reaches `to`.
    Deliver {
        /// The sending slot.
        from: usize,
        /// The receiving slot.
        to: usize,
        /// The message.
        msg: Message,
    },
    /// A process's van tick.
    Tick {
        /// The slot.
        slot: usize,
        /// The process's life.
        life: u64,
    },
    /// A node's heartbeat.
    Beat {
        /// The slot.
        slot: usize,
        /// The process's life.
        life: u64,
    },
    /// A fault (or its end).
    Fault(Fault),
}

/// What a step produced for the invariants.
#[derive(Default)]
pub struct Effects {
    /// Scheduler acts: (slot, process incarnation, act).
    pub acts: Vec<(usize, u64, Act)>,
    /// Pushes workers saw answered.
    pub acked: Vec<(PushKey, i64)>,
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
    /// The agenda.
    pub agenda: Agenda<Ev>,
    /// A short log of what happened (faults, takeovers), for the report.
    pub log: Vec<String>,
    /// Every delivery is logged too (a replayed seed's full story).
    pub trace: bool,
    /// The fault window is over.
    pub calm: bool,
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
            agenda: Agenda::default(),
            log: Vec::new(),
            trace: false,
            calm: false,
            cfg,
        };
        for slot in 0..n {
            w.start(slot);
        }
        w
    }

    /// Starts a fresh process in `slot` (a restarted candidate is a standby).
    pub fn start(&mut self, slot: usize) {
        let cfg = &self.cfg;
        let now = self.now;
        let inc = self.rng.u64() | 1;
        let s = &mut self.slots[slot];
        s.life += 1;
        s.starts += 1;
        let first = s.starts == 1;
        let life = s.life;
        let role = s.role;
        let id = if role == Role::Scheduler { SCHEDULER } else { EMPTY_ID };
        let host = Host::new(slot, role, id, inc, cfg.resend_ms);
        let proc = match role {
            Role::Scheduler => Proc::Sched(Box::new(Scheduler::new(
                host,
                slot,
                cfg.schedulers,
                !(first && slot == 0),
                cfg.servers,
                cfg.workers,
                (cfg.heartbeat_ms, cfg.timeout_ms),
                (cfg.tasks, cfg.passes),
                cfg.plant.scheduler,
                now,
            ))),
            Role::Server => {
                let node = NodeShell::new(host, cfg.schedulers, cfg.replicas > 0, cfg.timeout_ms, now);
                Proc::Server(Box::new(Server::new(node, cfg.servers, cfg.replicas, cfg.plant.server)))
            }
            Role::Worker => {
                let node = NodeShell::new(host, cfg.schedulers, cfg.replicas > 0, cfg.timeout_ms, now);
                Proc::Worker(Box::new(Worker::new(node, cfg.servers, cfg.replicas)))
            }
        };
        s.proc = Some(proc);
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
        if s.proc.take().is_some() {
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
        let now = at;
        let mut fx = Effects::default();
        let slot = match ev {
            Ev::Deliver { from, to, msg } => {
                if !self.net.connected(from, to) {
                    return Some(fx);
                }
                if self.trace && self.slots[to].proc.is_some() {
                    let c = &msg.meta.control;
                    let extra = if msg.meta.is_control() {
                        format!(
                            " [term {} cand {} origin {} seq {} lease {}{}{}]",
                            c.term,
                            c.candidate,
                            c.origin,
                            c.seq,
                            c.lease_ms,
                            if msg.meta.request { " request" } else { "" },
                            if c.granted { " granted" } else { "" }
                        ) + &if c.nodes.is_empty() {
                            String::new()
                        } else {
                            format!(
                                " nodes {:?}",
                                c.nodes.iter().map(|n| (n.id, n.incarnation % 1000)).collect::<Vec<_>>()
                            )
                        }
                    } else {
                        String::new()
                    };
                    self.log.push(format!("{now} ms: {from} -> {to}: {msg}{extra}"));
                }
                let rng = &mut self.rng;
                match self.slots[to].proc.as_mut() {
                    Some(Proc::Sched(s)) => s.on_message(msg, now),
                    Some(Proc::Server(s)) => {
                        let ev = s.node.on_message(msg, now);
                        s.on_events(ev, now);
                    }
                    Some(Proc::Worker(w)) => {
                        let ev = w.node.on_message(msg, now);
                        w.on_events(ev, rng, now);
                    }
                    None => return Some(fx),
                }
                to
            }
            Ev::Tick { slot, life } => {
                if self.slots[slot].life != life {
                    return Some(fx);
                }
                match self.slots[slot].proc.as_mut() {
                    Some(Proc::Sched(s)) => s.tick(now),
                    Some(Proc::Server(s)) => {
                        s.node.join(now);
                        s.node.tick(now);
                        s.tick(now);
                    }
                    Some(Proc::Worker(w)) => {
                        w.node.join(now);
                        w.node.tick(now);
                        w.tick(now);
                    }
                    None => return Some(fx),
                }
                self.agenda.at(now + TICK_MS, Ev::Tick { slot, life });
                slot
            }
            Ev::Beat { slot, life } => {
                if self.slots[slot].life != life {
                    return Some(fx);
                }
                match self.slots[slot].proc.as_mut() {
                    Some(Proc::Server(s)) => s.node.heartbeat(now),
                    Some(Proc::Worker(w)) => w.node.heartbeat(now),
                    _ => return Some(fx),
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
        Some(fx)
    }

    /// Takes what the process in `slot` sent and produced, and stops it if it was
    /// evicted.
    fn collect(&mut self, slot: usize, fx: &mut Effects) {
        let now = self.now;
        let (out, evicted): (Vec<Outgoing>, bool) = match self.slots[slot].proc.as_mut() {
            Some(Proc::Sched(s)) => {
                let inc = s.host.me.incarnation;
                fx.acts.extend(s.acts.drain(..).map(|a| (slot, inc, a)));
                (std::mem::take(&mut s.host.outbox), false)
            }
            Some(Proc::Server(s)) => (std::mem::take(&mut s.node.host.outbox), s.node.evicted),
            Some(Proc::Worker(w)) => {
                fx.acked.append(&mut w.acked);
                (std::mem::take(&mut w.node.host.outbox), w.node.evicted)
            }
            None => return,
        };
        for o in out {
            for d in self.net.delays(&mut self.rng, slot, o.to) {
                self.agenda.at(
                    now + d,
                    Ev::Deliver {
                        from: slot,
                        to: o.to,
                        msg: o.msg.clone(),
                    },
                );
            }
        }
        if evicted {
            self.crash(slot, "stopped: the scheduler declared it dead");
            self.restart_later(slot);
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

    /// The scheduler candidate acting with the best epoch, if any.
    pub fn active(&self) -> Option<&Scheduler> {
        self.slots
            .iter()
            .filter_map(|s| match &s.proc {
                Some(Proc::Sched(x)) if x.is_active() => Some(x.as_ref()),
                _ => None,
            })
            .max_by_key(|s| s.fo.epoch())
    }
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
                    Some(Proc::Sched(x)) => format!(
                        "scheduler id {} inc {}: {} {}, master {}, finished {}",
                        x.host.me.id,
                        x.host.me.incarnation % 1000,
                        if x.is_active() { "active" } else { "standby" },
                        x.fo.epoch(),
                        x.master
                            .as_ref()
                            .map_or("none".to_string(), |m| format!("{:?}", m.snapshot())),
                        x.finished
                    ),
                    Some(Proc::Server(x)) => format!(
                        "server id {} inc {}: ready {}, catching up {}, finished {}, follows {}",
                        x.node.host.me.id,
                        x.node.host.me.incarnation % 1000,
                        x.node.ready,
                        x.catching_up(),
                        x.finished,
                        x.node.view.epoch()
                    ),
                    Some(Proc::Worker(x)) => format!(
                        "worker id {} inc {}: ready {}, {}, finished {}, follows {}",
                        x.node.host.me.id,
                        x.node.host.me.incarnation % 1000,
                        x.node.ready,
                        x.phase_name(),
                        x.finished(),
                        x.node.view.epoch()
                    ),
                };
                format!("slot {i}: {what}")
            })
            .collect()
    }
}

impl World {
    /// The node table of the newest scheduler state (the candidate holding the state
    /// of the newest epoch, and of that the highest sequence), if any holds one.
    pub fn newest_table(&self) -> Option<ps_core::protocol::membership::Membership> {
        let newest = self
            .slots
            .iter()
            .filter_map(|s| match &s.proc {
                Some(Proc::Sched(x)) => Some(x),
                _ => None,
            })
            .max_by_key(|x| (x.fo.state_epoch(), x.fo.seq(), x.is_active()))?;
        bincode::deserialize(newest.fo.core()).ok()
    }
}
