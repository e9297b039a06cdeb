//! An inference job's outputs: each finished batch is saved in its own file (named by
//! its task id, written atomically before the scheduler replies, so a restarted
//! scheduler has it and a batch done twice is kept once), and at the end the batches
//! are joined in task order — dataset order — into the job's output, a CSV file
//! `index,class,probability,label` (label empty for unlabelled records), or, for a
//! Python function's outputs, `index,output` (`index,output_0,output_1,...` when an
//! output is a list).

use super::error::JobsError;
use super::inputs::csv_field;
use super::wire::Prediction;
use crate::storage::confined::job_files;
use std::io::Write;
use std::path::{Path, PathBuf};

fn batch_path(dir: &Path, task: u64) -> PathBuf {
    dir.join(format!("batch-{task:08}.csv"))
}

/// Whether a record counts for accuracy (it has a label).
fn labelled(p: &Prediction) -> bool {
    p.label.is_finite() && p.label >= 0.0
}

/// Saves batch `task`'s predictions in `dir` (replacing an earlier copy);
/// [`JobsError::Io`] names the file that could not be written.
pub fn save_batch(dir: &Path, task: u64, preds: &[Prediction]) -> Result<(), JobsError> {
    job_files()
        .create_dir_all(dir)
        .map_err(|e| JobsError::Io(format!("{}: {e}", dir.display())))?;
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
    job_files()
        .write_atomic(&path, s.as_bytes())
        .map_err(|e| JobsError::Io(format!("{}: {e}", path.display())))
}

/// Saves batch `task`'s outputs of a Python function (each a list of fields) in `dir`;
/// [`JobsError::Io`] names the file that could not be written.
pub fn save_rows(dir: &Path, task: u64, rows: &[Vec<String>]) -> Result<(), JobsError> {
    job_files()
        .create_dir_all(dir)
        .map_err(|e| JobsError::Io(format!("{}: {e}", dir.display())))?;
    let mut s = String::new();
    for r in rows {
        let fields: Vec<String> = r.iter().map(|f| csv_field(f)).collect();
        s.push_str(&fields.join(","));
        s.push('\n');
    }
    let path = batch_path(dir, task);
    job_files()
        .write_atomic(&path, s.as_bytes())
        .map_err(|e| JobsError::Io(format!("{}: {e}", path.display())))
}

/// What a job's batches hold.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Columns {
    /// `class,probability,label` per record (accuracy over the labelled ones).
    Predictions,
    /// A Python function's output fields per input.
    Outputs,
}

/// Splits a batch file into its lines (CSV records): a line break inside a quoted
/// field belongs to the record.
fn records(text: &str) -> Vec<&str> {
    let (mut out, mut start, mut quoted) = (Vec::new(), 0, false);
    for (i, c) in text.char_indices() {
        match c {
            '"' => quoted = !quoted,
            '\n' if !quoted => {
                out.push(&text[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    if start < text.len() {
        out.push(&text[start..]);
    }
    out
}

/// Fields in a CSV record (commas outside quotes, plus one).
fn width(record: &str) -> usize {
    let mut quoted = false;
    1 + record
        .chars()
        .filter(|&c| {
            if c == '"' {
                quoted = !quoted;
            }
            c == ',' && !quoted
        })
        .count()
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
/// index); a missing batch, or an output that cannot be written, is [`JobsError::Io`]
/// naming it.
pub fn join(dir: &Path, tasks: u64, out: &Path, columns: Columns) -> Result<Joined, JobsError> {
    let read = |t: u64| {
        let p = batch_path(dir, t);
        let bytes = job_files()
            .read(&p)
            .map_err(|e| JobsError::Io(format!("batch {t} ({}): {e}", p.display())))?;
        String::from_utf8(bytes).map_err(|e| JobsError::Io(format!("batch {t} ({}): {e}", p.display())))
    };
    let header = match columns {
        Columns::Predictions => "index,class,probability,label".to_string(),
        Columns::Outputs => {
            let mut most = 1;
            for t in 0..tasks {
                most = records(&read(t)?).into_iter().map(width).fold(most, usize::max);
            }
            match most {
                1 => "index,output".to_string(),
                k => (0..k).fold("index".to_string(), |h, i| format!("{h},output_{i}")),
            }
        }
    };
    let file = job_files()
        .create(out)
        .map_err(|e| JobsError::Io(format!("{}: {e}", out.display())))?;
    let mut w = std::io::BufWriter::new(file);
    let err = |e: std::io::Error| JobsError::Io(format!("{}: {e}", out.display()));
    writeln!(w, "{header}").map_err(err)?;
    let (mut n, mut labelled, mut correct) = (0u64, 0u64, 0u64);
    for t in 0..tasks {
        let text = read(t)?;
        for line in records(&text) {
            if columns == Columns::Outputs {
                writeln!(w, "{n},{line}").map_err(err)?;
                n += 1;
                continue;
            }
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
        assert!(join(&dir, 3, &out, Columns::Predictions)
            .unwrap_err()
            .to_string()
            .contains("batch 2"));
        // a batch done twice replaces its first copy
        save_batch(&dir, 1, &[p(1, 1.0), p(0, f32::NAN)]).unwrap();
        let j = join(&dir, 2, &out, Columns::Predictions).unwrap();
        assert_eq!(j.records, 4);
        assert_eq!(j.accuracy, Some(2.0 / 3.0));
        let text = std::fs::read_to_string(&out).unwrap();
        assert_eq!(
            text,
            "index,class,probability,label\n0,2,0.500000,2\n1,2,0.500000,3\n2,1,0.500000,1\n3,0,0.500000,\n"
        );
    }

    #[test]
    fn function_outputs_join_with_a_column_per_field() {
        let d = tempfile::tempdir().unwrap();
        let dir = d.path().join("batches");
        let row = |f: &[&str]| f.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        save_rows(&dir, 0, &[row(&["cat", "0.9"]), row(&["a, \"b\"\nc"])]).unwrap();
        save_rows(&dir, 1, &[row(&["dog", "0.8", "x"])]).unwrap();
        let out = d.path().join("out.csv");
        let j = join(&dir, 2, &out, Columns::Outputs).unwrap();
        assert_eq!((j.records, j.accuracy), (3, None));
        let text = std::fs::read_to_string(&out).unwrap();
        assert_eq!(
            text,
            "index,output_0,output_1,output_2\n0,cat,0.9\n1,\"a, \"\"b\"\"\nc\"\n2,dog,0.8,x\n"
        );
        save_rows(&dir, 0, &[row(&["only"])]).unwrap();
        join(&dir, 1, &out, Columns::Outputs).unwrap();
        assert_eq!(std::fs::read_to_string(&out).unwrap(), "index,output\n0,only\n");
    }
}
