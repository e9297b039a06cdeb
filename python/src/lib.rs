//! The native module `psrs._psrs` of the Python package `psrs`: this process as a node
//! of a psrs cluster (joined from the DMLC_* variables), KV workers and servers over
//! numpy arrays, the master's tasks, and the parameter tables of `psrs.torch`. psrs/__init__.py re-exports it with the
//! `tasks()` generator; psrs/_psrs.pyi has the signatures and docs.

mod arrays;
mod bench;
mod errors;
mod idle;
mod interrupt;
mod master;
mod node;
mod records;
mod replies;
mod serve;
mod server;
mod table_spec;
mod tables;
mod tasks;
mod worker;

use pyo3::prelude::*;

#[pymodule]
fn _psrs(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("Error", m.py().get_type::<errors::Error>())?;
    m.add("SCHEDULER", ps_core::node::SCHEDULER)?;
    m.add("SERVER_GROUP", ps_core::node::SERVER_GROUP)?;
    m.add("WORKER_GROUP", ps_core::node::WORKER_GROUP)?;
    m.add("ALL_GROUP", ps_core::node::ALL_GROUP)?;
    m.add_function(wrap_pyfunction!(node::start, m)?)?;
    m.add_function(wrap_pyfunction!(node::finalize, m)?)?;
    m.add_function(wrap_pyfunction!(node::barrier, m)?)?;
    m.add_function(wrap_pyfunction!(node::rank, m)?)?;
    m.add_function(wrap_pyfunction!(node::node_id, m)?)?;
    m.add_function(wrap_pyfunction!(node::role, m)?)?;
    m.add_function(wrap_pyfunction!(node::num_workers, m)?)?;
    m.add_function(wrap_pyfunction!(node::num_servers, m)?)?;
    m.add_function(wrap_pyfunction!(node::is_recovery, m)?)?;
    m.add_function(wrap_pyfunction!(node::server_key_ranges, m)?)?;
    m.add_function(wrap_pyfunction!(records::read_records, m)?)?;
    m.add_function(wrap_pyfunction!(serve::serve, m)?)?;
    m.add_function(wrap_pyfunction!(arrays::_conversions, m)?)?;
    m.add_class::<worker::KVWorker>()?;
    m.add_class::<server::KVServer>()?;
    m.add_class::<server::ReqMeta>()?;
    m.add_class::<tasks::Task>()?;
    m.add_class::<tasks::TaskClient>()?;
    m.add_class::<master::Master>()?;
    m.add_class::<bench::RustBench>()?;
    m.add_class::<tables::Tables>()?;
    m.add_class::<tables::PendingLookup>()?;
    Ok(())
}
