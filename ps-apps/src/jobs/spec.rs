//! What a job is: the JSON body of `POST /jobs`. A training job carries the options of
//! `psrs train` by their long names with `-` written `_` (defaults as in the CLI); an
//! inference job names a saved model, a RecordIO dataset and where its outputs go.
//! Unknown fields are refused, so a misspelt option is an error and not a silent
//! default.

use crate::model::Model;
use crate::recordio::{self, Example, Features};
use serde::{Deserialize, Serialize};
use std::path::Path;

/// Model architectures a training job can train.
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

/// Update rules of a training job.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum UpdateRule {
    /// Synchronous SGD on model versions.
    Sync,
    /// Apply each gradient at once.
    Async,
    /// Async, rejecting gradients more than `staleness` versions old.
    Bounded,
}

fn d_hidden() -> usize {
    128
}
fn d_classes() -> usize {
    10
}
fn d_epochs() -> u64 {
    3
}
fn d_batch() -> usize {
    64
}
fn d_lr() -> f32 {
    0.1
}
fn d_one() -> f32 {
    1.0
}
fn d_model() -> ModelKind {
    ModelKind::Softmax
}
fn d_mode() -> UpdateRule {
    UpdateRule::Sync
}
fn d_staleness() -> u64 {
    4
}
fn d_sync_timeout() -> u64 {
    500
}
fn d_chunks() -> usize {
    1
}
fn d_task_timeout() -> u64 {
    10_000
}
fn d_retries() -> u32 {
    3
}
fn d_checkpoint() -> u64 {
    20
}
fn d_seed() -> u64 {
    1
}
fn d_rejections() -> u32 {
    20
}

/// A training job: the options of `psrs train` that belong to one job (the cluster's
/// own ones, such as `--work-dir` and `--stats-addr`, are not here).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TrainSpec {
    /// Training data: RecordIO files.
    pub train: Vec<String>,
    /// Held-out RecordIO file: the final test accuracy is measured on it.
    #[serde(default)]
    pub test: Option<String>,
    /// The model.
    #[serde(default = "d_model")]
    pub model: ModelKind,
    /// Hidden units of the MLP.
    #[serde(default = "d_hidden")]
    pub hidden: usize,
    /// Classes (dense models).
    #[serde(default = "d_classes")]
    pub classes: usize,
    /// Input features (default: the length of the first example).
    #[serde(default)]
    pub dim: Option<usize>,
    /// Passes over the data.
    #[serde(default = "d_epochs")]
    pub epochs: u64,
    /// Examples per minibatch.
    #[serde(default = "d_batch")]
    pub batch: usize,
    /// Learning rate.
    #[serde(default = "d_lr")]
    pub lr: f32,
    /// Momentum.
    #[serde(default)]
    pub momentum: f32,
    /// L2 weight decay.
    #[serde(default)]
    pub weight_decay: f32,
    /// Learning-rate decay per pass.
    #[serde(default = "d_one")]
    pub lr_decay: f32,
    /// Update rule.
    #[serde(default = "d_mode")]
    pub mode: UpdateRule,
    /// Largest accepted gradient age (bounded mode).
    #[serde(default = "d_staleness")]
    pub staleness: u64,
    /// Sync mode: apply what has arrived this many ms after a version's first gradient.
    #[serde(default = "d_sync_timeout")]
    pub sync_timeout_ms: u64,
    /// Chunks per task.
    #[serde(default = "d_chunks")]
    pub chunks_per_task: usize,
    /// A task times out after this many ms at least.
    #[serde(default = "d_task_timeout")]
    pub task_timeout_ms: u64,
    /// Timeouts or failures after which a task is given up.
    #[serde(default = "d_retries")]
    pub max_retries: u32,
    /// Servers checkpoint the job's shards every this many versions.
    #[serde(default = "d_checkpoint")]
    pub checkpoint_every: u64,
    /// Where the trained model is saved.
    #[serde(default)]
    pub out: Option<String>,
    /// Seed of the initial parameters.
    #[serde(default = "d_seed")]
    pub seed: u64,
    /// Rejected pushes in a row after which a task fails.
    #[serde(default = "d_rejections")]
    pub max_rejections: u32,
}

