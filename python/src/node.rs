//! This process as a node of the cluster: `start`, `finalize`, `barrier` and what the
//! scheduler told it (rank, role, cluster size). The configuration comes from the
//! DMLC_* / PS_* variables, read once by `ps_core::Config::from_env`.

use crate::errors::cluster_err;
use crate::interrupt::run_blocking;
use parking_lot::Mutex;
use ps_core::node::ALL_GROUP;
use ps_core::{Config, Postoffice};
use pyo3::prelude::*;
use std::io::Write;
use std::sync::Arc;

enum State {
    Idle,
    Started(Arc<Postoffice>),
    Finalized,
}

static NODE: Mutex<State> = Mutex::new(State::Idle);

/// The started postoffice, or `psrs.Error` if `start()` was not called (or the node
/// finalized).
pub fn postoffice() -> PyResult<Arc<Postoffice>> {
    match &*NODE.lock() {
        State::Started(po) => Ok(Arc::clone(po)),
        State::Idle => Err(cluster_err("psrs.start() has not been called")),
        State::Finalized => Err(cluster_err("this node has finalized")),
    }
}

fn init_logging(role: &str, level: log::LevelFilter) {
    let role = role.to_string();
    let mut b = env_logger::Builder::new();
    b.filter_level(level);
    if let Ok(spec) = std::env::var("RUST_LOG") {
        b.parse_filters(&spec);
    }
    b.format(move |buf, rec| {
        writeln!(
            buf,
            "[{} {} py {:>5} {}] {}",
            buf.timestamp_millis(),
            role,
            rec.level(),
            rec.target(),
            rec.args()
        )
    });
    let _ = b.try_init();
}

/// Joins the cluster as the role DMLC_ROLE names: registers with the scheduler, waits
/// for the node table and for every node to start. Once per process.
#[pyfunction]
pub fn start(py: Python<'_>) -> PyResult<()> {
    {
        let st = NODE.lock();
        match &*st {
            State::Idle => {}
            State::Started(_) => return Err(cluster_err("psrs.start() was already called")),
            State::Finalized => return Err(cluster_err("a node starts once per process")),
        }
    }
    let cfg = Config::from_env().map_err(|e| cluster_err(e.to_string()))?;
    init_logging(&cfg.role.to_string(), cfg.log_level());
    let po = Postoffice::new(cfg).map_err(cluster_err)?;
    po.on_evicted(|reason| {
        // the scheduler gave this node's work to others: it may not go on
        let code = ps_core::postoffice::EXIT_EVICTED;
        log::error!("stopping this process (exit status {code}): {reason}");
        std::process::exit(code);
    });
    let po2 = Arc::clone(&po);
    run_blocking(py, "psrs-start", move || po2.start(true))?.map_err(cluster_err)?;
    *NODE.lock() = State::Started(po);
    Ok(())
}

/// Leaves the cluster: waits until every live node finalizes, then stops.
#[pyfunction]
pub fn finalize(py: Python<'_>) -> PyResult<()> {
    let po = postoffice()?;
    let po2 = Arc::clone(&po);
    run_blocking(py, "psrs-finalize", move || po2.finalize(true))?;
    *NODE.lock() = State::Finalized;
    Ok(())
}

/// Waits until every live node of `group` reached this barrier.
#[pyfunction]
#[pyo3(signature = (group = ALL_GROUP))]
pub fn barrier(py: Python<'_>, group: i32) -> PyResult<()> {
    if !(1..=ALL_GROUP).contains(&group) {
        return Err(pyo3::exceptions::PyValueError::new_err(format!(
            "group {group}: must be a sum of SCHEDULER (1), SERVER_GROUP (2), WORKER_GROUP (4)"
        )));
    }
    let po = postoffice()?;
    run_blocking(py, "psrs-barrier", move || po.barrier(group))
}

/// This node's rank within its role (0-based).
#[pyfunction]
pub fn rank() -> PyResult<usize> {
    Ok(postoffice()?.my_rank())
}

/// This node's id (scheduler 1, server rank r: 8 + 2r, worker rank r: 9 + 2r).
#[pyfunction]
pub fn node_id() -> PyResult<i32> {
    Ok(postoffice()?.my_id())
}

/// "scheduler", "server" or "worker".
#[pyfunction]
pub fn role() -> PyResult<String> {
    Ok(postoffice()?.role().to_string())
}

/// Number of workers in the cluster.
#[pyfunction]
pub fn num_workers() -> PyResult<usize> {
    Ok(postoffice()?.num_workers())
}

/// Number of servers in the cluster.
#[pyfunction]
pub fn num_servers() -> PyResult<usize> {
    Ok(postoffice()?.num_servers())
}

/// Whether this node took over the id of a dead node.
#[pyfunction]
pub fn is_recovery() -> PyResult<bool> {
    Ok(postoffice()?.is_recovery())
}

/// The key range `(begin, end)` (end exclusive; the last one includes `2**64 - 1`) of
/// each server rank, in rank order: what each server owns.
#[pyfunction]
#[pyo3(signature = (num_servers = None))]
pub fn server_key_ranges(num_servers: Option<usize>) -> PyResult<Vec<(u64, u64)>> {
    let n = match num_servers {
        Some(n) => n,
        None => postoffice()?.num_servers(),
    };
    Ok(ps_core::kv::server_key_ranges(n)
        .iter()
        .map(|r| (r.begin, r.end))
        .collect())
}
