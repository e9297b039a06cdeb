//! `psrs.Master`: the master on the scheduler node, serving tasks of the RecordIO
//! dataset the workers report (the coordinator `psrs train` runs, with its timeouts,
//! retries, dead-worker requeueing and optional statistics endpoint).

use crate::errors::cluster_err;
use crate::node::postoffice;
use parking_lot::Mutex;
use ps_apps::master::{FileStore, Master as RsMaster, MasterConfig, MemStore, Store};
use ps_apps::train::coordinator::Coordinator;
use ps_core::Role;
use pyo3::prelude::*;
use std::path::PathBuf;

/// Starts the master on this (scheduler) node: its state in `work_dir/master.state`
/// (a restarted scheduler resumes it) or in memory, statistics on `stats_addr`.
pub fn coordinator(
    py: Python<'_>,
    cfg: MasterConfig,
    work_dir: Option<PathBuf>,
    stats_addr: Option<String>,
    job: &str,
) -> PyResult<Coordinator> {
    let po = postoffice()?;
    if po.role() != Role::Scheduler {
        return Err(cluster_err("the master runs on the scheduler node"));
    }
    cfg.validate()
        .map_err(|e| pyo3::exceptions::PyValueError::new_err(e.to_string()))?;
    let store: Box<dyn Store> = match &work_dir {
        Some(d) => {
            std::fs::create_dir_all(d).map_err(|e| cluster_err(format!("{}: {e}", d.display())))?;
            Box::new(FileStore::new(d.join("master.state")))
        }
        None => Box::new(MemStore::default()),
    };
    let job = job.to_string();
    py.detach(move || {
        let m = RsMaster::new(cfg, store, 0).map_err(|e| e.to_string())?;
        Coordinator::start(&po, m, stats_addr.as_deref(), job).map_err(|e| e.to_string())
    })
    .map_err(cluster_err)
}

/// The master, served on this (scheduler) node until `close()` or the node finalizes.
#[pyclass(frozen, module = "psrs._psrs")]
pub struct Master {
    inner: Mutex<Option<Coordinator>>,
}

#[pymethods]
impl Master {
    #[new]
    #[pyo3(signature = (epochs = 1, chunks_per_task = 1, task_timeout_ms = 10_000, max_retries = 3,
                        timeout_multiplier = 4.0, work_dir = None, stats_addr = None))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        epochs: u64,
        chunks_per_task: usize,
        task_timeout_ms: u64,
        max_retries: u32,
        timeout_multiplier: f64,
        work_dir: Option<PathBuf>,
        stats_addr: Option<String>,
    ) -> PyResult<Master> {
        let cfg = MasterConfig {
            chunks_per_task,
            num_epochs: epochs,
            timeout_multiplier,
            timeout_floor_ms: task_timeout_ms,
            max_retries,
            planted: Default::default(),
        };
        let c = coordinator(py, cfg, work_dir, stats_addr, "python job")?;
        Ok(Master {
            inner: Mutex::new(Some(c)),
        })
    }

    /// Stops serving tasks.
    fn close(&self, py: Python<'_>) {
        let c = self.inner.lock().take();
        py.detach(move || drop(c));
    }
}
