//! The scheduler's node table: assigns ids when the cluster is complete, hands a dead
//! node's id to a replacement of the same role. Workers are elastic: one registering
//! after the start with no dead or departed worker's id to take gets a new id beyond
//! `DMLC_NUM_WORKER`, and a worker may leave (goodbye) without being declared dead.

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
    /// `node` took a dead (or departed) node's id, or is a worker joining the running
    /// cluster under a new id: send `table` to it, and `node` to everyone else.
    Replaced {
        /// The node with its id and `is_recovery` set (it joins a running cluster: it
        /// skips the start barrier).
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
    /// Workers that said goodbye ([`Membership::leave`]): not members, not dead.
    #[serde(default)]
    left: BTreeSet<i32>,
    /// Workers registering after the start get new ids (see [`Membership::set_elastic_workers`]).
    #[serde(default)]
    elastic: bool,
}

/// True if `a` and `b` are one registration of one process. A ps-lite process (no
/// incarnation) registers once per customer, and each registration is a node of its
/// own (see [`super::shared`]).
fn same_process(a: &Node, b: &Node) -> bool {
    a.incarnation != 0 && a.hostname == b.hostname && a.port == b.port && a.incarnation == b.incarnation
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
            left: BTreeSet::new(),
            elastic: false,
        }
    }

    /// With `on`, a worker registering after the start with no dead or departed
    /// worker's id to take joins under a new id (rank `num_workers`, which grows);
    /// without, it waits for a worker to die (today's standby behaviour).
    pub fn set_elastic_workers(&mut self, on: bool) {
        self.elastic = on;
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

    /// Workers that left on their own and whose id no new worker took.
    pub fn left(&self) -> &BTreeSet<i32> {
        &self.left
    }

    /// Worker ids handed out so far (`DMLC_NUM_WORKER`, more once workers joined).
    pub fn num_workers(&self) -> usize {
        self.num_workers
    }

    /// Members of group (or node) `group` that are neither dead nor departed.
    pub fn alive_members(&self, group: i32) -> Vec<i32> {
        group_members(group, self.num_servers, self.num_workers)
            .into_iter()
            .filter(|id| !self.dead.contains(id) && !self.left.contains(id))
            .collect()
    }

    /// Worker `id` says goodbye: it is no member from now on, without being declared
    /// dead; its id goes to a worker waiting for one, if any (as a
    /// [`Join::Replaced`]), else to the next worker that registers. `None` if `id` is
    /// no live worker (unknown, a server, dead, or gone already): nothing changes.
    pub fn leave(&mut self, id: i32) -> Option<Option<Join>> {
        let worker = self.nodes.get(&id).is_some_and(|n| n.role == Role::Worker);
        if !worker || self.dead.contains(&id) || !self.left.insert(id) {
            return None;
        }
        let waiting = self.waiting_replacements.iter().position(|n| n.role == Role::Worker);
        Some(waiting.map(|i| {
            let n = self.waiting_replacements.remove(i);
            self.replace(id, n)
        }))
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
        if let Some(holder) = self.nodes.get(&node.id).filter(|h| h.incarnation != node.incarnation) {
            // a process claiming an id another process took since: it was declared dead
            // and replaced (it missed the notice, cut off); it must not come back
            return Join::Rejected(format!(
                "{} {} was replaced by another process (declared dead before); a new process may take a free id",
                holder.role, node.id
            ));
        }
        if let Some(id) = self.dead_id_of(node.role) {
            return self.replace(id, node);
        }
        if self.capacity(node.role) == 0 {
            return Join::Rejected(format!("the cluster has no {}s", node.role));
        }
        if let Some(&id) = self.left.iter().find(|_| node.role == Role::Worker) {
            return self.replace(id, node);
        }
        if node.role == Role::Worker && self.elastic {
            self.num_workers += 1;
            return self.replace(worker_rank_to_id(self.num_workers - 1), node);
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
        self.left.remove(&id);
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

    /// Declares `id` dead. Returns `None` if it was unknown, dead already or departed
    /// (a worker that said goodbye goes silent), else the
    /// replacement that was waiting for such a death (if any) as a [`Join::Replaced`].
    pub fn mark_dead(&mut self, id: i32) -> Option<Option<Join>> {
        let role = self.nodes.get(&id)?.role;
        if self.left.contains(&id) || !self.dead.insert(id) {
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
#[path = "membership_tests.rs"]
pub(crate) mod tests;
