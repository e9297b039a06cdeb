//! A server's or worker's van and postoffice, simulated: joining (ADD_NODE until the
//! table comes), heartbeats to every scheduler candidate (re-registering when the
//! active one is lost), following the active scheduler's epoch ([`ActiveView`]),
//! death notices, the dead and catching-up sets, and barriers (asked again when the
//! scheduler changes). The decisions are ps-core's; this is the van's wiring.

use crate::host::Host;
use ps_core::failover::{candidate_key, Epoch, Follower, Heard};
use ps_core::message::{Command, Control, Message, Meta};
use ps_core::node::{Node, Role, EMPTY_ID, SCHEDULER};
use ps_core::protocol::scheduler::LEFT;
use std::collections::BTreeSet;

/// What the layer above (the server or worker) hears from its van.
#[derive(Debug)]
pub enum NodeEvent {
    /// The node table changed (the first one: the node has its id).
    Table,
    /// These ids' processes were declared dead.
    Dead(Vec<i32>),
    /// A barrier of this group was released.
    Released(i32),
    /// An application message.
    Data(Message),
}

/// An ADD_NODE carrying only its state sequence (its nodes are filled in).
fn msg_meta_only(seq: u64) -> Message {
    let mut m = Message::control(SCHEDULER, Command::AddNode);
    m.meta.control.seq = seq;
    m
}

/// The van and postoffice of a server or worker.
pub struct NodeShell {
    /// The van state.
    pub host: Host,
    /// The active scheduler followed, and this node's vote.
    pub view: Follower,
    /// The node table arrived.
    pub ready: bool,
    /// Ids declared dead (the postoffice's set).
    pub dead: BTreeSet<i32>,
    /// Replacement servers still copying their ranges.
    pub catching_up: BTreeSet<i32>,
    /// The scheduler declared this process dead, or refused it: it must stop.
    pub evicted: bool,
    candidates: usize,
    replicated: bool,
    timeout_ms: u64,
    next_join_ms: u64,
    /// Node table changes that arrived before this node's own table.
    early: Vec<Message>,
    /// The barrier waited for: its group and the scheduler (incarnation, epoch) it
    /// was asked of.
    barrier: Option<(i32, (u64, Epoch))>,
}

impl NodeShell {
    /// A fresh process of `role` in `slot`, with `candidates` scheduler candidates in
    /// slots `0..candidates` (the first active), at `now`.
    pub fn new(host: Host, candidates: usize, replicated: bool, timeout_ms: u64, now: u64) -> NodeShell {
        let mut host = host;
        host.connect(SCHEDULER, 0);
        if candidates > 1 {
            for i in 0..candidates {
                host.connect(candidate_key(i), i);
            }
        }
        NodeShell {
            host,
            view: Follower::new(0, candidates, timeout_ms, now),
            ready: false,
            dead: BTreeSet::new(),
            catching_up: BTreeSet::new(),
            evicted: false,
            candidates,
            replicated,
            timeout_ms,
            next_join_ms: now,
            early: Vec::new(),
            barrier: None,
        }
    }

    /// Ids not serving: dead or still catching up.
    pub fn unavailable(&self) -> BTreeSet<i32> {
        self.dead.union(&self.catching_up).copied().collect()
    }

    /// The incarnation of the scheduler in the node table.
    pub fn scheduler_incarnation(&self) -> u64 {
        self.host
            .table
            .iter()
            .find(|n| n.id == SCHEDULER)
            .map_or(0, |n| n.incarnation)
    }

    fn stamp(&self, msg: &mut Message, now: u64) {
        if msg.meta.control.cmd == Command::Heartbeat {
            let c = &mut msg.meta.control;
            c.term = self.view.epoch().term;
            c.candidate = self.view.epoch().candidate;
            c.silence_ms = self.view.silence_ms(now);
            c.seq = self.view.seen_seq();
            c.lease_ms = self.view.echo_ms();
        }
    }

    /// Sends `msg` (stamped as the van stamps it).
    pub fn send(&mut self, mut msg: Message, now: u64) -> bool {
        self.stamp(&mut msg, now);
        self.host.send(msg, now)
    }

