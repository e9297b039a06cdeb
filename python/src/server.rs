//! `psrs.KVServer`: serves one app's key range with a built-in handle ("sum", "sgd")
//! or a Python callable `handle(meta, keys, vals) -> vals | (vals, lens) | None`.
//! A callable runs on the thread that received the request, holding the GIL.

use crate::arrays::{self, Elem};
use crate::errors::cluster_err;
use crate::node::postoffice;
use numpy::PyArray1;
use parking_lot::Mutex;
use ps_core::kv::handles::{sgd_handle, sum_handle};
use ps_core::kv::{KVMeta, KVPairs, KVResponder, KVServer as RsServer, KvError, ReqHandle};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

/// A request's header as a Python handle sees it.
#[pyclass(frozen, get_all, module = "psrs._psrs")]
pub struct ReqMeta {
    /// Application command sent with the request.
    cmd: i32,
    /// The request carries values to apply.
    push: bool,
    /// The request wants values back.
    pull: bool,
    /// The requesting worker's node id.
    sender: i32,
    /// The request's timestamp (unique per worker).
    timestamp: i32,
    /// Application-defined version sent with the request.
    version: u64,
    /// Values per key (None: every key has the same number).
    lens: Option<Py<PyAny>>,
}

#[pymethods]
impl ReqMeta {
    fn __repr__(&self) -> String {
        format!(
            "ReqMeta(cmd={}, push={}, pull={}, sender={}, timestamp={}, version={})",
            self.cmd, self.push, self.pull, self.sender, self.timestamp, self.version
        )
    }
}

/// Calls `handle`; its answer as key/value pairs for the response.
fn call<V: Elem>(py: Python<'_>, handle: &Py<PyAny>, meta: &KVMeta, req: &KVPairs<V>) -> PyResult<KVPairs<V>> {
    let m = ReqMeta {
        cmd: meta.cmd,
        push: meta.push,
        pull: meta.pull,
        sender: meta.sender,
        timestamp: meta.timestamp,
        version: meta.version,
        lens: (!req.lens.is_empty()).then(|| PyArray1::from_slice(py, &req.lens).into_any().unbind()),
    };
    let keys = PyArray1::from_slice(py, &req.keys);
    let vals = PyArray1::from_slice(py, &req.vals);
    let got = handle.bind(py).call1((m, keys, vals))?;
    if got.is_none() {
        if meta.pull {
            return Err(PyValueError::new_err("the handle returned None for a pull"));
        }
        return Ok(KVPairs::default());
    }
    if !meta.pull {
        return Ok(KVPairs::default());
    }
    let (v, l) = match got.extract::<(Bound<'_, PyAny>, Bound<'_, PyAny>)>() {
        Ok((v, l)) => (v, Some(l)),
        Err(_) => (got, None),
    };
    let out = KVPairs {
        keys: req.keys.clone(),
        vals: arrays::sarray::<V>(&v, "the handle's values")?,
        lens: arrays::lens(l.as_ref())?,
    };
    out.validate_counts()
        .map_err(|e| PyValueError::new_err(format!("the handle's answer: {e}")))?;
    Ok(out)
}

fn py_handle<V: Elem>(handle: Py<PyAny>) -> ReqHandle<V> {
    Box::new(move |meta: &KVMeta, req: KVPairs<V>, resp: &KVResponder| {
        let res = Python::attach(|py| {
            call(py, &handle, meta, &req).map_err(|e| {
                let text = e.to_string();
                e.print(py);
                text
            })
        });
        let sent = match res {
            Ok(kvs) => resp.response(meta, &kvs),
            Err(text) => resp.error(meta, &KvError::Transport(format!("handle raised {text}"))),
        };
        if let Err(e) = sent {
            log::warn!("response to {} not sent: {e}", meta.sender);
        }
    })
}

enum AnyServer {
    F32(RsServer<f32>),
    F64(RsServer<f64>),
}

fn handle_for<V: Elem>(handle: &Bound<'_, PyAny>, lr: f64) -> PyResult<ReqHandle<V>> {
    if handle.is_callable() {
        return Ok(py_handle::<V>(handle.clone().unbind()));
    }
    match handle.extract::<String>()?.as_str() {
        "sum" => Ok(sum_handle::<V>()),
        "sgd" => Ok(sgd_handle::<V>(V::from_f64(lr))),
        other => Err(PyValueError::new_err(format!(
            "handle {other:?}: \"sum\", \"sgd\" or a callable(meta, keys, vals)"
        ))),
    }
}

/// A KV server of app `app_id` holding this server's key range.
#[pyclass(frozen, module = "psrs._psrs")]
pub struct KVServer {
    inner: Mutex<Option<AnyServer>>,
}

#[pymethods]
impl KVServer {
    #[new]
    #[pyo3(signature = (app_id = 0, handle = None, dtype = None, lr = 0.1))]
    fn new(
        py: Python<'_>,
        app_id: i32,
        handle: Option<&Bound<'_, PyAny>>,
        dtype: Option<&Bound<'_, PyAny>>,
        lr: f64,
    ) -> PyResult<KVServer> {
        let po = postoffice()?;
        let sum = pyo3::types::PyString::new(py, "sum").into_any();
        let handle = handle.unwrap_or(&sum);
        let dtype = match dtype {
            Some(d) => arrays::dtype_name(py, d)?,
            None => "float32".into(),
        };
        let s = match dtype.as_str() {
            "float64" => {
                AnyServer::F64(RsServer::new(&po, app_id, handle_for::<f64>(handle, lr)?).map_err(cluster_err)?)
            }
            _ => AnyServer::F32(RsServer::new(&po, app_id, handle_for::<f32>(handle, lr)?).map_err(cluster_err)?),
        };
        Ok(KVServer {
            inner: Mutex::new(Some(s)),
        })
    }

    /// This server's key range `(begin, end)` (end exclusive); None once closed.
    #[getter]
    fn key_range(&self) -> Option<(u64, u64)> {
        let r = match self.inner.lock().as_ref()? {
            AnyServer::F32(s) => s.range(),
            AnyServer::F64(s) => s.range(),
        };
        Some((r.begin, r.end))
    }

    /// Stops serving (requests that arrive later are held by the node until a new
    /// server of this app registers).
    fn close(&self, py: Python<'_>) {
        let s = self.inner.lock().take();
        py.detach(move || drop(s));
    }
}

impl Drop for KVServer {
    fn drop(&mut self) {
        if let Some(s) = self.inner.get_mut().take() {
            // A Python handle may be waiting for the GIL on the receiving thread
            // while holding the customer: unregister without the GIL.
            Python::attach(|py| py.detach(move || drop(s)));
        }
    }
}
