//! Live statistics of a running job, served by the scheduler over HTTP: JSON
//! (`/stats.json`), Prometheus text (`/metrics`) and a dashboard page (`/`).

mod access;
mod cluster;
mod dashboard;
mod error;
pub mod https;
mod node_view;
mod prometheus;
mod server;
mod snapshot;

pub use access::{bind_addr, Access, HttpSecurity};
pub use cluster::{node_stats, nodes, traffic};
pub use error::StatsError;
pub use node_view::base_snapshot;
pub use prometheus::to_prometheus;
pub use server::{Api, ApiResponse, StatsServer};
pub use snapshot::{NodeStat, QueueStat, SchedulerStat, Snapshot, TrafficStat, TrainStat};
