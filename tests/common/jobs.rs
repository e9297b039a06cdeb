//! Helpers of the jobs-cluster tests: a synthetic dataset (Gaussian blobs), the
//! `psrs job` client and the HTTP API as seen by a test, training job arguments.

use super::{psrs_bin, Cluster};
use ps_apps::recordio::{Compressor, Example, Features, Writer};
use serde_json::Value;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

pub const ENV: &[(&str, &str)] = &[
    ("PS_HEARTBEAT_INTERVAL", "0.2"),
    ("PS_HEARTBEAT_TIMEOUT", "1"),
    ("PS_RESEND", "1"),
    ("PS_RESEND_TIMEOUT", "500"),
];
pub const DIM: usize = 16;
pub const CLASSES: usize = 4;

/// A deterministic generator (xorshift) for the synthetic dataset.
pub struct Rng(pub u64);
impl Rng {
    pub fn next(&mut self) -> f64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 >> 11) as f64 / (1u64 << 53) as f64
    }
    pub fn normal(&mut self) -> f32 {
        let (u, v) = (self.next().max(1e-12), self.next());
        ((-2.0 * u.ln()).sqrt() * (2.0 * std::f64::consts::PI * v).cos()) as f32
    }
}

/// Gaussian blobs: class c's centre is ±1 per feature by the bits of c·7+feature.
pub fn blobs(path: &Path, n: usize, per_chunk: u32, seed: u64) -> Vec<u32> {
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

pub struct Api(pub String);

/// The token of the API at `url` as `psrs job` on this host finds it (published by a
/// cluster without security in the user's runtime directory).
pub fn token_for(url: &str) -> Option<String> {
    let rt = ps_apps::stats::RuntimeDir::from_vars(|k| std::env::var(k).ok());
    ps_apps::stats::find_token(url, rt.as_ref(), Path::new("psrs-cluster"))
}

impl Api {
    pub fn run(&self, args: &[&str]) -> Result<String, String> {
        self.run_env(&[], args)
    }
    /// `psrs job ARGS` with more variables (a cluster secret: HTTPS with its client
    /// certificate).
    pub fn run_env(&self, env: &[(&str, &str)], args: &[&str]) -> Result<String, String> {
        let out = Command::new(psrs_bin())
            .arg("job")
            .args(args)
            .env("PSRS_API", &self.0)
            .envs(env.iter().copied())
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout).to_string();
        if out.status.success() {
            Ok(text)
        } else {
            Err(format!("{text}{}", String::from_utf8_lossy(&out.stderr)))
        }
    }
    pub fn submit(&self, args: &[&str]) -> String {
        self.run(&[&["submit"], args].concat()).unwrap().trim().to_string()
    }
    pub fn status(&self, id: &str) -> Value {
        serde_json::from_str(&self.run(&["status", id]).unwrap()).unwrap()
    }
    /// `GET path` with the API's token: the body, or the error.
    pub fn get_text(&self, path: &str) -> Result<String, String> {
        let mut req = ureq::get(&format!("{}{path}", self.0));
        if let Some(t) = token_for(&self.0) {
            req = req.set("Authorization", &format!("Bearer {t}"));
        }
        req.call()
            .map_err(|e| e.to_string())
            .and_then(|r| r.into_string().map_err(|e| e.to_string()))
    }
    /// `GET path` with the API's token, as JSON; Null when it fails.
    pub fn get(&self, path: &str) -> Value {
        self.get_text(path)
            .ok()
            .and_then(|t| serde_json::from_str(&t).ok())
            .unwrap_or(Value::Null)
    }
    /// Waits until the API answers `GET /jobs` (panics after 60 s).
    pub fn wait_up(&self, c: &Cluster) {
        let up = Instant::now();
        while !self.get("/jobs").is_array() {
            assert!(
                up.elapsed() < Duration::from_secs(60),
                "the API never came up\n{}",
                c.dump()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    /// Polls job `id` until `pred` holds (panics after `limit`).
    pub fn until(&self, c: &Cluster, limit: Duration, id: &str, what: &str, pred: impl Fn(&Value) -> bool) -> Value {
        let start = Instant::now();
        loop {
            let j = self.status(id);
            if pred(&j) {
                return j;
            }
            assert!(
                start.elapsed() < limit,
                "job {id}: {what} never happened: {j}\n{}",
                c.dump()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

pub fn train_args<'a>(train: &'a str, test: &'a str, model: &'a str, epochs: &'a str) -> Vec<&'a str> {
    vec![
        "train", "--train", train, "--test", test, "--model", model, "--hidden", "16", "--epochs", epochs,
    ]
    .into_iter()
    .chain(["--lr", "0.05", "--batch", "32", "--classes", "4", "--mode", "async"])
    .collect()
}

pub fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

/// [`ENV`] with the heartbeat timeout set to `secs` ([`super::with_heartbeat_timeout`]).
pub fn env_with_heartbeat_timeout(secs: &'static str) -> Vec<(&'static str, &'static str)> {
    super::with_heartbeat_timeout(ENV, secs)
}

/// A jobs cluster (`psrs cluster`, 1 server, `workers` workers) with its work dir under
/// `dir`, `extra` arguments, and its API up.
pub fn jobs_cluster(
    dir: &Path,
    workers: usize,
    extra: &[&str],
    env: &[(&str, &str)],
    limit: Duration,
) -> (Cluster, Api) {
    let addr = format!("127.0.0.1:{}", super::free_port());
    let work = dir.join("work");
    let mut args = vec!["cluster", "--stats-addr", &addr, "--work-dir", work.to_str().unwrap()];
    args.extend_from_slice(extra);
    let c = Cluster::start(1, workers, &args, env, limit);
    let api = Api(format!("http://{addr}"));
    api.wait_up(&c);
    (c, api)
}

/// One fair-time sample of two jobs (`a` and `b` from one `GET /jobs` answer): their
/// workers, queries per second and seconds per query (NaN when absent).
pub fn fair_sample(a: &Value, b: &Value) -> [f64; 6] {
    let f = |j: &Value, k: &str| j[k].as_f64().unwrap_or(f64::NAN);
    [
        f(a, "workers"),
        f(b, "workers"),
        f(a, "queries_per_s"),
        f(b, "queries_per_s"),
        f(a, "seconds_per_query"),
        f(b, "seconds_per_query"),
    ]
}
