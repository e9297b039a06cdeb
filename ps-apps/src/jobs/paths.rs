//! Where a submitted job's files may be. With `psrs cluster --data-dir D --outputs-dir
//! O`, a job reads only files under D or O (e.g. a model a training job wrote) and
//! writes only under O; without `--data-dir` nothing is confined. A path with `..` is refused,
//! and so is one that leads out through a symbolic link (checked on the resolved path
//! of the file, or of its nearest existing directory for an output not written yet).
//! Object-store URLs (`s3://`, `http://`, `https://`) are not files and are exempt. A
//! path outside is refused without touching it, so refusals say nothing about what
//! exists there. Checked when the job is submitted.

use super::error::JobsError;
use super::spec::JobSpec;
use std::path::{Component, Path, PathBuf};

/// The directories a job's paths are confined to (none: unconfined).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct JobPaths {
    data: Option<Dir>,
    outputs: Option<Dir>,
}

/// A directory as given (made absolute) and resolved.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Dir {
    flag: &'static str,
    given: PathBuf,
    real: PathBuf,
}

fn absolute(p: &Path) -> Result<PathBuf, JobsError> {
    std::path::absolute(p).map_err(|e| JobsError::BadRequest(format!("'{}': {e}", p.display())))
}

impl Dir {
    fn new(flag: &'static str, p: &Path) -> Result<Dir, JobsError> {
        let real = p
            .canonicalize()
            .map_err(|e| JobsError::BadRequest(format!("{flag} '{}': {e}", p.display())))?;
        if !real.is_dir() {
            return Err(JobsError::BadRequest(format!(
                "{flag} '{}' is not a directory",
                p.display()
            )));
        }
        Ok(Dir {
            flag,
            given: absolute(p)?,
            real,
        })
    }

    /// Whether the absolute `p` lies under this directory, as given or resolved.
    fn holds(&self, p: &Path) -> bool {
        p.starts_with(&self.given) || p.starts_with(&self.real)
    }
}

impl JobPaths {
    /// Confines inputs to `data` (and `outputs`) and outputs to `outputs` when `data`
    /// is given (`psrs cluster --data-dir`, which needs `--outputs-dir`); without it
    /// nothing is confined (`--outputs-dir` alone only says where inference batches
    /// go). `data` must exist; `outputs` is made if missing. A directory that cannot
    /// be used is [`JobsError::BadRequest`] naming its flag.
    pub fn new(data: Option<&Path>, outputs: Option<&Path>) -> Result<JobPaths, JobsError> {
        let Some(data) = data else {
            return Ok(JobPaths::default());
        };
        let outputs = outputs
            .ok_or_else(|| JobsError::BadRequest("--data-dir needs --outputs-dir (where jobs may write)".into()))?;
        std::fs::create_dir_all(outputs)
            .map_err(|e| JobsError::BadRequest(format!("--outputs-dir '{}': {e}", outputs.display())))?;
        Ok(JobPaths {
            data: Some(Dir::new("--data-dir", data)?),
            outputs: Some(Dir::new("--outputs-dir", outputs)?),
        })
    }

    /// Checks every path of `spec`; [`JobsError::BadRequest`] is one line naming the
    /// field and the path as given.
    pub fn check(&self, spec: &JobSpec) -> Result<(), JobsError> {
        match spec {
            JobSpec::Train(t) => {
                for p in &t.train {
                    self.input("train", p)?;
                }
                if let Some(p) = &t.test {
                    self.input("test", p)?;
                }
                if let Some(p) = &t.out {
                    self.output("out", p)?;
                }
            }
            JobSpec::Infer(i) => {
                let files = [("model", &i.model), ("torch", &i.torch), ("pythonpath", &i.pythonpath)];
                for (field, p) in files {
                    if let Some(p) = p {
                        self.input(field, p)?;
                    }
                }
                for p in &i.data {
                    self.input("data", p)?;
                }
                self.output("out", &i.out)?;
            }
        }
        Ok(())
    }

    fn input(&self, field: &str, p: &str) -> Result<(), JobsError> {
        let Some(data) = &self.data else {
            return Ok(());
        };
        let dirs: Vec<&Dir> = std::iter::once(data).chain(self.outputs.as_ref()).collect();
        confine(field, p, &dirs, false)
    }

    fn output(&self, field: &str, p: &str) -> Result<(), JobsError> {
        match &self.outputs {
            Some(o) => confine(field, p, &[o], true),
            None => Ok(()),
        }
    }
}

