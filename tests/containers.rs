//! The container image (scripts/build-image.sh: a Debian base from debootstrap, the
//! psrs binary, the Python package) under podman, every node a container on one podman
//! network, finding the scheduler by its container name:
//!
//! - a training job: 1 scheduler + 2 servers + 2 workers, five containers;
//! - a jobs cluster (1 scheduler + 1 server + 2 workers) secured by a cluster secret,
//!   as deploy/k8s runs it, with one training job submitted through its HTTPS API from
//!   this host (`psrs job` with the secret's client certificate);
//! - the Python package imports inside the image.
//!
//! The image is built once per test run (`PSRS_IMAGE` names a ready one instead; the
//! base layer is kept between runs). Needs root, podman, runc and debootstrap
//! (scripts/install-deps.sh): `#[ignore]`d, CI runs them with `--ignored`. If containers
//! cannot run here, the tests fail saying what podman answered.

mod common;

use common::jobs::{blobs, train_args, Api};
use common::{psrs_bin, training};
use std::path::Path;
use std::process::{Command, Output};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

fn podman(args: &[&str]) -> Output {
    Command::new("podman")
        .args(args)
        .env(
            "CONTAINERS_CONF",
            std::env::var("CONTAINERS_CONF").unwrap_or_else(|_| format!("{ROOT}/deploy/image/containers.conf")),
        )
        .output()
        .unwrap_or_else(|e| {
            panic!("cannot run podman ({e}): apt-get install podman runc (scripts/install-deps.sh does)")
        })
}

