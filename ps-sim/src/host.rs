//! What every simulated process has, as a van has it: its node, its links (connection
//! keys to process slots), the resender, message timestamps, the incarnations it knows
//! ([`Peers`]) and the node table. Sending only queues the message in the host's
//! outbox; the world hands the outbox to the network after each step.

use ps_core::message::{Command, Control, Message};
use ps_core::node::{Node, Role, EMPTY_ID};
use ps_core::protocol::peers::{Admit, Peers};
use ps_core::protocol::resender::{needs_ack, signature, Incoming, Resender};
use std::collections::{BTreeMap, VecDeque};

/// The port a slot's process listens on (slot = port - [`BASE_PORT`]).
pub const BASE_PORT: u16 = 1000;
/// Resends of one message before giving up (as the van's `MAX_RESENDS`).
pub const MAX_RESENDS: u32 = 10;
/// Messages held for senders not connected yet (as the van's).
const MAX_UNCONNECTED: usize = 1024;

/// A message leaving a process.
#[derive(Debug)]
pub struct Outgoing {
    /// The slot it goes to.
    pub to: usize,
    /// The message.
    pub msg: Message,
    /// A resend of a message sent before (not a new decision of its sender).
    pub resend: bool,
}

/// The slot of the process at `node`'s address.
pub fn slot_of(node: &Node) -> usize {
    (node.port - BASE_PORT) as usize
}

/// One process's van state.
pub struct Host {
    /// This process's slot.
    pub slot: usize,
    /// This process as the cluster sees it.
    pub me: Node,
    links: BTreeMap<i32, usize>,
    resender: Resender<Message>,
    ts: i32,
    /// Incarnations behind the ids.
    pub peers: Peers,
    /// The node table as last received.
    pub table: Vec<Node>,
    unconnected: VecDeque<Message>,
    /// Messages sent during the current step.
    pub outbox: Vec<Outgoing>,
    /// A scheduler's failover stamp, put on the acknowledgements it sends as on
    /// every scheduler message (the van stamps every message it sends).
    pub stamp: Option<Control>,
}

impl Host {
    /// A fresh process of `role` in `slot` with `incarnation`, resending after
    /// `resend_ms`.
    pub fn new(slot: usize, role: Role, id: i32, incarnation: u64, resend_ms: u64) -> Host {
        Host {
            slot,
            me: Node {
                role,
                id,
                hostname: "sim".into(),
                port: BASE_PORT + slot as u16,
                is_recovery: false,
                incarnation,
                cert: 0,
            },
            links: BTreeMap::new(),
            resender: Resender::new(resend_ms, MAX_RESENDS),
            ts: 0,
            peers: Peers::new(),
            table: Vec::new(),
            unconnected: VecDeque::new(),
            outbox: Vec::new(),
            stamp: None,
        }
    }

    /// Opens (or re-points) the link `key` to `slot`.
    pub fn connect(&mut self, key: i32, slot: usize) {
        self.links.insert(key, slot);
    }

    /// True if an answer to `msg` would reach its sender: a link to it exists and
    /// the table taken names its process (see [`Peers::unknown_sender`]).
    fn reachable(&self, msg: &Message) -> bool {
        self.is_connected(msg.meta.sender) && !self.peers.unknown_sender(&msg.meta)
    }

    /// True if a link `key` exists.
    pub fn is_connected(&self, key: i32) -> bool {
        self.links.contains_key(&key)
    }

    /// A fresh timestamp.
    pub fn next_ts(&mut self) -> i32 {
        self.ts += 1;
        self.ts
    }

    /// Sends `msg` to its `recver` (sender fields filled in, tracked by the resender
    /// when it needs an ACK). False when there is no link to the receiver (the
    /// resender still has it, as in the van).
    pub fn send(&mut self, mut msg: Message, now: u64) -> bool {
        msg.meta.sender = self.me.id;
        msg.meta.incarnation = self.me.incarnation;
        if needs_ack(&msg.meta) {
            self.resender.on_send(signature(&msg.meta), msg.clone(), now);
        }
        self.send_raw(msg, false)
    }

    fn send_raw(&mut self, msg: Message, resend: bool) -> bool {
        match self.links.get(&msg.meta.recver) {
            Some(&to) => {
                self.outbox.push(Outgoing { to, msg, resend });
                true
            }
            None => false,
        }
    }

    fn ack(&mut self, msg: &Message, sig: u64) {
        if msg.meta.sender == EMPTY_ID {
            return;
        }
        let mut a = Message::control(msg.meta.sender, Command::Ack);
        a.meta.recver_incarnation = msg.meta.incarnation;
        a.meta.control.msg_sig = sig;
        a.meta.timestamp = self.next_ts();
        a.meta.sender = self.me.id;
        a.meta.incarnation = self.me.incarnation;
        if let Some(s) = &self.stamp {
            let c = &mut a.meta.control;
            (c.term, c.candidate, c.origin, c.seq, c.lease_ms) = (s.term, s.candidate, s.origin, s.seq, s.lease_ms);
        }
        self.send_raw(a, false);
    }

    /// The van's receive path after screening: drops messages for another
    /// incarnation or from the dead (acknowledged), holds data from senders not
    /// connected yet, acknowledges and drops duplicates. Returns the messages to
    /// process now.
    pub fn receive(&mut self, msg: Message, now: u64) -> Vec<Message> {
        match self.peers.admit(&msg.meta, self.me.incarnation) {
            Admit::Accept => {}
            _ => {
                if needs_ack(&msg.meta) {
                    self.ack(&msg, signature(&msg.meta));
                }
                return Vec::new();
            }
        }
        self.acknowledge(msg, now).into_iter().collect()
    }

    fn acknowledge(&mut self, msg: Message, now: u64) -> Option<Message> {
        if !msg.meta.is_control() && msg.meta.sender != EMPTY_ID && !self.reachable(&msg) {
            if self.unconnected.len() >= MAX_UNCONNECTED {
                self.unconnected.pop_front();
            }
            self.unconnected.push_back(msg);
            return None;
        }
        match self.resender.on_receive(&msg.meta, now) {
            Incoming::Ack => None,
            Incoming::Duplicate(sig) => {
                self.ack(&msg, sig);
                None
            }
            Incoming::Fresh(sig) => {
                self.ack(&msg, sig);
                Some(msg)
            }
            Incoming::Untracked => Some(msg),
        }
    }

    /// The held messages whose senders are connected now, to process.
    pub fn replay_unconnected(&mut self, now: u64) -> Vec<Message> {
        let all = std::mem::take(&mut self.unconnected);
        let (ready, wait): (Vec<Message>, Vec<Message>) = all.into_iter().partition(|m| self.reachable(m));
        self.unconnected.extend(wait);
        ready.into_iter().filter_map(|m| self.acknowledge(m, now)).collect()
    }

    /// The resender's tick: messages due are sent again (those to a node declared
    /// dead wait for its replacement).
    pub fn tick(&mut self, now: u64) {
        let peers = &self.peers;
        let due = self.resender.due(now, |m| peers.is_dead(m.meta.recver));
        for m in due.resend {
            self.send_raw(m, true);
        }
    }
}
