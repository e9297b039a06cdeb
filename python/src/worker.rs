//! `psrs.KVWorker`: push and pull numpy arrays by sorted uint64 keys. Calls return a
//! timestamp at once; `wait` / `pull_result` block (without the GIL, interruptibly).

use crate::arrays::{self, Elem};
use crate::errors::{cluster_err, kv_err};
use crate::interrupt::{wait_for, SLICE};
use crate::node::postoffice;
use crate::replies::Pulled;
use numpy::{PyArray1, PyArrayDyn, PyArrayMethods, PyUntypedArrayMethods};
use parking_lot::Mutex;
use ps_core::kv::{KVPairs, KVWorker as RsWorker, ServerReply};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use std::collections::HashMap;

/// A request in flight or answered.
enum Pending<V: Elem> {
    Push,
    Pull {
        nkeys: usize,
        out: Option<Py<PyArrayDyn<V>>>,
    },
    /// A pull answered by `wait` (no `out`): kept for `pull_result`.
    Ready(Py<PyAny>, Option<Py<PyAny>>),
}

/// The typed worker behind the Python class.
struct Typed<V: Elem> {
    kv: RsWorker<V>,
    pending: Mutex<HashMap<i32, Pending<V>>>,
}

/// What the Python class calls, whatever the value type.
trait Backend: Send + Sync {
    fn push(
        &self,
        keys: &Bound<'_, PyAny>,
        vals: &Bound<'_, PyAny>,
        lens: Option<&Bound<'_, PyAny>>,
        cmd: i32,
        pull_into: Option<Option<&Bound<'_, PyAny>>>,
    ) -> PyResult<i32>;
    fn pull(&self, keys: &Bound<'_, PyAny>, out: Option<&Bound<'_, PyAny>>, cmd: i32) -> PyResult<i32>;
    /// Waits for `ts`; for a pull returns its values, and its lengths when `want_lens`
    /// or when the values are not in an `out` (a later `pull_result` may ask for them).
    fn wait(&self, py: Python<'_>, ts: i32, want_lens: bool) -> PyResult<Option<Answer>>;
    /// Keeps a pull's answer for a later `pull_result`.
    fn stash(&self, ts: i32, a: Answer);
}

/// A pull's values (in `out` if one was given) and per-key lengths.
struct Answer {
    vals: Py<PyAny>,
    lens: Option<Py<PyAny>>,
    /// The values went into the caller's `out`.
    into_out: bool,
}

fn out_array<V: Elem>(out: Option<&Bound<'_, PyAny>>) -> PyResult<Option<Py<PyArrayDyn<V>>>> {
    let Some(o) = out.filter(|o| !o.is_none()) else {
        return Ok(None);
    };
    // a torch tensor: its memory, as a numpy array
    let tensor = arrays::torch_as_numpy(o, "out")?;
    let o = tensor.as_ref().unwrap_or(o);
    let a = o
        .cast::<PyArrayDyn<V>>()
        .map_err(|_| PyValueError::new_err(format!("out: a numpy array of dtype {} is needed", V::NAME)))?;
    let writeable: bool = a.getattr("flags")?.getattr("writeable")?.extract()?;
    if !a.is_c_contiguous() || !writeable {
        return Err(PyValueError::new_err("out: must be C-contiguous and writeable"));
    }
    Ok(Some(a.clone().unbind()))
}

impl<V: Elem> Typed<V> {
    fn take_replies(&self, py: Python<'_>, ts: i32) -> PyResult<Vec<ServerReply<V>>> {
        let kv = &self.kv;
        wait_for(py, || kv.try_wait(ts, SLICE))?.map_err(kv_err)
    }
}

impl<V: Elem> Backend for Typed<V> {
    fn push(
        &self,
        keys: &Bound<'_, PyAny>,
        vals: &Bound<'_, PyAny>,
        lens: Option<&Bound<'_, PyAny>>,
        cmd: i32,
        pull_into: Option<Option<&Bound<'_, PyAny>>>,
    ) -> PyResult<i32> {
        let kvs = KVPairs {
            keys: arrays::keys(keys)?,
            vals: arrays::sarray::<V>(vals, "vals")?,
            lens: arrays::lens(lens)?,
        };
        let nkeys = kvs.keys.len();
        // sending can block (a full queue): not with the GIL
        let py = keys.py();
        let (ts, p) = match pull_into {
            None => (py.detach(|| self.kv.zpush(kvs, cmd)).map_err(kv_err)?, Pending::Push),
            Some(out) => {
                let out = out_array::<V>(out)?;
                let ts = py.detach(|| self.kv.push_pull(kvs, cmd)).map_err(kv_err)?;
                (ts, Pending::Pull { nkeys, out })
            }
        };
        self.pending.lock().insert(ts, p);
        Ok(ts)
    }

