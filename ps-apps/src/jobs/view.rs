//! Jobs and workers as the HTTP API and the dashboard show them (JSON).

use super::figures::JobFigures;
use super::spec::JobSpec;
use super::table::{Job, JobState};
use serde::{Deserialize, Serialize};

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
}
