//! What a model declares to the servers: the update rule, the dense parameters (their
//! count, names and shapes, and optimizer) and each embedding table (rows, width,
//! optimizer, initial deviation, seed). Worker 0 declares it with its initial values;
//! every other worker's model must match it, and a mismatch is named in one line.

use super::error::TablesError;
use super::keys::{MAX_ROWS, MAX_TABLES};
use super::optim::Optimizer;
use crate::train::versions::Mode;
use bincode::Options;
use serde::{Deserialize, Serialize};

/// Largest encoded spec accepted.
const MAX_SPEC_BYTES: u64 = 16 << 20;

/// One named dense parameter: its name in the module and its shape.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ParamSpec {
    /// Name, as `named_parameters()` gives it.
    pub name: String,
    /// Shape.
    pub shape: Vec<u64>,
}

/// One embedding table.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TableSpec {
    /// The module's name in the model.
    pub name: String,
    /// `num_embeddings`: ids are below it.
    pub rows: u64,
    /// `embedding_dim`: values per row.
    pub dim: u32,
    /// The optimizer of its rows.
    pub optimizer: Optimizer,
    /// Initial rows are normal(0, `init_std`).
    pub init_std: f32,
    /// Seed of the initial rows.
    pub seed: u64,
    /// A row is created once it has had gradients in this many steps (Monolith's
    /// frequency filter; 1: at its first gradient). Until then it reads as its
    /// initial values and its gradients are dropped.
    pub admit_after: u32,
    /// A row not updated in this many steps is dropped and reads as its initial
    /// values again (Monolith's expiry; 0: never).
    pub expire_after: u64,
    /// Rows and their gradients travel as float16 ([`super::halves`]).
    pub fp16_wire: bool,
}

impl TableSpec {
    /// Values one row takes in a message: `dim`, or its float16 pairs.
    pub fn wire_len(&self) -> usize {
        if self.fp16_wire {
            super::halves::words(self.dim as usize)
        } else {
            self.dim as usize
        }
    }
}

/// A model as the servers hold it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ModelSpec {
    /// The update rule.
    pub mode: Mode,
    /// Dense parameters in order; their values are concatenated (flattened).
    pub params: Vec<ParamSpec>,
    /// The optimizer of the dense parameters.
    pub dense_optimizer: Optimizer,
    /// The embedding tables, by index.
    pub tables: Vec<TableSpec>,
}

impl ModelSpec {
    /// Number of dense values.
    pub fn dense_len(&self) -> u64 {
        self.params.iter().map(|p| p.shape.iter().product::<u64>()).sum()
    }

    /// Checks the settings: [`TablesError::Invalid`], one line naming the bad one.
    pub fn validate(&self) -> Result<(), TablesError> {
        let invalid = TablesError::Invalid;
        self.dense_optimizer
            .validate()
            .map_err(|e| invalid(format!("the optimizer's {e}")))?;
        if self.tables.len() > MAX_TABLES {
            return Err(invalid(format!(
                "{} embedding tables: at most {MAX_TABLES} per model",
                self.tables.len()
            )));
        }
        if let Mode::Sync {
            grads_per_version: 0, ..
        } = self.mode
        {
            return Err(invalid("sync mode needs at least one gradient per version".into()));
        }
        for t in &self.tables {
            t.optimizer
                .validate()
                .map_err(|e| invalid(format!("embedding {}: {e}", t.name)))?;
            if t.rows == 0 || t.rows > MAX_ROWS {
                return Err(invalid(format!(
                    "embedding {}: num_embeddings={} must be 1 to {MAX_ROWS}",
                    t.name, t.rows
                )));
            }
            if t.dim == 0 || t.dim > 1 << 20 {
                return Err(invalid(format!(
                    "embedding {}: embedding_dim={} must be 1 to {}",
                    t.name,
                    t.dim,
                    1 << 20
                )));
            }
            if t.admit_after == 0 {
                return Err(invalid(format!(
                    "embedding {}: admit_after=0 must be at least 1 (1: rows created at their first gradient)",
                    t.name
                )));
            }
            if !(t.init_std.is_finite() && t.init_std >= 0.0) {
                return Err(invalid(format!(
                    "embedding {}: init_std={} must be >= 0",
                    t.name, t.init_std
                )));
            }
        }
        Ok(())
    }

