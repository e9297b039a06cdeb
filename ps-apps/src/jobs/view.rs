//! Jobs and workers as the HTTP API and the dashboard show them (JSON).

use super::figures::JobFigures;
use super::spec::JobSpec;
use super::table::{Job, JobState};
use crate::pyrunner::ModelState;
use serde::{Deserialize, Serialize};

/// A job's model on one worker's Python runner (jobs whose model a runner runs).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ModelView {
    /// The worker's node id.
    pub worker: i32,
    /// `loading`, `ready` or `failed`.
    pub state: ModelState,
    /// When it became ready (ms since the Unix epoch, the scheduler's clock).
    pub ready_ms: Option<u64>,
    /// How long its load took, seconds.
    pub load_s: f64,
    /// CPU time its load took, seconds.
    pub cpu_s: f64,
    /// Its memory: its tensors' bytes (or the runner's growth during the load when it
    /// holds no tensor).
    pub bytes: u64,
    /// The runner's growth in resident memory during the load, bytes.
    pub rss_growth: i64,
    /// Why the load failed.
    pub error: Option<String>,
}

/// A job as `GET /jobs/ID` answers it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct JobView {
    /// Its id (`j1`, `j2`, ...).
    pub id: String,
    /// `train` or `infer`.
    pub kind: String,
    /// `queued`, `running`, `done`, `failed` or `cancelled`.
    pub state: JobState,
    /// Workers allocated to it now.
    pub workers: usize,
    /// Fraction of its tasks done (0..1).
    pub progress: f64,
    /// Final test accuracy (training) or accuracy over the labelled records
    /// (inference); null until known.
    pub accuracy: Option<f64>,
    /// Mean training loss of the latest pass (training jobs; null otherwise).
    pub loss: Option<f64>,
    /// Why it failed (one line), else null.
    pub error: Option<String>,
    /// While it runs: the last failure of one of its queries or of loading its model
    /// (one line; the query is retried), else null.
    pub last_error: Option<String>,
    /// The model's name.
    pub model: String,
    /// Submission time, ms since the Unix epoch.
    pub submitted_ms: u64,
    /// When it started running.
    pub started_ms: Option<u64>,
    /// When it ended.
    pub ended_ms: Option<u64>,
    /// Tasks (queries) done and in all, passes, query rate, per-pass loss and accuracy.
    #[serde(flatten)]
    pub figures: JobFigures,
    /// While it runs: seconds per query as fair time counts them (each worker's
    /// hand-out to report, smoothed per worker and averaged over the workers); null
    /// before its first query or once it ended.
    #[serde(default)]
    pub smoothed_seconds_per_query: Option<f64>,
    /// While it runs: the real-valued share of the workers fair time would give it
    /// (the split follows it over time with whole workers).
    #[serde(default)]
    pub ideal_workers: Option<f64>,
    /// When a worker first had its model ready (jobs whose model a Python runner runs).
    #[serde(default)]
    pub model_ready_ms: Option<u64>,
    /// Its model on each live worker's runner: loading, ready (since when) or failed.
    #[serde(default)]
    pub models: Vec<ModelView>,
    /// What was submitted.
    pub spec: JobSpec,
}

impl JobView {
    /// The view of `job` with the scheduler's live figures.
    pub fn new(job: &Job, workers: usize, progress: f64, figures: JobFigures) -> JobView {
        JobView {
            id: job.id(),
            kind: job.spec.kind().to_string(),
            state: job.state,
            workers,
            progress,
            accuracy: job.accuracy,
            loss: figures.last_loss(),
            error: job.error.clone(),
            last_error: None,
            model: job.model_name(),
            submitted_ms: job.submitted_ms,
            started_ms: job.started_ms,
            ended_ms: job.ended_ms,
            figures,
            smoothed_seconds_per_query: None,
            ideal_workers: None,
            model_ready_ms: None,
            models: Vec::new(),
            spec: job.spec.clone(),
        }
    }
}

/// A worker as the dashboard shows it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct WorkerView {
    /// Its node id.
    pub id: i32,
    /// The job it works on (null: idle).
    pub job: Option<String>,
    /// The task it holds, e.g. `j2 task 14`.
    pub task: Option<String>,
    /// The jobs whose models its Python runner has ready.
    #[serde(default)]
    pub ready: Vec<String>,
    /// The jobs whose models its Python runner is loading.
    #[serde(default)]
    pub loading: Vec<String>,
}
