//! Failure detection and recovery on real processes: heartbeats declare a killed node
//! dead, barriers stop waiting for it, and a replacement takes its id.

mod common;

use common::Cluster;
use std::time::{Duration, Instant};

const LIMIT: Duration = Duration::from_secs(90);
const HB: &[(&str, &str)] = &[
    ("PS_HEARTBEAT_INTERVAL", "0.2"),
    ("PS_HEARTBEAT_TIMEOUT", "1"),
    ("PS_RESEND", "1"),
    ("PS_RESEND_TIMEOUT", "300"),
];

/// The id a process printed in its "started" log line.
fn started_id(c: &Cluster, i: usize) -> i32 {
    let err = c.procs[i].stderr();
    let line = err.lines().find(|l| l.ends_with(" started")).expect("started line");
    let tag = line.split_whitespace().rev().nth(1).unwrap(); // e.g. worker[11]@127.0.0.1:5000
    tag.split('[')
        .nth(1)
        .unwrap()
        .split(']')
        .next()
        .unwrap()
        .parse()
        .unwrap()
}

fn wait_started(c: &mut Cluster, i: usize) -> i32 {
    c.wait_for_output(i, "start", |s| s.lines().any(|l| l.ends_with(" started")));
    started_id(c, i)
}

#[test]
fn killed_worker_is_declared_dead_and_barriers_go_on() {
    let args = ["barrier", "--rounds", "40", "--max-delay-ms", "60"];
    let mut c = Cluster::start(1, 3, &args, HB, LIMIT);
    for i in 0..5 {
        wait_started(&mut c, i);
    }
    c.wait_for_output(4, "a few barrier rounds", |s| s.contains("barrier leave 3 "));
    let victim = started_id(&c, 4);
    let t = Instant::now();
    c.kill(4);
    c.wait_for_output(0, "the death report", |s| s.contains("declared dead"));
    let detected = t.elapsed();
    println!("worker {victim} declared dead {detected:?} after kill -9 (timeout 1 s)");
    assert!(detected < Duration::from_secs(5), "{detected:?}");
    let sched = c.procs[0].stderr();
    assert!(sched.contains(&format!("[{victim}]")), "{sched}");
    // the survivors finish all rounds and finalize without the dead worker
    c.wait_success();
    let out = c.all_stdout();
    assert!(out.contains("barrier leave 39 node 1 "), "{}", c.dump());
}

/// Killed at several moments of the exchange: a survivor's request to the dead worker
/// (on a link the kill broke) must not fail, the resender delivers it to the
/// replacement.
#[test]
fn replacement_worker_takes_the_dead_id_and_the_job_completes() {
    for kill_after_ms in [100, 500, 1300] {
        replacement_worker_case(kill_after_ms);
    }
}

fn replacement_worker_case(kill_after_ms: u64) {
    let args = ["simple-app", "--requests", "300", "--interval-ms", "10"];
    let mut c = Cluster::start(1, 2, &args, HB, LIMIT);
    for i in 0..4 {
        wait_started(&mut c, i);
    }
    std::thread::sleep(Duration::from_millis(kill_after_ms));
    let victim = started_id(&c, 3);
    let t = Instant::now();
    c.kill(3);
    c.wait_for_output(0, "the death report", |s| s.contains("declared dead"));
    println!(
        "killed at {kill_after_ms} ms: worker {victim} declared dead after {:?}",
        t.elapsed()
    );
    let r = c.spawn("worker");
    let new_id = wait_started(&mut c, r);
    println!("replacement took id {new_id} {:?} after the kill", t.elapsed());
    assert_eq!(new_id, victim, "{}", c.dump());
    c.wait_success();
    let out = c.all_stdout();
    assert_eq!(out.matches("simple-app ok").count(), 2, "{}", c.dump());
    assert!(
        out.contains(&format!("simple-app ok: worker {victim} checked 1200 replies")),
        "{}",
        c.dump()
    );
}

#[test]
fn killed_server_is_replaced_and_finalize_does_not_hang() {
    let args = ["simple-app", "--requests", "300", "--interval-ms", "20"];
    let mut c = Cluster::start(2, 1, &args, HB, LIMIT);
    for i in 0..4 {
        wait_started(&mut c, i);
    }
    std::thread::sleep(Duration::from_millis(500));
    let victim = started_id(&c, 1);
    c.kill(1);
    c.wait_for_output(0, "the death report", |s| s.contains("declared dead"));
    let r = c.spawn("server");
    assert_eq!(wait_started(&mut c, r), victim);
    c.wait_success();
    assert!(
        c.all_stdout().contains("simple-app ok: worker 9 checked 1200 replies"),
        "{}",
        c.dump()
    );
}

