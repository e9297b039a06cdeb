//! What a new user trips over, on the real binary: wrong data and wrong
//! settings are one-line errors before any work (with the role in front for cluster
//! nodes), and a corrupt chunk fails its task rather than the job, which finishes and
//! reports the records it skipped.

mod common;

use common::{psrs_bin, Cluster};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

const LIMIT: Duration = Duration::from_secs(120);

fn psrs(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut c = Command::new(psrs_bin());
    c.args(args).env_remove("RUST_LOG");
    for (k, v) in env {
        c.env(k, v);
    }
    c.output().unwrap()
}

/// `psrs convert --format csv --input CSV --out OUT EXTRA...`.
fn convert_csv(csv: &Path, out: &Path, extra: &[&str]) -> Output {
    let (c, o) = (csv.display().to_string(), out.display().to_string());
    let mut a = vec!["convert", "--format", "csv", "--input", &c, "--out", &o];
    a.extend(extra);
    psrs(&a, &[])
}

/// The process failed with exactly one stderr line containing `want`; returns it.
fn one_line_error(out: &Output, want: &str) -> String {
    let err = String::from_utf8_lossy(&out.stderr).trim().to_string();
    assert!(!out.status.success(), "succeeded: {err}");
    let last = err.lines().last().unwrap_or("").to_string();
    assert!(last.contains(want), "wanted '{want}' in\n{err}");
    assert!(last.contains("error: "), "{err}");
    last
}

/// A CSV dataset of `rows` rows with `features` features (labels 0/1) in RecordIO,
/// `per_chunk` rows per chunk, uncompressed (so a flipped byte is a CRC mismatch).
fn dataset(dir: &Path, name: &str, rows: usize, features: usize, per_chunk: usize) -> PathBuf {
    let csv = dir.join(format!("{name}.csv"));
    let text: String = (0..rows)
        .map(|i| {
            let f: Vec<String> = (0..features)
                .map(|j| format!("{}", ((i * 7 + j * 3) % 11) as f32 / 10.0))
                .collect();
            format!("{},{}\n", i % 2, f.join(","))
        })
        .collect();
    std::fs::write(&csv, text).unwrap();
    let out = dir.join(format!("{name}.rio"));
    let n = per_chunk.to_string();
    let r = convert_csv(&csv, &out, &["--per-chunk", &n, "--compressor", "none"]);
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    out
}

/// Flips a payload byte of chunk 1 of an uncompressed RecordIO file.
fn corrupt_chunk_1(path: &Path) {
    let mut b = std::fs::read(path).unwrap();
    let len0 = u32::from_le_bytes(b[12..16].try_into().unwrap()) as usize;
    b[20 + len0 + 20 + 5] ^= 0x5a;
    std::fs::write(path, b).unwrap();
}

#[test]
fn bad_settings_are_one_line_errors_naming_the_variable_and_the_role() {
    let base = [
        ("DMLC_ROLE", "worker"),
        ("DMLC_PS_ROOT_URI", "127.0.0.1"),
        ("DMLC_PS_ROOT_PORT", "9"),
        ("DMLC_NUM_WORKER", "1"),
    ];
    let mut env = base.to_vec();
    env.push(("DMLC_NUM_SERVER", "20000"));
    let e = one_line_error(&psrs(&["connect"], &env), "DMLC_NUM_SERVER: 20000");
    assert!(e.starts_with("psrs worker: error: "), "{e}");

    // a scheduler nobody joins says who is missing, not "is the scheduler running"
    let port = common::free_port().to_string();
    let env = [
        ("DMLC_ROLE", "scheduler"),
        ("DMLC_PS_ROOT_URI", "127.0.0.1"),
        ("DMLC_PS_ROOT_PORT", port.as_str()),
        ("DMLC_NUM_SERVER", "1"),
        ("DMLC_NUM_WORKER", "2"),
        ("PS_JOIN_TIMEOUT", "1"),
    ];
    let e = one_line_error(&psrs(&["connect"], &env), "only 0/1 servers and 0/2 workers registered");
    assert!(e.starts_with("psrs scheduler: error: "), "{e}");
}

