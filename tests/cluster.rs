//! Foundation tests on real processes: connection, barriers, SimpleApp, malformed
//! input, configuration errors and the local launcher.

mod common;

use common::{free_port, psrs_bin, Cluster};
use std::io::Write;
use std::process::Command;
use std::time::Duration;

const LIMIT: Duration = Duration::from_secs(60);

#[test]
fn connection_matrix_starts_and_finalizes() {
    for servers in 1..=3 {
        for workers in 1..=4 {
            let mut c = Cluster::start(servers, workers, &["connect"], &[], LIMIT);
            c.wait_success();
            let out = c.all_stdout();
            let mut ids: Vec<i32> = out
                .lines()
                .filter_map(|l| l.split(" id ").nth(1)?.split(' ').next()?.parse().ok())
                .collect();
            ids.sort();
            let mut want = vec![1];
            want.extend((0..servers).map(|r| 8 + 2 * r as i32));
            want.extend((0..workers).map(|r| 9 + 2 * r as i32));
            want.sort();
            assert_eq!(ids, want, "{servers}x{workers}\n{}", c.dump());
        }
    }
}

fn parse_barrier_log(out: &str) -> Vec<(String, usize, i32, u128)> {
    out.lines()
        .filter_map(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            (w.len() == 7 && w[0] == "barrier").then(|| {
                (
                    w[1].to_string(),
                    w[2].parse().unwrap(),
                    w[4].parse().unwrap(),
                    w[6].parse().unwrap(),
                )
            })
        })
        .collect()
}

fn check_barrier_order(out: &str, rounds: usize, members: &[i32]) {
    let log = parse_barrier_log(out);
    for r in 0..rounds {
        let enters: Vec<_> = log.iter().filter(|e| e.0 == "enter" && e.1 == r).collect();
        let leaves: Vec<_> = log.iter().filter(|e| e.0 == "leave" && e.1 == r).collect();
        let mut who: Vec<i32> = enters.iter().map(|e| e.2).collect();
        who.sort();
        assert_eq!(who, members, "round {r} entered by {who:?}");
        assert_eq!(leaves.len(), members.len(), "round {r}");
        let last_enter = enters.iter().map(|e| e.3).max().unwrap();
        let first_leave = leaves.iter().map(|e| e.3).min().unwrap();
        assert!(
            first_leave >= last_enter,
            "round {r}: a node left at {first_leave} before the last entered at {last_enter}"
        );
    }
}

#[test]
fn barrier_releases_only_after_every_member_arrived() {
    let rounds = 6;
    let mut c = Cluster::start(2, 3, &["barrier", "--rounds", "6", "--max-delay-ms", "80"], &[], LIMIT);
    c.wait_success();
    check_barrier_order(&c.all_stdout(), rounds, &[1, 8, 9, 10, 11, 13]);

    // a barrier over the workers only
    let mut c = Cluster::start(1, 3, &["barrier", "--rounds", "4", "--group", "4"], &[], LIMIT);
    c.wait_success();
    check_barrier_order(&c.all_stdout(), 4, &[9, 11, 13]);
}

#[test]
fn simple_app_replies_are_checked() {
    let mut c = Cluster::start(2, 2, &["simple-app", "--requests", "100"], &[], LIMIT);
    c.wait_success();
    let out = c.all_stdout();
    for w in [9, 11] {
        // 100 requests x 5 nodes
        assert!(
            out.contains(&format!("simple-app ok: worker {w} checked 500 replies")),
            "{}",
            c.dump()
        );
    }
}

/// Garbage to `port` over ZMQ (a DEALER's malformed messages), then raw bytes that are
/// not even ZMTP. Returns the DEALER: its messages go (and, to a TCP van, which
/// refuses the ZMTP greeting, its connection attempts go on) while it is open and,
/// once dropped, for its linger.
fn send_garbage(ctx: &zmq::Context, port: u16) -> zmq::Socket {
    let s = ctx.socket(zmq::DEALER).unwrap();
    s.connect(&format!("tcp://127.0.0.1:{port}")).unwrap();
    s.send(&b"garbage"[..], 0).unwrap();
    s.send_multipart([&b"\xff\xff\xff\xff\xff\xff\xff\xff\xff"[..], &b"x"[..]], 0)
        .unwrap();
    s.send(&b""[..], 0).unwrap();
    // a header claiming an enormous vector
    s.send(&[0u8, 0, 0, 0, 0, 0, 0, 0xfb, 0xff, 0xff, 0xff, 0xff][..], 0)
        .unwrap();
    let many: Vec<&[u8]> = vec![&b"m"[..]; 100];
    s.send_multipart(many, 0).unwrap();
    // raw bytes that are not even ZMTP
    if let Ok(mut t) = std::net::TcpStream::connect(("127.0.0.1", port)) {
        let _ = t.write_all(&[0x17u8; 300]);
    }
    s
}

