//! Inference jobs with a user's Python function in a jobs cluster of real processes (2
//! workers, each with its Python runner started with plain `python3`; no torch): a
//! function over a RecordIO file's records gets each record's bytes, in dataset order;
//! a module that does not import fails its job with the import error once the retries
//! are spent; a function that hangs is killed at the task timeout and its job fails
//! naming the query, while the workers stay and run the next job; bad options are
//! refused at submission with a one-line reason.

mod common;

use common::jobs::{blobs, env_with_heartbeat_timeout, Api};
use common::{free_port, Cluster};
use ps_apps::recordio;
use std::path::Path;
use std::time::Duration;

const LIMIT: Duration = Duration::from_secs(180);

const MODULE: &str = r#"
import hashlib, time

def digest(records):
    return [[len(r), hashlib.sha256(r).hexdigest()[:16]] for r in records]

def hang(records):
    time.sleep(3600)
"#;

#[test]
fn a_python_function_job_its_failures_and_bad_options() {
    let dir = tempfile::tempdir().unwrap();
    let mods = dir.path().join("mods");
    std::fs::create_dir(&mods).unwrap();
    std::fs::write(mods.join("usermod.py"), MODULE).unwrap();
    let data = dir.path().join("data.rio");
    blobs(&data, 500, 20, 5);
    let (data, mods) = (data.to_str().unwrap(), mods.to_str().unwrap());
    let addr = format!("127.0.0.1:{}", free_port());
    let work = dir.path().join("work");
    let args = [
        "cluster",
        "--stats-addr",
        &addr,
        "--work-dir",
        work.to_str().unwrap(),
        "--python",
        common::python3(),
    ];
    // no node dies here (the hanging function's runner is killed, not its worker, and
    // both workers must stay): a long heartbeat timeout, so that a worker the loaded
    // machine leaves unscheduled for a second is not declared dead
    let c = Cluster::start(0, 2, &args, &env_with_heartbeat_timeout("10"), LIMIT);
    let api = Api(format!("http://{addr}"));
    api.wait_up(&c);

    // bad options: refused with one line, nothing submitted
    for (bad, want) in [
        (vec!["--runner", "usermod.digest"], "module:function"),
        (
            vec!["--runner", "usermod:digest", "--pythonpath", "/no/such/dir"],
            "no such directory",
        ),
        (vec!["--torch", data], "not a TorchScript file"),
    ] {
        let out = dir.path().join("never.csv");
        let e = api
            .run(
                &[
                    &["submit", "infer"],
                    &bad[..],
                    &["--data", data, "--out", out.to_str().unwrap()],
                ]
                .concat(),
            )
            .unwrap_err();
        assert!(e.contains(want) && e.trim().lines().count() == 1, "{bad:?}: {e}");
    }

    // every record's bytes, once, in dataset order
    let out = dir.path().join("digest.csv");
    let out_s = out.to_str().unwrap();
    let sub = |function: &str, extra: &[&str]| {
        let base = ["infer", "--runner", function, "--pythonpath", mods, "--data", data];
        api.submit(&[&base[..], extra].concat())
    };
    let j = sub(
        "usermod:digest",
        &["--out", out_s, "--batch", "7", "--chunks-per-task", "2"],
    );
    let v = api.until(&c, LIMIT, &j, "done", |j| {
        j["state"] == "done" || j["state"] == "failed"
    });
    assert_eq!(v["state"], "done", "{v}\n{}", c.dump());
    let mut want = Vec::new();
    for chunk in recordio::index(Path::new(data)).unwrap() {
        for r in recordio::read_chunk(Path::new(data), &chunk).unwrap() {
            want.push(r);
        }
    }
    let text = std::fs::read_to_string(&out).unwrap();
    let mut lines = text.lines();
    assert_eq!(lines.next(), Some("index,output_0,output_1"));
    let rows: Vec<Vec<&str>> = lines.map(|l| l.split(',').collect()).collect();
    assert_eq!(rows.len(), want.len(), "every record once");
    for (i, (row, rec)) in rows.iter().zip(&want).enumerate() {
        assert_eq!(row[0], i.to_string());
        assert_eq!(row[1], rec.len().to_string(), "record {i}");
    }
    assert_eq!(v["model"], "python usermod:digest");
    assert!(v["accuracy"].is_null());

    // a module that does not import: the job fails with the import error
    let j = sub("nosuchmodule:f", &["--out", out_s, "--max-retries", "1"]);
    let v = api.until(&c, LIMIT, &j, "failed", |j| j["state"] == "failed");
    let e = v["error"].as_str().unwrap();
    assert!(
        e.starts_with("loading the model failed 2 times: ModuleNotFoundError"),
        "{e}"
    );

    // a function that hangs: killed at the timeout, retried once, the job fails
    let j = sub(
        "usermod:hang",
        &[
            "--out",
            out_s,
            "--task-timeout-ms",
            "1500",
            "--max-retries",
            "1",
            "--chunks-per-task",
            "25",
        ],
    );
    let v = api.until(&c, LIMIT, &j, "failed", |j| j["state"] == "failed");
    let e = v["error"].as_str().unwrap();
    assert!(e.contains("failed 2 times; task 0:"), "{e}");
    let log = c.all_stdout() + &c.procs.iter().map(|p| p.stderr()).collect::<String>();
    assert!(log.contains("took longer than 1.5s: killed"), "{}", c.dump());

    // the workers stayed: the next job runs on both
    let out2 = dir.path().join("again.csv");
    let j = sub("usermod:digest", &["--out", out2.to_str().unwrap()]);
    let v = api.until(&c, LIMIT, &j, "done", |j| j["state"] == "done");
    assert_eq!(v["state"], "done");
    assert_eq!(
        api.get("/workers").as_array().map(Vec::len),
        Some(2),
        "both workers stayed"
    );
    assert_eq!(std::fs::read_to_string(&out2).unwrap().lines().count(), want.len() + 1);
}
