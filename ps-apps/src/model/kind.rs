//! [`Model`]: which architecture, with its sizes. It is what a job is configured
//! with, what a model file records, and it dispatches to the model types.

use super::error::ModelError;
use super::flat::{BatchStats, FlatModel};
use super::learner::Learner;
use super::logreg::LogisticRegression;
use super::mlp::Mlp;
use super::softmax::SoftmaxRegression;
use crate::recordio::{Example, Features};
use serde::{Deserialize, Serialize};

/// A model architecture and its sizes (its hyperparameters).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Model {
    /// Softmax regression ([`SoftmaxRegression`]): `classes × dim` weights and
    /// `classes` biases.
    Softmax {
        /// Input features.
        dim: usize,
        /// Classes.
        classes: usize,
    },
    /// `dim → hidden (ReLU) → classes (softmax)` ([`Mlp`]).
    Mlp {
        /// Input features.
        dim: usize,
        /// Hidden units.
        hidden: usize,
        /// Classes.
        classes: usize,
    },
    /// Binary logistic regression on sparse features ([`LogisticRegression`]): `dim`
    /// weights and a bias.
    LogReg {
        /// Input features.
        dim: usize,
    },
}

/// Runs `$body` with `$m` bound to the model type of `$self`.
macro_rules! dispatch {
    ($self:expr, $m:ident => $body:expr) => {
        match *$self {
            Model::Softmax { dim, classes } => {
                let $m = SoftmaxRegression { dim, classes };
                $body
            }
            Model::Mlp { dim, hidden, classes } => {
                let $m = Mlp { dim, hidden, classes };
                $body
            }
            Model::LogReg { dim } => {
                let $m = LogisticRegression { dim };
                $body
            }
        }
    };
}

/// Largest parameter count accepted (2^32: keys stay far inside u64 and a model
/// file stays loadable).
const MAX_PARAMS: u128 = 1 << 32;

impl Model {
    /// Checks the sizes: at least one feature, one hidden unit, two classes, and at
    /// most 2^32 parameters. [`ModelError::Invalid`] names the offending size.
    pub fn validate(&self) -> Result<(), ModelError> {
        let (dim, hidden, classes) = match *self {
            Model::Softmax { dim, classes } => (dim, 1, classes),
            Model::Mlp { dim, hidden, classes } => (dim, hidden, classes),
            Model::LogReg { dim } => (dim, 1, 2),
        };
        if dim == 0 {
            return Err(ModelError::Invalid(format!(
                "{}: the input dimension must be at least 1",
                self.name()
            )));
        }
        if hidden == 0 {
            return Err(ModelError::Invalid(format!(
                "{}: at least one hidden unit is needed",
                self.name()
            )));
        }
        if classes < 2 {
            return Err(ModelError::Invalid(format!(
                "{}: at least two classes are needed",
                self.name()
            )));
        }
        let (d, h, c) = (dim as u128, hidden as u128, classes as u128);
        let n = match self {
            Model::Softmax { .. } => c * d + c,
            Model::Mlp { .. } => h * d + h + c * h + c,
            Model::LogReg { .. } => d + 1,
        };
        if n > MAX_PARAMS {
            return Err(ModelError::Invalid(format!(
                "{}: {n} parameters, more than the 2^32 supported",
                self.name()
            )));
        }
        Ok(())
    }

    /// Number of parameters (as [`FlatModel::num_params`]).
    pub fn num_params(&self) -> usize {
        dispatch!(self, m => m.num_params())
    }

    /// Initial parameters, deterministic in `seed` (as [`FlatModel::init_params`]).
    pub fn init(&self, seed: u64) -> Vec<f32> {
        dispatch!(self, m => m.init_params(seed))
    }

    /// Class probabilities of one example (as [`FlatModel::predict`] on its features).
    pub fn predict(&self, params: &[f32], e: &Example) -> Vec<f32> {
        dispatch!(self, m => m.predict(params, &e.features))
    }

    /// A short name with the sizes, e.g. `mlp(784→128→10)`.
    pub fn name(&self) -> String {
        match *self {
            Model::Softmax { dim, classes } => format!("softmax({dim}→{classes})"),
            Model::Mlp { dim, hidden, classes } => format!("mlp({dim}→{hidden}→{classes})"),
            Model::LogReg { dim } => format!("logreg({dim})"),
        }
    }

    /// Whether the model touches only some keys per minibatch (then workers should
    /// exchange [`FlatModel::touched_keys`] rather than the whole vector).
    pub fn is_sparse(&self) -> bool {
        matches!(self, Model::LogReg { .. })
    }
}

impl FlatModel for Model {
    fn num_params(&self) -> usize {
        dispatch!(self, m => m.num_params())
    }
    fn num_outputs(&self) -> usize {
        dispatch!(self, m => m.num_outputs())
    }
    fn init_params(&self, seed: u64) -> Vec<f32> {
        dispatch!(self, m => m.init_params(seed))
    }
    fn predict(&self, params: &[f32], features: &Features) -> Vec<f32> {
        dispatch!(self, m => m.predict(params, features))
    }
    fn batch_stats(&self, params: &[f32], batch: &[Example]) -> BatchStats {
        dispatch!(self, m => m.batch_stats(params, batch))
    }
    fn touched_keys(&self, batch: &[Example]) -> Vec<u64> {
        dispatch!(self, m => m.touched_keys(batch))
    }
    fn batch_stats_on_keys(&self, values: &[f32], keys: &[u64], batch: &[Example]) -> BatchStats {
        dispatch!(self, m => m.batch_stats_on_keys(values, keys, batch))
    }
}

/// For the worker's minibatch loop: sparse models exchange the touched keys, dense
/// ones the whole vector (`None`).
impl Learner<[Example]> for Model {
    fn keys(&self, batch: &[Example]) -> Option<Vec<u64>> {
        self.is_sparse().then(|| self.touched_keys(batch))
    }

    fn loss_and_grad(&self, params: &[f32], keys: Option<&[u64]>, batch: &[Example]) -> (f32, usize, Vec<f32>) {
        let s = match keys {
            None => self.batch_stats(params, batch),
            Some(k) => self.batch_stats_on_keys(params, k, batch),
        };
        (s.loss, s.correct, s.grad)
    }
}
