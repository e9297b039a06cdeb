//! `psrs._psrs.Tables`: a worker's connection to the parameter tables of one model
//! (`ps_apps::tables`), for `psrs.torch`. It holds the model's flattened dense values
//! (a float32 array shared with the torch parameters): pulls write into it, and a
//! server replaced with nothing to restore is declared again from it. Every wait runs
//! without the GIL; arrays go to the wire without a copy where they are contiguous.

use crate::arrays::{keys as key_array, sarray};
use crate::errors::cluster_err;
use crate::node::postoffice;
use crate::table_spec::{self, table_spec};
use numpy::{PyArray1, PyArray2, PyArrayDyn, PyArrayMethods, PyUntypedArrayMethods};
use parking_lot::Mutex;
use ps_apps::tables::client::{ClientError, StepOutcome, TableClient};
use ps_apps::tables::hot_cache::HotCache;
use ps_apps::tables::keys::KeySpace;
use ps_apps::tables::pack::RowGrads;
use ps_apps::tables::reader::RowReader;
use ps_apps::tables::spec::{ModelSpec, ParamSpec};
use ps_core::kv::{KVWorker, SArray};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyDict;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

/// The dense values' memory, written by pulls while the GIL is released. The array
/// is kept alive by `Tables`; the Python thread that called is blocked meanwhile.
#[derive(Clone, Copy)]
struct Values {
    ptr: usize,
    len: usize,
}

impl Values {
    /// # Safety
    /// The array must be alive and not accessed by anyone else during the borrow.
    unsafe fn slice<'a>(self) -> &'a mut [f32] {
        std::slice::from_raw_parts_mut(self.ptr as *mut f32, self.len)
    }
}

/// How many times a request is retried after declaring the model again to servers
/// replaced with nothing to restore.
const REDECLARE_TRIES: usize = 3;

/// The client and the dense values' array it writes.
struct Inner {
    client: TableClient,
    values: Values,
    /// The array `values` points into, kept alive as long as this.
    _array: Py<PyAny>,
}

impl Inner {
    /// Runs `op` (a lookup: idempotent); a server that holds no model (replaced,
    /// nothing to restore) gets the model again from this worker's current dense
    /// values, and `op` is retried.
    fn with_redeclare<T>(
        &mut self,
        mut op: impl FnMut(&mut TableClient, &mut [f32]) -> Result<T, ClientError>,
    ) -> Result<T, ClientError> {
        let mut tries = 0;
        loop {
            // Safety: `values` is alive (held by `Tables`) and its caller is blocked
            let vals = unsafe { self.values.slice() };
            match op(&mut self.client, vals) {
                Err(ClientError::Undeclared(servers)) if tries < REDECLARE_TRIES => {
                    log::warn!("servers {servers:?} hold no model: declaring it again from this worker's values");
                    tries += 1;
                    self.client.redeclare(&servers, vals)?;
                }
                other => return other,
            }
        }
    }
}

fn to_py(e: ClientError) -> PyErr {
    match e {
        ClientError::Refused(why) => PyValueError::new_err(why),
        other => cluster_err(other.to_string()),
    }
}

/// `obj` as a C-contiguous, writeable float32 array (the dense values).
fn values_array<'py>(obj: &Bound<'py, PyAny>, len: u64) -> PyResult<Bound<'py, PyArrayDyn<f32>>> {
    let a = obj
        .cast::<PyArrayDyn<f32>>()
        .map_err(|_| PyValueError::new_err("values: a float32 numpy array is needed"))?;
    let writeable: bool = a.getattr("flags")?.getattr("writeable")?.extract()?;
    if !a.is_c_contiguous() || !writeable {
        return Err(PyValueError::new_err("values: must be C-contiguous and writeable"));
    }
    if a.len() as u64 != len {
        return Err(PyValueError::new_err(format!(
            "values: {} values for a model of {len}",
            a.len()
        )));
    }
    Ok(a.clone())
}

/// A lookup's answer: the rows' keys (sorted), where each id's row is, the rows.
type Lookup<'py> = (
    Bound<'py, PyArray1<u64>>,
    Bound<'py, PyArray1<i64>>,
    Bound<'py, PyArray2<f32>>,
);

/// What a step run in the background ends with: its outcome and the dense values it
/// pulled (installed into the values array when it is waited for).
type StepDone = (Result<StepOutcome, ClientError>, Vec<f32>);

