//! The master's tasks from Python: a client that reports the dataset, asks for tasks
//! (reporting the one just finished) or reports one failed, and `Task.records()`
//! reading a task's chunks into numpy arrays. The generator `psrs.tasks()` (Python,
//! psrs/__init__.py) drives it.

use crate::errors::cluster_err;
use crate::interrupt::{run_blocking, wait_for, SLICE};
use crate::node::postoffice;
use crate::records;
use numpy::PyArray1;
use ps_apps::master::{MasterRequest, MasterResponse, Task as RsTask, TaskReport};
use ps_apps::recordio::{self, Example};
use ps_apps::train::master_client::MasterClient;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// One task: some chunks of the dataset, in pass `epoch`.
#[pyclass(module = "psrs._psrs")]
pub struct Task {
    task: RsTask,
    /// Statistics reported with the task when it finishes.
    report: TaskReport,
}

#[pymethods]
impl Task {
    /// The task's id, unique over the job.
    #[getter]
    fn id(&self) -> u64 {
        self.task.id
    }

    /// The pass over the data it belongs to (from 0).
    #[getter]
    fn epoch(&self) -> u64 {
        self.task.epoch
    }

    /// (path, chunk number) of each chunk.
    #[getter]
    fn chunks(&self) -> Vec<(String, usize)> {
        self.task.chunks.iter().map(|c| (c.path.clone(), c.index.idx)).collect()
    }

    /// Statistics for the master's progress lines: examples trained, their loss sum,
    /// correct predictions. Sent when the task is reported finished.
    #[pyo3(signature = (examples, loss_sum = 0.0, correct = 0))]
    fn report(&mut self, examples: u64, loss_sum: f64, correct: u64) {
        self.report = TaskReport {
            examples,
            loss_sum,
            correct,
            version: 0,
        };
    }

    /// The task's examples: `(features, labels)`. Dense features are a float32 array of
    /// shape (n, dim); sparse ones a CSR triple (indptr int64, indices uint32, values
    /// float32). Labels are float32 of shape (n,).
    fn records<'py>(&self, py: Python<'py>) -> PyResult<(Py<PyAny>, Bound<'py, PyArray1<f32>>)> {
        let t = self.task.clone();
        let ex = py.detach(move || read(&t)).map_err(cluster_err)?;
        records::to_numpy(py, &ex)
    }

    fn __repr__(&self) -> String {
        format!(
            "Task(id={}, epoch={}, chunks={})",
            self.task.id,
            self.task.epoch,
            self.task.chunks.len()
        )
    }
}

fn read(t: &RsTask) -> Result<Vec<Example>, String> {
    let mut out = Vec::new();
    for c in &t.chunks {
        let what = format!("{}: chunk {}", c.path, c.index.idx);
        let recs = recordio::read_chunk(Path::new(&c.path), &c.index).map_err(|e| format!("{what}: {e}"))?;
        out.extend(records::decode(&recs, &what)?);
    }
    Ok(out)
}

/// A worker's connection to the master (on the scheduler).
#[pyclass(frozen, module = "psrs._psrs")]
pub struct TaskClient {
    client: Arc<MasterClient>,
    patience: Duration,
}

impl TaskClient {
    fn call(&self, py: Python<'_>, req: MasterRequest) -> PyResult<MasterResponse> {
        let (client, patience) = (Arc::clone(&self.client), self.patience);
        run_blocking(py, "psrs-master-call", move || client.call(&req, patience))?.map_err(cluster_err)
    }
}

#[pymethods]
impl TaskClient {
    /// Connects to the master and reports the dataset (only the first report of the
    /// job counts). `patience`: seconds to keep asking an unreachable master.
    #[new]
    #[pyo3(signature = (train, patience = 120.0))]
    fn new(py: Python<'_>, train: Vec<String>, patience: f64) -> PyResult<TaskClient> {
        if train.is_empty() {
            return Err(PyValueError::new_err("train: at least one RecordIO file is needed"));
        }
        let po = postoffice()?;
        let c = TaskClient {
            client: Arc::new(MasterClient::new(&po).map_err(cluster_err)?),
            patience: Duration::from_secs_f64(patience.max(0.0)),
        };
        match c.call(py, MasterRequest::ReportDataset { paths: train })? {
            MasterResponse::Error(e) => Err(cluster_err(e)),
            _ => Ok(c),
        }
    }

    /// Reports `finished` (if given) done and returns the next task, waiting while the
    /// master has none to hand out yet; None when the job is complete.
    #[pyo3(signature = (finished = None))]
    fn next_task(&self, py: Python<'_>, finished: Option<PyRef<'_, Task>>) -> PyResult<Option<Task>> {
        let (mut fin, mut report) = match finished {
            Some(t) => (Some(t.task.id), Some(t.report.clone())),
            None => (None, None),
        };
        loop {
            let req = MasterRequest::GetTask {
                finished: fin.take(),
                report: report.take(),
            };
            match self.call(py, req)? {
                MasterResponse::Task(task) => {
                    return Ok(Some(Task {
                        task,
                        report: TaskReport::default(),
                    }))
                }
                MasterResponse::NoMoreTasks => {
                    // the job is over for this worker: sync versions must not wait for it
                    py.detach(crate::idle::notify);
                    return Ok(None);
                }
                MasterResponse::Wait => {
                    // nothing to train until the others finish the pass
                    py.detach(crate::idle::notify);
                    pause(py, Duration::from_millis(50))?
                }
                MasterResponse::Error(e) => {
                    log::warn!("master: {e}; asking again");
                    pause(py, Duration::from_millis(200))?;
                }
                other => return Err(cluster_err(format!("unexpected master reply {other:?}"))),
            }
        }
    }

    /// Reports `task` failed: the master hands it out again (up to its retry limit).
    fn fail(&self, py: Python<'_>, task: PyRef<'_, Task>) -> PyResult<()> {
        let id = task.task.id;
        drop(task);
        match self.call(py, MasterRequest::TaskFailed { task: id })? {
            MasterResponse::Error(e) => Err(cluster_err(e)),
            _ => Ok(()),
        }
    }
}

/// Sleeps `d` without the GIL, interruptibly.
fn pause(py: Python<'_>, d: Duration) -> PyResult<()> {
    let until = Instant::now() + d;
    wait_for(py, || {
        let left = until.saturating_duration_since(Instant::now());
        std::thread::sleep(left.min(SLICE));
        (Instant::now() >= until).then_some(())
    })
}
