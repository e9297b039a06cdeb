//! Replicated key ranges (`PS_REPLICAS`) on real processes: a server killed with
//! SIGKILL in the middle of the pushes loses nothing, and no replacement is started;
//! a replacement started later copies its ranges and the next kill loses nothing.

mod common;

use common::Cluster;
use std::time::{Duration, Instant};

const LIMIT: Duration = Duration::from_secs(90);
const ENV: &[(&str, &str)] = &[
    ("PS_REPLICAS", "1"),
    ("PS_HEARTBEAT_INTERVAL", "0.1"),
    ("PS_HEARTBEAT_TIMEOUT", "0.5"),
];

/// Kills server `victim` (launch index: scheduler 0, servers 1..=3) once worker
/// output shows `after` pushes, then checks every sum.
fn kill_a_server_mid_pushes(victim: usize, after: usize) {
    kill_a_server_mid_pushes_with(victim, after, &[]);
}

fn kill_a_server_mid_pushes_with(victim: usize, after: usize, extra: &[(&str, &str)]) {
    let args = [
        "kv-test",
        "--keys",
        "3000",
        "--repeat",
        "200",
        "--interval-ms",
        "5",
        "--uneven",
    ];
    let env: Vec<(&str, &str)> = ENV.iter().chain(extra).copied().collect();
    let mut c = Cluster::start(3, 2, &args, &env, LIMIT);
    let worker = 4;
    let mark = format!("kv-test pushed {after}\n");
    c.wait_for_output(worker, "pushes", |s| s.contains(&mark));
    let t = Instant::now();
    c.kill(victim);
    c.wait_for_output(0, "the death report", |s| s.contains("declared dead"));
    println!(
        "server {victim} killed after {after} pushes; declared dead after {:?}",
        t.elapsed()
    );
    c.wait_success();
    let out = c.all_stdout();
    // 3000 keys with lens 1,2,3,...: 6000 values, each 200 pushes x 2 workers
    assert_eq!(
        out.matches("checked 6000 values = 400 x pushed").count(),
        2,
        "{}",
        c.dump()
    );
    if !extra.is_empty() {
        // the loss really happened (the killed server logs nothing at exit)
        let drops: u64 = c
            .procs
            .iter()
            .flat_map(|p| {
                p.stderr()
                    .lines()
                    .filter_map(|l| {
                        l.split("injected drops ")
                            .nth(1)?
                            .split(',')
                            .next()?
                            .trim()
                            .parse::<u64>()
                            .ok()
                    })
                    .collect::<Vec<_>>()
            })
            .sum();
        assert!(drops > 0, "no message was dropped\n{}", c.dump());
        println!("{drops} messages dropped and resent");
    }
    let rerouted: usize = c
        .procs
        .iter()
        .map(|p| p.stderr().matches("now goes to server").count())
        .sum();
    println!("{rerouted} request parts sent again to the next replica");
}

#[test]
fn kv_sums_exact_after_a_server_is_killed_early_without_replacement() {
    kill_a_server_mid_pushes(1, 20);
}

#[test]
fn kv_sums_exact_after_a_server_is_killed_late_without_replacement() {
    kill_a_server_mid_pushes(3, 150);
}

/// With 10% of data messages dropped and resent: forwards, acknowledgements and
/// answers for two ranges from one server survive the resender's de-duplication.
#[test]
fn kv_sums_exact_after_a_server_is_killed_under_message_loss() {
    let loss = [("PS_RESEND", "1"), ("PS_RESEND_TIMEOUT", "200"), ("PS_DROP_MSG", "10")];
    kill_a_server_mid_pushes_with(2, 80, &loss);
}

/// A replacement server copies its ranges from live replicas and rejoins as a holder:
/// after it announced so, a second server (another one) is killed, and every sum is
/// still exact (the replacement's copy of one range is then the only one).
#[test]
fn a_replacement_catches_up_and_the_next_kill_is_survived_too() {
    replace_then_kill_another(3, "1");
}

/// The same with 4 servers and 2 replicas: a range's copy may come from a holder that
/// is not the one the workers push to (it relays those pushes to the newcomer).
#[test]
fn with_two_replicas_a_replacement_catches_up_and_the_next_kill_is_survived_too() {
    replace_then_kill_another(4, "2");
}

/// `servers` servers with `replicas` replicas: server rank 1 killed, a replacement
/// started at once and, after it rejoined, server rank 2 killed; every sum exact.
fn replace_then_kill_another(servers: usize, replicas: &str) {
    let args = ["kv-test", "--keys", "3000", "--repeat", "400", "--interval-ms", "5"];
    let env: Vec<(&str, &str)> = ENV
        .iter()
        .map(|&(k, v)| if k == "PS_REPLICAS" { (k, replicas) } else { (k, v) })
        .collect();
    let mut c = Cluster::start(servers, 2, &args, &env, LIMIT);
    let worker = servers + 1;
    c.wait_for_output(worker, "pushes", |s| s.contains("kv-test pushed 30\n"));
    c.kill(2);
    c.wait_for_output(0, "the death report", |s| s.contains("declared dead"));
    let t = Instant::now();
    let r = c.spawn("server");
    c.wait_for_output(r, "the rejoin", |s| s.contains("rejoining as a holder"));
    println!("replacement rejoined {:?} after it started", t.elapsed());
    // the catch-up really happened while pushes were going on: one copy per range held
    let log = c.procs[r].stderr();
    let held = replicas.parse::<usize>().unwrap() + 1;
    assert_eq!(log.matches("installed key range").count(), held, "{}", c.dump());
    c.kill(3);
    c.wait_for_output(0, "the second death report", |s| {
        s.matches("declared dead").count() >= 2
    });
    c.wait_success();
    assert_eq!(c.procs[r].status, Some(0), "{}", c.dump());
    assert_eq!(
        c.all_stdout().matches("checked 3000 values = 800 x pushed").count(),
        2,
        "{}",
        c.dump()
    );
}
