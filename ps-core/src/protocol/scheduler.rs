//! The scheduler's control logic: node table, barriers and dead-node detection
//! combined, turning each control event into the actions the van must carry out.

use super::barrier::Barriers;
use super::error::ProtocolError;
use super::liveness::Liveness;
use super::membership::{Join, Membership};
use super::shared::Shared;
use crate::message::{Command, Message};
use crate::node::{id_role, Node, Role, SCHEDULER};

/// Something the van must do on the scheduler's behalf.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    /// Open (or re-open) a connection to this node under its id.
    Connect(Node),
    /// Send this control message (its `recver` is set).
    Send(Message),
    /// Tell a node without an id that it cannot join.
    Reject {
        /// The refused node.
        node: Node,
        /// Why.
        reason: String,
    },
    /// Tell a node still waiting for its id that the scheduler heard it and can reach
    /// it (a node that never hears this knows the scheduler cannot connect back).
    Welcome(Node),
    /// The node table changed: here it is.
    Table(Vec<Node>),
    /// These nodes were declared dead.
    Dead(Vec<i32>),
    /// These workers left the cluster on their own (goodbye).
    Left(Vec<i32>),
}

impl Action {
    /// `actions` in the order a shell carries them out: deaths and departures first,
    /// then the rest as decided. A `NODE_DEAD` notice leaves after the death is in the
    /// scheduler's state, so with standby schedulers it is held until the standbys
    /// hold that state: no node acts on a death (a server answering alone for a
    /// range, say) that a standby taking over would not know of.
    pub fn in_state_order(actions: Vec<Action>) -> Vec<Action> {
        let mut actions = actions;
        actions.sort_by_key(|a| match a {
            Action::Dead(_) | Action::Left(_) => 0,
            _ => 1,
        });
        actions
    }
}

/// The reason a NODE_DEAD carries when the node left on its own.
pub const LEFT: &str = "left";

fn add_node_msg(recver: i32, nodes: Vec<Node>) -> Message {
    let mut m = Message::control(recver, Command::AddNode);
    m.meta.control.nodes = nodes;
    m
}

/// The death notice a node taking the node table needs besides it: the table lists
/// dead nodes too (their ids stay theirs until replaced), so a node that joins, or
/// hears from a scheduler that took over, learns which of them are dead from this.
fn deaths_for(recver: i32, membership: &Membership) -> Option<Message> {
    let dead: Vec<Node> = membership
        .dead()
        .iter()
        .filter(|&&id| id != recver)
        .filter_map(|&id| membership.get(id).cloned())
        .collect();
    if dead.is_empty() {
        return None;
    }
    let mut m = Message::control(recver, Command::NodeDead);
    m.meta.control.nodes = dead;
    Some(m)
}

/// The scheduler's protocol state.
pub struct SchedulerCore {
    membership: Membership,
    barriers: Barriers,
    liveness: Liveness,
    shared: Shared,
}

impl SchedulerCore {
    /// A scheduler expecting the given cluster, declaring nodes dead after
    /// `heartbeat_timeout_ms` of silence (0 = never).
    pub fn new(num_servers: usize, num_workers: usize, me: Node, heartbeat_timeout_ms: u64) -> SchedulerCore {
        SchedulerCore {
            membership: Membership::new(num_servers, num_workers, me),
            barriers: Barriers::new(),
            liveness: Liveness::new(heartbeat_timeout_ms),
            shared: Shared::default(),
        }
    }

    /// Lets workers join the running cluster under new ids (`PS_ELASTIC_WORKERS`).
    pub fn set_elastic_workers(&mut self, on: bool) {
        self.membership.set_elastic_workers(on);
    }

    /// The node table.
    pub fn membership(&self) -> &Membership {
        &self.membership
    }

    /// Heartbeat bookkeeping (for statistics).
    pub fn liveness(&self) -> &Liveness {
        &self.liveness
    }

    /// The node table in its wire form, for the standbys (empty before the cluster
    /// is complete: a standby taking over then waits for the nodes to register).
    pub fn export(&self) -> Vec<u8> {
        if !self.membership.is_ready() {
            return Vec::new();
        }
        bincode::serialize(&self.membership).expect("the node table serializes")
    }

    /// A standby takes over at `now_ms` with the table `exported` by the active one
    /// (see [`SchedulerCore::export`]), `me` as the scheduler (`is_recovery` set). Barrier
    /// counts start empty: nodes repeat their pending requests. Every live node is
    /// watched afresh and sent the table; dead ones stay dead. Bytes that do not decode
    /// are [`ProtocolError::CorruptTable`] and change nothing.
    pub fn adopt(&mut self, exported: &[u8], mut me: Node, now_ms: u64) -> Result<Vec<Action>, ProtocolError> {
        me.is_recovery = true;
        if exported.is_empty() {
            self.membership.set_scheduler(me);
            return Ok(Vec::new());
        }
        let mut m: Membership =
            bincode::deserialize(exported).map_err(|e| ProtocolError::CorruptTable(e.to_string()))?;
        m.set_scheduler(me);
        self.membership = m;
        self.barriers = Barriers::new();
        let table = self.membership.table();
        self.shared = Shared::from_table(&table);
        let mut out = Vec::new();
        for id in self.membership.alive_members(crate::node::ALL_GROUP) {
            if id == SCHEDULER {
                continue;
            }
            if let Some(n) = self.membership.get(id).cloned() {
                self.liveness.revive(id, now_ms);
                out.push(Action::Connect(n));
                out.push(Action::Send(add_node_msg(id, table.clone())));
                out.extend(deaths_for(id, &self.membership).map(Action::Send));
            }
        }
        out.push(Action::Table(table));
        Ok(self.addressed(out))
    }

