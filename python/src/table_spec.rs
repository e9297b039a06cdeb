//! A model's settings as `psrs.torch` gives them to `Tables` (dicts of torch's names and
//! defaults) read into the tables' typed spec: the optimizers, the update rule and each
//! embedding table. A setting that is unknown or out of range is a ValueError naming it.

use ps_apps::tables::optim::Optimizer;
use ps_apps::tables::spec::TableSpec;
use ps_apps::train::versions::{Mode, EVERY_LIVE_WORKER};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyDict;

fn get_f32(d: &Bound<'_, PyDict>, key: &str, default: f32) -> PyResult<f32> {
    match d.get_item(key)? {
        Some(v) if !v.is_none() => v.extract(),
        _ => Ok(default),
    }
}

/// An optimizer from its settings (`name` and torch's names and defaults).
pub fn optimizer(d: &Bound<'_, PyDict>) -> PyResult<Optimizer> {
    const KNOWN: [&str; 8] = [
        "name",
        "lr",
        "momentum",
        "weight_decay",
        "betas",
        "eps",
        "initial_accumulator_value",
        "lr_decay",
    ];
    for k in d.keys() {
        let k: String = k.extract()?;
        if !KNOWN.contains(&k.as_str()) {
            return Err(PyValueError::new_err(format!("optimizer setting {k:?} is not known")));
        }
    }
    let name: String = d
        .get_item("name")?
        .ok_or_else(|| PyValueError::new_err("optimizer: no name"))?
        .extract()?;
    let lr = get_f32(d, "lr", 0.01)?;
    let weight_decay = get_f32(d, "weight_decay", 0.0)?;
    let o = match name.as_str() {
        "sgd" => Optimizer::Sgd {
            lr,
            momentum: get_f32(d, "momentum", 0.0)?,
            weight_decay,
        },
        "adagrad" => Optimizer::Adagrad {
            lr,
            eps: get_f32(d, "eps", 1e-10)?,
            initial_accumulator_value: get_f32(d, "initial_accumulator_value", 0.0)?,
            weight_decay,
        },
        "adam" => {
            let (beta1, beta2) = match d.get_item("betas")? {
                Some(b) if !b.is_none() => b.extract()?,
                _ => (0.9, 0.999),
            };
            Optimizer::Adam {
                lr,
                beta1,
                beta2,
                eps: get_f32(d, "eps", 1e-8)?,
                weight_decay,
            }
        }
        other => {
            return Err(PyValueError::new_err(format!(
                "optimizer {other:?}: \"sgd\", \"adagrad\" or \"adam\""
            )))
        }
    };
    if name != "sgd" && d.get_item("momentum")?.is_some_and(|m| !m.is_none()) {
        let m = get_f32(d, "momentum", 0.0)?;
        if m != 0.0 {
            return Err(PyValueError::new_err(format!(
                "momentum={m}: only sgd takes a momentum"
            )));
        }
    }
    o.validate()
        .map_err(|e| PyValueError::new_err(format!("{name}: {e}")))?;
    Ok(o)
}

pub fn mode(name: &str, staleness: u64, sync_timeout_ms: u64) -> PyResult<Mode> {
    match name {
        "sync" => Ok(Mode::Sync {
            grads_per_version: EVERY_LIVE_WORKER,
            timeout_ms: sync_timeout_ms,
        }),
        "async" => Ok(Mode::Async),
        "bounded" => Ok(Mode::Bounded { staleness }),
        other => Err(PyValueError::new_err(format!(
            "mode {other:?}: \"sync\", \"async\" or \"bounded\""
        ))),
    }
}

/// `d[key]` unless it is absent or None.
fn given<'py>(d: &Bound<'py, PyDict>, key: &str) -> PyResult<Option<Bound<'py, PyAny>>> {
    Ok(d.get_item(key)?.filter(|v| !v.is_none()))
}

/// Embedding table `i` from its dict: `name`, `rows`, `dim`, `optimizer` (a dict as
/// [`optimizer`] reads), `init_std`, `seed`, and optionally `admit_after` (1),
/// `expire_after` (0), `fp16_wire` (False).
pub fn table_spec(i: usize, t: &Bound<'_, PyDict>) -> PyResult<TableSpec> {
    let get = |k: &str| -> PyResult<Bound<'_, PyAny>> {
        t.get_item(k)?
            .ok_or_else(|| PyValueError::new_err(format!("table {i}: no {k}")))
    };
    let opt = get("optimizer")?;
    Ok(TableSpec {
        name: get("name")?.extract()?,
        rows: get("rows")?.extract()?,
        dim: get("dim")?.extract()?,
        optimizer: optimizer(opt.cast::<PyDict>()?)
            .map_err(|e| PyValueError::new_err(format!("embedding {i}: {e}")))?,
        init_std: get("init_std")?.extract()?,
        seed: get("seed")?.extract()?,
        admit_after: given(t, "admit_after")?.map_or(Ok(1), |v| v.extract())?,
        expire_after: given(t, "expire_after")?.map_or(Ok(0), |v| v.extract())?,
        fp16_wire: given(t, "fp16_wire")?.map_or(Ok(false), |v| v.extract())?,
    })
}
