//! A jobs cluster of real processes with `--data-dir` and `--outputs-dir` opens every
//! job file beneath them, in the process that opens it, when it opens it: paths are
//! checked when a job is submitted, and files swapped for symbolic links afterwards
//! are still refused. A training job's test set swapped for a link out (read by the
//! worker), a model's directory swapped for a link out (written by the worker), an
//! inference job's output swapped for a link out (written by the scheduler), and a
//! file of a directory dataset swapped for a link out (checked by the worker before
//! the Python runner gets its path): each job fails naming the file, and nothing
//! outside is read into a result or written. A directory dataset holding a link out
//! is refused at submission. Legitimate jobs (training, a function over a directory)
//! still run.

mod common;

use common::jobs::{blobs, jobs_cluster, train_args, ENV};
use serde_json::Value;
use std::os::unix::fs::symlink;
use std::path::Path;
use std::time::Duration;

const LIMIT: Duration = Duration::from_secs(240);

/// The functions wait for a file `gate` beside the module, so a job is surely under
/// way (its first queries taken) when the test swaps a link in.
const MODULE: &str = r#"
import hashlib, os, time

GATE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "gate")

def wait_gate():
    while not os.path.exists(GATE):
        time.sleep(0.02)

def digest(records):
    wait_gate()
    return [[len(r), hashlib.sha256(r).hexdigest()[:16]] for r in records]

def files(paths):
    wait_gate()
    return [[hashlib.sha256(open(p, "rb").read()).hexdigest()[:16]] for p in paths]
"#;