    fn pull(&self, keys: &Bound<'_, PyAny>, out: Option<&Bound<'_, PyAny>>, cmd: i32) -> PyResult<i32> {
        let out = out_array::<V>(out)?;
        let keys_py = keys.py();
        let keys = arrays::keys(keys)?;
        let nkeys = keys.len();
        let ts = keys_py.detach(|| self.kv.zpull(keys, cmd)).map_err(kv_err)?;
        self.pending.lock().insert(ts, Pending::Pull { nkeys, out });
        Ok(ts)
    }

    fn stash(&self, ts: i32, a: Answer) {
        self.pending.lock().insert(ts, Pending::Ready(a.vals, a.lens));
    }

    fn wait(&self, py: Python<'_>, ts: i32, want_lens: bool) -> PyResult<Option<Answer>> {
        let p = self
            .pending
            .lock()
            .remove(&ts)
            .ok_or_else(|| cluster_err(format!("unknown request {ts} (never sent, or already waited for)")))?;
        let replies = match &p {
            Pending::Ready(v, l) => {
                return Ok(Some(Answer {
                    vals: v.clone_ref(py),
                    lens: l.as_ref().map(|l| l.clone_ref(py)),
                    into_out: false,
                }))
            }
            _ => match self.take_replies(py, ts) {
                Ok(r) => r,
                Err(e) => {
                    if e.is_instance_of::<pyo3::exceptions::PyKeyboardInterrupt>(py) {
                        // still in flight: it can be waited for again
                        self.pending.lock().insert(ts, p);
                    }
                    return Err(e);
                }
            },
        };
        let (nkeys, out) = match p {
            Pending::Push => return Ok(None),
            Pending::Pull { nkeys, out } => (nkeys, out),
            Pending::Ready(..) => unreachable!("answered above"),
        };
        let pulled = Pulled::new(replies, nkeys).map_err(kv_err)?;
        let into_out = out.is_some();
        // the lengths only when they can be asked for (a 1M-key pull into `out`
        // would build a 4 MB array for nothing)
        let lens = (want_lens || !into_out).then(|| PyArray1::from_vec(py, pulled.lens()).into_any().unbind());
        let vals = match out {
            Some(out) => {
                let o = out.bind(py);
                let mut rw = o
                    .try_readwrite()
                    .map_err(|e| PyValueError::new_err(format!("out: {e}")))?;
                let dst = rw
                    .as_slice_mut()
                    .map_err(|e| PyValueError::new_err(format!("out: {e}")))?;
                if dst.len() != pulled.num_vals() {
                    return Err(PyValueError::new_err(format!(
                        "out holds {} values but the pull returned {}",
                        dst.len(),
                        pulled.num_vals()
                    )));
                }
                pulled.copy_into(dst);
                out.into_any()
            }
            None => {
                let mut v = Vec::with_capacity(pulled.num_vals());
                pulled.extend_into(&mut v);
                PyArray1::from_vec(py, v).into_any().unbind()
            }
        };
        Ok(Some(Answer { vals, lens, into_out }))
    }
}

/// A KV worker of app `app_id`: pushes and pulls values of one dtype (float32 or
/// float64) by sorted, unique uint64 keys; servers own contiguous key ranges.
#[pyclass(frozen, module = "psrs._psrs")]
pub struct KVWorker {
    inner: Box<dyn Backend>,
    dtype: String,
}

impl KVWorker {
    fn typed<V: Elem>(app_id: i32) -> PyResult<Box<dyn Backend>> {
        let kv = RsWorker::<V>::new(&postoffice()?, app_id).map_err(cluster_err)?;
        Ok(Box::new(Typed {
            kv,
            pending: Mutex::new(HashMap::new()),
        }))
    }

