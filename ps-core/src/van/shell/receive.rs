//! The van's receive path: decode, drop what is stale or duplicated, acknowledge, and
//! hand each message to the protocol state machines or the layer above; then carry out
//! the scheduler core's decisions ([`Action`]s).

use super::Van;
use crate::failover::Epoch;
use crate::message::{Command, Message};
use crate::node::{Node, EMPTY_ID, SCHEDULER};
use crate::protocol::resender::Incoming;
use crate::protocol::scheduler::Action;
use crate::van::authz::{self, Origin};
use crate::van::zmq::ack::pslite_signature;
use std::sync::atomic::Ordering;

/// At most this many messages wait for their senders to be connected.
const MAX_UNCONNECTED: usize = 1024;

impl Van {
    /// Handles one message's frames from the link `origin` describes (None: a
    /// transport without per-link state): decoded once, dropped if the link may not
    /// send it ([`authz::authorize`]), then counted and processed.
    pub(super) fn on_frames(&self, frames: Vec<bytes::Bytes>, origin: Option<&mut Origin>) {
        let bytes: usize = frames.iter().map(|f| f.len()).sum();
        let mut msg = match self.transport.decode(frames) {
            Ok(m) => m,
            Err(e) => {
                self.stats.malformed.fetch_add(1, Ordering::Relaxed);
                log::warn!("dropped a malformed message ({bytes} B): {e}");
                return;
            }
        };
        let fingerprint = origin.as_ref().and_then(|o| o.cert.as_ref()).map(|c| c.fingerprint);
        if let Err(why) = authz::authorize(origin, &msg.meta, self.cfg.role, self) {
            return self.refused(&msg, &why);
        }
        if self.sched.is_some() && msg.meta.control.cmd == Command::AddNode {
            // the registration is filed with the certificate of the link it came on
            for n in msg.meta.control.nodes.iter_mut() {
                n.cert = fingerprint.unwrap_or(0);
            }
        }
        self.stats.recv_msgs.fetch_add(1, Ordering::Relaxed);
        self.stats.recv_bytes.fetch_add(bytes as u64, Ordering::Relaxed);
        log::trace!("recv {msg}");
        if !self.fo.screen(self, &msg) || !self.admit(&msg) {
            return;
        }
        if msg.meta.sender == SCHEDULER {
            self.last_from_scheduler.store(self.now_ms(), Ordering::Relaxed);
            self.heard_from_scheduler.store(true, Ordering::Relaxed);
            if msg.meta.incarnation != 0 {
                self.heard_psrs_scheduler.store(true, Ordering::Relaxed);
            }
        }
        if !msg.meta.is_control()
            && self.cfg.drop_msg_percent > 0
            && rand::random::<u8>() % 100 < self.cfg.drop_msg_percent
        {
            self.stats.injected_drops.fetch_add(1, Ordering::Relaxed);
            log::debug!("PS_DROP_MSG dropped {msg}");
            return;
        }
        self.acknowledge_and_process(msg, fingerprint);
    }

    /// Acknowledges and de-duplicates `msg` (from a link whose certificate has
    /// `fingerprint`, if any) through the resender (when on), then processes it. A
    /// data message from a process this node cannot answer yet waits, unacknowledged,
    /// until it can ([`Van::waits`]); its sender's certificate is checked again then.
    fn acknowledge_and_process(&self, msg: Message, fingerprint: Option<u64>) {
        if self.waits(&msg, fingerprint.is_some()) {
            let mut q = self.unconnected.lock();
            if q.len() >= MAX_UNCONNECTED {
                if let Some((old, _)) = q.pop_front() {
                    log::debug!("dropped {old}: too many messages from senders that cannot be answered yet");
                }
            }
            log::debug!("held {msg}: its sender cannot be answered yet");
            q.push_back((msg, fingerprint));
            return;
        }
        if let Some(r) = &self.resender {
            let verdict = r.lock().on_receive(&msg.meta, self.now_ms());
            match verdict {
                Incoming::Ack => return,
                Incoming::Duplicate(sig) => {
                    self.stats.duplicates.fetch_add(1, Ordering::Relaxed);
                    self.ack(&msg, sig);
                    return;
                }
                Incoming::Fresh(sig) => self.ack(&msg, sig),
                // ps-lite's resender wants every message but TERMINATE acknowledged
                Incoming::Untracked if self.sent_by_pslite(&msg) && msg.meta.control.cmd != Command::Terminate => {
                    self.ack(&msg, 0)
                }
                Incoming::Untracked => {}
            }
        }
        self.process(msg);
    }

