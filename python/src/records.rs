//! Examples as numpy arrays: a task's records (`Task.records()`) and a whole RecordIO
//! file (`psrs.read_records(path)`, e.g. a held-out set to evaluate on).

use crate::errors::cluster_err;
use numpy::{PyArray1, PyArrayMethods};
use ps_apps::recordio::{self, Example, Features};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use std::path::PathBuf;

/// `(features, labels)` of `ex`: dense features as a float32 array of shape (n, dim),
/// else a CSR triple (indptr int64, indices uint32, values float32); labels float32.
pub fn to_numpy<'py>(py: Python<'py>, ex: &[Example]) -> PyResult<(Py<PyAny>, Bound<'py, PyArray1<f32>>)> {
    let labels: Vec<f32> = ex.iter().map(|e| e.label).collect();
    let labels = PyArray1::from_vec(py, labels);
    let dense = ex.iter().all(|e| matches!(e.features, Features::Dense(_)));
    if dense {
        let dim = ex.first().map_or(0, Example::dim);
        let mut flat = Vec::with_capacity(dim * ex.len());
        for (i, e) in ex.iter().enumerate() {
            if let Features::Dense(v) = &e.features {
                if v.len() != dim {
                    return Err(PyValueError::new_err(format!(
                        "record {i} has {} features, record 0 has {dim}",
                        v.len()
                    )));
                }
                flat.extend_from_slice(v);
            }
        }
        let feats = PyArray1::from_vec(py, flat).reshape([ex.len(), dim])?;
        return Ok((feats.into_any().unbind(), labels));
    }
    let (mut indptr, mut idx, mut val) = (vec![0i64], Vec::new(), Vec::new());
    for e in ex {
        match &e.features {
            Features::Sparse { idx: i, val: v } => {
                idx.extend_from_slice(i);
                val.extend_from_slice(v);
            }
            Features::Dense(v) => {
                for (i, &x) in v.iter().enumerate().filter(|(_, &x)| x != 0.0) {
                    idx.push(i as u32);
                    val.push(x);
                }
            }
        }
        indptr.push(idx.len() as i64);
    }
    let csr = (
        PyArray1::from_vec(py, indptr),
        PyArray1::from_vec(py, idx),
        PyArray1::from_vec(py, val),
    );
    Ok((csr.into_pyobject(py)?.into_any().unbind(), labels))
}

/// Decodes `records` (an error names `what` and the record).
pub fn decode(records: &[Vec<u8>], what: &str) -> Result<Vec<Example>, String> {
    records
        .iter()
        .enumerate()
        .map(|(i, r)| Example::decode(r).map_err(|e| format!("{what}: record {i}: {e}")))
        .collect()
}

/// Every example of the RecordIO file `path` (a path, or an `s3://` or `http(s)://` URL)
/// as `(features, labels)` (the layout of
/// `Task.records()`). Needs no cluster. `psrs.Error` for an unreadable or corrupt file.
#[pyfunction]
pub fn read_records(py: Python<'_>, path: PathBuf) -> PyResult<(Py<PyAny>, Bound<'_, PyArray1<f32>>)> {
    let shown = path.display().to_string();
    let ex = py
        .detach(|| {
            let recs = recordio::read_all(&path).map_err(|e| format!("{shown}: {e}"))?;
            decode(&recs, &shown)
        })
        .map_err(cluster_err)?;
    to_numpy(py, &ex)
}
