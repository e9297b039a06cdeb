//! Training end to end on real processes, and its failover: a worker, a server and the
//! scheduler are each killed with SIGKILL mid-training; every run must finish and
//! reach the accuracy of the fault-free run within one point; after the scheduler's
//! restart no task is trained twice (the master resumed from its store). Recovery
//! times are printed (seconds from the kill to training progress again). Skipped, with a
//! message, when Fashion-MNIST is not installed.

mod common;

use common::{psrs_bin, Cluster};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

const LIMIT: Duration = Duration::from_secs(240);
const DATA: &str = "/usr/share/datasets/fashion-mnist";
const ENV: &[(&str, &str)] = &[
    ("PS_HEARTBEAT_INTERVAL", "0.2"),
    ("PS_HEARTBEAT_TIMEOUT", "1"),
    ("PS_RESEND", "1"),
    ("PS_RESEND_TIMEOUT", "500"),
];

fn convert(dir: &Path, split: &str) -> PathBuf {
    let out = dir.join(format!("{split}.rio"));
    let st = Command::new(psrs_bin())
        .args(["convert", "--format", "idx", "--per-chunk", "1000", "--input"])
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

fn args(train: &Path, test: &Path, work: &Path) -> Vec<String> {
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

fn final_accuracy(c: &Cluster) -> f64 {
    let out = c.all_stdout();
    let line = out
        .lines()
        .find(|l| l.starts_with("final test accuracy"))
        .unwrap_or_else(|| panic!("no accuracy\n{}", c.dump()));
    line.split_whitespace().nth(3).unwrap().parse().unwrap()
}

/// Tasks the workers report having trained ("worker 9 trained 120 tasks").
fn trained_tasks(c: &Cluster) -> usize {
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

fn progress_lines(c: &Cluster, i: usize) -> usize {
    c.procs[i].stderr().matches("progress: ").count()
}

fn id_of(c: &Cluster, i: usize) -> i32 {
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

/// Waits until process `i` logged `n` progress lines; returns when.
fn wait_progress(c: &mut Cluster, i: usize, n: usize) -> Instant {
    c.wait_for_output(i, "training progress", |s| s.matches("progress: ").count() >= n);
    Instant::now()
}

enum Fault {
    None,
    Worker,
    Server,
    Scheduler,
}

fn run(fault: Fault, train: &Path, test: &Path, dir: &Path, name: &str) -> (f64, Option<Duration>) {
    let work = dir.join(name);
    let a = args(train, test, &work);
    let a: Vec<&str> = a.iter().map(|s| s.as_str()).collect();
    let mut c = Cluster::start(2, 2, &a, ENV, LIMIT);
    wait_progress(&mut c, 0, 12);
    let recovery = match fault {
        Fault::None => None,
        Fault::Worker => {
            // the worker that is not rank 0 (rank 0 evaluates and reports)
            let victim = if id_of(&c, 3) == 11 { 3 } else { 4 };
            let before = progress_lines(&c, 0);
            let t = Instant::now();
            c.kill(victim);
            c.wait_for_output(0, "the dead worker's tasks requeued", |s| s.contains("is dead:"));
            let back = wait_progress(&mut c, 0, before + 2);
            Some(back - t)
        }
        Fault::Server => {
            let before = progress_lines(&c, 0);
            let t = Instant::now();
            c.kill(1);
            c.spawn("server");
            c.wait_for_output(5, "the replacement to restore its shard", |s| {
                s.contains("restored version")
            });
            let back = wait_progress(&mut c, 0, before + 2);
            Some(back - t)
        }
        Fault::Scheduler => {
            let t = Instant::now();
            c.kill(0);
            let r = c.spawn("scheduler");
            c.wait_for_output(r, "the master to resume", |s| s.contains("master resumed"));
            let back = wait_progress(&mut c, r, 1);
            Some(back - t)
        }
    };
    c.wait_success();
    if matches!(fault, Fault::None | Fault::Scheduler) {
        // 60 chunks, one per task, 4 passes; every worker survives: a task redone
        // after the master's restart (or lost and redone) shows here
        assert_eq!(trained_tasks(&c), 240, "{name}: tasks trained\n{}", c.dump());
    }
    (final_accuracy(&c), recovery)
}

/// The tests of this file take both cores: one at a time.
fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

fn have_data() -> bool {
    let ok = Path::new(DATA).join("train-images-idx3-ubyte.gz").exists();
    if !ok {
        eprintln!("SKIPPED: {DATA} is absent (apt-get install dataset-fashion-mnist)");
    }
    ok
}

#[test]
fn async_and_bounded_staleness_modes_train() {
    if !have_data() {
        return;
    }
    let _x = one_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    let (train, test) = (convert(dir.path(), "train"), convert(dir.path(), "t10k"));
    for mode in [&["--mode", "async"][..], &["--mode", "bounded", "--staleness", "4"]] {
        let work = dir.path().join(mode[1]);
        let mut a = args(&train, &test, &work);
        // two passes; every push is applied on its own, so half the sync rate
        let e = a.iter().position(|x| x == "--epochs").unwrap();
        a[e + 1] = "2".into();
        let l = a.iter().position(|x| x == "--lr").unwrap();
        a[l + 1] = "0.025".into();
        a.extend(mode.iter().map(|s| s.to_string()));
        let a: Vec<&str> = a.iter().map(|s| s.as_str()).collect();
        let mut c = Cluster::start(2, 2, &a, ENV, LIMIT);
        c.wait_success();
        let acc = final_accuracy(&c);
        println!("{}: test accuracy {acc:.4}", mode[1]);
        assert!(acc > 0.78, "{}: accuracy {acc}", mode[1]);
        assert_eq!(trained_tasks(&c), 120, "{}: 60 tasks x 2 passes\n{}", mode[1], c.dump());
    }
}

#[test]
fn training_survives_the_loss_of_any_node() {
    if !have_data() {
        return;
    }
    let _x = one_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    let (train, test) = (convert(dir.path(), "train"), convert(dir.path(), "t10k"));
    let (base, _) = run(Fault::None, &train, &test, dir.path(), "clean");
    println!("fault-free softmax: test accuracy {base:.4}");
    assert!(base > 0.80, "fault-free accuracy {base}");
    for (fault, name, seed) in [
        (Fault::Worker, "worker", 5.4),
        (Fault::Server, "server", f64::NAN),
        (Fault::Scheduler, "scheduler", 8.0),
    ] {
        let (acc, rec) = run(fault, &train, &test, dir.path(), name);
        let rec = rec.unwrap().as_secs_f64();
        let vs = if seed.is_nan() {
            String::new()
        } else {
            format!(" (seed 002: {seed} s, ratio {:.2})", rec / seed)
        };
        println!("{name} killed: recovered in {rec:.2} s{vs}; test accuracy {acc:.4} vs {base:.4}");
        assert!(
            (acc - base).abs() <= 0.01,
            "{name}: accuracy {acc} vs fault-free {base}"
        );
    }
}

/// Sync training on 3 servers with `PS_REPLICAS=1`; with `kill`, server 2 (launch
/// index) is killed with SIGKILL mid-pass and nothing is started in its place.
/// Returns the accuracy and, with `kill`, the seconds from the kill to progress again.
fn run_replicated(kill: bool, train: &Path, test: &Path, dir: &Path, name: &str) -> (f64, Option<Duration>) {
    let work = dir.join(name);
    let a = args(train, test, &work);
    let a: Vec<&str> = a.iter().map(|s| s.as_str()).collect();
    let env = [
        ("PS_REPLICAS", "1"),
        ("PS_HEARTBEAT_INTERVAL", "0.1"),
        ("PS_HEARTBEAT_TIMEOUT", "0.5"),
        ("PS_RESEND", "1"),
        ("PS_RESEND_TIMEOUT", "500"),
    ];
    let mut c = Cluster::start(3, 2, &a, &env, LIMIT);
    wait_progress(&mut c, 0, 20);
    let mut recovery = None;
    if kill {
        let before = progress_lines(&c, 0);
        let t = Instant::now();
        c.kill(2);
        let back = wait_progress(&mut c, 0, before + 2);
        recovery = Some(back - t);
    }
    c.wait_success();
    assert!(
        !c.procs[0].stderr().contains("restored version"),
        "{name}: nothing restarts"
    );
    (final_accuracy(&c), recovery)
}

#[test]
fn replicated_training_survives_a_server_kill_without_replacement() {
    if !have_data() {
        return;
    }
    let _x = one_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    let (train, test) = (convert(dir.path(), "train"), convert(dir.path(), "t10k"));
    let (base, _) = run_replicated(false, &train, &test, dir.path(), "replicated-clean");
    println!("3 servers, 1 replica, fault-free: test accuracy {base:.4}");
    assert!(base > 0.80, "fault-free accuracy {base}");
    let (acc, rec) = run_replicated(true, &train, &test, dir.path(), "replicated-kill");
    let rec = rec.unwrap().as_secs_f64();
    println!("server killed, no replacement: progress again after {rec:.2} s; test accuracy {acc:.4} vs {base:.4}");
    assert!((acc - base).abs() <= 0.01, "accuracy {acc} vs fault-free {base}");
}