    /// True if data message `msg` must wait before it is processed. Its sender is a
    /// process that took an id since the table this node holds (a replacement server
    /// asking for a copy of its key ranges before the table naming it arrived here):
    /// an answer now would go to the earlier holder's address and be lost. Or it came
    /// over a link with a certificate (`certified`) from an id the table does not hold
    /// at all (a worker that joined since): the certificate the id registered with is
    /// not known here yet. Or, with the resender on, its sender is not connected yet
    /// (a restarted scheduler before its table): neither the ACK nor an answer could
    /// go back, and once counted as seen its resends would be dropped as duplicates.
    /// (Without the resender, a message from a node not connected goes on to the
    /// layer above, which holds what no customer takes yet under its own limit.)
    fn waits(&self, msg: &Message, certified: bool) -> bool {
        if msg.meta.is_control() || msg.meta.sender == EMPTY_ID {
            return false;
        }
        let peers = self.peers.read();
        peers.unknown_sender(&msg.meta)
            || (certified && peers.holder(msg.meta.sender).is_none())
            || (self.resender.is_some() && !self.transport.is_connected(msg.meta.sender))
    }

    /// Processes the held messages whose senders are known and connected now (each
    /// dropped if its link's certificate is not the one its sender registered with).
    pub(super) fn replay_unconnected(&self) {
        let ready: Vec<(Message, Option<u64>)> = {
            let mut q = self.unconnected.lock();
            if q.is_empty() {
                return;
            }
            let all = std::mem::take(&mut *q);
            let (ready, wait): (Vec<_>, Vec<_>) = all.into_iter().partition(|(m, fp)| !self.waits(m, fp.is_some()));
            q.extend(wait);
            ready
        };
        for (m, fingerprint) in ready {
            if let Err(why) = self.registered_certificate(&m, fingerprint) {
                self.refused(&m, &why);
                continue;
            }
            self.acknowledge_and_process(m, fingerprint);
        }
    }

    /// True if `msg` came from a ps-lite process (one without incarnation, on ps-lite's wire).
    fn sent_by_pslite(&self, msg: &Message) -> bool {
        self.transport.speaks_pslite() && msg.meta.incarnation == 0
    }

    /// Acknowledges `msg` by signature `sig` (a ps-lite process: by ps-lite's own).
    pub(super) fn ack(&self, msg: &Message, sig: u64) {
        if msg.meta.sender == EMPTY_ID {
            return;
        }
        let m = &msg.meta;
        let sig = if self.sent_by_pslite(msg) {
            pslite_signature(m.app_id, m.sender, m.recver, m.timestamp, m.request)
        } else {
            sig
        };
        let mut a = Message::control(msg.meta.sender, Command::Ack);
        a.meta.recver_incarnation = msg.meta.incarnation;
        a.meta.control.msg_sig = sig;
        a.meta.timestamp = self.next_timestamp();
        if let Err(e) = self.send(a) {
            log::debug!("ack to {} not sent: {e}", msg.meta.sender);
        }
    }

    pub(super) fn process(&self, msg: Message) {
        let cmd = msg.meta.control.cmd;
        match cmd {
            Command::Empty => match self.handler() {
                Some(h) => h.on_data(msg),
                None => log::warn!("no handler for {msg}; dropped"),
            },
            Command::Terminate => log::debug!("TERMINATE from {}", msg.meta.sender),
            Command::AddNode => self.on_add_node(msg),
            Command::Barrier => {
                if msg.meta.request {
                    if let Some(s) = &self.sched {
                        let actions = s.lock().on_barrier(msg.meta.control.barrier_group, msg.meta.sender);
                        self.execute(actions);
                    }
                } else if let Some(h) = self.handler() {
                    h.on_barrier_released(msg.meta.control.barrier_group);
                }
            }
            Command::Heartbeat => {
                if let Some(s) = &self.sched {
                    let actions = s
                        .lock()
                        .on_heartbeat(msg.meta.sender, msg.meta.incarnation, self.now_ms());
                    self.execute(actions);
                }
            }
            Command::NodeDead => {
                let ids = self.on_death_notice(&msg.meta.control.nodes);
                if Van::is_goodbye(&msg) {
                    return self.on_left(ids);
                }
                if ids.is_empty() {
                    return;
                }
                log::info!("scheduler declared dead: {ids:?}");
                if let Some(h) = self.handler() {
                    h.on_nodes_dead(&ids);
                }
            }
            Command::Leave => self.on_leave(&msg),
            Command::Ack | Command::Sync | Command::PeerBeat | Command::Campaign | Command::Vote => {}
        }
    }