    fn send_to_schedulers(&mut self, msg: Message, now: u64) {
        if self.candidates <= 1 {
            self.send(msg, now);
            return;
        }
        for i in 0..self.candidates {
            let mut c = msg.clone();
            c.meta.recver = candidate_key(i);
            self.send(c, now);
        }
    }

    fn add_node(&mut self, now: u64) -> Message {
        let mut m = Message::control(SCHEDULER, Command::AddNode);
        m.meta.control.nodes = vec![self.host.me.clone()];
        m.meta.timestamp = self.host.next_ts();
        let _ = now;
        m
    }

    /// Before the table: ADD_NODE to the scheduler (and every candidate), every second.
    pub fn join(&mut self, now: u64) {
        if self.ready || now < self.next_join_ms {
            return;
        }
        self.next_join_ms = now + 1000;
        let m = self.add_node(now);
        self.send(m.clone(), now);
        if self.candidates > 1 {
            self.send_to_schedulers(m, now);
        }
    }

    /// A heartbeat; when the active scheduler is lost, ADD_NODE again to every
    /// candidate first (a restarted or new scheduler rebuilds the table from them).
    pub fn heartbeat(&mut self, now: u64) {
        if !self.ready {
            return;
        }
        if self.timeout_ms > 0 && self.view.lost(now) {
            let m = self.add_node(now);
            self.send(m.clone(), now);
            if self.candidates > 1 {
                self.send_to_schedulers(m, now);
            }
        }
        let mut m = Message::control(SCHEDULER, Command::Heartbeat);
        m.meta.timestamp = self.host.next_ts();
        self.send_to_schedulers(m, now);
    }

    /// Asks the scheduler to release `group`'s barrier once every live member is in.
    pub fn barrier(&mut self, group: i32, now: u64) {
        self.barrier = Some((group, self.asked()));
        self.send_barrier(group, now);
    }

    fn send_barrier(&mut self, group: i32, now: u64) {
        let mut m = Message::control(SCHEDULER, Command::Barrier);
        m.meta.request = true;
        m.meta.timestamp = self.host.next_ts();
        m.meta.control.barrier_group = group;
        self.send(m, now);
    }

    /// Who a barrier request goes to: the scheduler process and the epoch it acts in
    /// (a scheduler taking over, even the same process again, starts its barrier
    /// counts afresh).
    fn asked(&self) -> (u64, Epoch) {
        (self.scheduler_incarnation(), self.view.epoch())
    }

    /// The van's tick: resends, and a barrier asked again of a new scheduler.
    pub fn tick(&mut self, now: u64) {
        self.host.tick(now);
        if let Some((group, asked)) = self.barrier {
            let now_asked = self.asked();
            if now_asked != asked {
                self.barrier = Some((group, now_asked));
                self.send_barrier(group, now);
            }
        }
    }

    /// A message from the network.
    pub fn on_message(&mut self, msg: Message, now: u64) -> Vec<NodeEvent> {
        if msg.meta.control.cmd == Command::Campaign {
            self.on_campaign(&msg, now);
            return Vec::new();
        }
        if msg.meta.sender == SCHEDULER {
            let c = &msg.meta.control;
            let from = Epoch {
                term: c.term,
                candidate: c.candidate,
            };
            match self.view.on_message(from, c.seq, c.lease_ms, now) {
                Heard::Fenced => return Vec::new(),
                Heard::Current => {}
                Heard::Switched { from: old } => {
                    if old.candidate != from.candidate && self.candidates > 1 {
                        self.host.connect(SCHEDULER, from.candidate as usize);
                    }
                }
            }
        }
        let mut out = Vec::new();
        for m in self.host.receive(msg, now) {
            self.process(m, now, &mut out);
        }
        out
    }

    /// A candidate asks for this node's vote: the answer goes back to it.
    fn on_campaign(&mut self, msg: &Message, now: u64) {
        let c = &msg.meta.control;
        let want = Epoch {
            term: c.term,
            candidate: c.candidate,
        };
        if self.host.me.id == EMPTY_ID || c.origin as usize >= self.candidates {
            return;
        }
        let pre = msg.meta.request;
        let b = if pre {
            self.view.on_pre_campaign(want, c.seq, now)
        } else {
            self.view.on_campaign(want, c.seq, c.lease_ms, now)
        };
        let mut v = b.reply(c.origin as usize, pre);
        v.meta.timestamp = self.host.next_ts();
        self.send(v, now);
    }