/// An inference job: a saved model over a RecordIO dataset.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InferSpec {
    /// The model file (`--out` of a training job or of `psrs train`).
    pub model: String,
    /// The dataset: RecordIO files, read in order.
    pub data: Vec<String>,
    /// Where the outputs go (CSV: `index,class,probability,label`, in dataset order).
    pub out: String,
    /// Chunks per batch ("query").
    #[serde(default = "d_chunks")]
    pub chunks_per_task: usize,
}

/// A job as submitted.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum JobSpec {
    /// Train a model.
    Train(TrainSpec),
    /// Evaluate a saved model over a dataset.
    Infer(InferSpec),
}

/// Accepts `"data": "a.rio"` as well as `"data": ["a.rio", "b.rio"]` (and the same for
/// `"train"`), as the CLI takes comma-separated lists.
fn normalize(v: &mut serde_json::Value) {
    for key in ["train", "data"] {
        if let Some(s) = v.get(key).and_then(|s| s.as_str()).map(str::to_string) {
            v[key] = serde_json::Value::Array(s.split(',').map(|p| p.to_string().into()).collect());
        }
    }
}

impl JobSpec {
    /// Parses a `POST /jobs` body; the error is one line saying what is wrong.
    pub fn from_json(body: &str) -> Result<JobSpec, String> {
        let mut v: serde_json::Value = serde_json::from_str(body).map_err(|e| format!("malformed JSON: {e}"))?;
        if !v.is_object() {
            return Err("the body must be a JSON object".into());
        }
        match v.get("kind").and_then(|k| k.as_str()) {
            Some("train") | Some("infer") => {}
            Some(k) => return Err(format!("unknown kind {k:?}: use \"train\" or \"infer\"")),
            None => return Err("missing \"kind\": use \"train\" or \"infer\"".into()),
        }
        normalize(&mut v);
        let spec: JobSpec = serde_json::from_value(v).map_err(|e| e.to_string())?;
        spec.validate()?;
        Ok(spec)
    }

    /// Checks the values that need no file (the shell checks the files with
    /// [`JobSpec::check_files`]).
    pub fn validate(&self) -> Result<(), String> {
        match self {
            JobSpec::Train(t) => {
                if t.train.is_empty() || t.train.iter().any(|p| p.is_empty()) {
                    return Err("\"train\" must name at least one RecordIO file".into());
                }
                if t.batch == 0 || t.epochs == 0 || !t.lr.is_finite() || t.lr <= 0.0 {
                    return Err("\"batch\", \"epochs\" and \"lr\" must be above 0".into());
                }
                if !(t.lr_decay.is_finite() && t.lr_decay > 0.0 && t.lr_decay <= 1.0) {
                    return Err(format!("\"lr_decay\" {}: must be in (0, 1]", t.lr_decay));
                }
                if !t.momentum.is_finite() || !t.weight_decay.is_finite() {
                    return Err("\"momentum\" and \"weight_decay\" must be finite".into());
                }
                if t.chunks_per_task == 0 || t.task_timeout_ms == 0 {
                    return Err("\"chunks_per_task\" and \"task_timeout_ms\" must be above 0".into());
                }
            }
            JobSpec::Infer(i) => {
                if i.model.is_empty() || i.out.is_empty() || i.data.is_empty() || i.data.iter().any(|p| p.is_empty()) {
                    return Err("\"model\", \"data\" and \"out\" are required".into());
                }
                if i.chunks_per_task == 0 {
                    return Err("\"chunks_per_task\" must be above 0".into());
                }
            }
        }
        Ok(())
    }

