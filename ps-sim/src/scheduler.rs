//! A simulated scheduler candidate: the van's scheduler side (node table, barriers,
//! heartbeats through [`SchedulerCore`]), its failover ([`Candidacy`]: lease, votes,
//! held messages, state streamed to the standbys) and the coordinator serving the
//! master ([`Master`]) while active, whose every change is saved through a store that
//! replicates it to the standbys before the reply may leave.

use crate::host::{slot_of, Host};
use bytes::Bytes;
use parking_lot::Mutex;
use ps_apps::master::{
    decode_queues, encode_queues, Chunk, Master, MasterConfig, MasterError, MasterRequest, Store, StoreError,
};
use ps_apps::recordio::ChunkIndex;
use ps_apps::train::coordinator::{decode, encode, MASTER_APP};
use ps_core::failover::{candidate_key, is_act, voters, Candidacy, Epoch, Out, Timing};
use ps_core::message::{Command, Message};
use ps_core::node::{id_role, Node, Role, ALL_GROUP, SCHEDULER};
use ps_core::protocol::peers::Peers;
use ps_core::protocol::scheduler::{Action, SchedulerCore};
use std::collections::BTreeSet;
use std::sync::Arc;

/// Planted bugs of the scheduler side (for the simulator's own tests).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SchedulerBugs {
    /// A master resuming from its store forgets one pending task.
    pub forget_pending: bool,
    /// The active scheduler keeps no lease: it acts (replies, releases, declares
    /// nodes dead) whether or not a majority of the nodes heard it lately.
    pub no_lease: bool,
}

#[derive(Default)]
struct Cell {
    initial: Option<Vec<u8>>,
    saved: Option<Vec<u8>>,
    may_save: bool,
}

/// The master's store in the simulator: a save succeeds only on the active scheduler
/// (as `ReplicatedStore`'s does) and is replicated by the caller before the reply.
struct SimStore(Arc<Mutex<Cell>>);

impl Store for SimStore {
    fn load(&mut self) -> Result<Option<Vec<u8>>, StoreError> {
        Ok(self.0.lock().initial.clone())
    }
    fn save(&mut self, state: &[u8]) -> Result<(), StoreError> {
        let mut c = self.0.lock();
        if !c.may_save {
            return Err(StoreError("this scheduler is not active".into()));
        }
        c.saved = Some(state.to_vec());
        Ok(())
    }
}

/// What one act of a scheduler was, for the invariants.
#[derive(Clone, Debug)]
pub struct Act {
    /// The term it acted under.
    pub term: u64,
    /// The command (or `Empty` for a master reply).
    pub what: String,
}

/// A scheduler candidate process.
pub struct Scheduler {
    /// Van state.
    pub host: Host,
    core: SchedulerCore,
    /// Failover.
    pub fo: Candidacy,
    /// The master, once this candidate first became active.
    pub master: Option<Master>,
    cell: Arc<Mutex<Cell>>,
    mcfg: MasterConfig,
    tasks: usize,
    /// Ids declared dead (the postoffice's set).
    pub dead: BTreeSet<i32>,
    ready: bool,
    started: bool,
    /// Released from the final barrier.
    pub finished: bool,
    next_master_tick: u64,
    /// Acts since the world last looked.
    pub acts: Vec<Act>,
    bugs: SchedulerBugs,
}

