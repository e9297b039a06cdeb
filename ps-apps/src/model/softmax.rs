//! Softmax (multinomial logistic) regression on dense features.
//!
//! Parameter layout: `classes × dim` weights, row `c` for class `c` (`w[c*dim + j]`),
//! then `classes` biases. Loss: cross-entropy `logsumexp(z) - z[label]` with logits
//! `z = W x + b`.

use super::batch::accumulate;
use super::flat::{BatchStats, FlatModel};
use super::math::{argmax, axpy, class_of, dense_view, dot, softmax_in_place};
use crate::recordio::{Example, Features};

/// Softmax regression from `dim` dense features to `classes` classes.
///
/// Features are read as `dim` dense values (shorter vectors padded with zeros, longer
/// ones truncated, sparse ones scattered); labels are class indices (clamped into
/// `0..classes`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SoftmaxRegression {
    /// Input features.
    pub dim: usize,
    /// Classes.
    pub classes: usize,
}

impl SoftmaxRegression {
    /// Logits of `x` (`dim` values).
    fn logits(&self, params: &[f32], x: &[f32]) -> Vec<f32> {
        let (w, b) = params.split_at(self.classes * self.dim);
        w.chunks_exact(self.dim.max(1))
            .zip(b)
            .map(|(row, &bias)| dot(row, x) + bias)
            .collect()
    }

    /// Adds one example's gradient to `g`; returns its loss and whether it was right.
    fn example(&self, params: &[f32], e: &Example, g: &mut [f32]) -> (f32, bool) {
        let x = dense_view(&e.features, self.dim);
        let mut z = self.logits(params, &x);
        let y = class_of(e.label, self.classes);
        let zy = z[y];
        let loss = softmax_in_place(&mut z) - zy;
        let (gw, gb) = g.split_at_mut(self.classes * self.dim);
        for (c, p) in z.iter().enumerate() {
            let d = p - f32::from(u8::from(c == y));
            axpy(d, &x, &mut gw[c * self.dim..(c + 1) * self.dim]);
            gb[c] += d;
        }
        (loss, argmax(&z) == y)
    }
}

impl FlatModel for SoftmaxRegression {
    fn num_params(&self) -> usize {
        self.classes * self.dim + self.classes
    }

    fn num_outputs(&self) -> usize {
        self.classes
    }

    /// All zeros (the loss is convex; `seed` is not needed).
    fn init_params(&self, _seed: u64) -> Vec<f32> {
        vec![0.0; self.num_params()]
    }

    fn predict(&self, params: &[f32], features: &Features) -> Vec<f32> {
        let mut z = self.logits(params, &dense_view(features, self.dim));
        softmax_in_place(&mut z);
        z
    }

    fn batch_stats(&self, params: &[f32], batch: &[Example]) -> BatchStats {
        assert_eq!(params.len(), self.num_params(), "softmax: parameter count");
        let flops = 4 * self.dim * self.classes;
        accumulate(batch, params.len(), flops, |e, g| self.example(params, e, g))
    }
}