/// Replaces `path` with a symbolic link to `to` (what an attacker with write access
/// to the directory does after the job was checked).
fn swap_for_link(path: &Path, to: &Path) {
    if path.is_dir() {
        std::fs::remove_dir_all(path).unwrap();
    } else {
        std::fs::remove_file(path).unwrap();
    }
    symlink(to, path).unwrap();
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

#[test]
fn job_files_open_only_beneath_the_cluster_directories() {
    let dir = tempfile::tempdir().unwrap();
    let (data, outs, elsewhere) = (
        dir.path().join("data"),
        dir.path().join("outputs"),
        dir.path().join("elsewhere"),
    );
    for d in [&data, &outs, &elsewhere, &outs.join("sub"), &elsewhere.join("sub")] {
        std::fs::create_dir_all(d).unwrap();
    }
    let (train, test, test2) = (data.join("train.rio"), data.join("test.rio"), data.join("test2.rio"));
    blobs(&train, 1500, 100, 7);
    blobs(&test, 300, 50, 11);
    std::fs::copy(&test, &test2).unwrap();
    std::fs::copy(&test, elsewhere.join("test.rio")).unwrap();
    std::fs::write(elsewhere.join("secret.txt"), "root:x:0:0:do-not-read").unwrap();
    let mods = data.join("mods");
    std::fs::create_dir(&mods).unwrap();
    std::fs::write(mods.join("usermod.py"), MODULE).unwrap();
    let extra = [
        "--data-dir",
        s(&data),
        "--outputs-dir",
        s(&outs),
        "--python",
        common::python3(),
    ];
    let (c, api) = jobs_cluster(dir.path(), 2, &extra, ENV, LIMIT);
    let ended = |j: &str| {
        api.until(&c, LIMIT, j, "the end", |v| {
            v["state"] == "done" || v["state"] == "failed"
        })
    };
    let failed_naming = |v: &Value, file: &str, flag: &str| {
        let e = v["error"].as_str().unwrap_or_default();
        assert!(
            v["state"] == "failed" && e.contains(file) && e.contains(&format!("outside {flag}")),
            "{v}\n{}",
            c.dump()
        );
        assert!(!e.contains("do-not-read"), "{e}");
    };

    // a legitimate training job
    let ok_model = outs.join("ok.model");
    let args = [
        &train_args(s(&train), s(&test), "softmax", "2")[..],
        &["--out", s(&ok_model)],
    ]
    .concat();
    let v = ended(&api.submit(&args));
    assert_eq!(v["state"], "done", "{v}\n{}", c.dump());
    assert!(ok_model.is_file());

    // the test set swapped for a link out after submission: the worker refuses it
    let t_model = outs.join("t.model");
    let args = [
        &train_args(s(&train), s(&test2), "softmax", "3")[..],
        &["--out", s(&t_model)],
    ]
    .concat();
    let j = api.submit(&args);
    swap_for_link(&test2, &elsewhere.join("test.rio"));
    failed_naming(&ended(&j), "test2.rio", "--data-dir");

    // the model's directory swapped for a link out: the worker refuses to write there
    let m_model = outs.join("sub/m.model");
    let args = [
        &train_args(s(&train), s(&test), "softmax", "3")[..],
        &["--out", s(&m_model)],
    ]
    .concat();
    let j = api.submit(&args);
    swap_for_link(&outs.join("sub"), &elsewhere.join("sub"));
    failed_naming(&ended(&j), "m.model", "--outputs-dir");
    assert!(!elsewhere.join("sub/m.model").exists(), "written outside");

    // an inference job's output swapped for a link out: the scheduler refuses to write it
    let preds = outs.join("preds.csv");
    let base = ["infer", "--runner", "usermod:digest", "--pythonpath", s(&mods)];
    let gate = mods.join("gate");
    let j = api.submit(&[&base[..], &["--data", s(&test), "--out", s(&preds)]].concat());
    symlink(elsewhere.join("preds.csv"), &preds).unwrap();
    std::fs::write(&gate, "").unwrap();
    failed_naming(&ended(&j), "preds.csv", "--outputs-dir");
    assert!(!elsewhere.join("preds.csv").exists(), "written outside");

    // a directory dataset holding a link out: refused at submission
    let files = data.join("files");
    std::fs::create_dir(&files).unwrap();
    for i in 0..12 {
        std::fs::write(files.join(format!("f{i:02}.txt")), format!("file {i}")).unwrap();
    }
    let fbase = [
        "infer",
        "--runner",
        "usermod:files",
        "--pythonpath",
        s(&mods),
        "--max-retries",
        "1",
        "--batch",
        "4",
    ];
    let linked = data.join("linked");
    std::fs::create_dir(&linked).unwrap();
    std::fs::write(linked.join("a.txt"), "a").unwrap();
    symlink(elsewhere.join("secret.txt"), linked.join("b.txt")).unwrap();
    let e = api
        .run(
            &[
                &["submit"][..],
                &fbase,
                &["--data", s(&linked), "--out", s(&outs.join("l.csv"))],
            ]
            .concat(),
        )
        .unwrap_err();
    assert!(
        e.contains("b.txt") && e.contains("outside --data-dir") && !e.contains("do-not-read"),
        "{e}"
    );

    // a legitimate directory dataset runs
    let out = outs.join("files.csv");
    let v = ended(&api.submit(&[&fbase[..], &["--data", s(&files), "--out", s(&out)]].concat()));
    assert_eq!(v["state"], "done", "{v}\n{}", c.dump());
    assert_eq!(std::fs::read_to_string(&out).unwrap().lines().count(), 13);

    // a file of a directory dataset swapped for a link out after submission, while
    // the first queries (four files each) wait at the gate: the worker refuses to
    // hand its path to the runner
    let out = outs.join("files2.csv");
    std::fs::remove_file(&gate).unwrap();
    let j = api.submit(&[&fbase[..], &["--data", s(&files), "--out", s(&out)]].concat());
    swap_for_link(&files.join("f11.txt"), &elsewhere.join("secret.txt"));
    std::fs::write(&gate, "").unwrap();
    failed_naming(&ended(&j), "f11.txt", "--data-dir");
    assert!(!out.exists());
}