/// A worker's connection to the parameter tables of one model.
#[pyclass(frozen, module = "psrs._psrs")]
pub struct Tables {
    inner: Arc<Mutex<Inner>>,
    dims: Vec<usize>,
    fp16: Vec<bool>,
    /// Looks rows up beside a step in flight.
    reader: RowReader,
    /// The key layout (read without the client, which a step in flight holds).
    space: KeySpace,
    /// A step in flight (`step(..., wait=False)`).
    in_flight: Mutex<Option<JoinHandle<StepDone>>>,
    /// The buffer the last step in flight pulled into, kept for the next one (a
    /// fresh one per step cost an allocation and its pages every step).
    staging: Mutex<Vec<f32>>,
    /// A signal's exception raised while a call waited without the GIL.
    signal: Arc<Mutex<Option<PyErr>>>,
    /// Per table: its cache of hot rows, if one was set (`set_hot_cache`). Never held
    /// while rows are pulled.
    caches: Vec<Mutex<Option<HotCache>>>,
}

impl Tables {
    /// Runs `op` on the client without the GIL (the Python signal handlers run every
    /// 50 ms meanwhile: Ctrl-C abandons the wait and raises KeyboardInterrupt).
    fn call<T: Send>(
        &self,
        py: Python<'_>,
        op: impl FnOnce(&mut Inner) -> Result<T, ClientError> + Send,
    ) -> PyResult<T> {
        let inner = &self.inner;
        let out = py.detach(move || op(&mut inner.lock()));
        if let Some(e) = self.signal.lock().take() {
            return Err(e);
        }
        out.map_err(to_py)
    }

    fn dim(&self, table: usize) -> PyResult<usize> {
        self.dims
            .get(table)
            .copied()
            .ok_or_else(|| PyValueError::new_err(format!("no embedding table {table}")))
    }

    /// Waits for the step in flight, if any (without the GIL), and installs the dense
    /// values it pulled; its per-server acceptance (None if no step was in flight).
    fn finish_in_flight(&self, py: Python<'_>) -> PyResult<Option<Vec<bool>>> {
        let Some(handle) = self.in_flight.lock().take() else {
            return Ok(None);
        };
        let (out, staged) = py
            .detach(move || handle.join())
            .map_err(|_| cluster_err("the step running in the background panicked".to_string()))?;
        let outcome = out.map_err(to_py)?;
        let g = self.inner.lock();
        // Safety: the array is alive (held by `g`) and its caller (this thread) holds it
        unsafe { g.values.slice() }.copy_from_slice(&staged);
        *self.staging.lock() = staged;
        Ok(Some(outcome.accepted))
    }

    /// The rows `keys` (sorted, unique) of table `table` from the servers, in key
    /// order; a replaced server holding no model gets it declared again (after the
    /// step in flight) and is asked again.
    fn fetch(&self, py: Python<'_>, table: usize, keys: SArray<u64>) -> PyResult<Vec<f32>> {
        let mut out = vec![0.0f32; keys.len() * self.dim(table)?];
        let k2 = keys.clone();
        let reader = &self.reader;
        match py.detach(|| reader.lookup(table, k2, &mut out)) {
            Ok(()) => {}
            Err(ClientError::Undeclared(_)) => {
                self.finish_in_flight(py)?;
                self.call(py, |g| g.with_redeclare(|c, _| c.lookup(table, keys.clone(), &mut out)))?;
            }
            Err(e) => return Err(to_py(e)),
        }
        Ok(out)
    }

    /// A step was pushed: every hot-row cache's rows age by one step.
    fn advance_caches(&self) {
        for c in &self.caches {
            if let Some(c) = c.lock().as_mut() {
                c.advance();
            }
        }
    }

    /// Runs `f` on table `table`'s hot-row cache (None without one).
    fn with_cache<T>(&self, table: usize, f: impl FnOnce(&mut HotCache) -> T) -> Option<T> {
        self.caches.get(table)?.lock().as_mut().map(f)
    }

    /// Plans a lookup of `keys` served `ahead` steps from now (`HotCache::plan`): the
    /// indices of the keys to pull and the current step (None without a cache).
    fn plan(&self, table: usize, keys: &[u64], ahead: u64) -> Option<(Vec<usize>, u64)> {
        self.with_cache(table, |c| (c.plan(keys, ahead), c.now()))
    }