    /// How `self` (a worker's model) differs from `declared` (the servers'), in one
    /// line; None if they match.
    pub fn difference(&self, declared: &ModelSpec) -> Option<String> {
        if self.params.len() != declared.params.len() {
            return Some(format!(
                "this model has {} dense parameters, the servers' model {}",
                self.params.len(),
                declared.params.len()
            ));
        }
        for (mine, theirs) in self.params.iter().zip(&declared.params) {
            if mine != theirs {
                return Some(format!(
                    "dense parameter {} {:?} here is {} {:?} on the servers",
                    mine.name, mine.shape, theirs.name, theirs.shape
                ));
            }
        }
        if self.tables.len() != declared.tables.len() {
            return Some(format!(
                "this model has {} embedding tables, the servers' model {}",
                self.tables.len(),
                declared.tables.len()
            ));
        }
        for (mine, theirs) in self.tables.iter().zip(&declared.tables) {
            if mine != theirs {
                return Some(format!(
                    "embedding {} ({} x {}, {}) here is {} ({} x {}, {}) on the servers",
                    mine.name,
                    mine.rows,
                    mine.dim,
                    mine.optimizer.name(),
                    theirs.name,
                    theirs.rows,
                    theirs.dim,
                    theirs.optimizer.name()
                ));
            }
        }
        if self.mode != declared.mode {
            return Some(format!("mode {:?} here, {:?} on the servers", self.mode, declared.mode));
        }
        if self.dense_optimizer != declared.dense_optimizer {
            return Some(format!(
                "optimizer {:?} here, {:?} on the servers",
                self.dense_optimizer, declared.dense_optimizer
            ));
        }
        None
    }

    /// The spec as bytes.
    pub fn encode(&self) -> Vec<u8> {
        codec().serialize(self).expect("a spec always serializes")
    }

    /// A spec from [`ModelSpec::encode`]'s bytes, validated: [`TablesError::Malformed`]
    /// if they do not decode, [`TablesError::Invalid`] if the spec is not valid.
    pub fn decode(bytes: &[u8]) -> Result<ModelSpec, TablesError> {
        let s: ModelSpec = codec()
            .deserialize(bytes)
            .map_err(|e| TablesError::Malformed(format!("malformed model declaration: {e}")))?;
        s.validate()?;
        Ok(s)
    }
}

fn codec() -> impl Options {
    bincode::DefaultOptions::new()
        .with_limit(MAX_SPEC_BYTES)
        .reject_trailing_bytes()
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A small model: 9 dense values, one table of 10^9 rows x 4.
    pub(crate) fn spec() -> ModelSpec {
        ModelSpec {
            mode: Mode::Async,
            params: vec![
                ParamSpec {
                    name: "fc.weight".into(),
                    shape: vec![3, 2],
                },
                ParamSpec {
                    name: "fc.bias".into(),
                    shape: vec![3],
                },
            ],
            dense_optimizer: Optimizer::Sgd {
                lr: 0.1,
                momentum: 0.9,
                weight_decay: 0.0,
            },
            tables: vec![TableSpec {
                name: "emb".into(),
                rows: 1_000_000_000,
                dim: 4,
                optimizer: Optimizer::Adagrad {
                    lr: 0.05,
                    eps: 1e-10,
                    initial_accumulator_value: 0.0,
                    weight_decay: 0.0,
                },
                init_std: 0.01,
                seed: 0,
                admit_after: 1,
                expire_after: 0,
                fp16_wire: false,
            }],
        }
    }

    #[test]
    fn round_trip_and_differences() {
        let s = spec();
        assert_eq!(s.dense_len(), 9);
        assert_eq!(ModelSpec::decode(&s.encode()).unwrap(), s.clone());
        let e = ModelSpec::decode(&s.encode()[..5]).unwrap_err();
        assert!(matches!(e, TablesError::Malformed(_)));
        assert!(e.to_string().starts_with("malformed"));
        assert_eq!(s.difference(&s), None);
        let mut other = s.clone();
        other.params[1].shape = vec![4];
        assert_eq!(
            s.difference(&other).unwrap(),
            "dense parameter fc.bias [3] here is fc.bias [4] on the servers"
        );
        let mut other = s.clone();
        other.tables[0].dim = 8;
        assert!(s
            .difference(&other)
            .unwrap()
            .starts_with("embedding emb (1000000000 x 4, adagrad)"));
        let mut bad = s.clone();
        bad.tables[0].rows = 0;
        assert!(bad.validate().unwrap_err().to_string().contains("num_embeddings=0"));
        assert!(matches!(ModelSpec::decode(&bad.encode()), Err(TablesError::Invalid(_))));
    }
}
