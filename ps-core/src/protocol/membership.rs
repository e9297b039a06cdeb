//! The scheduler's node table: assigns ids when the cluster is complete, hands a dead
//! node's id to a replacement of the same role.

use crate::node::{
    group_members, id_role, id_to_rank, server_rank_to_id, worker_rank_to_id, Node, Role, EMPTY_ID, SCHEDULER,
};
use std::collections::{BTreeMap, BTreeSet};

/// What the scheduler must do after an ADD_NODE.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Join {
    /// The cluster is not complete yet; nothing to send.
    Waiting,
    /// The cluster just became complete: send `table` to every node in it.
    Ready {
        /// Every node, scheduler included, with ids.
        table: Vec<Node>,
    },
    /// `node` took a dead node's id: send `table` to it, and `node` to everyone else.
    Replaced {
        /// The replacement with its new id and `is_recovery` set.
        node: Node,
        /// The full table after the replacement.
        table: Vec<Node>,
    },
    /// A node already in the table registered again (a resent ADD_NODE): send it the
    /// table again.
    Known {
        /// The node as the table has it.
        node: Node,
        /// The full table.
        table: Vec<Node>,
    },
    /// The node cannot join; tell it why.
    Rejected(String),
}

/// The scheduler's view of the cluster's membership (serializable: the active
/// scheduler streams it to its standbys).
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct Membership {
    num_servers: usize,
    num_workers: usize,
    scheduler: Node,
    pending: Vec<Node>,
    nodes: BTreeMap<i32, Node>,
    dead: BTreeSet<i32>,
    waiting_replacements: Vec<Node>,
}

fn same_process(a: &Node, b: &Node) -> bool {
    a.hostname == b.hostname && a.port == b.port && a.incarnation == b.incarnation
}

impl Membership {
    /// A table expecting `num_servers` servers and `num_workers` workers, with the
    /// scheduler `scheduler` (its id is set to 1).
    pub fn new(num_servers: usize, num_workers: usize, mut scheduler: Node) -> Membership {
        scheduler.id = SCHEDULER;
        Membership {
            num_servers,
            num_workers,
            scheduler,
            pending: Vec::new(),
            nodes: BTreeMap::new(),
            dead: BTreeSet::new(),
            waiting_replacements: Vec::new(),
        }
    }

    /// Makes `scheduler` (its id set to 1) the scheduler of this table: a standby took
    /// over the table it followed.
    pub fn set_scheduler(&mut self, mut scheduler: Node) {
        scheduler.id = SCHEDULER;
        self.scheduler = scheduler;
    }

    /// True once every expected node has an id.
    pub fn is_ready(&self) -> bool {
        !self.nodes.is_empty() || self.num_servers + self.num_workers == 0
    }

    /// Every node with an id, scheduler first.
    pub fn table(&self) -> Vec<Node> {
        let mut t = vec![self.scheduler.clone()];
        t.extend(self.nodes.values().cloned());
        t
    }

    /// The node with this id.
    pub fn get(&self, id: i32) -> Option<&Node> {
        if id == SCHEDULER {
            Some(&self.scheduler)
        } else {
            self.nodes.get(&id)
        }
    }

    /// Servers and workers registered while the cluster is not complete yet.
    pub fn pending_counts(&self) -> (usize, usize) {
        let servers = self.pending.iter().filter(|n| n.role == Role::Server).count();
        (servers, self.pending.len() - servers)
    }

    /// Ids currently declared dead.
    pub fn dead(&self) -> &BTreeSet<i32> {
        &self.dead
    }

    /// Members of group (or node) `group` that are not dead.
    pub fn alive_members(&self, group: i32) -> Vec<i32> {
        group_members(group, self.num_servers, self.num_workers)
            .into_iter()
            .filter(|id| !self.dead.contains(id))
            .collect()
    }

    fn capacity(&self, role: Role) -> usize {
        match role {
            Role::Server => self.num_servers,
            Role::Worker => self.num_workers,
            Role::Scheduler => 0,
        }
    }