    pub(super) fn on_add_node(&self, msg: Message) {
        if let Some(s) = &self.sched {
            if let Some(node) = msg.meta.control.nodes.into_iter().next() {
                let actions = s.lock().on_add_node(node, self.now_ms());
                self.execute(actions);
            }
            return;
        }
        if !msg.meta.control.reason.is_empty() {
            if self.me.read().id != EMPTY_ID {
                // registering again (the scheduler was silent), refused
                return self.evicted(&format!("the scheduler refused this node: {}", msg.meta.control.reason));
            }
            *self.ready.lock() = Some(Err(msg.meta.control.reason.clone()));
            self.ready_cv.notify_all();
            return;
        }
        let stamped = Epoch {
            term: msg.meta.control.term,
            candidate: msg.meta.control.candidate,
        };
        let (seq, nodes) = (msg.meta.control.seq, msg.meta.control.nodes);
        {
            let mut me = self.me.write();
            if me.id == EMPTY_ID {
                // (a ps-lite scheduler's table has no incarnations: the entry at this
                // node's address is this node)
                let found = nodes.iter().find(|n| names_process(n, &me));
                match found {
                    Some(n) => {
                        me.id = n.id;
                        me.is_recovery = n.is_recovery;
                        self.transport.set_local_node(me.id, me.incarnation);
                    }
                    None => {
                        // a change of another node overtook this node's own table: kept
                        // for after it (it was acknowledged: it is not sent again)
                        self.early.lock().push(((stamped.term, seq), nodes));
                        return;
                    }
                }
            }
        }
        if !self.take_table((stamped.term, seq), nodes) {
            return;
        }
        *self.table_epoch.lock() = stamped;
        let mut ready = self.ready.lock();
        if ready.is_none() {
            *ready = Some(Ok(()));
            self.ready_cv.notify_all();
        }
        drop(ready);
        for (version, nodes) in std::mem::take(&mut *self.early.lock()) {
            if !self.take_table(version, nodes) {
                return;
            }
        }
    }

    /// Takes the entries of a node table decided on scheduler state `version` (term,
    /// sequence) that are news (tables arrive out of order: an entry older than one
    /// taken, or naming a process that no longer holds its id, is left out). One
    /// naming this node's id with another process means the scheduler gave its id
    /// away: this process stops (false).
    fn take_table(&self, version: crate::protocol::peers::TableVersion, nodes: Vec<Node>) -> bool {
        let nodes = self.peers.write().fresh(nodes, version);
        let me = self.my_node();
        if let Some(n) = nodes.iter().find(|n| n.id == me.id && !names_process(n, &me)) {
            self.evicted(&format!(
                "the scheduler gave this node's id to another process ({n}): it was declared dead"
            ));
            return false;
        }
        self.merge_table(nodes);
        true
    }

