//! The cluster part of a snapshot, as the scheduler's postoffice knows it: nodes with
//! their heartbeat ages (or none at all when heartbeats are off) and the van's
//! traffic. Shared by the training coordinator and the jobs cluster.

use super::snapshot::{NodeStat, TrafficStat};
use ps_core::node::{Node, SCHEDULER};
use ps_core::Postoffice;
use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};

/// Whether heartbeats are on (`PS_HEARTBEAT_TIMEOUT` > 0), and every node: the
/// scheduler's heartbeat age is 0, the others' the silence the scheduler measured;
/// with heartbeats off every age is `None` (the dashboard shows "off").
pub fn node_stats(po: &Postoffice) -> (bool, Vec<NodeStat>) {
    let on = !po.config().heartbeat_timeout.is_zero();
    let hb: HashMap<i32, Option<u64>> = po.van().heartbeat_table().into_iter().collect();
    (on, nodes(&po.nodes(), &po.dead_nodes(), &hb, on))
}

/// [`node_stats`] from its parts (pure).
pub fn nodes(table: &[Node], dead: &BTreeSet<i32>, hb: &HashMap<i32, Option<u64>>, on: bool) -> Vec<NodeStat> {
    table
        .iter()
        .map(|n| NodeStat {
            id: n.id,
            role: n.role.to_string(),
            addr: n.addr(),
            heartbeat_age_ms: match (on, n.id == SCHEDULER) {
                (false, _) => None,
                (true, true) => Some(0),
                (true, false) => hb.get(&n.id).copied().flatten(),
            },
            dead: dead.contains(&n.id),
            recovered: n.is_recovery,
        })
        .collect()
}

/// The traffic counters of this node's van.
pub fn traffic(po: &Postoffice) -> TrafficStat {
    let st = &po.van().stats;
    let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
    TrafficStat {
        sent_msgs: get(&st.sent_msgs),
        sent_bytes: get(&st.sent_bytes),
        recv_msgs: get(&st.recv_msgs),
        recv_bytes: get(&st.recv_bytes),
        malformed: get(&st.malformed),
        resent: get(&st.resent),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ps_core::Role;

    #[test]
    fn heartbeat_ages_are_none_when_heartbeats_are_off() {
        let node = |id, role| Node {
            id,
            role,
            hostname: "127.0.0.1".into(),
            port: 9000,
            is_recovery: false,
            incarnation: 0,
            cert: 0,
        };
        let table = [node(1, Role::Scheduler), node(9, Role::Worker)];
        let hb = HashMap::from([(9, Some(300))]);
        let on = nodes(&table, &BTreeSet::new(), &hb, true);
        assert_eq!((on[0].heartbeat_age_ms, on[1].heartbeat_age_ms), (Some(0), Some(300)));
        let off = nodes(&table, &BTreeSet::from([9]), &hb, false);
        assert_eq!((off[0].heartbeat_age_ms, off[1].heartbeat_age_ms), (None, None));
        assert!(off[1].dead);
    }
}