    fn ready(&self, py: Python<'_>, ts: i32, want_lens: bool) -> PyResult<Answer> {
        self.inner
            .wait(py, ts, want_lens)?
            .ok_or_else(|| cluster_err(format!("request {ts} is a push: it has no pulled values")))
    }
}

#[pymethods]
impl KVWorker {
    #[new]
    #[pyo3(signature = (app_id = 0, dtype = None))]
    fn new(py: Python<'_>, app_id: i32, dtype: Option<&Bound<'_, PyAny>>) -> PyResult<KVWorker> {
        let dtype = match dtype {
            Some(d) => arrays::dtype_name(py, d)?,
            None => "float32".to_string(),
        };
        let inner = match dtype.as_str() {
            "float64" => KVWorker::typed::<f64>(app_id)?,
            _ => KVWorker::typed::<f32>(app_id)?,
        };
        Ok(KVWorker { inner, dtype })
    }

    /// The value dtype's name.
    #[getter]
    fn dtype(&self) -> &str {
        &self.dtype
    }

    /// Sends `vals` of the sorted uint64 `keys` to the servers (`lens[i]` values for key
    /// i, else `len(vals) // len(keys)` each); returns the request's timestamp at once.
    /// A C-contiguous array of the worker's dtype is sent without a copy: leave it
    /// unchanged until `wait(ts)` returned. ValueError for unsorted keys or values that
    /// do not fit them.
    #[pyo3(signature = (keys, vals, lens = None, cmd = 0))]
    fn push(
        &self,
        keys: &Bound<'_, PyAny>,
        vals: &Bound<'_, PyAny>,
        lens: Option<&Bound<'_, PyAny>>,
        cmd: i32,
    ) -> PyResult<i32> {
        self.inner.push(keys, vals, lens, cmd, None)
    }

    /// Asks for the values of the sorted uint64 `keys`; returns the timestamp at once.
    /// With `out` (C-contiguous, writeable, of the worker's dtype) `wait(ts)` fills it in
    /// place; else `pull_result(ts)` returns the values.
    #[pyo3(signature = (keys, out = None, cmd = 0))]
    fn pull(&self, keys: &Bound<'_, PyAny>, out: Option<&Bound<'_, PyAny>>, cmd: i32) -> PyResult<i32> {
        self.inner.pull(keys, out, cmd)
    }

    /// Pushes `vals` of `keys` and pulls their values after the push, in one round trip
    /// (`out` as for `pull`); returns the timestamp at once.
    #[pyo3(signature = (keys, vals, lens = None, out = None, cmd = 0))]
    fn push_pull(
        &self,
        keys: &Bound<'_, PyAny>,
        vals: &Bound<'_, PyAny>,
        lens: Option<&Bound<'_, PyAny>>,
        out: Option<&Bound<'_, PyAny>>,
        cmd: i32,
    ) -> PyResult<i32> {
        self.inner.push(keys, vals, lens, cmd, Some(out))
    }

    /// Waits until request `ts` completed, without the GIL (a pull with `out`: the
    /// values are in it; without: `pull_result(ts)` returns them). Ctrl-C raises
    /// KeyboardInterrupt and leaves the request pending. psrs.Error if a server refused
    /// it or a pull came back short.
    fn wait(&self, py: Python<'_>, ts: i32) -> PyResult<()> {
        if let Some(a) = self.inner.wait(py, ts, false)? {
            if !a.into_out {
                // a pull without `out`: keep its values for pull_result
                self.inner.stash(ts, a);
            }
        }
        Ok(())
    }

    /// Waits for pull `ts` and returns its values in key order as a 1-d array (the
    /// `out` array if one was given); with `with_lens`, `(values, lens)`.
    #[pyo3(signature = (ts, with_lens = false))]
    fn pull_result(&self, py: Python<'_>, ts: i32, with_lens: bool) -> PyResult<Py<PyAny>> {
        let Answer { vals, lens, .. } = self.ready(py, ts, with_lens)?;
        if with_lens {
            let lens = lens.ok_or_else(|| cluster_err(format!("request {ts}: no lengths kept")))?;
            Ok((vals, lens).into_pyobject(py)?.into_any().unbind())
        } else {
            Ok(vals)
        }
    }
}
