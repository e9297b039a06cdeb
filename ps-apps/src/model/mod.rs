//! Models over a flat parameter vector, so the parameter server can shard them by key
//! range: softmax regression and a one-hidden-layer MLP on dense features, and binary
//! logistic regression on sparse features (which touches only the keys of the
//! features present in a minibatch).

mod dense;
mod file;
mod logreg;

pub use file::{load, save};

use crate::recordio::Example;
use crate::train::minibatch::Learner;
use serde::{Deserialize, Serialize};

/// A model architecture and its sizes.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub enum Model {
    /// Softmax regression: `classes × dim` weights and `classes` biases.
    Softmax {
        /// Input features.
        dim: usize,
        /// Classes.
        classes: usize,
    },
    /// `dim → hidden (ReLU) → classes (softmax)`.
    Mlp {
        /// Input features.
        dim: usize,
        /// Hidden units.
        hidden: usize,
        /// Classes.
        classes: usize,
    },
    /// Binary logistic regression on sparse features: `dim` weights and a bias.
    LogReg {
        /// Input features.
        dim: usize,
    },
}

impl Model {
    /// Number of parameters.
    pub fn num_params(&self) -> usize {
        match *self {
            Model::Softmax { dim, classes } => classes * dim + classes,
            Model::Mlp { dim, hidden, classes } => hidden * dim + hidden + classes * hidden + classes,
            Model::LogReg { dim } => dim + 1,
        }
    }

    /// Initial parameters, deterministic in `seed`.
    pub fn init(&self, seed: u64) -> Vec<f32> {
        match *self {
            Model::Mlp { dim, hidden, classes } => dense::init_mlp(dim, hidden, classes, seed),
            _ => vec![0.0; self.num_params()],
        }
    }

    /// Class scores (probabilities) of one example under `params`.
    pub fn predict(&self, params: &[f32], e: &Example) -> Vec<f32> {
        match *self {
            Model::Softmax { dim, classes } => dense::softmax_forward(params, dim, classes, e).1,
            Model::Mlp { dim, hidden, classes } => dense::mlp_forward(params, dim, hidden, classes, e).2,
            Model::LogReg { dim } => {
                let p = logreg::probability(params, dim, e, None);
                vec![1.0 - p, p]
            }
        }
    }

    /// A short name.
    pub fn name(&self) -> String {
        match *self {
            Model::Softmax { dim, classes } => format!("softmax({dim}→{classes})"),
            Model::Mlp { dim, hidden, classes } => format!("mlp({dim}→{hidden}→{classes})"),
            Model::LogReg { dim } => format!("logreg({dim})"),
        }
    }
}

impl Learner<[Example]> for Model {
    fn keys(&self, batch: &[Example]) -> Option<Vec<u64>> {
        match *self {
            Model::LogReg { dim } => Some(logreg::touched(batch, dim)),
            _ => None,
        }
    }

    fn loss_and_grad(&self, params: &[f32], keys: Option<&[u64]>, batch: &[Example]) -> (f32, usize, Vec<f32>) {
        match *self {
            Model::Softmax { dim, classes } => dense::softmax_grad(params, dim, classes, batch),
            Model::Mlp { dim, hidden, classes } => dense::mlp_grad(params, dim, hidden, classes, batch),
            Model::LogReg { dim } => logreg::grad(params, keys, dim, batch),
        }
    }
}

#[cfg(test)]
mod tests;
