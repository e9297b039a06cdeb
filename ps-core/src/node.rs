//! Nodes, roles, node ids and groups, exactly as ps-lite numbers them.
//!
//! Ids 1..=7 name groups: the scheduler is 1, all servers 2, all workers 4, and a sum
//! names the union (3 = scheduler+servers, 7 = everyone). Server rank `r` has id
//! `8 + 2r`, worker rank `r` has id `9 + 2r`.

use serde::{Deserialize, Serialize};
use std::fmt;

/// The id of the scheduler node (also its group).
pub const SCHEDULER: i32 = 1;
/// The group of all servers.
pub const SERVER_GROUP: i32 = 2;
/// The group of all workers.
pub const WORKER_GROUP: i32 = 4;
/// The group of every node.
pub const ALL_GROUP: i32 = SCHEDULER + SERVER_GROUP + WORKER_GROUP;
/// Marker for "no id assigned yet".
pub const EMPTY_ID: i32 = i32::MAX;

/// The role a process plays in the cluster.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Role {
    /// Assigns ids, runs barriers, watches heartbeats, hosts the master.
    Scheduler,
    /// Holds a key range.
    Server,
    /// Computes and pushes/pulls.
    Worker,
}

impl Role {
    /// Parses a `DMLC_ROLE` value.
    pub fn parse(s: &str) -> Option<Role> {
        match s {
            "scheduler" => Some(Role::Scheduler),
            "server" => Some(Role::Server),
            "worker" => Some(Role::Worker),
            _ => None,
        }
    }
    /// The group id containing every node of this role.
    pub fn group(self) -> i32 {
        match self {
            Role::Scheduler => SCHEDULER,
            Role::Server => SERVER_GROUP,
            Role::Worker => WORKER_GROUP,
        }
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Role::Scheduler => "scheduler",
            Role::Server => "server",
            Role::Worker => "worker",
        })
    }
}

/// One node of the cluster: its role, id (once assigned) and advertised address.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Node {
    /// Role of the node.
    pub role: Role,
    /// Assigned id, or [`EMPTY_ID`] before the scheduler assigns one.
    pub id: i32,
    /// Host name or IP others connect to.
    pub hostname: String,
    /// Port of the node's receiving socket.
    pub port: u16,
    /// True when this node took over the id of a dead node.
    pub is_recovery: bool,
    /// Random per-process number; distinguishes a restarted node from its predecessor.
    pub incarnation: u64,
    /// The fingerprint of the certificate the process registered with
    /// ([`crate::tls::peer::fingerprint`]); 0 without certificates (no security, or
    /// the ZMQ van). The scheduler fills it in from the link the registration came on,
    /// and nodes check every link against it: a message from this id must come over a
    /// link with this certificate ([`crate::van::authz`]).
    pub cert: u64,
}

impl Node {
    /// `host:port` of the node (`[v6]:port` for an IPv6 address).
    pub fn addr(&self) -> String {
        crate::addr::host_port(&self.hostname, self.port)
    }
}

impl fmt::Display for Node {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.id == EMPTY_ID {
            write!(f, "{}[?]@{}", self.role, self.addr())
        } else {
            write!(f, "{}[{}]@{}", self.role, self.id, self.addr())
        }
    }
}

/// Id of the server with rank `rank`.
pub fn server_rank_to_id(rank: usize) -> i32 {
    rank as i32 * 2 + 8
}

/// Id of the worker with rank `rank`.
pub fn worker_rank_to_id(rank: usize) -> i32 {
    rank as i32 * 2 + 9
}

/// Rank of a server or worker id (`(id - 8) / 2`); `None` for group ids.
pub fn id_to_rank(id: i32) -> Option<usize> {
    if id >= 8 {
        Some(((id - 8) / 2) as usize)
    } else {
        None
    }
}

/// A node of `role` and `id` at 127.0.0.1 (port 1000 + id) run by process
/// `incarnation`, for tests.
#[cfg(test)]
pub(crate) fn test_node(role: Role, id: i32, incarnation: u64) -> Node {
    Node {
        role,
        id,
        hostname: "127.0.0.1".into(),
        port: 1000 + id as u16,
        is_recovery: false,
        incarnation,
        cert: 0,
    }
}

/// The role of a node id (not a group id).
pub fn id_role(id: i32) -> Option<Role> {
    match id {
        SCHEDULER => Some(Role::Scheduler),
        i if i >= 8 && i % 2 == 0 => Some(Role::Server),
        i if i >= 9 => Some(Role::Worker),
        _ => None,
    }
}

/// The node ids that `id` stands for: a group (1..=7) expands to its members, a node
/// id stands for itself.
pub fn group_members(id: i32, num_servers: usize, num_workers: usize) -> Vec<i32> {
    if !(1..=7).contains(&id) {
        return vec![id];
    }
    let mut out = Vec::new();
    if id & SCHEDULER != 0 {
        out.push(SCHEDULER);
    }
    if id & SERVER_GROUP != 0 {
        out.extend((0..num_servers).map(server_rank_to_id));
    }
    if id & WORKER_GROUP != 0 {
        out.extend((0..num_workers).map(worker_rank_to_id));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_follow_ps_lite() {
        assert_eq!(server_rank_to_id(0), 8);
        assert_eq!(server_rank_to_id(3), 14);
        assert_eq!(worker_rank_to_id(0), 9);
        assert_eq!(worker_rank_to_id(2), 13);
        assert_eq!(id_to_rank(13), Some(2));
        assert_eq!(id_to_rank(14), Some(3));
        assert_eq!(id_role(1), Some(Role::Scheduler));
        assert_eq!(id_role(10), Some(Role::Server));
        assert_eq!(id_role(11), Some(Role::Worker));
        assert_eq!(id_role(3), None);
    }

    #[test]
    fn groups_expand_to_members() {
        assert_eq!(group_members(SERVER_GROUP, 2, 3), vec![8, 10]);
        assert_eq!(group_members(WORKER_GROUP, 2, 3), vec![9, 11, 13]);
        assert_eq!(group_members(ALL_GROUP, 1, 1), vec![1, 8, 9]);
        assert_eq!(group_members(SCHEDULER + WORKER_GROUP, 1, 2), vec![1, 9, 11]);
        assert_eq!(group_members(11, 1, 2), vec![11]);
    }
}
