//! Partitions of real processes: a training job (softmax on Fashion-MNIST's test
//! split, 20 tasks a pass) on 2 servers with `PS_REPLICAS=1`, 3 workers, an active
//! scheduler and one standby (`PS_HEARTBEAT_TIMEOUT=1`, so the lease is 0.8 s), every
//! process in its own network namespace, while a fault of one shape lasts a given
//! time (`PSRS_PARTITION_SECS`, 6 s by default):
//! - `active-minority`: the active scheduler, a server and a worker cut off from the rest;
//! - `standby-minority`: the standby, a server and a worker cut off;
//! - `server-alone`: a server cut off;
//! - `one-way`: nothing the active scheduler sends arrives (what it is sent does);
//! - `flapping`: the active scheduler's minority cut off 10 times for 1 s, the link up
//!   a sixth of the time between cuts;
//! - `sigstop`: the active scheduler stopped (SIGSTOP) for the time.
//!
//! Every run must end with every pass's tasks trained exactly once (the master counts
//! `passes x 20`; the workers' own counts add up to it, or to no more when a worker
//! was evicted), every server and worker ended with status 0, or 3 (evicted) only on
//! the cut-off side, which the scheduler it was cut off from may declare dead; at
//! most one scheduler acting at any moment (from the schedulers' `acting ... since`
//! and `not acting ... since` log lines), and at most one starting to act after the
//! heal; no node of the majority side declared dead; every copy of a key range on a
//! server that finished holding the same model (version and parameters, as each
//! server reports them at its end); and no error of either scheduler's coordinator
//! (one that does not act leaves its master's queues alone: its ticker has a save
//! refused at most once, stepping down during a tick). Each run prints one line
//! with its figures: from the cut to the standby acting (when it takes over) and
//! from the heal to the normal rate of finished tasks. `scripts/partition-suite.sh`
//! runs the shapes many times.
//!
//! They need root (network namespaces, nftables), so they are `#[ignore]`d; CI (as
//! root) runs them with `--ignored`, where failing to make namespaces fails.

mod common;

use common::logs::{self, Acting};
use common::netns::Net;
use common::{training, Cluster};
use std::collections::BTreeSet;
use std::path::Path;
use std::time::Duration;

/// Namespaces and process indices: the active scheduler, the standby, two servers,
/// three workers.
const S0: usize = 0;
const S1: usize = 1;
const V0: usize = 2;
const W0: usize = 4;
const PROCS: usize = 7;
const WORKERS: [usize; 3] = [4, 5, 6];
const SERVERS: [usize; 2] = [2, 3];
/// Tasks of one pass (Fashion-MNIST's test split, 500 examples a chunk).
const TASKS: usize = 20;
/// Tasks done before the fault starts (the normal rate is measured on them).
const BEFORE: usize = 24;

/// A fault's shape.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Shape {
    ActiveMinority,
    StandbyMinority,
    ServerAlone,
    OneWay,
    Flapping,
    Stop,
}

impl Shape {
    fn name(self) -> &'static str {
        match self {
            Shape::ActiveMinority => "active-minority",
            Shape::StandbyMinority => "standby-minority",
            Shape::ServerAlone => "server-alone",
            Shape::OneWay => "one-way",
            Shape::Flapping => "flapping",
            Shape::Stop => "sigstop",
        }
    }

    /// The processes on the cut-off (minority) side.
    fn minority(self) -> &'static [usize] {
        match self {
            Shape::ActiveMinority | Shape::Flapping => &[S0, V0, W0],
            Shape::StandbyMinority => &[S1, V0, W0],
            Shape::ServerAlone => &[V0],
            Shape::OneWay | Shape::Stop => &[S0],
        }
    }

    fn majority(self) -> Vec<usize> {
        (0..PROCS).filter(|p| !self.minority().contains(p)).collect()
    }
}

/// The time the fault lasts, from `PSRS_PARTITION_SECS` (6 s by default).
fn secs() -> f64 {
    match std::env::var("PSRS_PARTITION_SECS") {
        Ok(v) => v
            .parse::<f64>()
            .ok()
            .filter(|s| *s > 0.0 && *s <= 120.0)
            .unwrap_or_else(|| panic!("PSRS_PARTITION_SECS={v}: seconds in (0, 120]")),
        Err(_) => 6.0,
    }
}