    /// Watches every live node afresh from `now_ms`: this scheduler could not hear a
    /// majority of the nodes for a while (no lease), so their silence meanwhile says
    /// nothing about them; they are declared dead only after a full timeout from now.
    pub fn resume_watch(&mut self, now_ms: u64) {
        for id in self.membership.alive_members(crate::node::ALL_GROUP) {
            if id != SCHEDULER && !self.liveness.is_dead(id) {
                self.liveness.revive(id, now_ms);
            }
        }
    }

    /// An ADD_NODE from `node` at `now_ms`.
    pub fn on_add_node(&mut self, node: Node, now_ms: u64) -> Vec<Action> {
        let join = self.membership.add_node(node.clone());
        let out = self.join_actions(join, Some(node), now_ms);
        self.addressed(out)
    }

    fn join_actions(&mut self, join: Join, joiner: Option<Node>, now_ms: u64) -> Vec<Action> {
        let mut out = Vec::new();
        match join {
            Join::Waiting => out.extend(joiner.map(Action::Welcome)),
            Join::Rejected(reason) => {
                if let Some(node) = joiner {
                    out.push(Action::Reject { node, reason });
                }
            }
            Join::Ready { table } => {
                self.shared = Shared::from_table(&table);
                for n in table.iter().filter(|n| n.id != SCHEDULER) {
                    self.liveness.revive(n.id, now_ms);
                    out.push(Action::Connect(n.clone()));
                    out.push(Action::Send(add_node_msg(n.id, table.clone())));
                }
                out.push(Action::Table(table));
            }
            Join::Replaced { node, table } => {
                self.shared = Shared::from_table(&table);
                self.liveness.revive(node.id, now_ms);
                out.push(Action::Connect(node.clone()));
                out.push(Action::Send(add_node_msg(node.id, table.clone())));
                out.extend(deaths_for(node.id, &self.membership).map(Action::Send));
                for n in table.iter() {
                    if n.id != SCHEDULER && n.id != node.id && !self.membership.dead().contains(&n.id) {
                        out.push(Action::Send(add_node_msg(n.id, vec![node.clone()])));
                    }
                }
                out.push(Action::Table(table));
            }
            Join::Known { node, table } => {
                out.push(Action::Connect(node.clone()));
                out.push(Action::Send(add_node_msg(node.id, table)));
                out.extend(deaths_for(node.id, &self.membership).map(Action::Send));
            }
        }
        out
    }

    /// A BARRIER request from `sender` over `group`.
    pub fn on_barrier(&mut self, group: i32, sender: i32) -> Vec<Action> {
        let alive = self.membership.alive_members(group);
        let barriers = &self.barriers;
        let slot = self.shared.barrier_slot(sender, |id| barriers.has_arrived(group, id));
        let released = self.barriers.arrive(group, slot, &alive);
        self.addressed(release(group, released))
    }

    /// A LEAVE (goodbye) from process `incarnation` holding worker id `sender`: it is
    /// answered (a repeated goodbye too), no member from now on and never declared
    /// dead; the other live nodes are told (NODE_DEAD, reason [`LEFT`]), barriers it
    /// held are released, and a worker waiting for an id takes its one. A goodbye
    /// from a process the table does not hold for the id changes nothing.
    pub fn on_leave(&mut self, sender: i32, incarnation: u64, now_ms: u64) -> Vec<Action> {
        let Some(gone) = self.membership.get(sender).cloned() else {
            return Vec::new();
        };
        if incarnation != 0 && gone.incarnation != incarnation {
            return Vec::new();
        }
        let mut out = vec![Action::Send(Message::control(sender, Command::Leave))];
        let Some(join) = self.membership.leave(sender) else {
            return self.addressed(out);
        };
        for id in self.membership.alive_members(crate::node::ALL_GROUP) {
            if id != SCHEDULER {
                let mut m = Message::control(id, Command::NodeDead);
                m.meta.control.nodes = vec![gone.clone()];
                m.meta.control.reason = LEFT.into();
                out.push(Action::Send(m));
            }
        }
        out.push(Action::Left(vec![sender]));
        for group in self.barriers.open_groups() {
            let alive = self.membership.alive_members(group);
            out.extend(release(group, self.barriers.complete(group, &alive)));
        }
        if let Some(j) = join {
            out.extend(self.join_actions(j, None, now_ms));
        }
        self.addressed(out)
    }