#[test]
fn restarted_scheduler_rebuilds_the_table_and_the_job_completes() {
    // several moments: a scheduler killed between taking a call and answering it is
    // asked again once it is back (SimpleApp::call), whenever that happens
    for wait_ms in [150, 500, 1100] {
        restart_the_scheduler_after(wait_ms);
    }
}

/// Kills the scheduler `wait_ms` after the cluster started, starts a new one, and
/// checks that it rebuilt the table with the same ids and the job completes.
fn restart_the_scheduler_after(wait_ms: u64) {
    let env = [
        ("PS_HEARTBEAT_INTERVAL", "0.2"),
        ("PS_HEARTBEAT_TIMEOUT", "1"),
        ("PS_RESEND", "1"),
        ("PS_RESEND_TIMEOUT", "500"),
    ];
    let args = ["simple-app", "--requests", "300", "--interval-ms", "20"];
    let mut c = Cluster::start(1, 2, &args, &env, LIMIT);
    for i in 0..4 {
        wait_started(&mut c, i);
    }
    std::thread::sleep(Duration::from_millis(wait_ms));
    let t = Instant::now();
    c.kill(0);
    let r = c.spawn("scheduler");
    c.wait_for_output(r, "the node table", |s| s.contains("node table"));
    println!(
        "killed at {wait_ms} ms: scheduler restarted and the table rebuilt {:?} after the kill",
        t.elapsed()
    );
    let table = c.procs[r].stderr();
    for i in 1..4 {
        let id = started_id(&c, i);
        assert!(table.contains(&format!("[{id}]@")), "node {id} kept its id\n{table}");
    }
    c.wait_success();
    let out = c.all_stdout();
    assert_eq!(
        out.matches("simple-app ok").count(),
        2,
        "killed at {wait_ms} ms\n{}",
        c.dump()
    );
}

/// A scheduler killed and never restarted (as one that ended its job while a node was
/// cut off from it): every node waits for a scheduler for `PS_JOIN_TIMEOUT`, then stops
/// with an error that says so, instead of re-registering with nobody for ever.
#[test]
fn nodes_stop_when_no_scheduler_comes_back_within_the_join_timeout() {
    let mut env = HB.to_vec();
    env.push(("PS_JOIN_TIMEOUT", "4"));
    let args = ["simple-app", "--requests", "100000", "--interval-ms", "20"];
    let mut c = Cluster::start(1, 2, &args, &env, LIMIT);
    for i in 0..4 {
        wait_started(&mut c, i);
    }
    std::thread::sleep(Duration::from_millis(300));
    let t = Instant::now();
    c.kill(0);
    let bound = Duration::from_secs(4 + 20);
    while (1..4).any(|i| !c.exited(i)) && t.elapsed() < bound {
        std::thread::sleep(Duration::from_millis(50));
    }
    let waited = t.elapsed();
    let running: Vec<usize> = (1..4).filter(|&i| !c.exited(i)).collect();
    c.kill_all();
    assert!(
        running.is_empty(),
        "nodes {running:?} still ran {waited:?} after their scheduler died (PS_JOIN_TIMEOUT 4 s)\n{}",
        c.dump()
    );
    for i in 1..4 {
        let p = &c.procs[i];
        assert_ne!(p.status, Some(0), "{} reported success\n{}", p.name, c.dump());
        assert!(
            p.stderr().contains("no word from any scheduler for"),
            "{} did not say why it stopped\n{}",
            p.name,
            c.dump()
        );
    }
    println!("every node stopped {waited:?} after its scheduler died (PS_JOIN_TIMEOUT 4 s)");
}

#[test]
fn tcp_transport_replacement_and_garbage() {
    let mut env: Vec<(&str, &str)> = HB.to_vec();
    env.push(("DMLC_PS_VAN_TYPE", "tcp"));
    let args = ["simple-app", "--requests", "300", "--interval-ms", "20"];
    let mut c = Cluster::start(1, 2, &args, &env, LIMIT);
    for i in 0..4 {
        wait_started(&mut c, i);
    }
    // garbage on the scheduler's port: the connection is dropped, the node goes on
    if let Ok(mut t) = std::net::TcpStream::connect(("127.0.0.1", c.port)) {
        use std::io::Write;
        let _ = t.write_all(b"GET / HTTP/1.0\r\n\r\n");
    }
    std::thread::sleep(Duration::from_millis(300));
    let victim = started_id(&c, 3);
    c.kill(3);
    c.wait_for_output(0, "the death report", |s| s.contains("declared dead"));
    let r = c.spawn("worker");
    assert_eq!(wait_started(&mut c, r), victim);
    c.wait_success();
    assert_eq!(c.all_stdout().matches("simple-app ok").count(), 2, "{}", c.dump());
    // the TCP van drops a connection whose first bytes are not a psrs stream
    let log = c.procs[0].stderr();
    assert!(
        log.contains("dropped a malformed message from 127.0.0.1") && log.contains("not a psrs stream"),
        "{}",
        c.dump()
    );
}