fn confine(field: &str, p: &str, dirs: &[&Dir], may_be_new: bool) -> Result<(), JobsError> {
    if crate::storage::is_url(p) {
        return Ok(());
    }
    let names = dirs.iter().map(|d| d.flag).collect::<Vec<_>>().join(" or ");
    let path = Path::new(p);
    if path.components().any(|c| c == Component::ParentDir) {
        return Err(JobsError::BadRequest(format!(
            "\"{field}\": '{p}' has '..'; give a path inside {names}"
        )));
    }
    let abs = absolute(path).map_err(|e| JobsError::BadRequest(format!("\"{field}\": {e}")))?;
    let Some(dir) = dirs.iter().find(|d| d.holds(&abs)) else {
        return Err(JobsError::BadRequest(format!("\"{field}\": '{p}' is outside {names}")));
    };
    // resolve the file, or for an output not written yet its nearest existing directory
    let mut existing = abs.as_path();
    let real = loop {
        match existing.canonicalize() {
            Ok(r) => break r,
            Err(_) if may_be_new && existing != dir.given && existing.parent().is_some() => {
                existing = existing.parent().expect("checked");
            }
            Err(_) => {
                return Err(JobsError::BadRequest(format!(
                    "\"{field}\": '{p}' does not exist in {}",
                    dir.flag
                )))
            }
        }
    };
    if !dirs.iter().any(|d| real.starts_with(&d.real)) {
        return Err(JobsError::BadRequest(format!(
            "\"{field}\": '{p}' leads outside {names} (a symbolic link)"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn infer(model: &str, data: &str, out: &str) -> JobSpec {
        JobSpec::from_json(&serde_json::json!({"kind": "infer", "model": model, "data": data, "out": out}).to_string())
            .unwrap()
    }

    fn train(train: &str, out: &str) -> JobSpec {
        JobSpec::from_json(&serde_json::json!({"kind": "train", "train": train, "out": out}).to_string()).unwrap()
    }

    #[test]
    fn paths_stay_inside_the_directories() {
        let t = tempfile::tempdir().unwrap();
        let (data, outs, elsewhere) = (t.path().join("data"), t.path().join("outs"), t.path().join("elsewhere"));
        for d in [&data, &outs, &elsewhere] {
            std::fs::create_dir(d).unwrap();
        }
        std::fs::write(data.join("a.rio"), b"x").unwrap();
        std::fs::write(outs.join("m.bin"), b"x").unwrap();
        std::fs::write(elsewhere.join("secret"), b"root:x:0:0").unwrap();
        std::os::unix::fs::symlink(elsewhere.join("secret"), data.join("link.rio")).unwrap();
        std::os::unix::fs::symlink(&elsewhere, outs.join("escape")).unwrap();
        let jp = JobPaths::new(Some(&data), Some(&outs)).unwrap();
        let d = |n: &str| data.join(n).display().to_string();
        let o = |n: &str| outs.join(n).display().to_string();
        let e = |n: &str| elsewhere.join(n).display().to_string();

        jp.check(&train(&d("a.rio"), &o("new/dir/model.bin"))).unwrap();
        jp.check(&infer(&o("m.bin"), &d("a.rio"), &o("preds.csv"))).unwrap();
        jp.check(&infer("s3://bucket/m.bin", "https://host/a.rio", &o("p.csv")))
            .unwrap();
        // a URL's scheme in any case, as the storage layer reads it
        jp.check(&infer("S3://bucket/m.bin", "HTTPS://host/a.rio", &o("p.csv")))
            .unwrap();

        let refused = |spec: JobSpec, what: &str| {
            let err = jp.check(&spec).unwrap_err();
            assert!(matches!(err, JobsError::BadRequest(_)));
            let err = err.to_string();
            assert!(err.contains(what), "{err} (wanted {what})");
            assert!(!err.contains("root:x"), "never the contents: {err}");
        };
        refused(train(&e("secret"), &o("m.bin")), "outside --data-dir or --outputs-dir");
        refused(
            train(&format!("{}/../elsewhere/secret", data.display()), &o("m.bin")),
            "'..'",
        );
        refused(train(&d("link.rio"), &o("m.bin")), "symbolic link");
        refused(train(&d("missing.rio"), &o("m.bin")), "does not exist");
        refused(train(&d("a.rio"), &e("evil.bin")), "outside --outputs-dir");
        refused(train(&d("a.rio"), &o("escape/evil.bin")), "symbolic link");
        refused(train(&d("a.rio"), &o("escape/deeper/evil.bin")), "symbolic link");
        refused(infer(&d("a.rio"), &d("a.rio"), &d("p.csv")), "outside --outputs-dir");
        let user = |field: &str, path: &str| {
            let mut v = serde_json::json!({"kind": "infer", "runner": "m:f", "data": d("a.rio"), "out": o("p.csv")});
            v[field] = path.into();
            if field == "torch" {
                v.as_object_mut().unwrap().remove("runner");
            }
            JobSpec::from_json(&v.to_string()).unwrap()
        };
        jp.check(&user("pythonpath", &data.display().to_string())).unwrap();
        refused(user("torch", &e("secret")), "\"torch\"");
        refused(user("pythonpath", &elsewhere.display().to_string()), "\"pythonpath\"");
        assert!(!elsewhere.join("evil.bin").exists());
    }

    #[test]
    fn unconfined_without_the_directories_and_bad_directories_are_refused() {
        JobPaths::default()
            .check(&train("/anywhere/a.rio", "/anywhere/evil.bin"))
            .unwrap();
        let t = tempfile::tempdir().unwrap();
        // --outputs-dir alone confines nothing
        let alone = JobPaths::new(None, Some(&t.path().join("batches"))).unwrap();
        alone.check(&train("/anywhere/a.rio", "/anywhere/evil.bin")).unwrap();
        let e = JobPaths::new(Some(t.path()), None).unwrap_err().to_string();
        assert!(e.contains("--outputs-dir"), "{e}");
        let made = t.path().join("outputs/new");
        let e = JobPaths::new(Some(Path::new("/nonexistent/psrs-data")), Some(&made))
            .unwrap_err()
            .to_string();
        assert!(e.contains("--data-dir"), "{e}");
        JobPaths::new(Some(t.path()), Some(&made)).unwrap();
        assert!(made.is_dir(), "--outputs-dir made");
        let f = tempfile::NamedTempFile::new().unwrap();
        let e = JobPaths::new(Some(t.path()), Some(f.path())).unwrap_err().to_string();
        assert!(e.contains("--outputs-dir"), "{e}");
        let e = JobPaths::new(Some(f.path()), Some(&made)).unwrap_err().to_string();
        assert!(e.contains("not a directory"), "{e}");
    }
}
