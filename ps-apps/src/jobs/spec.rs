//! What a job is: the JSON body of `POST /jobs`. A training job carries the options of
//! `psrs train` by their long names with `-` written `_` (defaults as in the CLI); an
//! inference job names a saved model, a RecordIO dataset and where its outputs go.
//! Unknown fields are refused, so a misspelt option is an error and not a silent
//! default.

use super::error::JobsError;
pub use crate::model::ModelKind;
use crate::model::{Model, ModelOptions};
use crate::pyrunner::UserModel;
use crate::recordio::{self, Example};
use serde::{Deserialize, Serialize};
use std::path::Path;

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

/// An inference job: a model over a dataset. The model is one of a model file psrs
/// wrote (`model`), a TorchScript file (`torch`), or a Python function (`runner`,
/// `module:function`); the last two run in each worker's Python runner. The dataset is
/// RecordIO files, or (for `runner`) one directory whose files are the inputs.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InferSpec {
    /// A model file psrs wrote (`--out` of a training job or of `psrs train`).
    #[serde(default)]
    pub model: Option<String>,
    /// A torch model file, a torch.export program (`torch.export.save`, .pt2) or a
    /// TorchScript file (`torch.jit.save`), given a float32 batch `[N, features]` of
    /// the dataset's examples (sparse ones densified to `dim`), returning logits
    /// `[N, classes]`.
    #[serde(default)]
    pub torch: Option<String>,
    /// A Python function `module:function` given a list of inputs (records' bytes, or
    /// file paths for a directory) and returning one output per input: a string, a
    /// number or a list of them (CSV columns after `index`).
    #[serde(default)]
    pub runner: Option<String>,
    /// A directory put first on the runner's `sys.path` (with `runner`).
    #[serde(default)]
    pub pythonpath: Option<String>,
    /// The dataset: RecordIO files, read in order, or one directory (its files in
    /// sorted order; with `runner`).
    pub data: Vec<String>,
    /// Where the outputs go (CSV, in dataset order: `index,class,probability,label`
    /// for `model` and `torch`, `index,output...` for `runner`).
    pub out: String,
    /// Chunks per batch ("query") of a RecordIO dataset.
    #[serde(default = "d_chunks")]
    pub chunks_per_task: usize,
    /// Inputs per call of a `torch` model or `runner` function; for a directory, also
    /// the files per query.
    #[serde(default = "d_infer_batch")]
    pub batch: usize,
    /// The input width of a `torch` model (default: a dense example's length; needed
    /// for sparse examples).
    #[serde(default)]
    pub dim: Option<usize>,
    /// A query times out after this many ms at least, or four times the job's pace
    /// if that is longer (then it is retried elsewhere, and a runner still on it is
    /// killed). Longer than training's default: a Python model's first queries may be
    /// slow.
    #[serde(default = "d_infer_timeout")]
    pub task_timeout_ms: u64,
    /// Failures or timeouts after which a query is given up (the job then fails).
    #[serde(default = "d_retries")]
    pub max_retries: u32,
}

fn d_infer_batch() -> usize {
    16
}
fn d_infer_timeout() -> u64 {
    60_000
}

/// Whether `s` is a Python identifier (ASCII letters, digits and `_`, or any other
/// alphanumeric character; not starting with a digit).
fn identifier(s: &str) -> bool {
    let mut c = s.chars();
    c.next().is_some_and(|f| f == '_' || f.is_alphabetic()) && c.all(|x| x == '_' || x.is_alphanumeric())
}

impl InferSpec {
    /// The model a Python runner runs for this job (None for a psrs model file).
    pub fn user_model(&self) -> Option<UserModel> {
        match (&self.torch, &self.runner) {
            (Some(t), _) => Some(UserModel::Torch(t.clone())),
            (None, Some(r)) => Some(UserModel::Runner {
                function: r.clone(),
                pythonpath: self.pythonpath.clone(),
            }),
            (None, None) => None,
        }
    }

