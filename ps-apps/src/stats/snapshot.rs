//! The statistics snapshot: everything the endpoint shows, as plain serde data.

use serde::{Deserialize, Serialize};

/// One node as the scheduler sees it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct NodeStat {
    /// Node id.
    pub id: i32,
    /// `scheduler`, `server` or `worker`.
    pub role: String,
    /// `host:port`.
    pub addr: String,
    /// Milliseconds since its last heartbeat (None: dead, or heartbeats off).
    pub heartbeat_age_ms: Option<u64>,
    /// Declared dead.
    pub dead: bool,
    /// Took over a dead node's id.
    pub recovered: bool,
}

/// The master's task queues: the master's own snapshot of them.
pub use crate::master::QueueSnapshot as QueueStat;

/// Training progress.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TrainStat {
    /// Examples processed so far.
    pub examples: u64,
    /// Examples per second over the last interval.
    pub examples_per_sec: f64,
    /// Most recent mean training loss.
    pub loss: Option<f64>,
    /// (seconds since start, loss) history.
    pub loss_history: Vec<(f64, f64)>,
    /// Last evaluated accuracy, if any.
    pub accuracy: Option<f64>,
    /// Model version (updates applied), as reported by workers.
    pub version: u64,
}

/// Traffic of the scheduler's van.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TrafficStat {
    /// Messages sent.
    pub sent_msgs: u64,
    /// Bytes sent.
    pub sent_bytes: u64,
    /// Messages received.
    pub recv_msgs: u64,
    /// Bytes received.
    pub recv_bytes: u64,
    /// Malformed messages dropped.
    pub malformed: u64,
    /// Messages resent.
    pub resent: u64,
}

/// Which scheduler candidate serves this endpoint, and under which term.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SchedulerStat {
    /// Its index in `PS_SCHEDULERS` (0 without standbys).
    pub candidate: u32,
    /// Its `host:port`.
    pub addr: String,
    /// The term it is active under (bumped by every takeover).
    pub term: u64,
    /// Whether it is the active scheduler (false only while a standby has not taken over).
    pub active: bool,
    /// Scheduler candidates configured (1 without standbys).
    pub candidates: usize,
}

/// Everything the endpoint shows.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Snapshot {
    /// Seconds since the scheduler started.
    pub uptime_s: f64,
    /// The job's name or command.
    pub job: String,
    /// Heartbeats are on (`PS_HEARTBEAT_TIMEOUT` > 0); off, no heartbeat ages exist
    /// and the dashboard shows "off".
    pub heartbeats: bool,
    /// Nodes.
    pub nodes: Vec<NodeStat>,
    /// Task queues (None before the dataset is reported).
    pub queues: Option<QueueStat>,
    /// Training progress.
    pub train: TrainStat,
    /// Traffic.
    pub traffic: TrafficStat,
    /// The scheduler serving this snapshot.
    #[serde(default)]
    pub scheduler: SchedulerStat,
}
