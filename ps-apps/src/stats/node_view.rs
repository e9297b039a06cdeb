//! The parts of a [`Snapshot`] every scheduler fills the same way from its postoffice:
//! the nodes and their heartbeats (none when heartbeats are off), the van's traffic, and which scheduler candidate is
//! active under which term.

use super::cluster::{node_stats, traffic};
use super::snapshot::{SchedulerStat, Snapshot};
use ps_core::Postoffice;

/// A snapshot with `uptime_s`, `job`, the nodes, the traffic and the scheduler filled
/// in from `po` (a scheduler's postoffice); queues and training figures are left empty.
pub fn base_snapshot(po: &Postoffice, uptime_s: f64, job: String) -> Snapshot {
    let van = po.van();
    let (heartbeats, nodes) = node_stats(po);
    let (epoch, active) = van.scheduler_epoch();
    let candidates = po.config().schedulers.len().max(1);
    Snapshot {
        uptime_s,
        job,
        heartbeats,
        nodes,
        scheduler: SchedulerStat {
            candidate: epoch.candidate,
            addr: van.scheduler_addr(epoch.candidate as usize),
            // a lone scheduler (no standbys) is active under term 1 from the start
            term: if candidates > 1 { epoch.term } else { epoch.term.max(1) },
            active: active || candidates == 1,
            candidates,
        },
        traffic: traffic(po),
        ..Default::default()
    }
}
