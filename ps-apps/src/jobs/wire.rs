//! What workers and servers say to the cluster's scheduler (over SimpleApp app
//! [`JOBS_APP`], bincode) and what it answers.

use super::spec::{InferSpec, TrainSpec};
use super::table::JobNum;
use crate::master::{Task, TaskReport};
use crate::model::Model;
use crate::pyrunner::ModelStatus;
use serde::{Deserialize, Serialize};

/// The SimpleApp id of the jobs service on the scheduler.
pub const JOBS_APP: i32 = 3;
/// The head of jobs requests.
pub const JOBS_HEAD: i32 = 1;
/// The KV app id of job `num`'s parameters (each training job has its own customer on
/// the servers).
pub fn job_app(num: JobNum) -> i32 {
    100 + num as i32
}

/// One record's prediction in an inference job.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Prediction {
    /// The predicted class.
    pub class: u32,
    /// Its probability.
    pub prob: f32,
    /// The record's label (NaN if it has none).
    pub label: f32,
}

/// A finished query (task) of a job.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Finished {
    /// The job.
    pub job: JobNum,
    /// The task.
    pub task: u64,
    /// Training statistics (examples, loss, correct).
    pub report: TaskReport,
    /// Inference with a psrs or TorchScript model: one prediction per record of the
    /// task, in order.
    pub predictions: Option<Vec<Prediction>>,
    /// Inference with a Python function: each input's output as CSV fields, in order.
    pub rows: Option<Vec<Vec<String>>>,
    /// How long the worker took over it, ms, as the worker measured it (from the
    /// scheduler's answer to the task's end); the scheduler counts it when it does not
    /// know when it handed the task out; 0 if not measured.
    pub took_ms: u64,
}

/// A request to the scheduler.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum JobsRequest {
    /// A worker reports what it finished (if anything) and asks for more.
    Next {
        /// The finished task.
        finished: Option<Finished>,
        /// The models its Python runner holds (loading, ready or failed), by job.
        models: Vec<ModelStatus>,
        /// The version of the list of jobs to warm it last got
        /// ([`JobsResponse::Warm`]); 0 at first.
        catalog: u64,
    },
    /// A worker could not do a task (it goes back to the job's queue, or is given up
    /// after the job's retries).
    Failed {
        /// The job.
        job: JobNum,
        /// The task.
        task: u64,
        /// Why (one line; shown in the job's status).
        error: Option<String>,
    },
    /// A worker's Python runner could not load a job's model.
    LoadFailed {
        /// The job.
        job: JobNum,
        /// Why (one line).
        error: String,
    },
    /// A worker finalized a training job (evaluated and saved the model).
    Finalized {
        /// The job.
        job: JobNum,
        /// Test accuracy, if the job has a test set.
        accuracy: Option<f64>,
        /// Why finalizing failed.
        error: Option<String>,
    },
    /// A server says which jobs' shards it holds and asks which it should hold.
    ServerPoll {
        /// Jobs whose shards it serves now.
        hosting: Vec<JobNum>,
    },
    /// A worker evaluated a training job's model after a pass
    /// ([`JobsResponse::Evaluate`]).
    Evaluated {
        /// The job.
        job: JobNum,
        /// The pass (from 0).
        pass: u64,
        /// Test accuracy (None if the evaluation failed).
        accuracy: Option<f64>,
    },
}

/// A training job's parameters as a server needs them.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ServerJob {
    /// The job.
    pub job: JobNum,
    /// Its model.
    pub model: Model,
    /// Its options.
    pub spec: TrainSpec,
    /// Workers on it now.
    pub workers: usize,
}

/// The scheduler's answer.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum JobsResponse {
    /// Train on this task of a training job.
    Train {
        /// The job.
        job: JobNum,
        /// Its model.
        model: Model,
        /// Its options.
        spec: TrainSpec,
        /// The task.
        task: Task,
    },
    /// Predict every record (or input file) of this task of an inference job.
    Infer {
        /// The job.
        job: JobNum,
        /// Its options (which model, batch size).
        spec: InferSpec,
        /// The task.
        task: Task,
        /// The task times out (is handed to another worker) this many ms after it was
        /// handed out: a runner still on it then is killed.
        timeout_ms: u64,
    },
    /// The worker is assigned to this inference job but its Python runner does not
    /// have the job's model ready: load it (first, if it is not loading yet) and ask
    /// again; a load that fails is reported with [`JobsRequest::LoadFailed`].
    Prepare {
        /// The job.
        job: JobNum,
        /// Its options.
        spec: InferSpec,
    },
    /// Pull the job's model, evaluate it on its test set, save it, and report
    /// [`JobsRequest::Finalized`].
    Finalize {
        /// The job.
        job: JobNum,
        /// Its model.
        model: Model,
        /// Its options.
        spec: TrainSpec,
    },
    /// Pull the job's model, evaluate it on its test set and report
    /// [`JobsRequest::Evaluated`]: pass `pass` of the job is complete.
    Evaluate {
        /// The job.
        job: JobNum,
        /// Its model.
        model: Model,
        /// Its options.
        spec: TrainSpec,
        /// The pass just completed (from 0).
        pass: u64,
    },
    /// The running jobs whose models a Python runner runs (the worker warms them all,
    /// within its memory budget, and drops the models of jobs not listed), and the
    /// list's version; ask again at once.
    Warm {
        /// The list's version, to send back in [`JobsRequest::Next`].
        catalog: u64,
        /// The jobs and their options, oldest first.
        jobs: Vec<(JobNum, InferSpec)>,
    },
    /// Nothing to do now; ask again shortly.
    Wait,
    /// The training jobs whose shards servers should hold now.
    Servers(Vec<ServerJob>),
    /// Done.
    Ok,
    /// The request was refused.
    Error(String),
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::train::coordinator::{decode, encode};

    #[test]
    fn inference_orders_cross_the_wire() {
        let spec = match super::super::JobSpec::from_json(
            r#"{"kind":"infer","runner":"m:f","pythonpath":"/p","data":"/d","out":"o","batch":4}"#,
        )
        .unwrap()
        {
            super::super::JobSpec::Infer(i) => i,
            _ => unreachable!(),
        };
        for msg in [
            JobsResponse::Warm {
                catalog: 17,
                jobs: vec![(3, spec.clone())],
            },
            JobsResponse::Prepare {
                job: 3,
                spec: spec.clone(),
            },
            JobsResponse::Infer {
                job: 3,
                spec,
                task: Task {
                    id: 1,
                    epoch: 0,
                    chunks: vec![],
                },
                timeout_ms: 7,
            },
        ] {
            assert_eq!(decode::<JobsResponse>(&encode(&msg)).unwrap(), msg);
        }
        let req = JobsRequest::Next {
            finished: Some(Finished {
                job: 3,
                task: 1,
                report: TaskReport::default(),
                predictions: None,
                rows: Some(vec![vec!["a".into(), "1".into()]]),
                took_ms: 1500,
            }),
            models: vec![ModelStatus {
                job: 3,
                state: crate::pyrunner::ModelState::Ready,
                error: None,
                bytes: 1 << 20,
                rss_growth: -4096,
                load_s: 2.5,
                cpu_s: 1.25,
                ready_ago_ms: Some(70),
            }],
            catalog: 17,
        };
        assert_eq!(decode::<JobsRequest>(&encode(&req)).unwrap(), req);
    }
}
