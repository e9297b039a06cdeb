//! Python exceptions: `psrs.Error` for cluster failures; `ValueError` for bad input
//! (unsorted keys, values that do not fit the keys). The messages are the Rust API's.

use ps_core::kv::KvError;
use pyo3::exceptions::PyValueError;
use pyo3::PyErr;

pyo3::create_exception!(
    _psrs,
    Error,
    pyo3::exceptions::PyException,
    "A cluster failure: a node not reachable, a server refusing a request, no reply in time."
);

/// `psrs.Error` with `msg` (a text, or an error's one line).
pub fn cluster_err(msg: impl std::fmt::Display) -> PyErr {
    Error::new_err(msg.to_string())
}

/// The Python exception for a KV error: input errors become `ValueError`.
pub fn kv_err(e: KvError) -> PyErr {
    match e {
        KvError::Unsorted(_) | KvError::BadLength(_) => PyValueError::new_err(e.to_string()),
        other => Error::new_err(other.to_string()),
    }
}
