//! Many jobs on one cluster (seed 002): the job table and its state machine, job
//! specifications (the JSON of `POST /jobs`), the fair-time scheduler (local and
//! global modes), per-job query rates over the last 10 s, and the assignment of workers
//! to jobs. Everything here is pure (time passed in, no sockets or threads); the
//! scheduler's shell that serves it lives beside it.

pub mod assign;
pub mod fairtime;
pub mod rate;
pub mod spec;
pub mod table;

pub use spec::{InferSpec, JobSpec, ModelKind, TrainSpec, UpdateRule};
pub use table::{parse_id, Job, JobNum, JobState, JobTable};
