//! The interface every model implements: a function of one flat parameter vector, so
//! the parameter server can shard it by key range (key `i` is parameter `i`).

use crate::recordio::{Example, Features};
use rayon::prelude::*;

/// What a minibatch gives: its mean loss, how many examples were predicted right, and
/// the mean gradient.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct BatchStats {
    /// Mean loss over the batch (0 for an empty batch).
    pub loss: f32,
    /// Examples whose predicted class is their label.
    pub correct: usize,
    /// Mean gradient of the loss over the batch: one value per parameter, or per key
    /// when computed on a key subset (all zeros for an empty batch).
    pub grad: Vec<f32>,
}

/// A model over a flat parameter vector `&[f32]`: parameter `i` is key `i` on the
/// parameter server. Implementations are pure functions of their arguments (no
/// interior state), so one value can serve any number of threads.
pub trait FlatModel: Sync {
    /// Number of parameters (the length of the flat vector).
    fn num_params(&self) -> usize;

    /// Length of the output of [`FlatModel::predict`]: the number of classes (2 for a
    /// binary model).
    fn num_outputs(&self) -> usize;

    /// Initial parameters, a deterministic function of `seed` (the same seed always
    /// gives the same vector, on any machine).
    fn init_params(&self, seed: u64) -> Vec<f32>;

    /// Class probabilities of one example's features under `params` (the full
    /// vector): `num_outputs()` values summing to 1.
    fn predict(&self, params: &[f32], features: &Features) -> Vec<f32>;

    /// Mean loss, correct count and mean gradient of `batch` under `params` (the full
    /// vector, `num_params()` values). Large batches are split across the rayon pool;
    /// the result does not depend on the size of the pool.
    fn batch_stats(&self, params: &[f32], batch: &[Example]) -> BatchStats;

    /// The sorted, distinct keys of the parameters the loss of `batch` depends on. A
    /// worker pulls and pushes only these. Dense models depend on every parameter
    /// (`0..num_params()`); sparse logistic regression on the features present in the
    /// batch and the bias.
    fn touched_keys(&self, _batch: &[Example]) -> Vec<u64> {
        (0..self.num_params() as u64).collect()
    }

    /// Like [`FlatModel::batch_stats`] on a subset of the parameters: `values[i]` is
    /// parameter `keys[i]`, `keys` sorted, distinct and a superset of
    /// `touched_keys(batch)`; the gradient has one value per key. Parameters outside
    /// `keys` do not influence the result.
    ///
    /// The provided method scatters the values into a full vector (zeros elsewhere)
    /// and gathers the gradient back; sparse models override it.
    ///
    /// # Panics
    /// If `values` and `keys` differ in length or a key is `>= num_params()`.
    fn batch_stats_on_keys(&self, values: &[f32], keys: &[u64], batch: &[Example]) -> BatchStats {
        assert_eq!(values.len(), keys.len(), "one value per key");
        if keys.len() == self.num_params() {
            // sorted and distinct below num_params: every key, in order
            return self.batch_stats(values, batch);
        }
        let mut full = vec![0.0; self.num_params()];
        for (&k, &v) in keys.iter().zip(values) {
            full[k as usize] = v;
        }
        let mut s = self.batch_stats(&full, batch);
        s.grad = keys.iter().map(|&k| s.grad[k as usize]).collect();
        s
    }

    /// Mean loss and mean gradient of `batch` under `params` (the full vector).
    fn loss_and_grad(&self, params: &[f32], batch: &[Example]) -> (f32, Vec<f32>) {
        let s = self.batch_stats(params, batch);
        (s.loss, s.grad)
    }

    /// Mean loss and gradient on a key subset; see [`FlatModel::batch_stats_on_keys`].
    fn loss_and_grad_on_keys(&self, values: &[f32], keys: &[u64], batch: &[Example]) -> (f32, Vec<f32>) {
        let s = self.batch_stats_on_keys(values, keys, batch);
        (s.loss, s.grad)
    }

    /// [`FlatModel::predict`] for every example, in parallel; results in input order.
    fn predict_batch(&self, params: &[f32], examples: &[Example]) -> Vec<Vec<f32>> {
        examples
            .par_iter()
            .with_min_len(64)
            .map(|e| self.predict(params, &e.features))
            .collect()
    }
}
