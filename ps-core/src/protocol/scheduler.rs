//! The scheduler's control logic: node table, barriers and dead-node detection
//! combined, turning each control event into the actions the van must carry out.

use super::barrier::Barriers;
use super::liveness::Liveness;
use super::membership::{Join, Membership};
use crate::message::{Command, Control, Message, Meta};
use crate::node::{Node, SCHEDULER};

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
}

fn control(recver: i32, cmd: Command) -> Message {
    Message {
        meta: Meta {
            recver,
            control: Control {
                cmd,
                ..Default::default()
            },
            ..Default::default()
        },
        data: Vec::new(),
    }
}

fn add_node_msg(recver: i32, nodes: Vec<Node>) -> Message {
    let mut m = control(recver, Command::AddNode);
    m.meta.control.nodes = nodes;
    m
}

/// The scheduler's protocol state.
pub struct SchedulerCore {
    membership: Membership,
    barriers: Barriers,
    liveness: Liveness,
}

impl SchedulerCore {
    /// A scheduler expecting the given cluster, declaring nodes dead after
    /// `heartbeat_timeout_ms` of silence (0 = never).
    pub fn new(num_servers: usize, num_workers: usize, me: Node, heartbeat_timeout_ms: u64) -> SchedulerCore {
        SchedulerCore {
            membership: Membership::new(num_servers, num_workers, me),
            barriers: Barriers::new(),
            liveness: Liveness::new(heartbeat_timeout_ms),
        }
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
    /// are an error and change nothing.
    pub fn adopt(&mut self, exported: &[u8], mut me: Node, now_ms: u64) -> Result<Vec<Action>, String> {
        me.is_recovery = true;
        if exported.is_empty() {
            self.membership.set_scheduler(me);
            return Ok(Vec::new());
        }
        let mut m: Membership =
            bincode::deserialize(exported).map_err(|e| format!("the node table from the active scheduler: {e}"))?;
        m.set_scheduler(me);
        self.membership = m;
        self.barriers = Barriers::new();
        let table = self.membership.table();
        let mut out = Vec::new();
        for id in self.membership.alive_members(crate::node::ALL_GROUP) {
            if id == SCHEDULER {
                continue;
            }
            if let Some(n) = self.membership.get(id).cloned() {
                self.liveness.revive(id, now_ms);
                out.push(Action::Connect(n));
                out.push(Action::Send(add_node_msg(id, table.clone())));
            }
        }
        out.push(Action::Table(table));
        Ok(out)
    }

    /// An ADD_NODE from `node` at `now_ms`.
    pub fn on_add_node(&mut self, node: Node, now_ms: u64) -> Vec<Action> {
        let join = self.membership.add_node(node.clone());
        self.join_actions(join, Some(node), now_ms)
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
                for n in table.iter().filter(|n| n.id != SCHEDULER) {
                    self.liveness.revive(n.id, now_ms);
                    out.push(Action::Connect(n.clone()));
                    out.push(Action::Send(add_node_msg(n.id, table.clone())));
                }
                out.push(Action::Table(table));
            }
            Join::Replaced { node, table } => {
                self.liveness.revive(node.id, now_ms);
                out.push(Action::Connect(node.clone()));
                out.push(Action::Send(add_node_msg(node.id, table.clone())));
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
            }
        }
        out
    }

    /// A BARRIER request from `sender` over `group`.
    pub fn on_barrier(&mut self, group: i32, sender: i32) -> Vec<Action> {
        let alive = self.membership.alive_members(group);
        let released = self.barriers.arrive(group, sender, &alive);
        release(group, released)
    }

    /// A HEARTBEAT from `sender` at `now_ms`; the reply to send.
    pub fn on_heartbeat(&mut self, sender: i32, now_ms: u64) -> Vec<Action> {
        self.liveness.beat(sender, now_ms);
        if self.liveness.is_dead(sender) {
            return Vec::new();
        }
        vec![Action::Send(control(sender, Command::Heartbeat))]
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
        for id in newly {
            if let Some(j) = self.membership.mark_dead(id) {
                dead.push(id);
                joins.extend(j);
            }
        }
        if dead.is_empty() {
            return out;
        }
        let dead_nodes: Vec<Node> = dead.iter().filter_map(|id| self.membership.get(*id).cloned()).collect();
        for id in self.membership.alive_members(crate::node::ALL_GROUP) {
            let mut m = control(id, Command::NodeDead);
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
        out
    }
}

