//! A long-running cluster with many jobs, on real processes: one training job alone,
//! then two training jobs side by side with a third cancelled mid-way, then an
//! inference job over the first job's model; a worker is SIGKILLed during the training
//! jobs and another during the inference job. Checks: the side-by-side job reaches the
//! lone job's accuracy within a point, the cancelled job's shards are freed, every
//! record appears exactly once in the inference output in dataset order, and its
//! accuracy is the lone job's test accuracy (same model, same data). Prints the
//! figures of the README (submit to first query, kill to reallocation).

mod common;

use common::{free_port, psrs_bin, Cluster};
use ps_apps::recordio::{Compressor, Example, Features, Writer};
use serde_json::Value;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

const LIMIT: Duration = Duration::from_secs(240);
const ENV: &[(&str, &str)] = &[
    ("PS_HEARTBEAT_INTERVAL", "0.2"),
    ("PS_HEARTBEAT_TIMEOUT", "1"),
    ("PS_RESEND", "1"),
    ("PS_RESEND_TIMEOUT", "500"),
];
const DIM: usize = 16;
const CLASSES: usize = 4;

/// A deterministic generator (xorshift) for the synthetic dataset.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> f64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 >> 11) as f64 / (1u64 << 53) as f64
    }
    fn normal(&mut self) -> f32 {
        let (u, v) = (self.next().max(1e-12), self.next());
        ((-2.0 * u.ln()).sqrt() * (2.0 * std::f64::consts::PI * v).cos()) as f32
    }
}

/// Gaussian blobs: class c's centre is ±1 per feature by the bits of c·7+feature.
fn blobs(path: &Path, n: usize, per_chunk: u32, seed: u64) -> Vec<u32> {
    let mut rng = Rng(seed);
    let mut w = Writer::create(path, Compressor::None, per_chunk, 1 << 20).unwrap();
    let mut labels = Vec::new();
    for i in 0..n {
        let c = (i * 7 + (rng.next() * 3.0) as usize) % CLASSES;
        let x: Vec<f32> = (0..DIM)
            .map(|f| if (c * 7 + f).is_multiple_of(3) { 1.0 } else { -1.0 } * (1 + c % 2) as f32 * 0.5 + 1.2 * rng.normal())
            .collect();
        w.write(
            &Example {
                label: c as f32,
                features: Features::Dense(x),
            }
            .encode(),
        )
        .unwrap();
        labels.push(c as u32);
    }
    w.finish().unwrap();
    labels
}

struct Api(String);