    /// Completes a cached lookup of `keys` whose rows `pulled` were pulled (`rows`)
    /// during step `pulled_at`: the rows of every key, in key order (those the cache
    /// can no longer serve pulled now).
    fn complete(
        &self,
        py: Python<'_>,
        table: usize,
        keys: &[u64],
        (pulled, pulled_at): (Vec<usize>, u64),
        rows: Vec<f32>,
    ) -> PyResult<Vec<f32>> {
        let mut out = vec![0.0f32; keys.len() * self.dim(table)?];
        let missing = self
            .with_cache(table, |c| c.complete(keys, &pulled, &rows, pulled_at, &mut out))
            .ok_or_else(|| PyValueError::new_err(format!("table {table} has no hot-row cache")))?;
        if !missing.is_empty() {
            let late = self.fetch(py, table, subset(keys, &missing))?;
            self.with_cache(table, |c| c.deliver(keys, &missing, &late, &mut out));
        }
        Ok(out)
    }

    /// `(keys, order)` of the unique ids `ids` of table `table`, as the client keys them.
    fn keys_of(&self, table: usize, ids: &Bound<'_, PyAny>) -> PyResult<(SArray<u64>, Vec<u32>)> {
        let ids = crate::arrays::contiguous::<i64>(ids, "ids")?;
        let ids: Vec<u64> = ids
            .readonly()
            .as_slice()
            .map_err(|e| PyValueError::new_err(e.to_string()))?
            .iter()
            .map(|&i| i as u64)
            .collect();
        let (keys, order) = self.space.sorted_row_keys(table, &ids);
        Ok((keys.into(), order.into_iter().map(|o| o as u32).collect()))
    }
}

fn lookup_answer<'py>(
    py: Python<'py>,
    keys: &[u64],
    order: Vec<u32>,
    rows: Vec<f32>,
    dim: usize,
) -> PyResult<Lookup<'py>> {
    let n = keys.len();
    let keys = PyArray1::from_slice(py, keys);
    let order = PyArray1::from_vec(py, order.into_iter().map(i64::from).collect());
    let rows = PyArray1::from_vec(py, rows).reshape([n, dim])?;
    Ok((keys, order, rows))
}

/// The keys `keys[i]` for each `i` in `which`.
fn subset(keys: &[u64], which: &[usize]) -> SArray<u64> {
    which.iter().map(|&i| keys[i]).collect::<Vec<_>>().into()
}

/// The thread of a started lookup: the rows' values in key order, or the client's error.
type LookupThread = JoinHandle<Result<Vec<f32>, ClientError>>;

/// A table's stored rows as `Tables.dump` returns them: uint64 ids and float32 rows.
type RowArrays<'py> = (Bound<'py, PyArray1<u64>>, Bound<'py, PyArray2<f32>>);

/// A lookup of rows started by `Tables.lookup_start` (a prefetch), running on a
/// thread of its own; `Tables.lookup_finish` waits for it.
#[pyclass(frozen, module = "psrs._psrs")]
pub struct PendingLookup {
    table: usize,
    keys: SArray<u64>,
    /// With a hot-row cache: the indices of the keys being pulled (the others are
    /// served from the cache) and the step they are pulled in.
    plan: Mutex<Option<(Vec<usize>, u64)>>,
    order: Mutex<Vec<u32>>,
    handle: Mutex<Option<LookupThread>>,
}

