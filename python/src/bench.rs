//! Benchmark aid for python/bench/bench_kv.py: the loops that script times in Python,
//! run by ps-core's Rust `KVWorker` in the same process (same cluster, build and
//! moment), so the two can be compared side by side. Not part of the package's API.

use crate::arrays;
use crate::errors::{cluster_err, kv_err};
use crate::node::postoffice;
use ps_core::kv::{KVPairs, KVWorker as RsWorker, KvError, SArray};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use std::collections::VecDeque;
use std::time::{Duration, Instant};

/// A Rust float32 KV worker of one app, timing push or pull loops.
#[pyclass(frozen, module = "psrs._psrs")]
pub struct RustBench {
    kv: RsWorker<f32>,
}

/// Issues requests with `send` (at most `inflight` outstanding) for `dur`, waiting for
/// each in order with `wait`; the requests completed and the seconds taken.
fn window(
    inflight: usize,
    dur: Duration,
    mut send: impl FnMut() -> Result<i32, KvError>,
    mut wait: impl FnMut(i32) -> Result<(), KvError>,
) -> Result<(u64, f64), KvError> {
    let start = Instant::now();
    let mut q = VecDeque::new();
    let mut ops = 0u64;
    loop {
        if start.elapsed() < dur && q.len() < inflight.max(1) {
            q.push_back(send()?);
            continue;
        }
        let Some(ts) = q.pop_front() else { break };
        wait(ts)?;
        ops += 1;
    }
    Ok((ops, start.elapsed().as_secs_f64()))
}

#[pymethods]
impl RustBench {
    /// A Rust worker of app `app_id` (float32 values). Needs start().
    #[new]
    fn new(app_id: i32) -> PyResult<RustBench> {
        let kv = RsWorker::new(&postoffice()?, app_id).map_err(cluster_err)?;
        Ok(RustBench { kv })
    }

    /// Pushes `vals` of `keys` ("push") or pulls `keys` ("pull"), `inflight` requests
    /// outstanding, for `seconds`, without the GIL; `(requests completed, seconds)`.
    fn run(
        &self,
        py: Python<'_>,
        mode: &str,
        keys: &Bound<'_, PyAny>,
        vals: &Bound<'_, PyAny>,
        inflight: usize,
        seconds: f64,
    ) -> PyResult<(u64, f64)> {
        let kvs = KVPairs {
            keys: arrays::keys(keys)?,
            vals: arrays::sarray::<f32>(vals, "vals")?,
            lens: SArray::empty(),
        };
        let dur = Duration::from_secs_f64(seconds);
        let kv = &self.kv;
        let n = kvs.vals.len();
        py.detach(|| match mode {
            "push" => Ok(window(inflight, dur, || kv.zpush(kvs.clone(), 0), |ts| kv.wait(ts))),
            "pull" => Ok(window(
                inflight,
                dur,
                || kv.zpull(kvs.keys.clone(), 0),
                |ts| match kv.wait_pull(ts)?.vals.len() {
                    got if got == n => Ok(()),
                    got => Err(KvError::BadLength(format!("pulled {got} values, expected {n}"))),
                },
            )),
            other => Err(PyValueError::new_err(format!("mode {other}: push or pull"))),
        })?
        .map_err(kv_err)
    }
}