/// Passes of the job: long enough that it runs on for several seconds after the
/// fault even on a quiet machine, where a pass takes about 0.4 s (a job that ended
/// during the cut leaves a cut-off node that never hears of the end;
/// `PSRS_PARTITION_PASSES` overrides).
fn passes(shape: Shape, secs: f64) -> u32 {
    if let Ok(v) = std::env::var("PSRS_PARTITION_PASSES") {
        return v
            .parse()
            .unwrap_or_else(|_| panic!("PSRS_PARTITION_PASSES={v}: a number"));
    }
    let fault = match shape {
        Shape::Flapping => 10.0 + 9.0 * secs / 6.0,
        _ => secs,
    };
    6 + (fault * 4.0).ceil() as u32
}

/// A run's hard limit: the job at ten times a quiet machine's pass time (0.4 s) and
/// a minute to start and end, 300 s at least. A hang still ends the run, but four
/// suites side by side on 2 cores, which stretch a pass to 2.5 s, do not fail the
/// longest flapping job (118 passes).
fn limit(passes: u32) -> Duration {
    Duration::from_secs(300.max(60 + 4 * u64::from(passes)))
}

fn job(data: &Path, work: &Path, passes: u32) -> Vec<String> {
    training::softmax_args(data, work, passes, 16)
}

fn sleep_s(s: f64) {
    std::thread::sleep(Duration::from_secs_f64(s));
}

/// Applies `shape` for `secs`; returns the Unix ms when it started and ended.
fn fault(shape: Shape, secs: f64, net: &Net, c: &Cluster) -> (u64, u64) {
    let minority = shape.minority();
    let majority = shape.majority();
    let cut = || net.partition(&[minority, &majority]).unwrap();
    let heal = || net.heal_bridge().unwrap();
    let start = logs::unix_now_ms();
    match shape {
        Shape::ActiveMinority | Shape::StandbyMinority | Shape::ServerAlone => {
            cut();
            sleep_s(secs);
            heal();
        }
        Shape::OneWay => {
            net.drop_from(S0).unwrap();
            sleep_s(secs);
            heal();
        }
        Shape::Flapping => {
            for i in 0..10 {
                cut();
                sleep_s(1.0);
                heal();
                if i < 9 {
                    sleep_s(secs / 6.0);
                }
            }
        }
        Shape::Stop => {
            c.signal(S0, "STOP");
            sleep_s(secs);
            c.signal(S0, "CONT");
        }
    }
    (start, logs::unix_now_ms())
}

/// The mean time (ms) between finished tasks over `points` (tasks finish in bursts:
/// a median of the gaps says little), at least 1.
fn mean_gap(points: &[(u64, usize)]) -> u64 {
    match (points.first(), points.last()) {
        (Some(a), Some(b)) if points.len() > 1 => ((b.0 - a.0) / (points.len() as u64 - 1)).max(1),
        _ => 1,
    }
}

/// Seconds from `heal` to the first finished task after which the next 10 come at
/// least at two thirds of the normal rate for `workers` workers (`gap`: the mean
/// time between finished tasks with all 3 before the fault); 0 if training never
/// slowed. None if the job ended before.
fn heal_to_normal(points: &[(u64, usize)], heal: u64, gap: u64, workers: usize) -> Option<f64> {
    const K: usize = 10;
    let after: Vec<u64> = points.iter().filter(|p| p.0 >= heal).map(|p| p.0).collect();
    let allowed = K as u64 * gap * 3 * 3 / (2 * workers.max(1) as u64);
    (0..after.len().saturating_sub(K))
        .find(|&i| after[i + K] - after[i] <= allowed)
        .map(|i| after[i].saturating_sub(heal) as f64 / 1000.0)
}

/// The terms whose first acting spell (of any scheduler's `spells`) started after
/// `heal`, in order: each is a change of leadership.
fn new_terms_after(spells: &[Vec<Acting>], heal: u64) -> Vec<u64> {
    let mut all: Vec<&Acting> = spells.iter().flatten().collect();
    all.sort_by_key(|s| s.from);
    let mut seen = BTreeSet::new();
    all.into_iter()
        .filter(|s| seen.insert(s.term) && s.from > heal)
        .map(|s| s.term)
        .collect()
}

