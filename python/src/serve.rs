//! `psrs._psrs.serve`: what `psrs.torch.init()` does on the nodes that are not
//! workers. The scheduler serves the master's tasks (as `psrs.Master`), a server the
//! parameter tables (`ps_apps::tables::server::TableServer`), each until every node
//! finalized; a worker returns at once.

use crate::errors::cluster_err;
use crate::master::coordinator;
use crate::node::{finalize, postoffice};
use ps_apps::master::MasterConfig;
use ps_apps::tables::server::{TableServer, TableServerOptions};
use ps_core::Role;
use pyo3::prelude::*;
use pyo3::types::PyDict;
use std::path::PathBuf;

/// KV app of the parameter tables.
pub const TABLES_APP: i32 = 0;

/// Serves this node's role until the job ends: None on a worker (at once); on the
/// scheduler and the servers, once every node finalized, a dict of what it served
/// (servers: their `rank`, and `version` and `stored_rows` per table of their own
/// key range).
#[pyfunction]
#[pyo3(signature = (epochs = 1, chunks_per_task = 1, task_timeout_ms = 10_000, max_retries = 3,
                    work_dir = None, checkpoint_every = 20, stats_addr = None))]
#[allow(clippy::too_many_arguments)]
pub fn serve<'py>(
    py: Python<'py>,
    epochs: u64,
    chunks_per_task: usize,
    task_timeout_ms: u64,
    max_retries: u32,
    work_dir: Option<PathBuf>,
    checkpoint_every: u64,
    stats_addr: Option<String>,
) -> PyResult<Option<Bound<'py, PyDict>>> {
    let po = postoffice()?;
    let out = PyDict::new(py);
    match po.role() {
        Role::Worker => return Ok(None),
        Role::Scheduler => {
            let cfg = MasterConfig {
                chunks_per_task,
                num_epochs: epochs,
                timeout_multiplier: 4.0,
                timeout_floor_ms: task_timeout_ms,
                max_retries,
                planted: Default::default(),
            };
            let c = coordinator(py, cfg, work_dir, stats_addr, "psrs.torch job")?;
            finalize(py)?;
            py.detach(move || drop(c));
        }
        Role::Server => {
            if checkpoint_every == 0 {
                return Err(pyo3::exceptions::PyValueError::new_err(
                    "checkpoint_every must be at least 1",
                ));
            }
            let opts = TableServerOptions {
                checkpoint_dir: work_dir.map(|d| d.join("checkpoints")),
                checkpoint_every,
            };
            if let Some(d) = &opts.checkpoint_dir {
                std::fs::create_dir_all(d).map_err(|e| cluster_err(format!("{}: {e}", d.display())))?;
            }
            let s = py
                .detach(|| TableServer::start(&po, TABLES_APP, opts))
                .map_err(cluster_err)?;
            finalize(py)?;
            let stats = s.stats();
            py.detach(move || drop(s));
            out.set_item("rank", po.my_rank())?;
            out.set_item("version", stats.version)?;
            out.set_item("stored_rows", stats.stored_rows)?;
        }
    }
    Ok(Some(out))
}
