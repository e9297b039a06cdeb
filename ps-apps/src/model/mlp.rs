//! A multi-layer perceptron with one hidden layer: `dim → hidden (ReLU) → classes
//! (softmax)`, on dense features.
//!
//! Parameter layout: `w1` (`hidden × dim`, row per hidden unit), `b1` (`hidden`),
//! `w2` (`classes × hidden`, row per class), `b2` (`classes`). Loss: cross-entropy.

use super::batch::accumulate;
use super::flat::{BatchStats, FlatModel};
use super::init::{uniform_scaled, SeededRng};
use super::math::{argmax, axpy, class_of, dense_view, dot, softmax_in_place};
use crate::recordio::{Example, Features};

/// The MLP `dim → hidden → classes`. Features and labels are read as by
/// [`super::softmax::SoftmaxRegression`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Mlp {
    /// Input features.
    pub dim: usize,
    /// Hidden ReLU units.
    pub hidden: usize,
    /// Classes.
    pub classes: usize,
}

/// The four parameter blocks.
struct Layers<'a> {
    w1: &'a [f32],
    b1: &'a [f32],
    w2: &'a [f32],
    b2: &'a [f32],
}

impl Mlp {
    fn layers<'a>(&self, p: &'a [f32]) -> Layers<'a> {
        let (w1, rest) = p.split_at(self.hidden * self.dim);
        let (b1, rest) = rest.split_at(self.hidden);
        let (w2, b2) = rest.split_at(self.classes * self.hidden);
        Layers { w1, b1, w2, b2 }
    }

    /// Hidden activations and logits of `x`.
    fn forward(&self, l: &Layers, x: &[f32]) -> (Vec<f32>, Vec<f32>) {
        let h: Vec<f32> =
            l.w1.chunks_exact(self.dim.max(1))
                .zip(l.b1)
                .map(|(row, &b)| (dot(row, x) + b).max(0.0))
                .collect();
        let z =
            l.w2.chunks_exact(self.hidden.max(1))
                .zip(l.b2)
                .map(|(row, &b)| dot(row, &h) + b)
                .collect();
        (h, z)
    }

    /// Adds one example's gradient to `g`; returns its loss and whether it was right.
    fn example(&self, l: &Layers, e: &Example, g: &mut [f32]) -> (f32, bool) {
        let (dim, hidden) = (self.dim, self.hidden);
        let x = dense_view(&e.features, dim);
        let (h, mut z) = self.forward(l, &x);
        let y = class_of(e.label, self.classes);
        let zy = z[y];
        let loss = softmax_in_place(&mut z) - zy;
        let (gw1, rest) = g.split_at_mut(hidden * dim);
        let (gb1, rest) = rest.split_at_mut(hidden);
        let (gw2, gb2) = rest.split_at_mut(self.classes * hidden);
        let mut dh = vec![0.0f32; hidden];
        for (c, p) in z.iter().enumerate() {
            let d = p - f32::from(u8::from(c == y));
            axpy(d, &h, &mut gw2[c * hidden..(c + 1) * hidden]);
            gb2[c] += d;
            axpy(d, &l.w2[c * hidden..(c + 1) * hidden], &mut dh);
        }
        for (j, &d) in dh.iter().enumerate() {
            if h[j] > 0.0 {
                axpy(d, &x, &mut gw1[j * dim..(j + 1) * dim]);
                gb1[j] += d;
            }
        }
        (loss, argmax(&z) == y)
    }
}

impl FlatModel for Mlp {
    fn num_params(&self) -> usize {
        self.hidden * self.dim + self.hidden + self.classes * self.hidden + self.classes
    }

    fn num_outputs(&self) -> usize {
        self.classes
    }

    /// `w1` He-uniform (`±sqrt(6 / dim)`, for the ReLUs), `w2` Glorot-uniform
    /// (`±sqrt(6 / (hidden + classes))`, for the softmax), biases zero.
    fn init_params(&self, seed: u64) -> Vec<f32> {
        let mut rng = SeededRng::new(seed);
        let mut p = Vec::with_capacity(self.num_params());
        uniform_scaled(&mut p, self.hidden * self.dim, self.dim as f32, &mut rng);
        p.resize(p.len() + self.hidden, 0.0);
        let fan = (self.hidden + self.classes) as f32;
        uniform_scaled(&mut p, self.classes * self.hidden, fan, &mut rng);
        p.resize(p.len() + self.classes, 0.0);
        p
    }

    fn predict(&self, params: &[f32], features: &Features) -> Vec<f32> {
        let (_, mut z) = self.forward(&self.layers(params), &dense_view(features, self.dim));
        softmax_in_place(&mut z);
        z
    }

    fn batch_stats(&self, params: &[f32], batch: &[Example]) -> BatchStats {
        assert_eq!(params.len(), self.num_params(), "mlp: parameter count");
        let l = self.layers(params);
        let flops = 4 * self.hidden * (self.dim + self.classes);
        accumulate(batch, params.len(), flops, |e, g| self.example(&l, e, g))
    }
}
