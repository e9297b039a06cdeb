//! Binary logistic regression on sparse (libsvm-style) features.
//!
//! Parameter layout: `dim` feature weights, then the bias at index `dim`. Labels: a
//! positive label (`1`, `+1`) is the positive class, anything else (`0`, `-1`) the
//! negative one. Loss: log-loss `softplus(z) - y z` with `z = w · x + b`, computed
//! without overflow. A minibatch depends only on the weights of the features present
//! in it and the bias, so workers pull and push just those keys.

use super::batch::accumulate;
use super::flat::{BatchStats, FlatModel};
use super::math::{binary_target, sigmoid, softplus};
use crate::recordio::{Example, Features};

/// Logistic regression over `dim` features (indices `>= dim` are ignored).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LogisticRegression {
    /// Feature weights (one past the largest feature index used).
    pub dim: usize,
}

/// Where a feature's weight lives in the parameter values at hand.
trait Slots: Sync {
    /// The position of key `k`'s value, if present.
    fn slot(&self, k: u64) -> Option<usize>;
}

/// The values are the full vector.
struct Full(usize);

impl Slots for Full {
    fn slot(&self, k: u64) -> Option<usize> {
        (k < self.0 as u64).then_some(k as usize)
    }
}

/// The values belong to these sorted keys.
struct Keyed<'a>(&'a [u64]);

impl Slots for Keyed<'_> {
    fn slot(&self, k: u64) -> Option<usize> {
        self.0.binary_search(&k).ok()
    }
}

impl LogisticRegression {
    /// `(feature, value)` pairs of an example below `dim`.
    fn features<'a>(&self, f: &'a Features) -> Box<dyn Iterator<Item = (u64, f32)> + 'a> {
        let dim = self.dim as u64;
        match f {
            Features::Sparse { idx, val } => Box::new(
                idx.iter()
                    .zip(val)
                    .map(|(&i, &v)| (u64::from(i), v))
                    .filter(move |&(i, _)| i < dim),
            ),
            Features::Dense(x) => Box::new(x.iter().enumerate().take(self.dim).map(|(i, &v)| (i as u64, v))),
        }
    }

    /// The logit `w · x + b`, reading weights through `slots` (absent ones are 0).
    fn logit(&self, values: &[f32], slots: &impl Slots, f: &Features) -> f32 {
        let w = |k: u64| slots.slot(k).map_or(0.0, |s| values[s]);
        self.features(f).fold(w(self.dim as u64), |z, (i, v)| z + w(i) * v)
    }

    fn stats(&self, values: &[f32], slots: &impl Slots, batch: &[Example]) -> BatchStats {
        let nnz = batch
            .iter()
            .map(|e| match &e.features {
                Features::Sparse { idx, .. } => idx.len(),
                Features::Dense(x) => x.len().min(self.dim),
            })
            .sum::<usize>()
            / batch.len().max(1);
        accumulate(batch, values.len(), 8 * nnz.max(1), |e, g| {
            let z = self.logit(values, slots, &e.features);
            let y = binary_target(e.label);
            let d = sigmoid(z) - y;
            if let Some(b) = slots.slot(self.dim as u64) {
                g[b] += d;
            }
            for (i, v) in self.features(&e.features) {
                if let Some(s) = slots.slot(i) {
                    g[s] += d * v;
                }
            }
            (softplus(z) - y * z, (z >= 0.0) == (y == 1.0))
        })
    }
}

impl FlatModel for LogisticRegression {
    fn num_params(&self) -> usize {
        self.dim + 1
    }

    fn num_outputs(&self) -> usize {
        2
    }

    /// All zeros (the loss is convex; `seed` is not needed).
    fn init_params(&self, _seed: u64) -> Vec<f32> {
        vec![0.0; self.num_params()]
    }

    /// `[P(negative), P(positive)]`.
    fn predict(&self, params: &[f32], features: &Features) -> Vec<f32> {
        let p = sigmoid(self.logit(params, &Full(params.len()), features));
        vec![1.0 - p, p]
    }

    fn batch_stats(&self, params: &[f32], batch: &[Example]) -> BatchStats {
        assert_eq!(params.len(), self.num_params(), "logreg: parameter count");
        self.stats(params, &Full(params.len()), batch)
    }

    /// The features present in the batch (below `dim`) and the bias key `dim`.
    fn touched_keys(&self, batch: &[Example]) -> Vec<u64> {
        let mut keys: Vec<u64> = batch
            .iter()
            .flat_map(|e| self.features(&e.features).map(|(i, _)| i))
            .chain([self.dim as u64])
            .collect();
        keys.sort_unstable();
        keys.dedup();
        keys
    }

    /// Works on the compact values directly (no full vector is built).
    fn batch_stats_on_keys(&self, values: &[f32], keys: &[u64], batch: &[Example]) -> BatchStats {
        assert_eq!(values.len(), keys.len(), "one value per key");
        self.stats(values, &Keyed(keys), batch)
    }
}
