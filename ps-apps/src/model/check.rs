//! Checking data against a model before any work: a dataset that is empty, or whose
//! examples do not fit the model's input (another feature count, sparse data for a
//! dense model, labels outside its classes), is a clear error rather than an accuracy
//! of 0 or a panic deep in the arithmetic.

use super::error::ModelError;
use super::kind::Model;
use crate::recordio::{Example, Features};

impl Model {
    /// Checks one example against the model: feature count (dense models need exactly
    /// `dim` dense features; logreg indices below `dim`) and label (a class of the
    /// model). [`ModelError::Misfit`] says what differs, without naming the example.
    pub fn check_example(&self, e: &Example) -> Result<(), ModelError> {
        match (self, &e.features) {
            (Model::Softmax { dim, .. } | Model::Mlp { dim, .. }, Features::Dense(v)) if v.len() != *dim => {
                Err(ModelError::Misfit(format!(
                    "it has {} features, the model {} takes {dim}",
                    v.len(),
                    self.name()
                )))
            }
            (Model::Softmax { dim, .. } | Model::Mlp { dim, .. }, Features::Sparse { .. }) => {
                Err(ModelError::Misfit(format!(
                    "it has sparse features, the model {} takes {dim} dense ones",
                    self.name()
                )))
            }
            (Model::LogReg { dim }, _) if e.dim() > *dim => Err(ModelError::Misfit(format!(
                "it has feature index {}, the model {} takes indices below {dim}",
                e.dim() - 1,
                self.name()
            ))),
            _ => self.check_label(e.label),
        }
    }

    fn check_label(&self, label: f32) -> Result<(), ModelError> {
        let classes = match *self {
            Model::Softmax { classes, .. } | Model::Mlp { classes, .. } => classes,
            Model::LogReg { .. } => return Ok(()), // any label: positive or not
        };
        if label.fract() != 0.0 || label < 0.0 || label >= classes as f32 {
            return Err(ModelError::Misfit(format!(
                "its label {label} is not a class of the model {} (0 to {})",
                self.name(),
                classes - 1
            )));
        }
        Ok(())
    }

    /// Checks a whole dataset (`what` names it in the error, e.g. its path): it must
    /// hold examples, and every one must pass [`Model::check_example`]; the error
    /// names the first misfit by its position ([`ModelError::Misfit`]); no examples at
    /// all is [`ModelError::Empty`].
    pub fn check_examples(&self, examples: &[Example], what: &str) -> Result<(), ModelError> {
        if examples.is_empty() {
            return Err(ModelError::Empty(format!("{what} holds no examples")));
        }
        for (i, e) in examples.iter().enumerate() {
            self.check_example(e)
                .map_err(|why| ModelError::Misfit(format!("{what}: example {i} does not fit the model: {why}")))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dense(n: usize, label: f32) -> Example {
        Example {
            label,
            features: Features::Dense(vec![0.5; n]),
        }
    }

    #[test]
    fn misfits_are_named() {
        let m = Model::Mlp {
            dim: 784,
            hidden: 8,
            classes: 10,
        };
        assert!(m.check_examples(&[dense(784, 3.0)], "t.rio").is_ok());
        let e = m.check_examples(&[], "t.rio").unwrap_err();
        assert!(matches!(e, ModelError::Empty(_)));
        assert_eq!(e.to_string(), "t.rio holds no examples");
        let e = m
            .check_examples(&[dense(784, 1.0), dense(3, 1.0)], "t.rio")
            .unwrap_err();
        assert!(matches!(e, ModelError::Misfit(_)));
        assert_eq!(
            e.to_string(),
            "t.rio: example 1 does not fit the model: it has 3 features, the model mlp(784→8→10) takes 784"
        );
        let e = m.check_examples(&[dense(784, 10.0)], "t.rio").unwrap_err().to_string();
        assert!(e.contains("label 10 is not a class"), "{e}");
        let sparse = Example {
            label: 1.0,
            features: Features::Sparse {
                idx: vec![2, 900],
                val: vec![1.0, 1.0],
            },
        };
        assert!(m
            .check_example(&sparse)
            .unwrap_err()
            .to_string()
            .contains("sparse features"));
        let lr = Model::LogReg { dim: 100 };
        assert!(lr
            .check_example(&sparse)
            .unwrap_err()
            .to_string()
            .contains("feature index 900"));
        assert!(Model::LogReg { dim: 1000 }.check_example(&sparse).is_ok());
    }
}