impl Scheduler {
    /// Candidate `me` of `n` (active at start unless `standby`), expecting `servers`
    /// and `workers`, with a job of `tasks` tasks per pass over `passes` passes.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        mut host: Host,
        me: usize,
        n: usize,
        standby: bool,
        servers: usize,
        workers: usize,
        (beat_ms, timeout_ms): (u64, u64),
        (tasks, passes): (usize, u64),
        bugs: SchedulerBugs,
        now: u64,
    ) -> Scheduler {
        host.connect(SCHEDULER, host.slot);
        for i in (0..n).filter(|&i| i != me) {
            host.connect(candidate_key(i), i);
        }
        let core = SchedulerCore::new(servers, workers, host.me.clone(), timeout_ms);
        Scheduler {
            host,
            core,
            fo: Candidacy::new(
                me,
                n,
                standby,
                voters(servers, workers),
                Timing { timeout_ms, beat_ms },
                now,
            ),
            master: None,
            cell: Arc::default(),
            mcfg: MasterConfig {
                chunks_per_task: 1,
                num_epochs: passes,
                timeout_multiplier: 4.0,
                timeout_floor_ms: 2_000,
                max_retries: 3,
            },
            tasks,
            dead: BTreeSet::new(),
            ready: false,
            started: false,
            finished: false,
            next_master_tick: 0,
            acts: Vec::new(),
            bugs,
        }
    }

    /// The node table as this scheduler holds it.
    pub fn table(&self) -> Vec<Node> {
        self.core.membership().table()
    }

    /// True while this candidate acts as the scheduler.
    pub fn is_active(&self) -> bool {
        self.fo.is_active()
    }

    /// Sends a message to a node through the failover's gate: acts wait for their
    /// state to reach the standbys and for the lease, or are dropped on a candidate
    /// that is not active.
    fn send(&mut self, mut msg: Message, now: u64) {
        if self.bugs.no_lease && self.fo.is_active() {
            self.fo.stamp(&mut msg, now);
            return self.put(msg, now);
        }
        if let Some(m) = self.fo.outgoing(msg, now) {
            self.put(m, now);
        }
    }

    /// Puts a stamped message on the wire (an act is recorded for the invariants).
    fn put(&mut self, msg: Message, now: u64) {
        if is_act(&msg) && msg.meta.recver != SCHEDULER {
            self.acts.push(Act {
                term: msg.meta.control.term,
                what: format!("{:?} to {}", msg.meta.control.cmd, msg.meta.recver),
            });
        }
        self.host.send(msg, now);
    }

    /// Carries out the failover's decisions.
    fn run(&mut self, outs: Vec<Out>, now: u64) {
        for o in outs {
            match o {
                Out::Send(m) => self.put(m, now),
                Out::Connect(n) => self.host.connect(n.id, slot_of(&n)),
                Out::TakeOver { epoch, core, app } => self.take_over(epoch, core, app, now),
                Out::StepDown(_) => {}
                Out::Acting(_) | Out::Stopped { .. } => {}
            }
        }
    }

    fn take_over(&mut self, _epoch: Epoch, core: Bytes, app: Bytes, now: u64) {
        self.host.me.is_recovery = true;
        let me = self.host.me.clone();
        // the coordinator resumes from the state this candidate holds now
        self.master = None;
        self.started = true;
        // the deaths this candidate saw while it acted before are not the table's:
        // the table adopted says who is dead now (a node it once declared dead may
        // have served a newer scheduler since)
        self.host.peers = Peers::new();
        self.dead.clear();
        if let Ok(actions) = self.core.adopt(&core, me.clone(), now) {
            let m = self.core.membership();
            let dead: Vec<Node> = m.dead().iter().filter_map(|id| m.get(*id).cloned()).collect();
            let (peers, dead) = Peers::adopted(&m.table(), &dead, &me);
            self.host.peers = peers;
            self.dead.extend(dead);
            self.execute(actions, now);
        }
        self.ready = true;
        self.start_master_from(app, now);
    }

    fn restamp(&mut self, now: u64) {
        let mut m = Message::default();
        self.fo.stamp(&mut m, now);
        m.meta.control.seq = self.fo.committed(now);
        self.host.stamp = Some(m.meta.control);
    }

    /// A message from the network.
    pub fn on_message(&mut self, msg: Message, now: u64) {
        self.restamp(now);
        let c = &msg.meta.control;
        let epoch = Epoch {
            term: c.term,
            candidate: c.candidate,
        };
        match c.cmd {
            Command::Sync | Command::PeerBeat => {
                let outs = self.fo.on_peer(&msg, now);
                return self.run(outs, now);
            }
            Command::Vote => {
                let outs = self
                    .fo
                    .on_vote(msg.meta.sender, c.granted, epoch, c.seq, msg.meta.request, now);
                return self.run(outs, now);
            }
            Command::Heartbeat if msg.meta.sender != SCHEDULER => {
                let sender = msg.meta.sender;
                let holder = self.core.membership().get(sender).map(|n| n.incarnation);
                let alive = holder == Some(msg.meta.incarnation) && !self.core.membership().dead().contains(&sender);
                let outs = self.fo.on_heartbeat(sender, alive, epoch, c.seq, c.lease_ms, now);
                self.run(outs, now);
            }
            _ => {}
        }
        // our own messages pass; other candidates only talk Sync and PeerBeat
        if msg.meta.sender == SCHEDULER && msg.meta.control.origin as usize != self.host.slot {
            return;
        }
        // a node's message waits (unacknowledged, so it is sent again) while this
        // scheduler is not active or has no lease: it records nothing it could not
        // answer
        if !self.fo.is_active()
            || (msg.meta.sender != SCHEDULER && msg.meta.control.cmd != Command::Heartbeat && !self.fo.may_act(now))
        {
            return;
        }
        for m in self.host.receive(msg, now) {
            self.process(m, now);
        }
    }

    fn process(&mut self, msg: Message, now: u64) {
        match msg.meta.control.cmd {
            Command::Empty => self.on_master_request(msg, now),
            Command::AddNode => {
                if let Some(node) = msg.meta.control.nodes.into_iter().next() {
                    let actions = self.core.on_add_node(node, now);
                    self.execute(actions, now);
                }
            }
            Command::Barrier if msg.meta.request => {
                let actions = self.core.on_barrier(msg.meta.control.barrier_group, msg.meta.sender);
                self.execute(actions, now);
            }
            Command::Barrier => {
                if self.started {
                    self.finished = true;
                } else {
                    self.started = true;
                    self.start_master(now);
                }
            }
            Command::Heartbeat => {
                let actions = self.core.on_heartbeat(msg.meta.sender, msg.meta.incarnation, now);
                self.execute(actions, now);
            }
            Command::Leave => {
                let actions = self.core.on_leave(msg.meta.sender, msg.meta.incarnation, now);
                self.execute(actions, now);
            }
            _ => {}
        }
    }

    fn execute(&mut self, actions: Vec<Action>, now: u64) {
        let replay = actions
            .iter()
            .any(|a| matches!(a, Action::Connect(_) | Action::Table(_)));
        for a in Action::in_state_order(actions) {
            match a {
                Action::Connect(n) => self.host.connect(n.id, slot_of(&n)),
                Action::Send(mut m) => {
                    m.meta.timestamp = self.host.next_ts();
                    self.send(m, now);
                }
                Action::Reject { node, reason } => {
                    let key = -1 - node.port as i32;
                    self.host.connect(key, slot_of(&node));
                    let mut m = Message::control(key, Command::AddNode);
                    m.meta.control.reason = reason;
                    // for the refused process only, not a later one at its address
                    m.meta.recver_incarnation = node.incarnation;
                    self.send(m, now);
                }
                Action::Welcome(n) => {
                    let key = -70_000 - n.port as i32;
                    self.host.connect(key, slot_of(&n));
                    let mut m = Message::control(key, Command::Heartbeat);
                    m.meta.timestamp = self.host.next_ts();
                    self.send(m, now);
                }
                Action::Table(t) => {
                    for id in self.host.peers.on_table(&t) {
                        self.dead.remove(&id);
                    }
                    self.host.table = t;
                    if !self.ready {
                        self.ready = true;
                        if self.host.me.is_recovery {
                            // a candidate that took over skips the start barrier
                            self.started = true;
                            self.start_master(now);
                        } else {
                            self.barrier(now);
                        }
                    }
                    self.replicate_core(now);
                }
                Action::Left(ids) | Action::Dead(ids) => {
                    let nodes: Vec<Node> = ids
                        .iter()
                        .filter_map(|id| self.host.table.iter().find(|n| n.id == *id).cloned())
                        .collect();
                    let me = self.host.me.clone();
                    let notice = self.host.peers.on_death(&nodes, &me);
                    self.dead.extend(notice.dead.iter().copied());
                    for id in notice.dead.iter().filter(|&&id| id_role(id) == Some(Role::Worker)) {
                        if let Some(m) = self.master.as_mut() {
                            let _ = with_store(&self.cell, &self.fo, || m.worker_dead(*id));
                        }
                    }
                    self.flush_master(now);
                    self.replicate_core(now);
                }
            }
        }
        if replay {
            for m in self.host.replay_unconnected(now) {
                self.process(m, now);
            }
        }
    }

    fn barrier(&mut self, now: u64) {
        let mut m = Message::control(SCHEDULER, Command::Barrier);
        m.meta.request = true;
        m.meta.timestamp = self.host.next_ts();
        m.meta.control.barrier_group = ALL_GROUP;
        self.send(m, now);
    }

    fn replicate_core(&mut self, now: u64) {
        let core = Bytes::from(self.core.export());
        if let Ok(outs) = self.fo.replicate(Some(core), None, now) {
            self.run(outs, now);
        }
    }

    /// Becoming the serving scheduler: the coordinator starts (the master resumes
    /// from the state replicated to this candidate) and waits in the final barrier.
    fn start_master(&mut self, now: u64) {
        let app = self.fo.app().clone();
        self.start_master_from(app, now);
    }

    fn start_master_from(&mut self, app: Bytes, now: u64) {
        if self.master.is_none() {
            let mut initial = (!app.is_empty()).then(|| app.to_vec());
            if self.bugs.forget_pending {
                initial = initial.map(forget_one_pending);
            }
            *self.cell.lock() = Cell {
                initial,
                saved: None,
                may_save: false,
            };
            match Master::new(self.mcfg.clone(), Box::new(SimStore(Arc::clone(&self.cell))), now) {
                Ok(mut m) => {
                    if m.queues().dataset.is_none() {
                        let chunks = (0..self.tasks)
                            .map(|i| Chunk {
                                path: "sim".into(),
                                index: ChunkIndex {
                                    idx: i,
                                    offset: i as u64 * 100,
                                    len: 100,
                                    records: 10,
                                },
                            })
                            .collect();
                        let _ = with_store(&self.cell, &self.fo, || m.report_chunks(vec!["sim".into()], chunks));
                    }
                    self.master = Some(m);
                }
                Err(e) => log::error!("master: {e}"),
            }
            self.flush_master(now);
        }
        self.barrier(now);
    }

    /// Streams the master's last save to the standbys (before any reply leaves).
    fn flush_master(&mut self, now: u64) {
        let saved = self.cell.lock().saved.take();
        if let Some(state) = saved {
            if let Ok(outs) = self.fo.replicate(None, Some(Bytes::from(state)), now) {
                self.run(outs, now);
            }
        }
    }

    fn on_master_request(&mut self, msg: Message, now: u64) {
        if msg.meta.app_id != MASTER_APP || !msg.meta.request {
            return;
        }
        let Some(master) = self.master.as_mut() else { return };
        let Some(Ok(req)) = msg.data.first().map(|b| decode::<MasterRequest>(b)) else {
            return;
        };
        let sender = msg.meta.sender;
        let alive = !(id_role(sender) == Some(Role::Worker) && self.dead.contains(&sender));
        let reply = with_store(&self.cell, &self.fo, || {
            let _ = master.sender_liveness(sender, alive);
            Ok::<_, MasterError>(master.handle(sender, req, now))
        });
        self.flush_master(now);
        let Ok(reply) = reply else { return };
        let mut r = msg.clone();
        r.meta.request = false;
        r.meta.recver = sender;
        r.meta.recver_incarnation = msg.meta.incarnation;
        r.meta.control = Default::default();
        r.data = vec![encode(&reply)];
        self.send(r, now);
    }

    /// The van's tick (every 20 ms): resends, liveness (while acting), failover, and
    /// the master's timeouts every 100 ms.
    pub fn tick(&mut self, now: u64) {
        self.restamp(now);
        self.host.tick(now);
        let outs = self.fo.tick(now);
        self.run(outs, now);
        let since = match self.fo.acting_since(now) {
            None if self.bugs.no_lease && self.fo.is_active() => Some(0),
            s => s,
        };
        if let Some(since) = since {
            let actions = self.core.tick(now, since);
            self.execute(actions, now);
        }
        if now >= self.next_master_tick {
            self.next_master_tick = now + 100;
            if let Some(m) = self.master.as_mut() {
                let _ = with_store(&self.cell, &self.fo, || m.tick(now));
                self.flush_master(now);
            }
        }
    }
}

/// Runs `f` (a master call) with saves allowed only while active.
fn with_store<T>(
    cell: &Arc<Mutex<Cell>>,
    fo: &Candidacy,
    f: impl FnOnce() -> Result<T, MasterError>,
) -> Result<T, MasterError> {
    cell.lock().may_save = fo.is_active();
    let out = f();
    cell.lock().may_save = false;
    out
}

/// The planted bug: the stored queues with one pending task dropped.
fn forget_one_pending(bytes: Vec<u8>) -> Vec<u8> {
    let Ok(mut q) = decode_queues(&bytes) else { return bytes };
    if let Some(&id) = q.pending.keys().next() {
        q.pending.remove(&id);
    }
    encode_queues(&q).unwrap_or(bytes)
}

impl Scheduler {
    /// Ids this scheduler's node table holds dead.
    pub fn dead_ids(&self) -> BTreeSet<i32> {
        self.core.membership().dead().clone()
    }
}
