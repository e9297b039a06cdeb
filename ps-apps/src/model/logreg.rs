//! Binary logistic regression on sparse features; parameter `dim` is the bias.

use crate::recordio::{Example, Features};

/// The sorted parameter keys a batch touches (its features, and the bias).
pub fn touched(batch: &[Example], dim: usize) -> Vec<u64> {
    let mut k: Vec<u64> = batch
        .iter()
        .flat_map(|e| match &e.features {
            Features::Sparse { idx, .. } => idx.iter().map(|&i| i as u64).collect::<Vec<_>>(),
            Features::Dense(v) => (0..v.len() as u64).collect(),
        })
        .filter(|&i| i < dim as u64)
        .collect();
    k.push(dim as u64);
    k.sort_unstable();
    k.dedup();
    k
}

fn target(e: &Example) -> f32 {
    if e.label > 0.0 {
        1.0
    } else {
        0.0
    }
}

/// P(label = 1). `keys`: the parameter index of each value of `params` (None: params
/// are the full vector).
pub fn probability(params: &[f32], dim: usize, e: &Example, keys: Option<&[u64]>) -> f32 {
    let w = |i: u64| -> f32 {
        match keys {
            None => params.get(i as usize).copied().unwrap_or(0.0),
            Some(k) => k.binary_search(&i).map(|p| params[p]).unwrap_or(0.0),
        }
    };
    let mut z = w(dim as u64);
    match &e.features {
        Features::Sparse { idx, val } => {
            for (&i, &v) in idx.iter().zip(val) {
                if (i as usize) < dim {
                    z += w(i as u64) * v;
                }
            }
        }
        Features::Dense(x) => {
            for (i, &v) in x.iter().enumerate().take(dim) {
                z += w(i as u64) * v;
            }
        }
    }
    1.0 / (1.0 + (-z).exp())
}

/// Mean log-loss, correct count, and the gradient for `keys` (or every parameter).
pub fn grad(params: &[f32], keys: Option<&[u64]>, dim: usize, batch: &[Example]) -> (f32, usize, Vec<f32>) {
    let mut g = vec![0.0; params.len()];
    let slot = |i: u64| -> Option<usize> {
        match keys {
            None => Some(i as usize),
            Some(k) => k.binary_search(&i).ok(),
        }
    };
    let (mut loss, mut correct) = (0.0f32, 0);
    for e in batch {
        let p = probability(params, dim, e, keys);
        let y = target(e);
        loss -= y * p.max(1e-7).ln() + (1.0 - y) * (1.0 - p).max(1e-7).ln();
        correct += usize::from((p >= 0.5) == (y == 1.0));
        let d = p - y;
        if let Some(b) = slot(dim as u64) {
            g[b] += d;
        }
        if let Features::Sparse { idx, val } = &e.features {
            for (&i, &v) in idx.iter().zip(val) {
                if let Some(s) = slot(i as u64).filter(|_| (i as usize) < dim) {
                    g[s] += d * v;
                }
            }
        } else if let Features::Dense(x) = &e.features {
            for (i, &v) in x.iter().enumerate().take(dim) {
                if let Some(s) = slot(i as u64) {
                    g[s] += d * v;
                }
            }
        }
    }
    let n = batch.len().max(1) as f32;
    g.iter_mut().for_each(|v| *v /= n);
    (loss / n, correct, g)
}