    /// `"train"` or `"infer"`.
    pub fn kind(&self) -> &'static str {
        match self {
            JobSpec::Train(_) => "train",
            JobSpec::Infer(_) => "infer",
        }
    }

    /// Reads what the job needs before it is accepted: every dataset file's index and,
    /// for training, the model's sizes (the input width from the first example unless
    /// `dim` is given); for inference, the model file. Returns the model.
    pub fn check_files(&self) -> Result<Model, String> {
        let files = match self {
            JobSpec::Train(t) => t.train.iter().chain(t.test.iter()).collect::<Vec<_>>(),
            JobSpec::Infer(i) => i.data.iter().collect(),
        };
        for f in files {
            recordio::index(Path::new(f)).map_err(|e| e.to_string())?;
        }
        match self {
            JobSpec::Train(t) => t.resolve_model(),
            // the error names the file already
            JobSpec::Infer(i) => crate::model::load(Path::new(&i.model))
                .map(|(m, _)| m)
                .map_err(|e| e.to_string()),
        }
    }
}

fn first_example(path: &str) -> Result<Example, String> {
    let p = Path::new(path);
    // RecordIO errors name the file already
    let idx = recordio::index(p).map_err(|e| e.to_string())?;
    let c = idx.first().ok_or_else(|| format!("{path} holds no records"))?;
    let rec = recordio::read_chunk(p, c).map_err(|e| e.to_string())?;
    Example::decode(rec.first().ok_or_else(|| format!("{path} holds no records"))?)
}

impl TrainSpec {
    /// The model this job trains (the input width read from the first example of the
    /// first training file unless `dim` is set); validated.
    pub fn resolve_model(&self) -> Result<Model, String> {
        let dim = match self.dim {
            Some(d) => d,
            None => match first_example(&self.train[0])?.features {
                Features::Dense(v) => v.len(),
                Features::Sparse { .. } => return Err("\"dim\" is required for sparse data".into()),
            },
        };
        let m = match self.model {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_the_cli_defaults() {
        let s = JobSpec::from_json(r#"{"kind":"train","train":"a.rio,b.rio"}"#).unwrap();
        let JobSpec::Train(t) = s else { panic!("a training job") };
        assert_eq!(t.train, vec!["a.rio", "b.rio"]);
        assert_eq!(
            (t.model, t.epochs, t.batch, t.lr, t.mode),
            (ModelKind::Softmax, 3, 64, 0.1, UpdateRule::Sync)
        );
        assert_eq!((t.hidden, t.classes, t.lr_decay, t.staleness), (128, 10, 1.0, 4));
        let s = JobSpec::from_json(r#"{"kind":"infer","model":"m","data":["d"],"out":"o.csv"}"#).unwrap();
        assert_eq!(s.kind(), "infer");
        let back = JobSpec::from_json(&serde_json::to_string(&s).unwrap()).unwrap();
        assert_eq!(back, s, "the stored form parses back");
    }

    #[test]
    fn bad_bodies_get_one_line_reasons() {
        for (body, want) in [
            ("{", "malformed JSON"),
            ("[1]", "JSON object"),
            (r#"{"train":"a"}"#, "missing \"kind\""),
            (r#"{"kind":"dance"}"#, "unknown kind"),
            (r#"{"kind":"train","train":"a","model":"resnet"}"#, "unknown variant"),
            (r#"{"kind":"train","train":"a","epoch":3}"#, "unknown field"),
            (r#"{"kind":"train"}"#, "missing field"),
            (r#"{"kind":"train","train":"a","lr":0}"#, "above 0"),
            (r#"{"kind":"train","train":"a","lr_decay":2}"#, "lr_decay"),
            (r#"{"kind":"infer","model":"m","data":[],"out":"o"}"#, "required"),
        ] {
            let e = JobSpec::from_json(body).unwrap_err();
            assert!(e.contains(want), "{body}: {e}");
            assert!(!e.contains('\n'), "one line: {e}");
        }
    }

    #[test]
    fn missing_files_are_refused() {
        let s = JobSpec::from_json(r#"{"kind":"train","train":"/nonexistent/a.rio"}"#).unwrap();
        assert!(s.check_files().unwrap_err().contains("/nonexistent/a.rio"));
        let s = JobSpec::from_json(r#"{"kind":"infer","model":"/no/m","data":"/no/d","out":"o"}"#).unwrap();
        assert!(s.check_files().is_err());
    }
}
