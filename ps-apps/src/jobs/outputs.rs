//! An inference job's outputs: each finished batch is saved in its own file (named by
//! its task id, written atomically before the scheduler replies, so a restarted
//! scheduler has it and a batch done twice is kept once), and at the end the batches
//! are joined in task order — dataset order — into the job's output, a CSV file
//! `index,class,probability,label` (label empty for unlabelled records).

use super::wire::Prediction;
use crate::fsutil::write_atomic;
use std::io::Write;
use std::path::{Path, PathBuf};

fn batch_path(dir: &Path, task: u64) -> PathBuf {
    dir.join(format!("batch-{task:08}.csv"))
}

/// Whether a record counts for accuracy (it has a label).
fn labelled(p: &Prediction) -> bool {
    p.label.is_finite() && p.label >= 0.0
}

/// Saves batch `task`'s predictions in `dir` (replacing an earlier copy).
pub fn save_batch(dir: &Path, task: u64, preds: &[Prediction]) -> Result<(), String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let mut s = String::new();
    for p in preds {
        let label = if labelled(p) {
            format!("{}", p.label)
        } else {
            String::new()
        };
        s.push_str(&format!("{},{:.6},{label}\n", p.class, p.prob));
    }
    let path = batch_path(dir, task);
    write_atomic(&path, s.as_bytes()).map_err(|e| format!("{}: {e}", path.display()))
}

/// What joining the batches gave.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Joined {
    /// Records written.
    pub records: u64,
    /// Accuracy over the labelled records (None if none is labelled).
    pub accuracy: Option<f64>,
}

/// Joins batches `0..tasks` of `dir` into `out` (CSV with a header and a running
/// index); a missing batch is an error naming it.
pub fn join(dir: &Path, tasks: u64, out: &Path) -> Result<Joined, String> {
    let file = std::fs::File::create(out).map_err(|e| format!("{}: {e}", out.display()))?;
    let mut w = std::io::BufWriter::new(file);
    let err = |e: std::io::Error| format!("{}: {e}", out.display());
    writeln!(w, "index,class,probability,label").map_err(err)?;
    let (mut n, mut labelled, mut correct) = (0u64, 0u64, 0u64);
    for t in 0..tasks {
        let p = batch_path(dir, t);
        let text = std::fs::read_to_string(&p).map_err(|e| format!("batch {t} ({}): {e}", p.display()))?;
        for line in text.lines() {
            let mut f = line.split(',');
            let (class, label) = (f.next().unwrap_or(""), f.nth(1).unwrap_or(""));
            if !label.is_empty() {
                labelled += 1;
                if label.parse::<f64>().ok() == class.parse::<f64>().ok() {
                    correct += 1;
                }
            }
            writeln!(w, "{n},{line}").map_err(err)?;
            n += 1;
        }
    }
    w.flush().map_err(err)?;
    Ok(Joined {
        records: n,
        accuracy: (labelled > 0).then(|| correct as f64 / labelled as f64),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(class: u32, label: f32) -> Prediction {
        Prediction {
            class,
            prob: 0.5,
            label,
        }
    }

    #[test]
    fn batches_join_in_task_order_once_each() {
        let d = tempfile::tempdir().unwrap();
        let dir = d.path().join("batches");
        save_batch(&dir, 1, &[p(1, 1.0), p(0, f32::NAN)]).unwrap();
        save_batch(&dir, 0, &[p(2, 2.0), p(2, 3.0)]).unwrap();
        let out = d.path().join("out.csv");
        assert!(join(&dir, 3, &out).unwrap_err().contains("batch 2"));
        // a batch done twice replaces its first copy
        save_batch(&dir, 1, &[p(1, 1.0), p(0, f32::NAN)]).unwrap();
        let j = join(&dir, 2, &out).unwrap();
        assert_eq!(j.records, 4);
        assert_eq!(j.accuracy, Some(2.0 / 3.0));
        let text = std::fs::read_to_string(&out).unwrap();
        assert_eq!(
            text,
            "index,class,probability,label\n0,2,0.500000,2\n1,2,0.500000,3\n2,1,0.500000,1\n3,0,0.500000,\n"
        );
    }
}
