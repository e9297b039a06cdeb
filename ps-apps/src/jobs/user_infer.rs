//! One query of an inference job whose model runs in the worker's Python runner: a
//! TorchScript model over a RecordIO task's examples (as float32 batches of `batch`
//! rows), or the user's function over a task's records (raw bytes) or files (paths),
//! `batch` inputs per call. The whole query must end by its deadline; a runner still
//! busy then is killed.

use super::error::JobsError;
use super::inputs::{densify, predictions};
use super::spec::InferSpec;
use super::table::JobNum;
use super::wire::Prediction;
use crate::master::Task;
use crate::pyrunner::{Inputs, RunnerSlot, UserModel};
use crate::recordio;
use crate::train::worker::task_examples;
use crate::train::TrainError;
use std::path::Path;
use std::time::{Duration, Instant};

/// The least time a runner gets to start and load a job's model (importing torch or
/// transformers and building a model can take tens of seconds on a busy machine); a
/// longer task timeout applies to loads too.
pub const LOAD_TIMEOUT: Duration = Duration::from_secs(120);

/// What a query gave.
pub enum Output {
    /// A TorchScript model's predictions, one per record.
    Predictions(Vec<Prediction>),
    /// A function's outputs (CSV fields), one per input.
    Rows(Vec<Vec<String>>),
}

/// The time left of `timeout` since `start`; [`JobsError::Timeout`] once none is left.
fn left(start: Instant, timeout: Duration) -> Result<Duration, JobsError> {
    timeout
        .checked_sub(start.elapsed())
        .filter(|d| !d.is_zero())
        .ok_or_else(|| JobsError::Timeout(format!("the query took longer than its timeout ({timeout:.1?})")))
}

/// Runs `task` of job `job` in the runner of `slot` (loading the model first if the
/// runner does not have it ready: it is normally warmed before), within `timeout`. The error is one line:
/// [`JobsError::Runner`] for the runner's failures, [`JobsError::Timeout`] when the
/// query ran out of time, [`JobsError::BadData`] or [`JobsError::Train`] for the
/// task's data.
pub fn run(
    slot: &mut RunnerSlot,
    job: JobNum,
    spec: &InferSpec,
    task: &Task,
    timeout: Duration,
) -> Result<Output, JobsError> {
    let start = Instant::now();
    let model = spec
        .user_model()
        .ok_or_else(|| JobsError::Internal("not a Python runner's model".into()))?;
    slot.load(job, &model, left(start, timeout)?)?;
    match model {
        UserModel::Torch(_) => {
            let examples = task_examples(task)?;
            let mut out = Vec::with_capacity(examples.len());
            for batch in examples.chunks(spec.batch) {
                let (x, width) = densify(batch, spec.dim)?;
                let (logits, classes) = slot.forward(job, &x, batch.len(), width, left(start, timeout)?)?;
                let labels: Vec<f32> = batch.iter().map(|e| e.label).collect();
                out.extend(predictions(&logits, classes, &labels));
            }
            Ok(Output::Predictions(out))
        }
        UserModel::Runner { .. } => {
            let inputs = if spec.reads_directory() {
                Inputs::Paths(task.chunks.iter().map(|c| c.path.clone()).collect())
            } else {
                let mut records = Vec::new();
                for c in &task.chunks {
                    records.extend(recordio::read_chunk(Path::new(&c.path), &c.index).map_err(TrainError::from)?);
                }
                Inputs::Bytes(records)
            };
            let mut rows = Vec::with_capacity(inputs.len());
            for batch in split(inputs, spec.batch) {
                rows.extend(slot.call(job, &batch, left(start, timeout)?)?);
            }
            Ok(Output::Rows(rows))
        }
    }
}

/// `inputs` in batches of at most `n`, in order.
fn split(inputs: Inputs, n: usize) -> Vec<Inputs> {
    match inputs {
        Inputs::Paths(p) => p.chunks(n).map(|c| Inputs::Paths(c.to_vec())).collect(),
        Inputs::Bytes(b) => b.chunks(n).map(|c| Inputs::Bytes(c.to_vec())).collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inputs_split_in_order_and_deadlines_run_out() {
        let b = split(Inputs::Paths((0..5).map(|i| i.to_string()).collect()), 2);
        assert_eq!(b.len(), 3);
        assert_eq!(b[2], Inputs::Paths(vec!["4".into()]));
        let b = split(Inputs::Bytes(vec![vec![1], vec![2]]), 8);
        assert_eq!(b, vec![Inputs::Bytes(vec![vec![1], vec![2]])]);
        let start = Instant::now();
        assert!(left(start, Duration::from_secs(60)).is_ok());
        let late = left(start - Duration::from_secs(2), Duration::from_secs(1)).unwrap_err();
        assert!(matches!(late, JobsError::Timeout(_)));
        assert!(late.to_string().contains("timeout"));
    }
}
