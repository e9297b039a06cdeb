//! Elastic workers on real processes: sync training on 2 servers and 2
//! workers with `PS_ELASTIC_WORKERS=1`; once a sixth of the tasks are done a third
//! worker joins the running job (it gets a new id beyond `DMLC_NUM_WORKER` and tasks
//! at once), and once more than half are done the original worker that is not rank 0
//! gets SIGTERM: it finishes its task, reports it, says goodbye and exits 0. The
//! master's counts must be exact (every pass 60 done, 0 failed, no task timed out, no
//! worker declared dead), the workers' own counts must add up to every task exactly
//! once, and the accuracy must be within one point of the fault-free run's. Fails when
//! Fashion-MNIST is not installed.

mod common;

use common::training::{self, args, convert, final_accuracy, id_of, require_data, trained_tasks, TASKS};
use common::{with_heartbeat_timeout, Cluster};
use std::path::Path;
use std::process::Command;
use std::time::Duration;

const LIMIT: Duration = Duration::from_secs(300);

/// What one worker printed: "worker ID trained N tasks".
fn trained_by(c: &Cluster, i: usize) -> usize {
    let out = c.procs[i].stdout();
    let line = out.lines().find(|l| l.contains(" trained ")).unwrap_or_else(|| {
        panic!("{} printed no task count\n{}", c.procs[i].name, c.dump());
    });
    line.split_whitespace().nth(3).unwrap().parse().unwrap()
}

fn tasks_done(c: &Cluster) -> usize {
    training::tasks_done(&c.procs[0].stderr())
}

/// Runs the job on 2 servers and 2 workers; with `elastic`, a worker joins and
/// another leaves on SIGTERM as the module says. Returns the final accuracy.
fn run(elastic: bool, train: &Path, test: &Path, work: &Path) -> f64 {
    let a = args(train, test, work);
    let a: Vec<&str> = a.iter().map(|s| s.as_str()).collect();
    // nobody dies here (leaving is not dying, and the test checks that no node was
    // declared dead): a long heartbeat timeout, so that a node the loaded machine
    // leaves unscheduled for a second is not
    let mut env = with_heartbeat_timeout(training::ENV, "10");
    env.push(("PS_ELASTIC_WORKERS", "1"));
    let mut c = Cluster::start(2, 2, &a, &env, LIMIT);
    if elastic {
        c.wait_until("a sixth of the tasks", |c| tasks_done(c) >= TASKS / 6);
        let joined = c.spawn("worker");
        c.wait_for_output(joined, "the newcomer's start", |s| s.contains(" started"));
        assert_eq!(id_of(&c, joined), 13, "a new id beyond DMLC_NUM_WORKER");
        c.wait_until("more than half of the tasks", |c| tasks_done(c) > TASKS / 2);
        let leaver = if id_of(&c, 3) == 11 { 3 } else { 4 };
        let pid = c.procs[leaver].pid().to_string();
        assert!(Command::new("kill").args(["-TERM", &pid]).status().unwrap().success());
        c.wait_until("the leaver's exit", |c| c.exited(leaver));
        assert_eq!(c.procs[leaver].status, Some(0), "{}", c.dump());
        assert!(c.procs[leaver].stdout().contains("leaves the job"), "{}", c.dump());
        c.wait_success();
        let sched = c.procs[0].stderr();
        assert!(sched.contains("worker 11 left"), "{}", c.dump());
        assert!(trained_by(&c, joined) > 0, "the newcomer trained\n{}", c.dump());
        assert!(trained_by(&c, leaver) > 0, "the leaver trained\n{}", c.dump());
    } else {
        c.wait_success();
    }
    let sched = c.procs[0].stderr();
    for pass in 1..4 {
        let line = format!("pass {pass} complete: 60 done, 0 failed");
        assert!(sched.contains(&line), "no \"{line}\"\n{}", c.dump());
    }
    assert_eq!(training::tasks_done(&sched), TASKS, "tasks done\n{}", c.dump());
    for bad in ["timed out (", "giving up", "is dead:", "declared dead"] {
        assert!(!sched.contains(bad), "the scheduler logged {bad:?}\n{}", c.dump());
    }
    assert_eq!(
        trained_tasks(&c),
        TASKS,
        "every task trained exactly once\n{}",
        c.dump()
    );
    final_accuracy(&c)
}

#[test]
fn a_worker_joins_the_running_job_and_another_leaves_on_sigterm() {
    require_data();
    let dir = tempfile::tempdir().unwrap();
    let (train, test) = (convert(dir.path(), "train"), convert(dir.path(), "t10k"));
    let base = run(false, &train, &test, &dir.path().join("fault-free"));
    println!("2 workers, fault-free: test accuracy {base:.4}");
    let acc = run(true, &train, &test, &dir.path().join("elastic"));
    println!("a worker joined, another left on SIGTERM: test accuracy {acc:.4} vs {base:.4}");
    assert!((acc - base).abs() <= 0.01, "accuracy {acc} vs fault-free {base}");
}