/// Runs the job under `shape` for `secs` and checks the run; prints its figures line.
fn run(shape: Shape) {
    let secs = secs();
    let passes = passes(shape, secs);
    let total = TASKS * passes as usize;
    let what = format!("partition {} {secs} s", shape.name());
    let net = Net::create(PROCS)
        .unwrap_or_else(|e| panic!("cannot make network namespaces (run as root with iproute2 and nftables): {e}"));
    training::require_data();
    let dir = tempfile::tempdir().unwrap();
    let data = training::convert_chunks(dir.path(), "t10k", 500);
    let args: Vec<Vec<String>> = (0..2)
        .map(|s| job(&data, &dir.path().join(format!("work{s}")), passes))
        .collect();
    let a: Vec<&str> = args[0].iter().map(|s| s.as_str()).collect();
    let env = [
        ("PS_HEARTBEAT_INTERVAL", "0.2"),
        ("PS_HEARTBEAT_TIMEOUT", "1"),
        ("PS_RESEND", "1"),
        ("PS_RESEND_TIMEOUT", "500"),
        ("PS_REPLICAS", "1"),
        ("DMLC_NODE_HOST", ""),
    ];
    let mut c = Cluster::new(2, 3, &a, &env, limit(passes));
    let (ip0, ip1) = (net.ip(S0), net.ip(S1));
    let list = format!("{ip0}:{p},{ip1}:{p}", p = c.port);
    for s in [S0, S1] {
        let sa: Vec<&str> = args[s].iter().map(|x| x.as_str()).collect();
        let ip = net.ip(s);
        let mut senv = vec![("PS_SCHEDULERS", list.as_str()), ("DMLC_PS_ROOT_URI", ip.as_str())];
        if s == S1 {
            senv.push(("PS_SCHEDULER_STANDBY", "1"));
        }
        assert_eq!(c.spawn_wrapped("scheduler", &net.exec_prefix(s), &sa, &senv), s);
    }
    for p in 2..PROCS {
        let role = if SERVERS.contains(&p) { "server" } else { "worker" };
        let env = [("PS_SCHEDULERS", list.as_str()), ("DMLC_PS_ROOT_URI", ip0.as_str())];
        assert_eq!(c.spawn_wrapped(role, &net.exec_prefix(p), &a, &env), p);
    }
    c.wait_for_output(S0, "training progress before the fault", |o| {
        training::tasks_done(o) >= BEFORE
    });
    let (cut, heal) = fault(shape, secs, &net, &c);
    // the job ends when every server and worker did; a standby waits for ever
    c.wait_until("every server and worker to end", |c| (2..PROCS).all(|p| c.exited(p)));
    // a scheduler that exited acted until its last line; one still running, until now
    let mut ended = [0u64; 2];
    for s in [S0, S1] {
        let t = std::time::Instant::now();
        while !c.exited(s) && t.elapsed() < Duration::from_secs(5) {
            std::thread::sleep(Duration::from_millis(50));
        }
        ended[s] = match c.exited(s) {
            true => logs::last_line_ms(&c.procs[s].stderr()).unwrap_or(0),
            false => logs::unix_now_ms(),
        };
    }
    c.kill_all();
    let log = |p: usize| c.procs[p].stderr();
    let spells: Vec<Vec<Acting>> = [S0, S1].iter().map(|&s| logs::acting(&log(s), ended[s])).collect();
    // PSRS_PARTITION_LOGS=1: every process's whole log, of a passing run too
    let logs = std::env::var("PSRS_PARTITION_LOGS").is_ok_and(|v| v == "1");
    let lines = if logs { usize::MAX } else { 60 };
    let fail = |why: String| -> ! { panic!("{what}: {why}\n{}", c.dump_lines(lines)) };
    if let Some(o) = logs::overlap(&spells) {
        fail(format!("two schedulers acted at once: {o}"));
    }
    // after the heal, leadership changes at most once: at most one term acts for the
    // first time (a lease that lapsed and came back under the same term is no change)
    let new_terms = new_terms_after(&spells, heal);
    if new_terms.len() > 1 {
        let after: Vec<&Acting> = spells.iter().flatten().filter(|s| s.from > heal).collect();
        fail(format!(
            "leadership changed {} times after the heal: terms {new_terms:?} first acted then; spells {after:?}",
            new_terms.len()
        ));
    }
    // every node finished; only one of the cut-off side may have been evicted
    let mut evicted = Vec::new();
    for p in 2..PROCS {
        match c.procs[p].status {
            Some(0) => {}
            Some(3) if shape.minority().contains(&p) => evicted.push(p),
            Some(3) => fail(format!("process {p}, on the majority side, was evicted")),
            s => fail(format!("process {p} ended with status {s:?}")),
        }
    }
    // no scheduler declared a node of the majority side dead
    let ids: Vec<(usize, i32)> = (2..PROCS).map(|p| (p, training::id_of(&c, p))).collect();
    for s in [S0, S1] {
        for line in log(s).lines().filter(|l| l.contains("declared dead (no heartbeat")) {
            let named: Vec<i32> = line
                .rsplit('[')
                .next()
                .unwrap_or("")
                .trim_end_matches(']')
                .split(',')
                .filter_map(|x| x.trim().parse().ok())
                .collect();
            for (p, id) in &ids {
                if named.contains(id) && !shape.minority().contains(p) {
                    fail(format!(
                        "scheduler {s} declared node {id} (process {p}, on the majority side) dead: {line}"
                    ));
                }
            }
        }
    }
    // no scheduler's master or coordinator failed (a save refused because it stepped
    // down meanwhile is a warning), and its ticker had a save refused at most once
    // (stepping down between its check and the save): a ticker that ran while its
    // scheduler did not act would time out the tasks it holds at every tick
    for s in [S0, S1] {
        if let Some(line) = log(s).lines().find(|l| l.contains(" ERROR ps_apps::")) {
            fail(format!("scheduler {s}'s master or coordinator failed: {line}"));
        }
        let refused = log(s).matches("stepped down while timing out tasks").count();
        if refused > 1 {
            fail(format!(
                "scheduler {s}'s ticker had {refused} saves refused while it did not act"
            ));
        }
    }
    // every copy of a key range on a server that finished holds the same model
    let mut copies: std::collections::BTreeMap<String, Vec<(usize, String)>> = Default::default();
    for p in SERVERS.into_iter().filter(|&p| c.procs[p].status == Some(0)) {
        for line in log(p).lines() {
            let copy = line.split("psrs::commands::train] key range ").nth(1);
            if let Some((range, copy)) = copy.and_then(|x| x.split_once(": ")) {
                copies.entry(range.to_string()).or_default().push((p, copy.to_string()));
            }
        }
    }
    if copies.is_empty() {
        fail("no server reported its key ranges' copies".into());
    }
    for (range, held) in &copies {
        if held.iter().any(|(_, c)| *c != held[0].1) {
            fail(format!(
                "the copies of key range {range} differ: (process, copy) {held:?}"
            ));
        }
    }
    let reports: String = [S0, S1].iter().map(|&s| c.procs[s].stdout()).collect();
    let complete = format!("job complete: {total} tasks trained, 0 given up");
    if !reports.contains(&complete) {
        fail(format!("no scheduler reported '{complete}'"));
    }
    let trained = training::trained_tasks(&c);
    let evicted_workers = evicted.iter().filter(|p| WORKERS.contains(p)).count();
    if trained > total || (evicted_workers == 0 && trained != total) {
        fail(format!("the workers trained {trained} tasks, not {total}"));
    }
    // figures
    let before = spells
        .iter()
        .position(|sp| sp.iter().any(|s| s.from <= cut && cut < s.to));
    let takeover = spells
        .iter()
        .enumerate()
        .filter(|(i, _)| Some(*i) != before)
        .flat_map(|(_, sp)| sp.iter().filter(|s| s.from >= cut).map(|s| s.from))
        .min()
        .map(|t| (t - cut) as f64 / 1000.0);
    let mut points: Vec<(u64, usize)> = [S0, S1].iter().flat_map(|&s| logs::progress(&log(s))).collect();
    points.sort_unstable();
    // the normal rate: the second half of the tasks before the fault (the first
    // tasks of a job start together)
    let before: Vec<(u64, usize)> = points.iter().filter(|p| p.0 < cut).copied().collect();
    let gap = mean_gap(&before[before.len() / 2..]);
    let normal = heal_to_normal(&points, heal, gap, WORKERS.len() - evicted_workers);
    let show = |f: Option<f64>| f.map_or("-".to_string(), |s| format!("{s:.2} s"));
    println!(
        "{what}: passed; cut->takeover {}; heal->normal {}; evicted {evicted:?}; {trained} of {total} tasks",
        show(takeover),
        show(normal)
    );
    if logs {
        println!("{}", c.dump_lines(lines));
    }
}

