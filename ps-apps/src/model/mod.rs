//! Models over a flat parameter vector, so the parameter server can shard them by key
//! range (key `i` is parameter `i`): softmax regression and a one-hidden-layer MLP on
//! dense features, and binary logistic regression on sparse features, which depends
//! only on the keys of the features present in a minibatch.
//!
//! - [`FlatModel`]: the interface (parameter count, seeded initialisation, mean loss
//!   and gradient of a minibatch, prediction, touched keys).
//! - [`SoftmaxRegression`], [`Mlp`], [`LogisticRegression`]: the models.
//! - [`Model`]: the architecture as configured and saved; dispatches to the above.
//! - [`ModelOptions`] / [`ModelKind`]: the one way from a user's options to a
//!   [`Model`], for `psrs train` and the jobs cluster.
//! - [`Sgd`]: the optimizer, applied per key range on the servers.
//! - [`save`] / [`load`]: model files.
//! - [`Learner`]: what the training loop asks of a model; [`metrics`]: evaluation
//!   metrics (accuracy, log-loss, AUC, confusion counts).
//!
//! Examples are [`crate::recordio::Example`]s (a label, dense or sparse features).
//! Everything here is pure computation: no I/O besides model files, no networking.

mod batch;
mod check;
mod error;
mod file;
mod flat;
mod init;
mod kind;
pub mod learner;
mod logreg;
mod math;
pub mod metrics;
mod mlp;
mod optim;
pub mod options;
mod softmax;

pub use error::ModelError;
pub use file::{decode, encode, load, save, ModelFileError};
pub use flat::{BatchStats, FlatModel};
pub use init::{shuffle, shuffled_indices};
pub use kind::Model;
pub use learner::Learner;
pub use logreg::LogisticRegression;
pub use mlp::Mlp;
pub use optim::Sgd;
pub use options::{first_example, ModelKind, ModelOptions};
pub use softmax::SoftmaxRegression;

#[cfg(test)]
mod fashion_tests;
#[cfg(test)]
mod tests;
