//! One way from a model's options to a [`Model`], shared by `psrs train` (its CLI
//! options) and the jobs cluster (a training job's JSON): the architecture by name, the
//! input width read from the data when not given, validated.

use super::error::ModelError;
use super::kind::Model;
use crate::recordio::{self, Example, Features};
use serde::{Deserialize, Serialize};
use std::path::Path;
use std::str::FromStr;

/// Model architectures `psrs train` and a training job can train, by the names the
/// CLI and the JSON use (`softmax`, `mlp`, `logreg`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ModelKind {
    /// Softmax regression.
    Softmax,
    /// One hidden ReLU layer.
    Mlp,
    /// Binary logistic regression on sparse features.
    Logreg,
}

impl ModelKind {
    /// Every kind's name, in the order the CLI lists them.
    pub const NAMES: [&'static str; 3] = ["softmax", "mlp", "logreg"];
}

impl FromStr for ModelKind {
    type Err = ModelError;

    /// A kind by its name (as in [`ModelKind::NAMES`]); another name is
    /// [`ModelError::Invalid`].
    fn from_str(s: &str) -> Result<ModelKind, ModelError> {
        match s {
            "softmax" => Ok(ModelKind::Softmax),
            "mlp" => Ok(ModelKind::Mlp),
            "logreg" => Ok(ModelKind::Logreg),
            _ => Err(ModelError::Invalid(format!(
                "unknown model {s:?} (one of: {})",
                ModelKind::NAMES.join(", ")
            ))),
        }
    }
}

/// A model's options as a user gives them: the kind, its sizes, and the input width if
/// known.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ModelOptions {
    /// The architecture.
    pub kind: ModelKind,
    /// Input features; `None`: the length of the first training example (dense only).
    pub dim: Option<usize>,
    /// Hidden units (MLP only).
    pub hidden: usize,
    /// Classes (softmax and MLP).
    pub classes: usize,
}

impl ModelOptions {
    /// The model, validated. Without `dim` the input width is the length of the first
    /// training example, which `first` reads (e.g. [`first_example`] of the first
    /// training file; its error, of the caller's type `E`, is returned as it is); sparse
    /// data then is [`ModelError::Invalid`] naming `dim_option` (the option as the
    /// caller's user writes it: `--dim`, `"dim"`), and so is an invalid model, both
    /// turned into `E`.
    pub fn build<E: From<ModelError>>(
        &self,
        first: impl FnOnce() -> Result<Example, E>,
        dim_option: &str,
    ) -> Result<Model, E> {
        let dim = match self.dim {
            Some(d) => d,
            None => match first()?.features {
                Features::Dense(v) => v.len(),
                Features::Sparse { .. } => {
                    return Err(ModelError::Invalid(format!("{dim_option} is required for sparse data")).into())
                }
            },
        };
        let m = match self.kind {
            ModelKind::Softmax => Model::Softmax {
                dim,
                classes: self.classes,
            },
            ModelKind::Mlp => Model::Mlp {
                dim,
                hidden: self.hidden,
                classes: self.classes,
            },
            ModelKind::Logreg => Model::LogReg { dim },
        };
        m.validate()?;
        Ok(m)
    }
}

/// The first example of the RecordIO file (or URL) `path`: an empty file is
/// [`ModelError::Empty`] naming it, one that cannot be read [`ModelError::Data`]
/// (RecordIO errors name the file already).
pub fn first_example(path: &str) -> Result<Example, ModelError> {
    let p = Path::new(path);
    let empty = || ModelError::Empty(format!("{path} holds no records"));
    let idx = recordio::index(p)?;
    let c = idx.first().ok_or_else(empty)?;
    let rec = recordio::read_chunk(p, c)?;
    Ok(Example::decode(rec.first().ok_or_else(empty)?)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts(kind: ModelKind, dim: Option<usize>) -> ModelOptions {
        ModelOptions {
            kind,
            dim,
            hidden: 8,
            classes: 3,
        }
    }

    #[test]
    fn kinds_parse_by_their_names() {
        for (name, kind) in ModelKind::NAMES
            .iter()
            .zip([ModelKind::Softmax, ModelKind::Mlp, ModelKind::Logreg])
        {
            assert_eq!(name.parse::<ModelKind>().unwrap(), kind);
            assert_eq!(serde_json::to_string(&kind).unwrap(), format!("\"{name}\""));
        }
        let e = "cnn".parse::<ModelKind>().unwrap_err();
        assert!(matches!(e, ModelError::Invalid(_)));
        assert_eq!(e.to_string(), "unknown model \"cnn\" (one of: softmax, mlp, logreg)");
    }

    #[test]
    fn a_given_dim_builds_each_kind_without_reading_data() {
        let none = || first_example("/nonexistent/data.rio");
        assert_eq!(
            opts(ModelKind::Softmax, Some(4)).build(none, "--dim").unwrap(),
            Model::Softmax { dim: 4, classes: 3 }
        );
        assert_eq!(
            opts(ModelKind::Mlp, Some(4)).build(none, "--dim").unwrap(),
            Model::Mlp {
                dim: 4,
                hidden: 8,
                classes: 3
            }
        );
        assert_eq!(
            opts(ModelKind::Logreg, Some(4)).build(none, "--dim").unwrap(),
            Model::LogReg { dim: 4 }
        );
        // without dim the data is read, and a missing file is the error
        assert!(matches!(
            opts(ModelKind::Softmax, None).build(none, "--dim"),
            Err(ModelError::Data(_))
        ));
        // an invalid model is refused by its validation
        assert!(matches!(
            opts(ModelKind::Softmax, Some(0)).build(none, "--dim"),
            Err(ModelError::Invalid(_))
        ));
    }
}
