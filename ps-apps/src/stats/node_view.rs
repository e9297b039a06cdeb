//! The parts of a [`Snapshot`] every scheduler fills the same way from its postoffice:
//! the nodes and their heartbeats, the van's traffic, and which scheduler candidate is
//! active under which term.

use super::snapshot::{NodeStat, SchedulerStat, Snapshot, TrafficStat};
use ps_core::node::SCHEDULER;
use ps_core::Postoffice;
use std::sync::atomic::{AtomicU64, Ordering};

/// A snapshot with `uptime_s`, `job`, the nodes, the traffic and the scheduler filled
/// in from `po` (a scheduler's postoffice); queues and training figures are left empty.
pub fn base_snapshot(po: &Postoffice, uptime_s: f64, job: String) -> Snapshot {
    let van = po.van();
    let dead = po.dead_nodes();
    let hb: std::collections::HashMap<i32, Option<u64>> = van.heartbeat_table().into_iter().collect();
    let nodes = po
        .nodes()
        .iter()
        .map(|n| NodeStat {
            id: n.id,
            role: n.role.to_string(),
            addr: n.addr(),
            heartbeat_age_ms: if n.id == SCHEDULER {
                Some(0)
            } else {
                hb.get(&n.id).copied().flatten()
            },
            dead: dead.contains(&n.id),
            recovered: n.is_recovery,
        })
        .collect();
    let st = &van.stats;
    let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
    let (epoch, active) = van.scheduler_epoch();
    let candidates = po.config().schedulers.len().max(1);
    Snapshot {
        uptime_s,
        job,
        nodes,
        scheduler: SchedulerStat {
            candidate: epoch.candidate,
            addr: van.scheduler_addr(epoch.candidate as usize),
            // a lone scheduler (no standbys) is active under term 1 from the start
            term: if candidates > 1 { epoch.term } else { epoch.term.max(1) },
            active: active || candidates == 1,
            candidates,
        },
        traffic: TrafficStat {
            sent_msgs: get(&st.sent_msgs),
            sent_bytes: get(&st.sent_bytes),
            recv_msgs: get(&st.recv_msgs),
            recv_bytes: get(&st.recv_bytes),
            malformed: get(&st.malformed),
            resent: get(&st.resent),
        },
        ..Default::default()
    }
}
