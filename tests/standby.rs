//! Scheduler failover to standbys on real processes (issue 11): a 4-pass training job
//! with two standby schedulers; the active scheduler is killed with SIGKILL mid-pass
//! and not restarted, the first standby takes over; later the new active one is killed
//! too and the second standby takes over. The job must finish within one point of the
//! fault-free accuracy, with exactly the expected number of tasks trained (nothing
//! redone, nothing lost). Seconds from each kill to training progress again are
//! printed. Fails when Fashion-MNIST is not installed.

mod common;

use common::training::{args, convert, final_accuracy, progress_lines, require_data, trained_tasks, ENV};
use common::{free_port, Cluster};
use std::path::Path;
use std::time::{Duration, Instant};

const LIMIT: Duration = Duration::from_secs(240);

/// A training cluster with `standbys` standby schedulers, each with its own work dir
/// (their state reaches them over the network, not through a shared file). Returns
/// the cluster and the indices of the schedulers, active first.
fn start(train: &Path, test: &Path, dir: &Path, name: &str, standbys: usize) -> (Cluster, Vec<usize>) {
    let work = dir.join(name);
    let a = args(train, test, &work);
    let a: Vec<&str> = a.iter().map(|s| s.as_str()).collect();
    let mut c = Cluster::new(2, 2, &a, ENV, LIMIT);
    let mut ports = vec![c.port];
    ports.extend((0..standbys).map(|_| free_port()));
    let list = ports
        .iter()
        .map(|p| format!("127.0.0.1:{p}"))
        .collect::<Vec<_>>()
        .join(",");
    let env = [("PS_SCHEDULERS", list.as_str())];
    let mut scheds = vec![c.spawn_with("scheduler", &a, &env)];
    for (k, p) in ports.iter().enumerate().skip(1) {
        let own = dir.join(format!("{name}-standby{k}"));
        let sa = args(train, test, &own);
        let sa: Vec<&str> = sa.iter().map(|s| s.as_str()).collect();
        let port = p.to_string();
        let senv = [
            ("PS_SCHEDULERS", list.as_str()),
            ("PS_SCHEDULER_STANDBY", "1"),
            ("DMLC_PS_ROOT_PORT", port.as_str()),
        ];
        scheds.push(c.spawn_with("scheduler", &sa, &senv));
    }
    for role in ["server", "server", "worker", "worker"] {
        c.spawn_with(role, &a, &env);
    }
    (c, scheds)
}

/// Kills the active scheduler `dead` and waits until `next` took over and logged two
/// more progress lines; returns the seconds from the kill to the first of them.
fn fail_over(c: &mut Cluster, dead: usize, next: usize) -> f64 {
    let t = Instant::now();
    c.kill(dead);
    c.wait_for_output(next, "the standby to take over", |s| {
        s.contains("taking over as the active scheduler")
    });
    c.wait_for_output(next, "training progress on the new active scheduler", |s| {
        s.contains("progress: ")
    });
    let back = t.elapsed().as_secs_f64();
    let n = progress_lines(c, next);
    c.wait_for_output(next, "more progress", |s| s.matches("progress: ").count() >= n + 2);
    back
}

#[test]
fn standbys_take_over_from_killed_schedulers() {
    require_data();
    let dir = tempfile::tempdir().unwrap();
    let (train, test) = (convert(dir.path(), "train"), convert(dir.path(), "t10k"));

    let (mut c, _) = start(&train, &test, dir.path(), "clean", 0);
    c.wait_success();
    let base = final_accuracy(&c);
    assert_eq!(trained_tasks(&c), 240, "fault-free: 60 tasks x 4 passes\n{}", c.dump());
    println!("fault-free softmax: test accuracy {base:.4}");

    let (mut c, s) = start(&train, &test, dir.path(), "failover", 2);
    // first kill: mid-pass in the first half of the job
    c.wait_for_output(s[0], "training progress", |o| o.matches("progress: ").count() >= 12);
    let first = fail_over(&mut c, s[0], s[1]);
    // second kill: the new active one, later in the job
    let later = progress_lines(&c, s[1]) + 40;
    c.wait_for_output(s[1], "later progress", |o| o.matches("progress: ").count() >= later);
    let second = fail_over(&mut c, s[1], s[2]);
    c.wait_success();
    let acc = final_accuracy(&c);
    println!(
        "scheduler killed twice (PS_HEARTBEAT_TIMEOUT=1): progress again {first:.2} s and {second:.2} s after kill -9 (seed 002: 8 s); test accuracy {acc:.4} vs {base:.4}"
    );
    let last = c.procs[s[2]].stderr();
    assert!(last.contains("term 3"), "the second standby runs term 3\n{}", c.dump());
    assert_eq!(
        trained_tasks(&c),
        240,
        "tasks trained after two failovers\n{}",
        c.dump()
    );
    assert!((acc - base).abs() <= 0.01, "accuracy {acc} vs fault-free {base}");
}