    /// Handles an ADD_NODE from `node`.
    pub fn add_node(&mut self, node: Node) -> Join {
        if node.role == Role::Scheduler {
            return Join::Rejected("a second scheduler cannot join".into());
        }
        if let Some(known) = self.nodes.values().find(|n| same_process(n, &node)) {
            if self.dead.contains(&known.id) {
                // a process declared dead (cut off past the heartbeat timeout) came back:
                // its tasks went to others and its id may go to a replacement
                return Join::Rejected(format!(
                    "{} {} was declared dead (no heartbeat within the timeout); a new process may take its place",
                    known.role, known.id
                ));
            }
            return Join::Known {
                node: known.clone(),
                table: self.table(),
            };
        }
        if !self.is_ready() {
            if self.pending.iter().any(|n| same_process(n, &node)) {
                return Join::Waiting;
            }
            let have = self.pending.iter().filter(|n| n.role == node.role).count();
            if have >= self.capacity(node.role) {
                return Join::Rejected(format!(
                    "the cluster expects {} {}s and all have registered",
                    self.capacity(node.role),
                    node.role
                ));
            }
            self.pending.push(node);
            return self.try_assign();
        }
        if self.dead.contains(&node.id) && self.nodes.get(&node.id).map(|n| n.role) == Some(node.role) {
            let id = node.id;
            return self.replace(id, node);
        }
        if let Some(id) = self.dead_id_of(node.role) {
            return self.replace(id, node);
        }
        if self.capacity(node.role) == 0 {
            return Join::Rejected(format!("the cluster has no {}s", node.role));
        }
        if !self.waiting_replacements.iter().any(|n| same_process(n, &node)) {
            self.waiting_replacements.push(node);
        }
        Join::Waiting
    }

    fn dead_id_of(&self, role: Role) -> Option<i32> {
        self.dead
            .iter()
            .copied()
            .find(|id| self.nodes.get(id).map(|n| n.role) == Some(role))
    }

    fn replace(&mut self, id: i32, mut node: Node) -> Join {
        node.id = id;
        node.is_recovery = true;
        self.dead.remove(&id);
        self.nodes.insert(id, node.clone());
        Join::Replaced {
            node,
            table: self.table(),
        }
    }

    fn valid_id(&self, node: &Node) -> bool {
        let rank = id_to_rank(node.id).unwrap_or(usize::MAX);
        id_role(node.id) == Some(node.role) && node.role != Role::Scheduler && rank < self.capacity(node.role)
    }

    fn try_assign(&mut self) -> Join {
        let servers = self.pending.iter().filter(|n| n.role == Role::Server).count();
        let workers = self.pending.len() - servers;
        if servers < self.num_servers || workers < self.num_workers {
            return Join::Waiting;
        }
        let mut pending = std::mem::take(&mut self.pending);
        pending.sort_by(|a, b| {
            (a.role, &a.hostname, a.port, a.incarnation).cmp(&(b.role, &b.hostname, b.port, b.incarnation))
        });
        // Nodes re-registering after a scheduler restart keep their ids.
        let mut rejoined = false;
        let mut fresh = Vec::new();
        for n in pending {
            if n.id != EMPTY_ID && self.valid_id(&n) && !self.nodes.contains_key(&n.id) {
                rejoined = true;
                self.nodes.insert(n.id, n);
            } else {
                fresh.push(n);
            }
        }
        let (mut s, mut w) = (0, 0);
        for mut n in fresh {
            let next = |rank: &mut usize, f: fn(usize) -> i32, nodes: &BTreeMap<i32, Node>| loop {
                let id = f(*rank);
                *rank += 1;
                if !nodes.contains_key(&id) {
                    return id;
                }
            };
            n.id = match n.role {
                Role::Server => next(&mut s, server_rank_to_id, &self.nodes),
                _ => next(&mut w, worker_rank_to_id, &self.nodes),
            };
            n.is_recovery = rejoined;
            self.nodes.insert(n.id, n);
        }
        self.scheduler.is_recovery = rejoined;
        Join::Ready { table: self.table() }
    }

    /// Declares `id` dead. Returns `None` if it was unknown or dead already, else the
    /// replacement that was waiting for such a death (if any) as a [`Join::Replaced`].
    pub fn mark_dead(&mut self, id: i32) -> Option<Option<Join>> {
        let role = self.nodes.get(&id)?.role;
        if !self.dead.insert(id) {
            return None;
        }
        let waiting = self.waiting_replacements.iter().position(|n| n.role == role);
        Some(waiting.map(|i| {
            let n = self.waiting_replacements.remove(i);
            self.replace(id, n)
        }))
    }