    /// Merges `nodes` into the table, (re)connecting to nodes that are new or whose
    /// process changed.
    pub(super) fn merge_table(&self, nodes: Vec<Node>) {
        // a process replacing one this node never heard declared dead (the table
        // overtook the death notice): the earlier one is dead all the same, and the
        // new one is revived like a replacement of a dead node (while the layer above
        // hears of the death, the earlier process is the id's dead incarnation: a
        // replica tells it from a newcomer by it)
        let replaced = self.peers.write().on_replaced(&nodes);
        if !replaced.is_empty() {
            log::info!("replaced without a death notice heard: {replaced:?}");
            if let Some(h) = self.handler() {
                h.on_nodes_dead(&replaced);
            }
        }
        let mut revived = self.peers_from_table(&nodes);
        for id in replaced {
            if !revived.contains(&id) {
                revived.push(id);
            }
        }
        let mut table = self.table.write();
        for n in nodes {
            self.note_peer(&n);
            let known = table.iter().position(|t| t.id == n.id);
            let changed = known.is_none_or(|i| table[i] != n);
            if n.id != SCHEDULER && (changed || !self.transport.is_connected(n.id)) {
                if let Err(e) = self.transport.connect_node(n.id, &n) {
                    log::warn!("cannot connect to {n}: {e}");
                }
            }
            match known {
                Some(i) => table[i] = n,
                None => table.push(n),
            }
        }
        table.sort_by_key(|n| n.id);
        let snapshot = table.clone();
        drop(table);
        if let Some(h) = self.handler() {
            h.on_nodes_changed(&snapshot, &revived);
        }
        self.replay_unconnected();
    }

    pub(super) fn execute(&self, actions: Vec<Action>) {
        let replay = actions
            .iter()
            .any(|a| matches!(a, Action::Connect(_) | Action::Table(_)));
        self.execute_all(actions);
        if replay {
            self.replay_unconnected();
        }
    }

    fn execute_all(&self, actions: Vec<Action>) {
        for a in Action::in_state_order(actions) {
            match a {
                Action::Connect(n) => self.connect_member(&n),
                Action::Send(mut m) => {
                    m.meta.timestamp = self.next_timestamp();
                    if let Err(e) = self.send(m) {
                        log::warn!("control message not sent: {e}");
                    }
                }
                Action::Reject { node, reason } => {
                    log::warn!("refused {node}: {reason}");
                    if self.is_pslite(&node) {
                        // ps-lite has no refusal: it would take it for the node table
                        continue;
                    }
                    let key = -1 - node.port as i32;
                    if self.transport.connect_node(key, &node).is_ok() {
                        let mut m = Message::control(key, Command::AddNode);
                        m.meta.control.reason = reason;
                        // for the refused process only: a later one at its address
                        // (its replacement, say) must not take it for its own refusal
                        m.meta.recver_incarnation = node.incarnation;
                        (m.meta.sender, m.meta.incarnation) = (SCHEDULER, self.me.read().incarnation);
                        self.fo.stamp(self, &mut m);
                        let _ = self.send_raw(&m);
                    }
                }
                Action::Welcome(n) => self.welcome(&n),
                Action::Table(t) => {
                    self.forget_welcomed();
                    let revived = self.peers_from_table(&t);
                    if t.first().is_some_and(|s| s.id == SCHEDULER && s.is_recovery) {
                        self.me.write().is_recovery = true;
                    }
                    log::info!(
                        "node table: {}",
                        t.iter().map(|n| n.to_string()).collect::<Vec<_>>().join(", ")
                    );
                    for n in &t {
                        self.note_peer(n);
                    }
                    *self.table.write() = t.clone();
                    let mut ready = self.ready.lock();
                    if ready.is_none() {
                        *ready = Some(Ok(()));
                        self.ready_cv.notify_all();
                    }
                    drop(ready);
                    if let Some(h) = self.handler() {
                        h.on_nodes_changed(&t, &revived);
                    }
                    self.replicate_core();
                }
                Action::Left(ids) => {
                    let ids = self.on_declared_dead(&ids);
                    self.on_left(ids);
                    self.replicate_core();
                }
                Action::Dead(ids) => {
                    let ids = self.on_declared_dead(&ids);
                    log::warn!(
                        "declared dead (no heartbeat for {:?}): {ids:?}",
                        self.cfg.heartbeat_timeout
                    );
                    if let Some(h) = self.handler() {
                        h.on_nodes_dead(&ids);
                    }
                    self.replicate_core();
                }
            }
        }
    }
}

/// Whether the table entry `n` names the process `me`: its incarnation, or, in a
/// ps-lite scheduler's table (entries without incarnations), its address.
pub(super) fn names_process(n: &Node, me: &Node) -> bool {
    n.hostname == me.hostname && n.port == me.port && (n.incarnation == me.incarnation || n.incarnation == 0)
}