    /// Whether the dataset is a directory of input files.
    pub fn reads_directory(&self) -> bool {
        self.data.len() == 1 && crate::storage::confined::job_files().is_dir(Path::new(&self.data[0]))
    }

    /// The model's name as the job list shows it.
    pub fn model_name(&self) -> String {
        let file = |p: &str| {
            Path::new(p)
                .file_name()
                .map_or(p.to_string(), |f| f.to_string_lossy().into_owned())
        };
        match (&self.model, &self.torch, &self.runner) {
            (_, Some(t), _) => format!("torchscript {}", file(t)),
            (_, _, Some(r)) => format!("python {r}"),
            (Some(m), _, _) => file(m),
            _ => "?".into(),
        }
    }

    fn validate(&self) -> Result<(), JobsError> {
        let given = [&self.model, &self.torch, &self.runner];
        if given.iter().filter(|m| m.is_some()).count() != 1 {
            return Err(JobsError::BadRequest("give one of \"model\" (a psrs model file), \"torch\" (a TorchScript file) or \"runner\" (module:function)".into()));
        }
        if given.iter().any(|m| m.as_deref() == Some("")) {
            return Err(JobsError::BadRequest("the model is an empty path".into()));
        }
        if self.out.is_empty() || self.data.is_empty() || self.data.iter().any(|p| p.is_empty()) {
            return Err(JobsError::BadRequest("\"data\" and \"out\" are required".into()));
        }
        if let Some(r) = &self.runner {
            let ok = r
                .split_once(':')
                .is_some_and(|(m, f)| m.split('.').all(identifier) && identifier(f));
            if !ok {
                return Err(JobsError::BadRequest(format!(
                    "\"runner\" {r:?}: write it module:function (e.g. mymodels:classify)"
                )));
            }
        } else if self.pythonpath.is_some() {
            return Err(JobsError::BadRequest("\"pythonpath\" goes with \"runner\"".into()));
        }
        if self.dim.is_some() && self.torch.is_none() {
            return Err(JobsError::BadRequest("\"dim\" goes with \"torch\"".into()));
        }
        if self.chunks_per_task == 0 || self.batch == 0 || self.task_timeout_ms == 0 || self.dim == Some(0) {
            return Err(JobsError::BadRequest(
                "\"chunks_per_task\", \"batch\", \"dim\" and \"task_timeout_ms\" must be above 0".into(),
            ));
        }
        Ok(())
    }

    /// Reads what the job needs before it is accepted (see [`JobSpec::check_files`]).
    fn check_files(&self) -> Result<Option<Model>, JobsError> {
        let dirs = self.data.iter().filter(|p| Path::new(p).is_dir()).count();
        if dirs > 0 {
            if self.data.len() > 1 {
                return Err(JobsError::BadRequest(
                    "\"data\": a directory dataset is one directory".into(),
                ));
            }
            if self.runner.is_none() {
                return Err(JobsError::BadRequest(format!(
                    "\"data\" {} is a directory: its files go to a \"runner\" function; \"model\" and \"torch\" read RecordIO files",
                    self.data[0]
                )));
            }
            super::directory::list_directory(Path::new(&self.data[0]))?;
        } else {
            for f in &self.data {
                check_recordio("data", f)?;
            }
        }
        if let Some(m) = &self.model {
            return crate::model::load(Path::new(m))
                .map(|(m, _)| Some(m))
                .map_err(|e| match e {
                    crate::model::ModelFileError::Io { ref source, .. } => {
                        JobsError::BadRequest(format!("\"model\": '{m}': {source}"))
                    }
                    _ => unusable("model", m, "psrs model file", None, &e),
                });
        }
        if let Some(t) = &self.torch {
            let mut magic = [0u8; 4];
            crate::storage::confined::job_files()
                .open(Path::new(t))
                .and_then(|mut f| std::io::Read::read_exact(&mut f, &mut magic))
                .map_err(|e| JobsError::BadRequest(format!("\"torch\" {t}: {e}")))?;
            if &magic != b"PK\x03\x04" {
                return Err(JobsError::BadRequest(format!(
                    "\"torch\" {t}: not a TorchScript file or torch.export program (torch.jit.save and torch.export.save write zip archives)"
                )));
            }
        }
        if let Some(p) = self
            .pythonpath
            .as_ref()
            .filter(|p| !crate::storage::confined::job_files().is_dir(Path::new(p)))
        {
            return Err(JobsError::BadRequest(format!("\"pythonpath\" {p}: no such directory")));
        }
        Ok(None)
    }
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
    /// Parses a `POST /jobs` body; [`JobsError::BadRequest`] is one line saying what is
    /// wrong.
    pub fn from_json(body: &str) -> Result<JobSpec, JobsError> {
        let mut v: serde_json::Value =
            serde_json::from_str(body).map_err(|e| JobsError::BadRequest(format!("malformed JSON: {e}")))?;
        if !v.is_object() {
            return Err(JobsError::BadRequest("the body must be a JSON object".into()));
        }
        match v.get("kind").and_then(|k| k.as_str()) {
            Some("train") | Some("infer") => {}
            Some(k) => {
                return Err(JobsError::BadRequest(format!(
                    "unknown kind {k:?}: use \"train\" or \"infer\""
                )))
            }
            None => {
                return Err(JobsError::BadRequest(
                    "missing \"kind\": use \"train\" or \"infer\"".into(),
                ))
            }
        }
        normalize(&mut v);
        let spec: JobSpec = serde_json::from_value(v).map_err(|e| JobsError::BadRequest(e.to_string()))?;
        spec.validate()?;
        Ok(spec)
    }