    /// The id a registering node has, if it is known (by address and incarnation).
    pub fn id_of(&self, node: &Node) -> i32 {
        self.nodes
            .values()
            .find(|n| same_process(n, node))
            .map_or(EMPTY_ID, |n| n.id)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A node of `role` on 127.0.0.1:`port`, not yet given an id (incarnation = port).
    pub(crate) fn node(role: Role, port: u16) -> Node {
        Node {
            role,
            id: EMPTY_ID,
            hostname: "127.0.0.1".into(),
            port,
            is_recovery: false,
            incarnation: port as u64,
        }
    }

    fn sched() -> Node {
        node(Role::Scheduler, 1000)
    }

    #[test]
    fn assigns_ids_once_complete_and_deterministically() {
        let mut m = Membership::new(2, 2, sched());
        assert_eq!(m.add_node(node(Role::Worker, 5002)), Join::Waiting);
        assert_eq!(m.add_node(node(Role::Server, 5004)), Join::Waiting);
        assert_eq!(m.add_node(node(Role::Worker, 5001)), Join::Waiting);
        let Join::Ready { table } = m.add_node(node(Role::Server, 5003)) else {
            panic!("not ready")
        };
        let ids: Vec<(i32, u16)> = table.iter().map(|n| (n.id, n.port)).collect();
        assert_eq!(ids, vec![(1, 1000), (8, 5003), (9, 5001), (10, 5004), (11, 5002)]);
        assert!(m.is_ready());
    }

    #[test]
    fn duplicate_and_excess_registrations() {
        let mut m = Membership::new(1, 1, sched());
        assert_eq!(m.add_node(node(Role::Worker, 1)), Join::Waiting);
        assert_eq!(m.add_node(node(Role::Worker, 1)), Join::Waiting);
        assert!(matches!(m.add_node(node(Role::Worker, 2)), Join::Rejected(_)));
        assert!(matches!(m.add_node(node(Role::Server, 3)), Join::Ready { .. }));
        assert!(matches!(m.add_node(node(Role::Server, 3)), Join::Known { node, .. } if node.id == 8));
        assert!(matches!(m.add_node(node(Role::Scheduler, 4)), Join::Rejected(_)));
    }

    #[test]
    fn replacement_takes_the_dead_id() {
        let mut m = Membership::new(1, 2, sched());
        for p in [1, 2, 3] {
            m.add_node(node(if p == 3 { Role::Server } else { Role::Worker }, p));
        }
        assert_eq!(m.alive_members(4), vec![9, 11]);
        assert_eq!(m.mark_dead(11), Some(None));
        assert_eq!(m.mark_dead(11), None);
        assert_eq!(m.alive_members(4), vec![9]);
        let Join::Replaced { node: n, table } = m.add_node(node(Role::Worker, 7)) else {
            panic!()
        };
        assert_eq!(n.id, 11);
        assert!(n.is_recovery);
        assert!(table.iter().any(|t| t.id == 11 && t.port == 7));
        assert_eq!(m.alive_members(4), vec![9, 11]);
    }

    #[test]
    fn restarted_scheduler_gives_rejoining_nodes_their_ids() {
        let mut m = Membership::new(2, 2, sched());
        let mut rejoin = |role, port, id| {
            let mut n = node(role, port);
            n.id = id;
            m.add_node(n)
        };
        assert_eq!(rejoin(Role::Worker, 1, 11), Join::Waiting);
        assert_eq!(rejoin(Role::Server, 2, 8), Join::Waiting);
        assert_eq!(rejoin(Role::Server, 3, 10), Join::Waiting);
        // a node that lost its id (it was replaced meanwhile) gets the free one
        let Join::Ready { table } = rejoin(Role::Worker, 4, EMPTY_ID) else {
            panic!()
        };
        let ids: Vec<(i32, u16, bool)> = table.iter().map(|n| (n.id, n.port, n.is_recovery)).collect();
        assert_eq!(
            ids,
            vec![
                (1, 1000, true),
                (8, 2, false),
                (9, 4, true),
                (10, 3, false),
                (11, 1, false)
            ]
        );
    }

    #[test]
    fn invalid_preassigned_ids_are_reassigned() {
        let mut m = Membership::new(1, 1, sched());
        let mut n = node(Role::Worker, 1);
        n.id = 8; // a server id claimed by a worker
        m.add_node(n);
        let Join::Ready { table } = m.add_node(node(Role::Server, 2)) else {
            panic!()
        };
        assert_eq!(
            table.iter().map(|n| (n.id, n.port)).collect::<Vec<_>>(),
            vec![(1, 1000), (8, 2), (9, 1)]
        );
    }

    #[test]
    fn early_replacement_waits_for_the_death() {
        let mut m = Membership::new(1, 1, sched());
        m.add_node(node(Role::Worker, 1));
        m.add_node(node(Role::Server, 2));
        assert_eq!(m.add_node(node(Role::Server, 9)), Join::Waiting);
        let Some(Some(Join::Replaced { node: n, .. })) = m.mark_dead(8) else {
            panic!()
        };
        assert_eq!((n.id, n.port), (8, 9));
        assert!(m.dead().is_empty());
    }
}
