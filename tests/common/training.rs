//! Fashion-MNIST training jobs for the tests: the dataset converted to RecordIO, the
//! `psrs train` arguments, and readers of what the nodes print (accuracy, tasks
//! trained, the master's progress).

use super::{psrs_bin, Cluster};
use std::path::{Path, PathBuf};
use std::process::Command;

/// Where Debian's dataset-fashion-mnist puts the IDX files.
pub const DATA: &str = "/usr/share/datasets/fashion-mnist";

/// Fast failure detection (heartbeats every 0.2 s, dead after 1 s) and resends.
pub const ENV: &[(&str, &str)] = &[
    ("PS_HEARTBEAT_INTERVAL", "0.2"),
    ("PS_HEARTBEAT_TIMEOUT", "1"),
    ("PS_RESEND", "1"),
    ("PS_RESEND_TIMEOUT", "500"),
];

/// The heartbeat timeout of [`ENV`], in seconds.
pub const HEARTBEAT_TIMEOUT_S: f64 = 1.0;

/// Tasks of the job of [`args`]: 60 chunks of 1000 examples, one per task, 4 passes.
pub const TASKS: usize = 240;

/// True if Fashion-MNIST is installed.
pub fn have_data() -> bool {
    Path::new(DATA).join("train-images-idx3-ubyte.gz").exists()
}

/// Fails the test (never passes it silently) when Fashion-MNIST is not installed.
pub fn require_data() {
    assert!(
        have_data(),
        "{DATA} is absent: apt-get install dataset-fashion-mnist (scripts/install-deps.sh does)"
    );
}

/// Converts split `split` (`train` or `t10k`) to `dir/split.rio`, 1000 examples a chunk.
pub fn convert(dir: &Path, split: &str) -> PathBuf {
    convert_chunks(dir, split, 1000)
}

/// Converts split `split` to `dir/split.rio`, `per_chunk` examples a chunk.
pub fn convert_chunks(dir: &Path, split: &str, per_chunk: u32) -> PathBuf {
    let out = dir.join(format!("{split}.rio"));
    let st = Command::new(psrs_bin())
        .args([
            "convert",
            "--format",
            "idx",
            "--per-chunk",
            &per_chunk.to_string(),
            "--input",
        ])
        .arg(format!("{DATA}/{split}-images-idx3-ubyte.gz"))
        .arg("--labels")
        .arg(format!("{DATA}/{split}-labels-idx1-ubyte.gz"))
        .arg("--out")
        .arg(&out)
        .status()
        .unwrap();
    assert!(st.success());
    out
}

/// A small softmax job: Fashion-MNIST's test split (converted in `dir`, 20 tasks a
/// pass) as training and test set, `epochs` passes, working in `dir/work`, a
/// `progress:` line per finished task.
pub fn small_job(dir: &Path, epochs: u32) -> Vec<String> {
    require_data();
    let data = convert_chunks(dir, "t10k", 500);
    softmax_args(&data, &dir.join("work"), epochs, 64)
}

/// `psrs train` arguments of a softmax job on `data` (training and test set),
/// `epochs` passes of `batch`-example minibatches, working in `work`, a `progress:`
/// line per finished task.
pub fn softmax_args(data: &Path, work: &Path, epochs: u32, batch: u32) -> Vec<String> {
    let (data, work) = (data.display().to_string(), work.display().to_string());
    let (e, b) = (epochs.to_string(), batch.to_string());
    [
        "train",
        "--model",
        "softmax",
        "--lr",
        "0.05",
        "--batch",
        &b,
        "--epochs",
        &e,
        "--train",
        &data,
        "--test",
        &data,
        "--work-dir",
        &work,
        "--progress-secs",
        "0",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}

/// `progress:` lines process `i` logged (one per finished task: [`args`] passes
/// `--progress-secs 0`).
pub fn progress_lines(c: &Cluster, i: usize) -> usize {
    c.procs[i].stderr().matches("progress: ").count()
}

/// A 4-pass sync softmax job (learning rate decayed by 0.7 per pass) working in `work`,
/// logging a `progress:` line per finished task.
pub fn args(train: &Path, test: &Path, work: &Path) -> Vec<String> {
    [
        "train",
        "--model",
        "softmax",
        "--lr",
        "0.05",
        "--momentum",
        "0.9",
        "--lr-decay",
        "0.7",
        "--batch",
        "64",
        "--epochs",
        "4",
        "--checkpoint-every",
        "10",
        "--task-timeout-ms",
        "5000",
        "--progress-secs",
        "0",
        "--train",
    ]
    .iter()
    .map(|s| s.to_string())
    .chain([
        train.display().to_string(),
        "--test".into(),
        test.display().to_string(),
        "--work-dir".into(),
        work.display().to_string(),
    ])
    .collect()
}

/// The final test accuracy worker 0 printed.
pub fn final_accuracy(c: &Cluster) -> f64 {
    let out = c.all_stdout();
    let line = out
        .lines()
        .find(|l| l.starts_with("final test accuracy"))
        .unwrap_or_else(|| panic!("no accuracy\n{}", c.dump()));
    line.split_whitespace().nth(3).unwrap().parse().unwrap()
}

/// Tasks the workers report having trained ("worker 9 trained 120 tasks").
pub fn trained_tasks(c: &Cluster) -> usize {
    c.all_stdout()
        .lines()
        .filter_map(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            match w[..] {
                ["worker", _, "trained", n, "tasks"] => n.parse::<usize>().ok(),
                _ => None,
            }
        })
        .sum()
}

/// Tasks the master counts done, from its last "progress: N/240 tasks" line in `log`.
pub fn tasks_done(log: &str) -> usize {
    log.lines().rev().find_map(progress_count).unwrap_or(0)
}

/// The tasks done a scheduler's "progress: N/..." line reports.
fn progress_count(line: &str) -> Option<usize> {
    line.split("progress: ").nth(1)?.split('/').next()?.parse().ok()
}

/// The longest time between two consecutive task completions in a scheduler's log
/// (its "progress: N/..." lines, by their timestamps) and the count it led to: where a
/// run stalled, as opposed to one that was slow throughout. None under two such lines.
pub fn longest_progress_gap(log: &str) -> Option<(f64, usize)> {
    let points: Vec<(f64, usize)> = log
        .lines()
        .filter_map(|l| {
            let n = progress_count(l)?;
            // "[2026-11-24T09:42:03.728Z scheduler ..." → seconds within the day
            let clock = l.split('T').nth(1)?.split('Z').next()?;
            let mut parts = clock.split(':');
            let (h, m, sec): (f64, f64, f64) = (
                parts.next()?.parse().ok()?,
                parts.next()?.parse().ok()?,
                parts.next()?.parse().ok()?,
            );
            Some((h * 3600.0 + m * 60.0 + sec, n))
        })
        .collect();
    points
        .windows(2)
        .map(|w| ((w[1].0 - w[0].0).rem_euclid(86400.0), w[1].1))
        .max_by(|a, b| a.0.total_cmp(&b.0))
}

/// The node id process `i` logged when it started ("worker[11]@... started").
pub fn id_of(c: &Cluster, i: usize) -> i32 {
    let err = c.procs[i].stderr();
    let line = err.lines().find(|l| l.ends_with(" started")).expect("started");
    let tag = line.split_whitespace().rev().nth(1).unwrap();
    tag.split('[')
        .nth(1)
        .unwrap()
        .split(']')
        .next()
        .unwrap()
        .parse()
        .unwrap()
}