    /// Checks the values that need no file (the shell checks the files with
    /// [`JobSpec::check_files`]); [`JobsError::BadRequest`] names the field.
    pub fn validate(&self) -> Result<(), JobsError> {
        match self {
            JobSpec::Train(t) => {
                if t.train.is_empty() || t.train.iter().any(|p| p.is_empty()) {
                    return Err(JobsError::BadRequest(
                        "\"train\" must name at least one RecordIO file".into(),
                    ));
                }
                if t.batch == 0 || t.epochs == 0 || !t.lr.is_finite() || t.lr <= 0.0 {
                    return Err(JobsError::BadRequest(
                        "\"batch\", \"epochs\" and \"lr\" must be above 0".into(),
                    ));
                }
                if !(t.lr_decay.is_finite() && t.lr_decay > 0.0 && t.lr_decay <= 1.0) {
                    return Err(JobsError::BadRequest(format!(
                        "\"lr_decay\" {}: must be in (0, 1]",
                        t.lr_decay
                    )));
                }
                if !t.momentum.is_finite() || !t.weight_decay.is_finite() {
                    return Err(JobsError::BadRequest(
                        "\"momentum\" and \"weight_decay\" must be finite".into(),
                    ));
                }
                if t.chunks_per_task == 0 || t.task_timeout_ms == 0 {
                    return Err(JobsError::BadRequest(
                        "\"chunks_per_task\" and \"task_timeout_ms\" must be above 0".into(),
                    ));
                }
            }
            JobSpec::Infer(i) => i.validate()?,
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

    /// Reads what the job needs before it is accepted: every dataset file's index (or
    /// the dataset directory's listing) and, for training, the model's sizes (the input
    /// width from the first example unless `dim` is given); for inference, the model
    /// file. Returns the model, None for a model a Python runner runs. An error
    /// ([`JobsError::BadRequest`]) names the field and the path only, never what the file holds (a detail such as a wrong
    /// magic number quotes its bytes, and the file may be anyone's): the detail goes to
    /// the scheduler's log.
    pub fn check_files(&self) -> Result<Option<Model>, JobsError> {
        match self {
            JobSpec::Train(t) => {
                let files = t
                    .train
                    .iter()
                    .map(|p| ("train", p))
                    .chain(t.test.iter().map(|p| ("test", p)));
                for (field, f) in files {
                    check_recordio(field, f)?;
                }
                t.resolve_model().map(Some)
            }
            JobSpec::Infer(i) => i.check_files(),
        }
    }
}

/// Checks that `f` (the job's field `field`) is a readable RecordIO file.
fn check_recordio(field: &str, f: &str) -> Result<(), JobsError> {
    recordio::index(Path::new(f))
        .map(|_| ())
        .map_err(|e| unusable(field, f, "RecordIO file", e.unreachable(), &e))
}

/// The one-line answer for a job file that cannot be used: a file that cannot be
/// reached (`unreachable`: no such file, no permission, an object storage's missing
/// object) says what the file system or store said; anything else is "not a readable
/// WHAT", the detail logged. Either is the request's fault ([`JobsError::BadRequest`]).
fn unusable(
    field: &str,
    path: &str,
    what: &str,
    unreachable: Option<&str>,
    detail: &dyn std::fmt::Display,
) -> JobsError {
    if let Some(io) = unreachable {
        return JobsError::BadRequest(format!("\"{field}\": '{path}': {io}"));
    }
    log::warn!("job refused: \"{field}\": {detail}");
    JobsError::BadRequest(format!(
        "\"{field}\": '{path}' is not a readable {what} (the scheduler's log says why)"
    ))
}

/// The first example of a training file, its errors as the job's one-line answers
/// (file contents never echoed).
fn first_example(path: &str) -> Result<Example, JobsError> {
    let p = Path::new(path);
    let bad = |detail: &dyn std::fmt::Display| unusable("train", path, "RecordIO dataset", None, detail);
    let idx = recordio::index(p).map_err(|e| unusable("train", path, "RecordIO file", e.unreachable(), &e))?;
    let c = idx
        .first()
        .ok_or_else(|| JobsError::BadRequest(format!("\"train\": '{path}' holds no records")))?;
    let rec = recordio::read_chunk(p, c).map_err(|e| bad(&e))?;
    Example::decode(
        rec.first()
            .ok_or_else(|| JobsError::BadRequest(format!("\"train\": '{path}' holds no records")))?,
    )
    .map_err(|e| bad(&e))
}

impl TrainSpec {
    /// The model this job trains (the input width read from the first example of the
    /// first training file unless `dim` is set); validated ([`JobsError::BadRequest`]).
    pub fn resolve_model(&self) -> Result<Model, JobsError> {
        ModelOptions {
            kind: self.model,
            dim: self.dim,
            hidden: self.hidden,
            classes: self.classes,
        }
        .build(|| first_example(&self.train[0]), "\"dim\"")
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
            (r#"{"kind":"infer","data":"d","out":"o"}"#, "give one of"),
            (
                r#"{"kind":"infer","model":"m","torch":"t","data":"d","out":"o"}"#,
                "give one of",
            ),
            (
                r#"{"kind":"infer","runner":"m.f","data":"d","out":"o"}"#,
                "module:function",
            ),
            (
                r#"{"kind":"infer","runner":"m:1f","data":"d","out":"o"}"#,
                "module:function",
            ),
            (
                r#"{"kind":"infer","runner":"a..b:f","data":"d","out":"o"}"#,
                "module:function",
            ),
            (
                r#"{"kind":"infer","torch":"t","pythonpath":"p","data":"d","out":"o"}"#,
                "goes with",
            ),
            (
                r#"{"kind":"infer","runner":"m:f","dim":3,"data":"d","out":"o"}"#,
                "goes with",
            ),
            (
                r#"{"kind":"infer","torch":"t","batch":0,"data":"d","out":"o"}"#,
                "above 0",
            ),
        ] {
            let e = JobSpec::from_json(body).unwrap_err();
            assert!(matches!(e, JobsError::BadRequest(_)));
            let e = e.to_string();
            assert!(e.contains(want), "{body}: {e}");
            assert!(!e.contains('\n'), "one line: {e}");
        }
    }

    #[test]
    fn missing_files_are_refused() {
        let s = JobSpec::from_json(r#"{"kind":"train","train":"/nonexistent/a.rio"}"#).unwrap();
        assert!(s.check_files().unwrap_err().to_string().contains("/nonexistent/a.rio"));
        let s = JobSpec::from_json(r#"{"kind":"infer","model":"/no/m","data":"/no/d","out":"o"}"#).unwrap();
        assert!(s.check_files().is_err());
    }

    #[test]
    fn a_users_model_is_checked_before_it_is_accepted() {
        let d = tempfile::tempdir().unwrap();
        let dir = d.path().join("inputs");
        std::fs::create_dir(&dir).unwrap();
        std::fs::write(dir.join("a.jpg"), "x").unwrap();
        let (pt, junk) = (d.path().join("m.pt"), d.path().join("junk.pt"));
        std::fs::write(&pt, b"PK\x03\x04 rest of a zip").unwrap();
        std::fs::write(&junk, b"not a zip").unwrap();
        let rio = d.path().join("d.rio");
        crate::recordio::Writer::create(&rio, crate::recordio::Compressor::None, 4, 1 << 20)
            .unwrap()
            .finish()
            .unwrap();
        let check = |v: serde_json::Value| JobSpec::from_json(&v.to_string()).and_then(|s| s.check_files());
        let ok = check(serde_json::json!({"kind":"infer","runner":"pkg.m:f","data":dir,"out":"o"}));
        assert_eq!(ok.unwrap(), None, "a directory for a function");
        let ok = check(serde_json::json!({"kind":"infer","torch":pt,"data":rio,"out":"o"}));
        assert_eq!(ok.unwrap(), None, "a TorchScript file over RecordIO");
        for (v, want) in [
            (
                serde_json::json!({"kind":"infer","torch":junk,"data":rio,"out":"o"}),
                "not a TorchScript file",
            ),
            (
                serde_json::json!({"kind":"infer","torch":pt,"data":dir,"out":"o"}),
                "is a directory",
            ),
            (
                serde_json::json!({"kind":"infer","runner":"m:f","data":[dir, rio],"out":"o"}),
                "one directory",
            ),
            (
                serde_json::json!({"kind":"infer","runner":"m:f","pythonpath":"/no/dir","data":dir,"out":"o"}),
                "no such directory",
            ),
            (
                serde_json::json!({"kind":"infer","torch":"/no/m.pt","data":rio,"out":"o"}),
                "/no/m.pt",
            ),
        ] {
            let e = check(v.clone()).unwrap_err().to_string();
            assert!(e.contains(want), "{v}: {e}");
        }
        let s =
            JobSpec::from_json(&serde_json::json!({"kind":"infer","runner":"m:f","data":dir,"out":"o"}).to_string())
                .unwrap();
        let JobSpec::Infer(i) = s else { panic!() };
        assert!(i.reads_directory());
        assert_eq!((i.batch, i.task_timeout_ms, i.max_retries), (16, 60_000, 3));
        assert_eq!(i.model_name(), "python m:f");
    }

    #[test]
    fn errors_about_files_never_quote_them() {
        let t = tempfile::tempdir().unwrap();
        let f = t.path().join("passwd");
        std::fs::write(&f, "root:x:0:0:root:/root:/bin/bash\n").unwrap();
        let p = f.display().to_string();
        for body in [
            serde_json::json!({"kind": "train", "train": p}),
            serde_json::json!({"kind": "infer", "model": p, "data": p, "out": "x.csv"}),
        ] {
            let e = JobSpec::from_json(&body.to_string())
                .unwrap()
                .check_files()
                .unwrap_err()
                .to_string();
            assert!(e.contains(&p) && e.contains("is not a readable"), "{e}");
            assert!(
                !e.contains("root") && !e.contains("0x746f6f72") && !e.contains("6f72"),
                "{e}"
            );
        }
        let missing = t.path().join("nope.rio").display().to_string();
        let e = JobSpec::from_json(&serde_json::json!({"kind": "train", "train": missing}).to_string())
            .unwrap()
            .check_files()
            .unwrap_err()
            .to_string();
        assert!(e.contains("No such file"), "{e}");
    }
}
