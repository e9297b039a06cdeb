//! The scheduler's HTTP port: live statistics of a running job (`/stats.json`,
//! Prometheus `/metrics`, a dashboard page at `/`) and, on a jobs cluster, the jobs API;
//! who may call (`access`, `origin`: pure), the server's limits (`limits`: pure), the
//! token kept on disk for clients on this host (`token_file`), and the hyper server
//! (`server`, `respond`).

mod access;
mod cluster;
mod dashboard;
mod error;
mod guard;
mod limits;
mod node_view;
mod origin;
mod prometheus;
mod respond;
mod server;
mod snapshot;
pub mod token_file;

pub use access::{bind_addr, Access, Call, Grant};
pub use cluster::{node_stats, nodes, traffic};
pub use dashboard::MARKUP_SINKS;
pub use error::StatsError;
pub use guard::{HttpOptions, HttpSecurity};
pub use limits::{ConnLimits, ConnTable, HEADER_TIMEOUT, IO_TIMEOUT, MAX_BODY_BYTES, MAX_HEADERS, MAX_HEAD_BYTES};
pub use node_view::base_snapshot;
pub use prometheus::{to_prometheus, to_text_format};
pub use respond::{Api, ApiResponse, Provider};
pub use server::StatsServer;
pub use snapshot::{NodeStat, QueueStat, SchedulerStat, Snapshot, TrafficStat, TrainStat};
pub use token_file::{find_token, RuntimeDir};