#[test]
fn wrong_data_is_refused_before_any_work() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path();
    let four = dataset(dir, "four", 40, 4, 10).display().to_string();
    let three = dataset(dir, "three", 40, 3, 10).display().to_string();
    let empty = dir.join("empty.rio");
    std::fs::write(&empty, b"").unwrap();
    let empty = empty.display().to_string();

    // convert: no empty chunks; a header without --header names the column
    let csv = dir.join("h.csv");
    std::fs::write(&csv, "label,a,b\n1,2,3\n").unwrap();
    let out = dir.join("h.rio");
    assert!(!convert_csv(&csv, &out, &["--per-chunk", "0"]).status.success());
    one_line_error(
        &convert_csv(&csv, &out, &[]),
        "h.csv:1: column 1: 'label' is not a number (if the first line is a header, pass --header)",
    );

    // train: a worker checks --test and --out before it joins (no scheduler runs here)
    let port = common::free_port().to_string();
    let env = [
        ("DMLC_ROLE", "worker"),
        ("DMLC_PS_ROOT_URI", "127.0.0.1"),
        ("DMLC_PS_ROOT_PORT", port.as_str()),
        ("DMLC_NUM_SERVER", "1"),
        ("DMLC_NUM_WORKER", "1"),
    ];
    let train = ["train", "--train", &four, "--classes", "2", "--work-dir"];
    let work = dir.join("work").display().to_string();
    let mut a: Vec<&str> = train.to_vec();
    a.extend([work.as_str(), "--test", &three]);
    let e = one_line_error(&psrs(&a, &env), "it has 3 features, the model softmax(4→2) takes 4");
    assert!(e.starts_with("psrs worker: error: --test "), "{e}");
    let blocker = dir.join("a-file");
    std::fs::write(&blocker, b"x").unwrap();
    let out = blocker.join("model.bin").display().to_string();
    let mut a: Vec<&str> = train.to_vec();
    a.extend([work.as_str(), "--out", &out]);
    one_line_error(&psrs(&a, &env), "--out ");

    // eval: a model of 4 inputs, trained on a real cluster
    let model = dir.join("m.model").display().to_string();
    let args = [
        "train",
        "--train",
        &four,
        "--classes",
        "2",
        "--epochs",
        "1",
        "--work-dir",
        &work,
        "--out",
        &model,
    ];
    Cluster::start(1, 1, &args, &[], LIMIT).wait_success();
    let ok = psrs(&["eval", "--model", &model, "--data", &four], &[]);
    assert!(ok.status.success(), "{}", String::from_utf8_lossy(&ok.stderr));
    one_line_error(
        &psrs(&["eval", "--model", &model, "--data", &empty], &[]),
        "empty.rio holds no examples",
    );
    one_line_error(
        &psrs(&["eval", "--model", &model, "--data", &three], &[]),
        "example 0 does not fit the model: it has 3 features, the model softmax(4→2) takes 4",
    );
    let dir_s = dir.display().to_string();
    one_line_error(
        &psrs(&["eval", "--model", &model, "--data", &dir_s], &[]),
        "is a directory, not a RecordIO file",
    );
}

#[test]
fn a_corrupt_chunk_fails_its_task_and_the_job_reports_the_skipped_records() {
    let d = tempfile::tempdir().unwrap();
    let data = dataset(d.path(), "data", 400, 4, 20); // 20 chunks of 20
    corrupt_chunk_1(&data);
    let (data, work) = (data.display().to_string(), d.path().join("work").display().to_string());
    let args = [
        "train",
        "--train",
        &data,
        "--classes",
        "2",
        "--epochs",
        "2",
        "--max-retries",
        "2",
        "--work-dir",
        &work,
        "--progress-secs",
        "600",
    ];
    let mut c = Cluster::start(1, 2, &args, &[], LIMIT);
    c.wait_success();
    let (out, err) = (c.procs[0].stdout(), c.procs[0].stderr());
    assert!(
        out.contains("job complete: 38 tasks trained, 2 given up, 40 records skipped"),
        "{}",
        c.dump()
    );
    assert!(out.contains("data.rio: chunk 1: CRC mismatch"), "{}", c.dump());
    // tried 1 + --max-retries times in each pass
    let tries = err
        .lines()
        .filter(|l| l.contains("master::queues] task") && l.contains("could not be read"))
        .count();
    assert_eq!(tries, 2 * 3, "{}", c.dump());
    // progress lines: the first and the last, not one per task
    assert_eq!(err.matches("progress: ").count(), 2, "{}", c.dump());
}