fn release(group: i32, released: Option<Vec<i32>>) -> Vec<Action> {
    released
        .unwrap_or_default()
        .into_iter()
        .map(|id| {
            let mut m = control(id, Command::Barrier);
            m.meta.control.barrier_group = group;
            Action::Send(m)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::node::{Role, ALL_GROUP, EMPTY_ID, WORKER_GROUP};

    fn node(role: Role, port: u16) -> Node {
        Node {
            role,
            id: EMPTY_ID,
            hostname: "127.0.0.1".into(),
            port,
            is_recovery: false,
            incarnation: 1,
        }
    }

    fn sends(actions: &[Action]) -> Vec<(i32, Command)> {
        actions
            .iter()
            .filter_map(|a| match a {
                Action::Send(m) => Some((m.meta.recver, m.meta.control.cmd)),
                _ => None,
            })
            .collect()
    }

    fn cluster() -> SchedulerCore {
        let mut s = SchedulerCore::new(1, 2, node(Role::Scheduler, 1), 1000);
        assert_eq!(
            s.on_add_node(node(Role::Worker, 3), 0),
            vec![Action::Welcome(node(Role::Worker, 3))]
        );
        assert_eq!(
            s.on_add_node(node(Role::Worker, 4), 0),
            vec![Action::Welcome(node(Role::Worker, 4))]
        );
        let a = s.on_add_node(node(Role::Server, 2), 0);
        assert_eq!(
            sends(&a),
            vec![(8, Command::AddNode), (9, Command::AddNode), (11, Command::AddNode)]
        );
        s
    }

    #[test]
    fn barrier_over_all_nodes() {
        let mut s = cluster();
        for id in [1, 8, 9] {
            assert!(s.on_barrier(ALL_GROUP, id).is_empty());
        }
        let a = s.on_barrier(ALL_GROUP, 11);
        assert_eq!(sends(&a).len(), 4);
        assert!(sends(&a).iter().all(|(_, c)| *c == Command::Barrier));
    }

    #[test]
    fn death_releases_barrier_and_replacement_gets_id() {
        let mut s = cluster();
        s.on_heartbeat(8, 900);
        s.on_heartbeat(9, 900);
        assert!(s.on_barrier(WORKER_GROUP, 9).is_empty());
        assert!(s.tick(1000).is_empty());
        let a = s.tick(1001);
        assert!(a.contains(&Action::Dead(vec![11])));
        // the barrier of the worker group is released for worker 9
        assert!(sends(&a).contains(&(9, Command::Barrier)));
        // living nodes are told
        assert!(sends(&a).contains(&(8, Command::NodeDead)));
        assert!(!sends(&a).iter().any(|(id, _)| *id == 11));
        // a heartbeat from the dead gets no reply
        assert!(s.on_heartbeat(11, 1100).is_empty());
        let a = s.on_add_node(node(Role::Worker, 77), 1200);
        assert!(matches!(&a[0], Action::Connect(n) if n.id == 11 && n.port == 77));
        assert_eq!(sends(&a)[0], (11, Command::AddNode));
        assert!(sends(&a).contains(&(9, Command::AddNode)));
        assert!(sends(&a).contains(&(8, Command::AddNode)));
    }

    #[test]
    fn a_standby_adopts_the_table_and_keeps_the_dead_dead() {
        let mut s = cluster();
        s.on_heartbeat(8, 900);
        s.on_heartbeat(9, 900);
        s.tick(1001);
        let exported = s.export();
        let mut standby = SchedulerCore::new(1, 2, node(Role::Scheduler, 5), 1000);
        assert!(standby.adopt(b"junk", node(Role::Scheduler, 5), 0).is_err());
        let a = standby.adopt(&exported, node(Role::Scheduler, 5), 5000).unwrap();
        assert_eq!(sends(&a), vec![(8, Command::AddNode), (9, Command::AddNode)]);
        let Some(Action::Table(t)) = a.last() else {
            panic!("no table: {a:?}")
        };
        assert_eq!((t[0].id, t[0].port, t[0].is_recovery), (SCHEDULER, 5, true));
        assert!(standby.membership().dead().contains(&11));
        // watched from the takeover on, not from the old heartbeats
        assert!(standby.tick(5900).is_empty());
        assert!(standby.tick(6001).contains(&Action::Dead(vec![8, 9])));
        // a node that re-registers under its id is sent the table
        let mut again = node(Role::Worker, 3);
        again.id = 9;
        let mut standby2 = SchedulerCore::new(1, 2, node(Role::Scheduler, 5), 1000);
        standby2.adopt(&exported, node(Role::Scheduler, 5), 0).unwrap();
        let a = standby2.on_add_node(again, 10);
        assert_eq!(sends(&a), vec![(9, Command::AddNode)]);
    }

    #[test]
    fn rejects_a_surplus_node() {
        let mut s = SchedulerCore::new(1, 0, node(Role::Scheduler, 1), 0);
        assert!(matches!(
            s.on_add_node(node(Role::Worker, 3), 0).as_slice(),
            [Action::Reject { .. }]
        ));
    }
}