    fn process(&mut self, msg: Message, now: u64, out: &mut Vec<NodeEvent>) {
        match msg.meta.control.cmd {
            Command::Empty => out.push(NodeEvent::Data(msg)),
            Command::AddNode => self.on_table(msg, now, out),
            Command::Barrier if !msg.meta.request => {
                if self.barrier.is_some_and(|(g, _)| g == msg.meta.control.barrier_group) {
                    self.barrier = None;
                }
                out.push(NodeEvent::Released(msg.meta.control.barrier_group));
            }
            Command::NodeDead => {
                let me = self.host.me.clone();
                let notice = self.host.peers.on_death(&msg.meta.control.nodes, &me);
                if notice.evicted {
                    self.evicted = true;
                    return;
                }
                if notice.dead.is_empty() {
                    return;
                }
                if msg.meta.control.reason == LEFT {
                    // a worker's goodbye: gone, treated as dead by the layers above
                }
                self.dead.extend(notice.dead.iter().copied());
                out.push(NodeEvent::Dead(notice.dead));
            }
            _ => {}
        }
    }

    fn on_table(&mut self, msg: Message, now: u64, out: &mut Vec<NodeEvent>) {
        if !msg.meta.control.reason.is_empty() {
            // refused: registering again after being declared dead, or a full cluster
            self.evicted = true;
            return;
        }
        let seq = msg.meta.control.seq;
        let nodes = msg.meta.control.nodes;
        if self.host.me.id == EMPTY_ID {
            let me = &self.host.me;
            let found = nodes
                .iter()
                .find(|n| n.hostname == me.hostname && n.port == me.port && n.incarnation == me.incarnation)
                .cloned();
            match found {
                Some(n) => {
                    self.host.me.id = n.id;
                    self.host.me.is_recovery = n.is_recovery;
                }
                None => {
                    // a change of another node overtook this node's own table: kept
                    // until the table comes (it was acknowledged: it is not resent)
                    let mut m = msg_meta_only(seq);
                    m.meta.control.nodes = nodes;
                    self.early.push(m);
                    return;
                }
            }
            let early = std::mem::take(&mut self.early);
            self.on_table(
                Message {
                    meta: Meta {
                        control: Control {
                            cmd: Command::AddNode,
                            nodes,
                            seq,
                            ..Default::default()
                        },
                        ..Default::default()
                    },
                    data: Vec::new(),
                },
                now,
                out,
            );
            for m in early {
                self.on_table(m, now, out);
            }
            return;
        }
        // another process holds this node's id: it was declared dead and replaced
        let me = &self.host.me;
        if me.id != EMPTY_ID && nodes.iter().any(|n| n.id == me.id && n.incarnation != me.incarnation) {
            self.evicted = true;
            return;
        }
        // entries older than what this node knows (tables arrive out of order) are skipped
        let nodes = self.host.peers.fresh(nodes, seq);
        // a process replacing one this node never heard declared dead (the table
        // overtook the death notice): the old one is dead all the same, and what was
        // sent to it goes elsewhere until the new one holds its ranges again
        let replaced = self.host.peers.replaced(&nodes);
        if !replaced.is_empty() {
            self.dead.extend(replaced.iter().copied());
            out.push(NodeEvent::Dead(replaced.clone()));
        }
        let revived = self.host.peers.on_table(&nodes);
        for n in nodes {
            if n.id != SCHEDULER {
                self.host.connect(n.id, crate::host::slot_of(&n));
            }
            match self.host.table.iter().position(|t| t.id == n.id) {
                Some(i) => self.host.table[i] = n,
                None => self.host.table.push(n),
            }
        }
        self.host.table.sort_by_key(|n| n.id);
        for id in revived.iter().chain(&replaced) {
            let server = self.host.table.iter().any(|n| n.id == *id && n.role == Role::Server);
            if self.dead.remove(id) && self.replicated && server {
                self.catching_up.insert(*id);
            }
        }
        self.ready = true;
        out.push(NodeEvent::Table);
        for m in self.host.replay_unconnected(now) {
            self.process(m, now, out);
        }
    }

    /// The node table as this process has it.
    pub fn table(&self) -> &[Node] {
        &self.host.table
    }
}
