//! Scheduler failover to standbys on real processes: a 4-pass training job
//! with two standby schedulers; the active scheduler is killed with SIGKILL mid-pass
//! and not restarted, the first standby takes over; later the new active one is killed
//! too and the second standby takes over. The job must finish within one point of the
//! fault-free accuracy, with exactly the expected number of tasks trained (nothing
//! redone, nothing lost), and the standbys must refuse no message while the cluster
//! forms (a member's message taken as forged). Seconds from each kill to training progress again are
//! printed. Fails when Fashion-MNIST is not installed. The same run with
//! `PS_ELECTION=etcd` (an etcd lock decides the active scheduler, the state lives in
//! etcd) needs `--features etcd` and a real etcd (`etcd-server`); without the feature it
//! is ignored. A standby stopped long enough to miss writes catches up and takes
//! over with nothing lost.

mod common;

use common::training::{args, convert, final_accuracy, progress_lines, require_data, trained_tasks, ENV};
use common::{free_port, with_heartbeat_timeout, Cluster};
use std::path::Path;
use std::time::{Duration, Instant};

const LIMIT: Duration = Duration::from_secs(240);

/// A training cluster with `standbys` standby schedulers, each with its own work dir
/// (their state reaches them over the network, not through a shared file), every
/// process with `env`. Returns the cluster and the indices of the schedulers, active
/// first. `election` is extra environment of every scheduler (the etcd election's
/// variables).
fn start(
    train: &Path,
    test: &Path,
    dir: &Path,
    name: &str,
    standbys: usize,
    env: &[(&str, &str)],
    election: &[(&str, &str)],
) -> (Cluster, Vec<usize>) {
    let work = dir.join(name);
    let a = args(train, test, &work);
    let a: Vec<&str> = a.iter().map(|s| s.as_str()).collect();
    let mut c = Cluster::new(2, 2, &a, env, LIMIT);
    let mut ports = vec![c.port];
    ports.extend((0..standbys).map(|_| free_port()));
    let list = ports
        .iter()
        .map(|p| format!("127.0.0.1:{p}"))
        .collect::<Vec<_>>()
        .join(",");
    let env = [("PS_SCHEDULERS", list.as_str())];
    let mut first = env.to_vec();
    first.extend_from_slice(election);
    let mut scheds = vec![c.spawn_with("scheduler", &a, &first)];
    for (k, p) in ports.iter().enumerate().skip(1) {
        let own = dir.join(format!("{name}-standby{k}"));
        let sa = args(train, test, &own);
        let sa: Vec<&str> = sa.iter().map(|s| s.as_str()).collect();
        let port = p.to_string();
        let mut senv = vec![
            ("PS_SCHEDULERS", list.as_str()),
            ("PS_SCHEDULER_STANDBY", "1"),
            ("DMLC_PS_ROOT_PORT", port.as_str()),
        ];
        senv.extend_from_slice(election);
        scheds.push(c.spawn_with("scheduler", &sa, &senv));
    }
    for role in ["server", "server", "worker", "worker"] {
        c.spawn_with(role, &a, &env);
    }
    (c, scheds)
}

/// Kills the active scheduler `dead` and waits until one of `standbys` took over and
/// logged two more progress lines; returns the seconds from the kill to the first of
/// them, and which standby took over (under etcd, whichever won the lock).
fn fail_over(c: &mut Cluster, dead: usize, standbys: &[usize]) -> (f64, usize) {
    let t = Instant::now();
    c.kill(dead);
    let took = |c: &Cluster| {
        let won = |&&i: &&usize| c.procs[i].stderr().contains("taking over as the active scheduler");
        standbys.iter().find(won).copied()
    };
    c.wait_until("a standby to take over", |c| took(c).is_some());
    let next = took(c).expect("took over");
    c.wait_for_output(next, "training progress on the new active scheduler", |s| {
        s.contains("progress: ")
    });
    let back = t.elapsed().as_secs_f64();
    let n = progress_lines(c, next);
    c.wait_for_output(next, "more progress", |s| s.matches("progress: ").count() >= n + 2);
    let both = standbys
        .iter()
        .any(|&i| i != next && c.procs[i].stderr().contains("taking over"));
    assert!(!both, "two standbys took over\n{}", c.dump());
    (back, next)
}

/// The term a scheduler took over under, from its log.
fn term_taken(log: &str) -> u64 {
    let line = log.lines().find(|l| l.contains("taking over as the active scheduler"));
    let term = line.and_then(|l| l.split("term ").nth(1)?.split(' ').next()?.parse().ok());
    term.unwrap_or_else(|| panic!("no takeover term in\n{log}"))
}

