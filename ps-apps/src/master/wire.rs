//! The master's request and response types, as they travel between workers and the
//! master (the network shell serializes them; [`super::Master::handle`] answers them).

use super::queues::{Attempt, Task};
use serde::{Deserialize, Serialize};

/// What a worker tells about the task it finished (for statistics).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TaskReport {
    /// Examples trained on.
    pub examples: u64,
    /// Sum of their losses.
    pub loss_sum: f64,
    /// Correct predictions among them (before the update).
    pub correct: u64,
    /// Model version the worker last saw.
    pub version: u64,
}

/// A request to the master.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum MasterRequest {
    /// The dataset's RecordIO files; only the first report counts.
    ReportDataset {
        /// File paths.
        paths: Vec<String>,
    },
    /// Report the finished task (if any) and get the next.
    GetTask {
        /// The task just finished.
        finished: Option<u64>,
        /// Its statistics.
        report: Option<TaskReport>,
    },
    /// The task could not be trained.
    TaskFailed {
        /// The task.
        task: u64,
    },
    /// The task's data could not be read or does not fit the model (`error` names the
    /// file and chunk): a failure like [`MasterRequest::TaskFailed`], with its reason.
    TaskUnreadable {
        /// The task.
        task: u64,
        /// What was wrong, e.g. `train.rio: chunk 3: CRC mismatch: the chunk is corrupt`.
        error: String,
    },
    /// The task's attempt was trained: counted once per pass whatever the failovers
    /// (see [`super::TaskQueues::finish_attempt`]); answered [`MasterResponse::Counted`].
    Finish {
        /// The task.
        task: u64,
        /// The attempt trained (as handed out with the task).
        attempt: Attempt,
        /// Its statistics.
        report: Option<TaskReport>,
    },
    /// The queues' sizes.
    Snapshot,
    /// The worker leaves the job (an elastic worker's goodbye, e.g. on SIGTERM): its
    /// finished task (if any) counts, any task it still holds goes back to todo, and
    /// it is handed nothing more.
    Leaving {
        /// The task just finished.
        finished: Option<u64>,
        /// Its statistics.
        report: Option<TaskReport>,
    },
}

/// The queues at a glance.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct QueueSnapshot {
    /// Waiting.
    pub todo: usize,
    /// Handed out.
    pub pending: usize,
    /// Finished this pass.
    pub done: usize,
    /// Given up this pass.
    pub failed: usize,
    /// Current pass.
    pub epoch: u64,
    /// Passes in all.
    pub num_epochs: u64,
    /// Moving average task time.
    pub avg_task_ms: f64,
    /// Tasks finished over the job.
    pub total_done: u64,
    /// Tasks in one pass.
    pub tasks_per_epoch: usize,
    /// Every pass is complete.
    pub finished: bool,
    /// Tasks given up on over the job.
    pub given_up: usize,
    /// Records of those tasks (not trained on in their pass).
    pub skipped_records: u64,
}

/// The master's reply.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum MasterResponse {
    /// Done.
    Ok,
    /// Train on this task.
    Task(Task),
    /// Ask again shortly.
    Wait,
    /// The job is complete.
    NoMoreTasks,
    /// The queues.
    Snapshot(QueueSnapshot),
    /// Whether a [`MasterRequest::Finish`] counts the task from that attempt.
    Counted(bool),
    /// The request failed; nothing changed.
    Error(String),
}