impl Api {
    fn run(&self, args: &[&str]) -> Result<String, String> {
        let out = Command::new(psrs_bin())
            .arg("job")
            .args(args)
            .env("PSRS_API", &self.0)
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout).to_string();
        if out.status.success() {
            Ok(text)
        } else {
            Err(format!("{text}{}", String::from_utf8_lossy(&out.stderr)))
        }
    }
    fn submit(&self, args: &[&str]) -> String {
        self.run(&[&["submit"], args].concat()).unwrap().trim().to_string()
    }
    fn status(&self, id: &str) -> Value {
        serde_json::from_str(&self.run(&["status", id]).unwrap()).unwrap()
    }
    fn get(&self, path: &str) -> Value {
        ureq::get(&format!("{}{path}", self.0))
            .call()
            .ok()
            .and_then(|r| r.into_string().ok())
            .and_then(|t| serde_json::from_str(&t).ok())
            .unwrap_or(Value::Null)
    }
    /// Polls job `id` until `pred` holds (panics after the limit).
    fn until(&self, c: &Cluster, id: &str, what: &str, pred: impl Fn(&Value) -> bool) -> Value {
        let start = Instant::now();
        loop {
            let j = self.status(id);
            if pred(&j) {
                return j;
            }
            assert!(
                start.elapsed() < LIMIT,
                "job {id}: {what} never happened: {j}\n{}",
                c.dump()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

fn train_args<'a>(train: &'a str, test: &'a str, model: &'a str, epochs: &'a str) -> Vec<&'a str> {
    vec![
        "train", "--train", train, "--test", test, "--model", model, "--hidden", "16", "--epochs", epochs,
    ]
    .into_iter()
    .chain(["--lr", "0.05", "--batch", "32", "--classes", "4", "--mode", "async"])
    .collect()
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

#[test]
fn training_and_inference_jobs_side_by_side_with_failures_and_cancel() {
    let addr = format!("127.0.0.1:{}", free_port());
    let dir = tempfile::tempdir().unwrap();
    let work = dir.path().join("work");
    let args = ["cluster", "--stats-addr", &addr, "--work-dir", work.to_str().unwrap()];
    let mut c = Cluster::start(2, 4, &args, ENV, LIMIT);
    let api = Api(format!("http://{addr}"));
    let up = Instant::now();
    while !api.get("/jobs").is_array() {
        assert!(
            up.elapsed() < Duration::from_secs(60),
            "the API never came up\n{}",
            c.dump()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let (train, test) = (dir.path().join("train.rio"), dir.path().join("test.rio"));
    blobs(&train, 4000, 200, 7);
    let labels = blobs(&test, 1000, 50, 11);
    let (train, test) = (train.to_str().unwrap(), test.to_str().unwrap());
    let m1 = dir.path().join("m1.model");
    let m1 = m1.to_str().unwrap();

    // one job alone
    let j1 = api.submit(&[train_args(train, test, "softmax", "3"), vec!["--out", m1]].concat());
    let v1 = api.until(&c, &j1, "done", |j| j["state"] == "done");
    let acc1 = v1["accuracy"].as_f64().unwrap();
    assert!(acc1 > 0.7, "lone job accuracy {acc1}");

    // two side by side, and a third to cancel; a worker dies mid-way
    let t2 = now_ms();
    let j2 = api.submit(&train_args(train, test, "softmax", "3"));
    let j3 = api.submit(&train_args(train, test, "mlp", "3"));
    let j4 = api.submit(&train_args(train, test, "softmax", "50"));
    let v3 = api.until(&c, &j3, "a first query", |j| j["first_query_ms"].as_u64().is_some());
    let first_query_s = (v3["first_query_ms"].as_u64().unwrap() - t2) as f64 / 1000.0;
    api.until(&c, &j2, "progress", |j| j["progress"].as_f64().unwrap() > 0.2);
    let killed = Instant::now();
    c.kill(3);
    let start = Instant::now();
    let realloc_s = loop {
        let ws = api.get("/workers");
        if ws.as_array().is_some_and(|a| a.len() == 3) {
            break killed.elapsed().as_secs_f64();
        }
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "dead worker never dropped: {ws}"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    api.until(&c, &j4, "running", |j| j["state"] == "running");
    let cancelled = api.run(&["cancel", &j4]).unwrap();
    assert!(cancelled.contains("cancelled"), "{cancelled}");
    assert!(api.run(&["cancel", &j4]).unwrap_err().contains("409"));
    assert!(api.run(&["wait", &j4]).is_err(), "waiting on a cancelled job fails");
    let v2 = api.until(&c, &j2, "done", |j| j["state"] == "done");
    let v3 = api.until(&c, &j3, "done", |j| j["state"] == "done");
    let (acc2, acc3) = (v2["accuracy"].as_f64().unwrap(), v3["accuracy"].as_f64().unwrap());
    assert!((acc2 - acc1).abs() <= 0.01, "side by side {acc2} vs alone {acc1}");
    assert!(acc3 > 0.7, "mlp accuracy {acc3}");
    assert_eq!(api.status(&j4)["state"], "cancelled", "a cancelled job stays cancelled");
    for s in [1, 2] {
        c.wait_for_output(s, "the cancelled job's shard freed", |o| {
            o.contains(&format!("job {j4} ended: its shard is freed"))
        });
    }

    // inference over the lone job's model; another worker dies mid-way
    let out = dir.path().join("out.csv");
    let j5 = api.submit(&["infer", "--model", m1, "--data", test, "--out", out.to_str().unwrap()]);
    api.until(&c, &j5, "progress", |j| j["progress"].as_f64().unwrap() > 0.1);
    c.kill(4);
    let v5 = api.until(&c, &j5, "done", |j| j["state"] == "done");
    let acc5 = v5["accuracy"].as_f64().unwrap();
    assert!(
        (acc5 - acc1).abs() < 1e-3,
        "inference accuracy {acc5} vs the job's test accuracy {acc1}"
    );
    let text = std::fs::read_to_string(&out).unwrap();
    let rows: Vec<Vec<&str>> = text.lines().skip(1).map(|l| l.split(',').collect()).collect();
    assert_eq!(rows.len(), labels.len(), "every record once");
    for (i, r) in rows.iter().enumerate() {
        assert_eq!(r[0], i.to_string(), "dataset order");
        assert_eq!(r[3], labels[i].to_string(), "record {i}'s label");
    }
    let list = api.run(&["list"]).unwrap();
    assert_eq!(list.lines().count(), 5, "{list}");
    println!("figure: submit of a second job to its first finished query: {first_query_s:.3} s");
    println!("figure: worker kill -9 to allocation updated (heartbeat timeout 1 s): {realloc_s:.3} s");
    println!("accuracy alone {acc1:.4}, side by side {acc2:.4}, mlp {acc3:.4}, inference {acc5:.4}");
}