#[test]
fn log_times_and_acting_spells_are_read() {
    assert_eq!(
        logs::line_ms("[1970-01-01T00:00:01.250Z scheduler  INFO x] y"),
        Some(1250)
    );
    assert_eq!(
        logs::line_ms("[2024-03-01T12:00:00.000Z w INFO x] y"),
        Some(1_709_294_400_000)
    );
    let log = "[1970-01-01T00:00:01.000Z s WARN f] acting as the active scheduler under term 1 (scheduler #0) since 900 (Unix ms)\n\
               [1970-01-01T00:00:05.000Z s WARN f] not acting under term 1 (scheduler #0) since 4000 (Unix ms): why\n\
               [1970-01-01T00:00:09.000Z s WARN f] acting as the active scheduler under term 3 (scheduler #0) since 9000 (Unix ms)\n";
    let a = logs::acting(log, 12_000);
    let spell = |term, from, to| Acting { term, from, to };
    assert_eq!(a, vec![spell(1, 900, 4000), spell(3, 9000, 12_000)]);
    assert_eq!(logs::overlap(&[a.clone(), vec![spell(2, 4500, 8900)]]), None);
    assert!(logs::overlap(&[a, vec![spell(2, 3900, 5000)]]).is_some());
    // five tasks after the heal at the normal rate: 0; slower first: from the first
    // of five at that rate
    let pts: Vec<(u64, usize)> = (0..20).map(|i| (1000 + 100 * i, i as usize)).collect();
    assert_eq!(mean_gap(&pts), 100);
    assert_eq!(heal_to_normal(&pts, 1000, 100, 3), Some(0.0));
    let mut slow = vec![(1000, 0), (3000, 1)];
    slow.extend((0..11).map(|i| (3100 + 100 * i, 2 + i as usize)));
    assert_eq!(heal_to_normal(&slow, 1000, 100, 3), Some(2.0));
    assert_eq!(heal_to_normal(&slow[..5], 1000, 100, 3), None);
}

