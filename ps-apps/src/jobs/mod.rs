//! Many jobs on one cluster (IDunno's design): the job table and its state machine, job
//! specifications (the JSON of `POST /jobs`), the fair-time scheduler (local and
//! global modes, their real-valued ideals followed over time with whole workers, from
//! the jobs' smoothed seconds per query), per-job query rates over the last 10 s,
//! where each job's model is ready, the assignment of workers to jobs, and the
//! scheduler that ties them together ([`JobScheduler`], driven with injected time). Those are pure or touch only files; the shells — the scheduler's
//! service (SimpleApp + HTTP API), the cluster worker and the cluster server — are
//! thin loops around them.

pub mod api;
pub mod assign;
pub mod cost;
pub mod directory;
mod dispatch;
pub mod error;
pub mod fairtime;
pub mod figures;
pub mod history;
pub mod inputs;
pub mod outputs;
pub mod page;
pub mod paths;
pub mod rate;
pub mod readiness;
pub mod scheduler;
pub mod server;
pub mod service;
pub mod share;
pub mod spec;
pub mod table;
pub mod user_infer;
pub mod view;
pub mod warmup;
pub mod wire;
pub mod worker;

pub use error::JobsError;
pub use scheduler::{FairMode, JobScheduler, SchedulerConfig, StoreFactory};
pub use spec::{InferSpec, JobSpec, ModelKind, TrainSpec, UpdateRule};
pub use table::{parse_id, Job, JobNum, JobState, JobTable};
pub use view::{JobView, WorkerView};

#[cfg(test)]
mod scheduler_tests;
#[cfg(test)]
mod warm_tests;