#[pymethods]
impl Tables {
    #[new]
    #[pyo3(signature = (values, params, optimizer, mode = "sync", staleness = 4, sync_timeout_ms = 10_000,
                        tables = Vec::new(), timeout = 120.0, app_id = 0))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        values: &Bound<'_, PyAny>,
        params: Vec<(String, Vec<u64>)>,
        optimizer: &Bound<'_, PyDict>,
        mode: &str,
        staleness: u64,
        sync_timeout_ms: u64,
        tables: Vec<Bound<'_, PyDict>>,
        timeout: f64,
        app_id: i32,
    ) -> PyResult<Tables> {
        let specs = tables
            .iter()
            .enumerate()
            .map(|(i, t)| table_spec(i, t))
            .collect::<PyResult<Vec<_>>>()?;
        let spec = ModelSpec {
            mode: table_spec::mode(mode, staleness, sync_timeout_ms)?,
            params: params
                .into_iter()
                .map(|(name, shape)| ParamSpec { name, shape })
                .collect(),
            dense_optimizer: table_spec::optimizer(optimizer)?,
            tables: specs,
        };
        spec.validate().map_err(|e| PyValueError::new_err(e.to_string()))?;
        if !(timeout.is_finite() && timeout > 0.0) {
            return Err(PyValueError::new_err(format!("timeout={timeout}: must be above 0")));
        }
        let arr = values_array(values, spec.dense_len())?;
        let vals = Values {
            ptr: arr.data() as usize,
            len: arr.len(),
        };
        let n_tables = spec.tables.len();
        let dims = spec.tables.iter().map(|t| t.dim as usize).collect();
        let fp16 = spec.tables.iter().map(|t| t.fp16_wire).collect();
        let kv = KVWorker::<f32>::new(&postoffice()?, app_id).map_err(cluster_err)?;
        let mut client = TableClient::new(kv, spec, Duration::from_secs_f64(timeout))
            .map_err(|e| PyValueError::new_err(e.to_string()))?;
        let signal: Arc<Mutex<Option<PyErr>>> = Arc::default();
        let sig = Arc::clone(&signal);
        // Python runs signal handlers on the thread that made this only: a step in
        // flight on its own thread does not take the GIL to look
        let caller = std::thread::current().id();
        client.set_interrupt(Box::new(move || {
            if std::thread::current().id() != caller {
                return false;
            }
            Python::attach(|py| match py.check_signals() {
                Ok(()) => false,
                Err(e) => {
                    *sig.lock() = Some(e);
                    true
                }
            })
        }));
        let inner = Arc::new(Mutex::new(Inner {
            client,
            values: vals,
            _array: arr.into_any().unbind(),
        }));
        let (reader, space) = {
            let g = inner.lock();
            (g.client.reader(), g.client.space().clone())
        };
        let weak: std::sync::Weak<Mutex<dyn crate::idle::Idle>> = Arc::downgrade(&inner) as _;
        crate::idle::register(weak);
        Ok(Tables {
            inner,
            dims,
            fp16,
            reader,
            space,
            in_flight: Mutex::new(None),
            staging: Mutex::new(Vec::new()),
            signal,
            caches: no_caches(n_tables),
        })
    }

    /// Declares the model to every server with the current dense values (worker 0's
    /// initial values, which every worker then starts from). A server holding the same
    /// model keeps its values; ValueError if it holds another model.
    fn declare(&self, py: Python<'_>) -> PyResult<()> {
        self.call(py, |g| {
            // Safety: the array is alive (held by `g`) and its caller is blocked
            let vals = unsafe { g.values.slice() };
            g.client.declare(vals)
        })
    }

    /// Waits (at most `patience` seconds) until the model is declared, and checks that
    /// this worker's model is the declared one (ValueError naming the difference).
    #[pyo3(signature = (patience = 120.0))]
    fn join(&self, py: Python<'_>, patience: f64) -> PyResult<()> {
        let patience = Duration::from_secs_f64(patience.max(0.0));
        self.call(py, |g| g.client.join(patience))
    }

    /// Pulls the servers' current dense values into the values array (after the step
    /// in flight, if any).
    fn pull(&self, py: Python<'_>) -> PyResult<()> {
        self.finish_in_flight(py)?;
        self.call(py, |g| {
            // Safety: the array is alive (held by `g`) and its caller is blocked
            let vals = unsafe { g.values.slice() };
            g.client.pull_dense(vals)
        })
    }

    /// Looks up the rows `ids` (unique int64 row ids) of table `table`: returns
    /// `(keys, order, rows)`: the rows' keys (sorted), where each id's row is
    /// (`rows[order[i]]` is row `ids[i]`), and the rows (float32, one per key). Runs
    /// beside a step in flight. With a hot-row cache (`set_hot_cache`) the rows it
    /// holds fresh are served from it unless `cached` is False (every row pulled, and
    /// the cache left as it was).
    #[pyo3(signature = (table, ids, cached = true))]
    fn lookup<'py>(
        &self,
        py: Python<'py>,
        table: usize,
        ids: &Bound<'py, PyAny>,
        cached: bool,
    ) -> PyResult<Lookup<'py>> {
        let dim = self.dim(table)?;
        let (keys, order) = self.keys_of(table, ids)?;
        let plan = if cached { self.plan(table, &keys, 0) } else { None };
        let out = match plan {
            Some((pull, now)) => {
                let rows = if pull.is_empty() {
                    Vec::new()
                } else {
                    self.fetch(py, table, subset(&keys, &pull))?
                };
                self.complete(py, table, &keys, (pull, now), rows)?
            }
            None => self.fetch(py, table, keys.clone())?,
        };
        lookup_answer(py, &keys, order, out, dim)
    }

    /// Starts looking up the rows `ids` of table `table` on a thread of its own (a
    /// prefetch): `lookup_finish` waits for its answer, as `lookup` gives it. With a
    /// hot-row cache, only the rows it will not hold fresh at the next step are
    /// pulled (the others are served from it when the lookup is finished).
    fn lookup_start(&self, table: usize, ids: &Bound<'_, PyAny>) -> PyResult<PendingLookup> {
        let dim = self.dim(table)?;
        let (keys, order) = self.keys_of(table, ids)?;
        let plan = self.plan(table, &keys, 1);
        let k2 = match &plan {
            Some((pull, _)) => subset(&keys, pull),
            None => keys.clone(),
        };
        let reader = self.reader.clone();
        let handle = std::thread::Builder::new()
            .name("psrs-prefetch".into())
            .spawn(move || -> Result<Vec<f32>, ClientError> {
                let mut out = vec![0.0f32; k2.len() * dim];
                if !k2.is_empty() {
                    reader.lookup(table, k2, &mut out)?;
                }
                Ok(out)
            })
            .map_err(|e| cluster_err(format!("no thread for a prefetch: {e}")))?;
        Ok(PendingLookup {
            table,
            keys,
            plan: Mutex::new(plan),
            order: Mutex::new(order),
            handle: Mutex::new(Some(handle)),
        })
    }

    /// Waits for a lookup from `lookup_start` (once); its answer as `lookup` gives it.
    /// A lookup that failed (a server replaced meanwhile) is done again here.
    fn lookup_finish<'py>(
        &self,
        py: Python<'py>,
        pending: &PendingLookup,
        ids: &Bound<'py, PyAny>,
    ) -> PyResult<Lookup<'py>> {
        let handle = pending
            .handle
            .lock()
            .take()
            .ok_or_else(|| PyValueError::new_err("this prefetch was taken already"))?;
        let got = py.detach(move || handle.join());
        match got {
            Ok(Ok(rows)) => {
                let order = std::mem::take(&mut *pending.order.lock());
                let rows = match pending.plan.lock().take() {
                    Some(plan) => self.complete(py, pending.table, &pending.keys, plan, rows)?,
                    None => rows,
                };
                lookup_answer(py, &pending.keys, order, rows, self.dim(pending.table)?)
            }
            _ => self.lookup(py, pending.table, ids, true),
        }
    }

    /// Every row of table `table` the servers store: `(ids, rows)` (uint64 ids in no
    /// order, float32 rows of the table's width), for an export. After the step in
    /// flight; run it when no worker trains.
    fn dump<'py>(&self, py: Python<'py>, table: usize) -> PyResult<RowArrays<'py>> {
        let dim = self.dim(table)?;
        self.finish_in_flight(py)?;
        let reader = &self.reader;
        let (ids, rows) = py.detach(|| reader.dump(table)).map_err(to_py)?;
        let n = ids.len();
        Ok((
            PyArray1::from_vec(py, ids),
            PyArray1::from_vec(py, rows).reshape([n, dim])?,
        ))
    }

    /// One training step: pushes `dense_grad` (float32, every dense value's gradient)
    /// and the rows' gradients (`rows`: `(table, keys, grads)` from earlier lookups,
    /// grads of shape (len(keys), dim)) to the servers `send` names (all if None),
    /// then pulls the new dense values into the values array (under sync once the
    /// version pushed to is applied). Returns per server whether it took the gradients
    /// (False: computed on a version it left; the new values are pulled anyway).
    ///
    /// With `wait=False` the push and the pull run on a thread of their own and this
    /// returns at once: the gradients are copied first, and the pulled values are
    /// installed by the next call that waits for it (the next step, `pull`,
    /// `synchronize`), whose acceptance this returns (all True if none was in flight).
    #[pyo3(signature = (dense_grad, rows = Vec::new(), send = None, wait = true))]
    fn step(
        &self,
        py: Python<'_>,
        dense_grad: &Bound<'_, PyAny>,
        rows: Vec<(usize, Bound<'_, PyAny>, Bound<'_, PyAny>)>,
        send: Option<Vec<bool>>,
        wait: bool,
    ) -> PyResult<Vec<bool>> {
        let mut dense = sarray::<f32>(dense_grad, "dense_grad")?;
        let mut parts = Vec::with_capacity(rows.len());
        for (table, keys, grads) in &rows {
            let dim = self.dim(*table)?;
            parts.push((key_array(keys)?, sarray::<f32>(grads, "grads")?, dim, self.fp16[*table]));
        }
        let send = send.unwrap_or_default();
        if wait {
            self.finish_in_flight(py)?;
            let out = self.call(py, move |g| {
                let rows = row_grads(&parts);
                // Safety: the array is alive (held by `g`) and its caller is blocked
                let vals = unsafe { g.values.slice() };
                g.client.step(dense, &rows, &send, vals)
            })?;
            self.advance_caches();
            return Ok(out.accepted);
        }
        let before = self.finish_in_flight(py)?;
        // the caller reuses the gradient buffer while this step is in flight
        dense = SArray::copy_from(&dense);
        let (kvs, staged) = {
            // no step in flight any more: the client is free
            let g = self.inner.lock();
            let rows = row_grads(&parts);
            let kvs = g.client.step_request(dense, &rows).map_err(to_py)?;
            let mut staged = std::mem::take(&mut *self.staging.lock());
            // Safety: the array is alive (held by `g`) and its caller (this thread) holds it
            let vals = unsafe { g.values.slice() };
            staged.clear();
            staged.extend_from_slice(vals);
            (kvs, staged)
        };
        let inner = Arc::clone(&self.inner);
        let handle = std::thread::Builder::new()
            .name("psrs-step".into())
            .spawn(move || {
                let mut staged = staged;
                let out = inner.lock().client.send_step(kvs, &send, &mut staged);
                (out, staged)
            })
            .map_err(|e| cluster_err(format!("no thread for a step: {e}")))?;
        *self.in_flight.lock() = Some(handle);
        self.advance_caches();
        Ok(before.unwrap_or_else(|| vec![true; self.space.num_servers()]))
    }

    /// Gives table `table` a cache of its `rows` most looked-up rows on this worker,
    /// each served for `staleness` steps after the step it was pulled in
    /// (`ps_apps::tables::hot_cache` has the rules; 0 rows or staleness 0 serve
    /// nothing from it). Once per table, before its lookups.
    fn set_hot_cache(&self, table: usize, rows: usize, staleness: u64) -> PyResult<()> {
        let dim = self.dim(table)?;
        let mut c = self.caches[table].lock();
        if c.is_some() {
            return Err(PyValueError::new_err(format!(
                "table {table} has a hot-row cache already"
            )));
        }
        *c = Some(HotCache::new(rows, staleness, dim));
        Ok(())
    }

    /// Table `table`'s hot-row cache: `(hits, pulls, rows, evictions)` (rows served
    /// from it, rows pulled through it, rows it holds, rows replaced by hotter
    /// ones), or None without one.
    fn hot_cache_stats(&self, table: usize) -> PyResult<Option<(u64, u64, u64, u64)>> {
        self.dim(table)?;
        Ok(self.with_cache(table, |c| {
            let s = c.stats();
            (s.hits, s.pulls, s.rows, s.evictions)
        }))
    }

    /// Waits for the step in flight (`step(..., wait=False)`) and installs the dense
    /// values it pulled; its per-server acceptance, or None if none was in flight.
    fn synchronize(&self, py: Python<'_>) -> PyResult<Option<Vec<bool>>> {
        self.finish_in_flight(py)
    }

    /// Tells the servers this worker holds no task: sync versions stop waiting for its
    /// gradients until its next step. After the step in flight.
    fn idle(&self, py: Python<'_>) -> PyResult<()> {
        self.finish_in_flight(py)?;
        self.call(py, |g| g.client.idle())
    }

    /// Per server: the version of the dense values last pulled (by the step in flight,
    /// if any, once it pulled).
    #[getter]
    fn versions(&self, py: Python<'_>) -> Vec<u64> {
        // without the GIL: a step in flight holds the client and may wait for the GIL
        py.detach(|| self.inner.lock().client.versions().to_vec())
    }
}

/// One empty cache slot per table.
fn no_caches(n: usize) -> Vec<Mutex<Option<HotCache>>> {
    (0..n).map(|_| Mutex::new(None)).collect()
}

impl crate::idle::Idle for Inner {
    fn idle(&mut self) {
        if let Err(e) = self.client.idle() {
            log::warn!("idle notice not sent: {e}");
        }
    }
}

/// A step's row gradients as the table client takes them: per table its keys, its
/// gradients, values per row and whether rows travel as float16.
fn row_grads(parts: &[(SArray<u64>, SArray<f32>, usize, bool)]) -> Vec<RowGrads<'_>> {
    parts
        .iter()
        .map(|(k, grads, dim, fp16)| RowGrads {
            keys: k,
            grads,
            dim: *dim,
            fp16: *fp16,
        })
        .collect()
}