#[test]
fn a_lease_that_lapses_and_returns_under_its_term_changes_no_leadership() {
    let spell = |term, from, to| Acting { term, from, to };
    // the heal at 5000: term 2 acted before it, lapsed after it and came back
    let s0 = vec![spell(1, 0, 1000)];
    let s1 = vec![spell(2, 2000, 6000), spell(2, 6100, 7000), spell(2, 7100, 9000)];
    assert!(new_terms_after(&[s0.clone(), s1.clone()], 5000).is_empty());
    // term 4 first acted after the heal: one change; then term 5: a second one
    let s0 = vec![spell(1, 0, 1000), spell(4, 9100, 9500)];
    assert_eq!(new_terms_after(&[s0.clone(), s1.clone()], 5000), vec![4]);
    let s1 = vec![spell(2, 2000, 9000), spell(5, 9600, 9900)];
    assert_eq!(new_terms_after(&[s0, s1], 5000), vec![4, 5]);
}

#[test]
#[ignore = "needs root for network namespaces and nftables; CI runs it with --ignored"]
fn the_active_scheduler_cut_off_with_a_minority() {
    run(Shape::ActiveMinority);
}

#[test]
#[ignore = "needs root for network namespaces and nftables; CI runs it with --ignored"]
fn the_standby_cut_off_with_a_minority() {
    run(Shape::StandbyMinority);
}

#[test]
#[ignore = "needs root for network namespaces and nftables; CI runs it with --ignored"]
fn a_server_cut_off_alone() {
    run(Shape::ServerAlone);
}

#[test]
#[ignore = "needs root for network namespaces and nftables; CI runs it with --ignored"]
fn nothing_the_active_scheduler_sends_arrives() {
    run(Shape::OneWay);
}

#[test]
#[ignore = "needs root for network namespaces and nftables; CI runs it with --ignored"]
fn a_flapping_link_to_the_active_schedulers_side() {
    run(Shape::Flapping);
}

#[test]
#[ignore = "needs root for network namespaces and nftables; CI runs it with --ignored"]
fn the_active_scheduler_stopped() {
    run(Shape::Stop);
}