fn ok(args: &[&str]) -> String {
    let out = podman(args);
    assert!(
        out.status.success(),
        "podman {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr).trim()
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// The image under test, built once per run; panics with the reason when containers
/// cannot run here.
fn image() -> &'static str {
    static IMAGE: OnceLock<String> = OnceLock::new();
    IMAGE.get_or_init(|| {
        let tag = match std::env::var("PSRS_IMAGE") {
            Ok(t) => t,
            Err(_) => {
                let tag = "localhost/psrs-test:latest".to_string();
                let mut c = Command::new(format!("{ROOT}/scripts/build-image.sh"));
                c.args(["--tag", &tag, "--binary"]).arg(psrs_bin());
                let wheel = std::env::var("PSRS_WHEEL").ok().or_else(|| {
                    std::fs::read_dir(format!("{ROOT}/target/wheels"))
                        .ok()?
                        .filter_map(|e| e.ok().map(|e| e.path().display().to_string()))
                        .find(|p| p.ends_with(".whl") && p.contains("psrs-"))
                });
                if let Some(w) = wheel {
                    c.args(["--wheel", &w]);
                }
                let out = c.output().expect("run scripts/build-image.sh");
                assert!(
                    out.status.success(),
                    "scripts/build-image.sh failed: {}",
                    String::from_utf8_lossy(&out.stderr)
                );
                tag
            }
        };
        let out = podman(&["run", "--rm", "--network", "none", &tag, "--version"]);
        assert!(
            out.status.success(),
            "containers cannot run on this machine: podman run {tag}: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
        tag
    })
}

/// A podman network and the containers started on it; all removed on drop, by id.
struct Pod {
    net: String,
    ids: Vec<(String, String)>,
    /// More variables for every container (`NAME=value`).
    env: Vec<String>,
}

impl Pod {
    fn new() -> Pod {
        static SEQ: AtomicUsize = AtomicUsize::new(0);
        let net = format!("psrs-{}-{}", std::process::id(), SEQ.fetch_add(1, Ordering::Relaxed));
        ok(&["network", "create", &net]);
        Pod {
            net,
            ids: Vec::new(),
            env: Vec::new(),
        }
    }

    /// The container name of node `name`.
    fn name(&self, name: &str) -> String {
        format!("{}-{name}", self.net)
    }

    /// Starts node `name` (role `role`) running `psrs ARGS` with the cluster's variables.
    fn run(&mut self, name: &str, role: &str, nodes: (usize, usize), mount: &Path, args: &[&str]) {
        let cname = self.name(name);
        let root = self.name("scheduler");
        let (s, w) = (nodes.0.to_string(), nodes.1.to_string());
        let vol = format!("{0}:{0}", mount.display());
        let env = [
            format!("DMLC_ROLE={role}"),
            format!("DMLC_PS_ROOT_URI={root}"),
            "DMLC_PS_ROOT_PORT=9091".into(),
            format!("DMLC_NUM_SERVER={s}"),
            format!("DMLC_NUM_WORKER={w}"),
            "PS_JOIN_TIMEOUT=60".into(),
        ];
        let mut a: Vec<&str> = vec!["run", "-d", "--name", &cname, "--network", &self.net, "-v", &vol];
        for e in env.iter().chain(&self.env) {
            a.extend(["-e", e]);
        }
        a.push(image());
        a.extend(args);
        let id = ok(&a);
        self.ids.push((name.to_string(), id));
    }

    /// Waits for every container to exit (at most `limit`); returns their exit codes and
    /// the logs of all.
    fn wait(&self, limit: Duration) -> (Vec<i64>, String) {
        let t = Instant::now();
        let mut codes = Vec::new();
        for (_, id) in &self.ids {
            loop {
                let st = ok(&["inspect", "-f", "{{.State.Status}} {{.State.ExitCode}}", id]);
                let (state, code) = st.split_once(' ').unwrap();
                if state == "exited" || state == "stopped" {
                    codes.push(code.parse().unwrap());
                    break;
                }
                if t.elapsed() > limit {
                    panic!("containers still running after {limit:?}\n{}", self.logs());
                }
                std::thread::sleep(Duration::from_millis(200));
            }
        }
        (codes, self.logs())
    }

    fn logs(&self) -> String {
        let mut s = String::new();
        for (name, id) in &self.ids {
            let out = podman(&["logs", id]);
            s += &format!(
                "--- {name}\n{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        s
    }

    fn ip(&self, name: &str) -> String {
        let id = &self.ids.iter().find(|(n, _)| n == name).unwrap().1;
        ok(&[
            "inspect",
            "-f",
            "{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}",
            id,
        ])
    }
}

impl Drop for Pod {
    fn drop(&mut self) {
        for (_, id) in &self.ids {
            let _ = podman(&["rm", "-f", "-t", "0", id]);
        }
        let _ = podman(&["network", "rm", "-f", &self.net]);
    }
}

#[test]
#[ignore = "needs root, podman, runc and debootstrap; CI runs it with --ignored"]
fn five_containers_train_on_one_network() {
    training::require_data();
    let dir = tempfile::tempdir().unwrap();
    let job = training::small_job(dir.path(), 1);
    let args: Vec<&str> = job.iter().map(|s| s.as_str()).collect();
    image();
    let mut pod = Pod::new();
    pod.run("scheduler", "scheduler", (2, 2), dir.path(), &args);
    for i in 0..2 {
        pod.run(&format!("server{i}"), "server", (2, 2), dir.path(), &args);
        pod.run(&format!("worker{i}"), "worker", (2, 2), dir.path(), &args);
    }
    let (codes, logs) = pod.wait(Duration::from_secs(180));
    assert!(codes.iter().all(|&c| c == 0), "exit codes {codes:?}\n{logs}");
    assert!(logs.contains("progress: 20/20 tasks"), "{logs}");
    assert!(logs.contains("final test accuracy"), "{logs}");
}

#[test]
#[ignore = "needs root, podman, runc and debootstrap; CI runs it with --ignored"]
fn a_jobs_cluster_in_containers_runs_a_job_submitted_through_the_api() {
    let dir = tempfile::tempdir().unwrap();
    let train = dir.path().join("train.rio");
    let test = dir.path().join("test.rio");
    blobs(&train, 2000, 100, 1);
    blobs(&test, 500, 100, 2);
    // secured as deploy/k8s runs it: a cluster secret (every link mutual TLS, the API
    // HTTPS), jobs' files confined to named directories
    let secret = dir.path().join("secret");
    common::write_private(&secret, "a-cluster-secret-for-the-containers-test");
    let secret = secret.display().to_string();
    let work = dir.path().join("work").display().to_string();
    let data = dir.path().display().to_string();
    let args = [
        "cluster",
        "--stats-addr",
        "0.0.0.0:8080",
        "--work-dir",
        &work,
        "--data-dir",
        &data,
        "--outputs-dir",
        &data,
    ];
    image();
    let mut pod = Pod::new();
    pod.env.push(format!("PS_SECRET_FILE={secret}"));
    pod.run("scheduler", "scheduler", (1, 2), dir.path(), &args);
    pod.run("server0", "server", (1, 2), dir.path(), &args);
    pod.run("worker0", "worker", (1, 2), dir.path(), &args);
    pod.run("worker1", "worker", (1, 2), dir.path(), &args);
    let api = Api(format!("https://{}:8080", pod.ip("scheduler")));
    let env = [("PS_SECRET_FILE", secret.as_str())];
    // plain HTTP is not served
    assert!(Api(format!("http://{}:8080", pod.ip("scheduler")))
        .run(&["list"])
        .is_err());
    let t = Instant::now();
    while let Err(e) = api.run_env(&env, &["list"]) {
        assert!(
            t.elapsed() < Duration::from_secs(60),
            "the jobs API never came up: {e}\n{}",
            pod.logs()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    let (tr, te) = (train.display().to_string(), test.display().to_string());
    let submit = [&["submit"][..], &train_args(&tr, &te, "softmax", "2")].concat();
    let id = api.run_env(&env, &submit).unwrap().trim().to_string();
    let t = Instant::now();
    let job = loop {
        let j: serde_json::Value = serde_json::from_str(&api.run_env(&env, &["status", &id]).unwrap()).unwrap();
        if j["state"] == "done" {
            break j;
        }
        assert!(
            j["state"] != "failed" && t.elapsed() < Duration::from_secs(120),
            "job {id}: {j}\n{}",
            pod.logs()
        );
        std::thread::sleep(Duration::from_millis(200));
    };
    assert!(job["progress"].as_f64() == Some(1.0), "{job}");
}

#[test]
#[ignore = "needs root, podman, runc and debootstrap; CI runs it with --ignored"]
fn the_python_package_imports_in_the_image() {
    let out = podman(&[
        "run",
        "--rm",
        "--network",
        "none",
        "--entrypoint",
        "python3",
        image(),
        "-c",
        "import numpy, psrs; print('psrs', psrs.__name__, numpy.__version__)",
    ]);
    let text = String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{text}");
    assert!(text.starts_with("psrs psrs "), "{text}");
}