/// Trains fault-free, then with the active scheduler killed twice (two standbys, each
/// scheduler with `election`); checks the accuracy and the task count and returns the
/// seconds from each kill to progress again, the two takeover terms and which
/// schedulers (1 or 2) took over.
fn kill_twice(election: &[(&str, &str)], what: &str) -> ([f64; 2], [u64; 2], [usize; 2]) {
    require_data();
    let dir = tempfile::tempdir().unwrap();
    let (train, test) = (convert(dir.path(), "train"), convert(dir.path(), "t10k"));

    // nothing dies in the fault-free run: a long heartbeat timeout, so that a node the
    // loaded machine leaves unscheduled for a second is not declared dead
    let (mut c, _) = start(
        &train,
        &test,
        dir.path(),
        "clean",
        0,
        &with_heartbeat_timeout(ENV, "10"),
        &[],
    );
    c.wait_success();
    let base = final_accuracy(&c);
    assert_eq!(trained_tasks(&c), 240, "fault-free: 60 tasks x 4 passes\n{}", c.dump());
    println!("fault-free softmax: test accuracy {base:.4}");

    let (mut c, s) = start(&train, &test, dir.path(), "failover", 2, ENV, election);
    // first kill: mid-pass in the first half of the job
    c.wait_for_output(s[0], "training progress", |o| o.matches("progress: ").count() >= 12);
    // a cluster forming with standbys is no attack: nothing the nodes sent them while
    // they joined (their first registrations go to every candidate) was refused
    for &i in &s[1..] {
        let log = c.procs[i].stderr();
        assert!(!log.contains("dropped a message"), "a standby refused a message\n{log}");
    }
    let (first, s1) = fail_over(&mut c, s[0], &s[1..]);
    // second kill: the new active one, later in the job
    let later = progress_lines(&c, s1) + 40;
    c.wait_for_output(s1, "later progress", |o| o.matches("progress: ").count() >= later);
    let s2 = if s1 == s[1] { s[2] } else { s[1] };
    let (second, _) = fail_over(&mut c, s1, &[s2]);
    c.wait_success();
    let acc = final_accuracy(&c);
    println!(
        "{what}: scheduler killed twice (PS_HEARTBEAT_TIMEOUT=1): progress again {first:.2} s and {second:.2} s after kill -9 (IDunno: 8 s); test accuracy {acc:.4} vs {base:.4}"
    );
    let terms = [term_taken(&c.procs[s1].stderr()), term_taken(&c.procs[s2].stderr())];
    assert_eq!(
        trained_tasks(&c),
        240,
        "tasks trained after two failovers\n{}",
        c.dump()
    );
    assert!((acc - base).abs() <= 0.01, "accuracy {acc} vs fault-free {base}");
    let order = [s1, s2].map(|i| s.iter().position(|&k| k == i).unwrap());
    ([first, second], terms, order)
}

#[test]
fn standbys_take_over_from_killed_schedulers() {
    let (_, terms, order) = kill_twice(&[], "embedded election");
    assert_eq!(terms, [2, 3], "the standbys run terms 2 and 3");
    assert_eq!(order, [1, 2], "the nearest standby takes over first");
}

/// One standby, stopped (SIGSTOP) for several heartbeat timeouts mid-job: the active
/// scheduler stops waiting for it and goes on, so the standby misses those writes.
/// Resumed, it must catch up; then the active one is killed and the standby, the only
/// candidate left, must take over holding everything the nodes were told: the job
/// finishes with every task trained exactly once.
#[test]
fn a_standby_that_missed_writes_catches_up_and_takes_over() {
    require_data();
    let dir = tempfile::tempdir().unwrap();
    let (train, test) = (convert(dir.path(), "train"), convert(dir.path(), "t10k"));
    let (mut c, s) = start(&train, &test, dir.path(), "missed", 1, ENV, &[]);
    c.wait_for_output(s[0], "training progress", |o| o.matches("progress: ").count() >= 8);
    c.signal(s[1], "STOP");
    // the active one goes on without the stopped standby: writes it misses
    let missed = progress_lines(&c, s[0]) + 12;
    c.wait_for_output(s[0], "progress without the standby", |o| {
        o.matches("progress: ").count() >= missed
    });
    c.signal(s[1], "CONT");
    // the active one's beats reach the standby again and catch it up
    let later = progress_lines(&c, s[0]) + 6;
    c.wait_for_output(s[0], "progress after the standby resumed", |o| {
        o.matches("progress: ").count() >= later
    });
    let (back, next) = fail_over(&mut c, s[0], &s[1..]);
    assert_eq!(next, s[1]);
    c.wait_success();
    assert_eq!(
        trained_tasks(&c),
        240,
        "tasks trained after the standby that missed writes took over\n{}",
        c.dump()
    );
    println!("a standby that missed writes took over: progress again {back:.2} s after kill -9");
}

#[test]
#[cfg_attr(not(feature = "etcd"), ignore = "needs --features etcd and etcd-server")]
fn etcd_elects_the_standbys_that_take_over() {
    let etcd = common::etcd::Etcd::start();
    let env = etcd.election("/standby-test");
    let (_, [t1, t2], _) = kill_twice(&env, "etcd election");
    // the terms are etcd revisions: each new holder of the lock has a higher one
    assert!(1 < t1 && t1 < t2, "terms {t1}, {t2}");
}