/// Garbage reaches the scheduler and the server twice: while they wait for the worker
/// (each must log a drop before the worker starts: they cannot exit before it joined,
/// so the check does not race the job's end), and again once the cluster runs. The
/// job must still come out exact.
#[test]
fn malformed_input_is_dropped_and_nodes_keep_working() {
    let server_port = free_port();
    let mut c = Cluster::new(
        1,
        1,
        &["simple-app", "--requests", "100", "--interval-ms", "10"],
        &[],
        LIMIT,
    );
    c.spawn("scheduler");
    let args = ["simple-app", "--requests", "100", "--interval-ms", "10"];
    let sp = server_port.to_string();
    c.spawn_with("server", &args, &[("PORT", sp.as_str())]);
    let sched_port = c.port;
    c.wait_until("the scheduler and the server listening", |_| {
        [sched_port, server_port]
            .iter()
            .all(|&p| std::net::TcpStream::connect(("127.0.0.1", p)).is_ok())
    });
    // the TCP van with security refuses garbage at the TLS handshake, before any message
    let dropped = |e: &str| e.contains("dropped a malformed message") || e.contains("not a TLS handshake");
    let ctx = zmq::Context::new();
    // open until both logged a drop, however long this process waits for the CPU
    let open: Vec<zmq::Socket> = [sched_port, server_port]
        .iter()
        .map(|&p| send_garbage(&ctx, p))
        .collect();
    c.wait_until("the scheduler and the server dropping the garbage", |c| {
        dropped(&c.procs[0].stderr()) && dropped(&c.procs[1].stderr())
    });
    for s in open {
        s.set_linger(0).unwrap();
    }
    c.spawn("worker");
    c.wait_for_output(0, "the scheduler to start", |s| {
        s.contains("scheduler[1]") && s.contains(" started")
    });
    for port in [sched_port, server_port] {
        // the job may end first: the context's end waits for this at most a second
        send_garbage(&ctx, port).set_linger(1000).unwrap();
    }
    c.wait_success();
    assert!(
        c.all_stdout().contains("simple-app ok: worker 9 checked 300 replies"),
        "{}",
        c.dump()
    );
    let sched_err = c.procs[0].stderr();
    assert!(dropped(&sched_err), "{sched_err}");
    assert!(dropped(&c.procs[1].stderr()));
    assert!(!c.dump().contains("panicked"));
}

#[test]
fn bad_environment_gives_one_line_naming_the_variable() {
    let cases: &[(&[(&str, &str)], &str)] = &[
        (&[], "DMLC_ROLE"),
        (&[("DMLC_ROLE", "boss")], "DMLC_ROLE"),
        (
            &[
                ("DMLC_ROLE", "worker"),
                ("DMLC_PS_ROOT_URI", "127.0.0.1"),
                ("DMLC_PS_ROOT_PORT", "abc"),
            ],
            "DMLC_PS_ROOT_PORT",
        ),
        (
            &[
                ("DMLC_ROLE", "worker"),
                ("DMLC_PS_ROOT_URI", "127.0.0.1"),
                ("DMLC_PS_ROOT_PORT", "9"),
                ("DMLC_NUM_SERVER", "1"),
            ],
            "DMLC_NUM_WORKER",
        ),
    ];
    for (env, var) in cases {
        let mut cmd = Command::new(psrs_bin());
        cmd.arg("connect");
        for k in [
            "DMLC_ROLE",
            "DMLC_PS_ROOT_URI",
            "DMLC_PS_ROOT_PORT",
            "DMLC_NUM_SERVER",
            "DMLC_NUM_WORKER",
        ] {
            cmd.env_remove(k);
        }
        cmd.envs(env.iter().copied());
        let out = cmd.output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{err}");
        assert_eq!(err.trim().lines().count(), 1, "{err}");
        assert!(err.contains(var) && !err.contains("panicked"), "{err}");
    }
}

#[test]
fn surplus_node_waits_as_standby_and_times_out_clearly() {
    let args = ["simple-app", "--requests", "200", "--interval-ms", "10"];
    let mut c = Cluster::start(1, 1, &args, &[], LIMIT);
    c.wait_for_output(0, "the cluster to start", |s| s.contains("node table"));
    // no node died, so there is no id to take: the extra worker waits, then gives up
    let extra = c.spawn_with("worker", &args, &[("PS_JOIN_TIMEOUT", "1")]);
    c.wait();
    assert_eq!(c.procs[extra].status, Some(2), "{}", c.dump());
    assert!(
        c.procs[extra].stderr().contains("no node table from the scheduler"),
        "{}",
        c.dump()
    );
    for p in &c.procs[..extra] {
        assert_eq!(p.status, Some(0), "{}", c.dump());
    }
}

#[test]
fn local_launcher_runs_a_cluster_and_reports_failure() {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/local.sh");
    let ok = Command::new("bash")
        .args([script, "2", "2"])
        .arg(psrs_bin())
        .args(["simple-app", "--requests", "20"])
        .env("PSRS_TIMEOUT", "60")
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&ok.stdout);
    assert!(ok.status.success(), "{}", String::from_utf8_lossy(&ok.stderr));
    assert_eq!(out.matches("simple-app ok").count(), 2, "{out}");

    // a node that fails makes the launcher fail and kill the rest
    let bad = Command::new("bash")
        .args([script, "1", "1"])
        .arg(psrs_bin())
        .args(["simple-app", "--no-such-flag"])
        .env("PSRS_TIMEOUT", "60")
        .output()
        .unwrap();
    assert!(!bad.status.success());

    // a hung cluster is killed at the timeout
    let t = std::time::Instant::now();
    let hung = Command::new("bash")
        .args([script, "1", "1", "sleep", "100"])
        .env("PSRS_TIMEOUT", "2")
        .output()
        .unwrap();
    assert_eq!(
        hung.status.code(),
        Some(124),
        "{}",
        String::from_utf8_lossy(&hung.stderr)
    );
    assert!(t.elapsed() < Duration::from_secs(30));
}