    /// A HEARTBEAT from process `incarnation` holding `sender` at `now_ms`; the reply
    /// to send. A process declared dead, or whose id a replacement took, is told so (a
    /// NODE_DEAD naming it): it must stop, and its beats do not count for the id.
    pub fn on_heartbeat(&mut self, sender: i32, incarnation: u64, now_ms: u64) -> Vec<Action> {
        let holder = self.membership.get(sender).map(|n| n.incarnation);
        let replaced = incarnation != 0 && holder.is_some_and(|h| h != incarnation);
        // dead by this scheduler's own check, or by the table it adopted (a standby
        // that took over learns the deaths its predecessor declared from the table)
        let dead = self.liveness.is_dead(sender) || self.membership.dead().contains(&sender);
        if replaced || dead {
            let Some(mut gone) = self.membership.get(sender).cloned() else {
                return Vec::new();
            };
            if incarnation != 0 {
                gone.incarnation = incarnation;
            }
            let mut m = Message::control(sender, Command::NodeDead);
            m.meta.recver_incarnation = gone.incarnation;
            m.meta.control.nodes = vec![gone];
            return vec![Action::Send(m)];
        }
        self.liveness.beat(sender, now_ms);
        for alias in self.shared.aliases_of(sender) {
            self.liveness.beat(alias, now_ms);
        }
        self.addressed(vec![Action::Send(Message::control(sender, Command::Heartbeat))])
    }

    /// Periodic check at `now_ms`: declares silent nodes dead, tells the living,
    /// releases barriers they were holding, and hands their ids to waiting
    /// replacements.
    pub fn tick(&mut self, now_ms: u64) -> Vec<Action> {
        let newly = self.liveness.check(now_ms);
        if newly.is_empty() {
            return Vec::new();
        }
        let mut out = Vec::new();
        let mut joins = Vec::new();
        let mut dead = Vec::new();
        let mut dead_nodes: Vec<Node> = Vec::new();
        for id in newly {
            // the process as it was (a waiting replacement takes the id in mark_dead)
            let gone = self.membership.get(id).cloned();
            if let Some(j) = self.membership.mark_dead(id) {
                dead.push(id);
                dead_nodes.extend(gone);
                joins.extend(j);
            }
        }
        if dead.is_empty() {
            return out;
        }
        // the nodes alive before these deaths: a replacement that was waiting for one
        // of the ids took it in mark_dead, and must not be told its own id is dead
        // (it gets the table below)
        let told = self.membership.alive_members(crate::node::ALL_GROUP);
        for id in told.into_iter().filter(|id| !dead.contains(id)) {
            let mut m = Message::control(id, Command::NodeDead);
            m.meta.control.nodes = dead_nodes.clone();
            out.push(Action::Send(m));
        }
        out.push(Action::Dead(dead));
        for group in self.barriers.open_groups() {
            let alive = self.membership.alive_members(group);
            out.extend(release(group, self.barriers.complete(group, &alive)));
        }
        for j in joins {
            out.extend(self.join_actions(j, None, now_ms));
        }
        self.addressed(out)
    }

    /// Addresses every message in `actions` to the process the table has for its
    /// receiver (`recver_incarnation`), so that a message for a node that is replaced
    /// meanwhile never reaches its replacement. Messages to an alias, and connections
    /// to one, are left out: its process gets the message under its own id.
    fn addressed(&self, mut actions: Vec<Action>) -> Vec<Action> {
        actions.retain(|a| match a {
            Action::Send(m) => !self.shared.is_alias(m.meta.recver),
            Action::Connect(n) => !self.shared.is_alias(n.id),
            _ => true,
        });
        for a in actions.iter_mut() {
            if let Action::Send(m) = a {
                if m.meta.recver_incarnation == 0 {
                    m.meta.recver_incarnation = self.membership.get(m.meta.recver).map_or(0, |n| n.incarnation);
                }
            }
        }
        actions
    }
}

/// The release of `group`'s barrier to each of `released`: servers first, then
/// workers, the scheduler's own last. A scheduler released from its final barrier
/// finalizes and closes its connections, so releases queued after its own would be
/// lost (on the TCP van, a large cluster would hang in `finalize` with "no connection
/// to node N"). A server released after a worker could get the worker's first request
/// before its own release, which a ps-lite server does not survive (its receiving
/// thread waits for a customer that only the release it holds back lets it create).
fn release(group: i32, released: Option<Vec<i32>>) -> Vec<Action> {
    let mut ids = released.unwrap_or_default();
    ids.sort_by_key(|&id| (id == SCHEDULER, id_role(id) == Some(Role::Worker), id));
    ids.into_iter()
        .map(|id| {
            let mut m = Message::control(id, Command::Barrier);
            m.meta.control.barrier_group = group;
            Action::Send(m)
        })
        .collect()
}

#[cfg(test)]
#[path = "scheduler_tests.rs"]
mod tests;
