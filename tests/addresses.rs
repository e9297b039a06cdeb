//! Address rules on real processes (one host): IPv6, names that do not resolve, and a
//! node the scheduler cannot connect back to.

mod common;

use common::Cluster;
use std::time::{Duration, Instant};

const LIMIT: Duration = Duration::from_secs(60);

#[test]
fn an_ipv6_cluster_with_default_addresses_runs_kv_test() {
    // DMLC_NODE_HOST empty = unset: nodes advertise their route to the scheduler (::1)
    let env = [("DMLC_PS_ROOT_URI", "::1"), ("DMLC_NODE_HOST", "")];
    for van in ["zmq", "tcp"] {
        let mut env = env.to_vec();
        env.push(("DMLC_PS_VAN_TYPE", van));
        let mut c = Cluster::start(2, 2, &["kv-test", "--keys", "1000", "--repeat", "5"], &env, LIMIT);
        c.wait_success();
        assert_eq!(c.all_stdout().matches("kv-test ok").count(), 2, "{van}\n{}", c.dump());
        let all: String = c.procs.iter().map(|p| p.stderr()).collect();
        assert!(all.contains("@[::1]:"), "nodes advertise [::1]\n{}", c.dump());
    }
}

#[test]
fn a_name_that_does_not_resolve_is_a_clear_error() {
    for (var, role) in [("DMLC_PS_ROOT_URI", "worker"), ("DMLC_NODE_HOST", "server")] {
        let mut c = Cluster::new(1, 1, &["connect"], &[(var, "no.such.host.invalid")], LIMIT);
        let t = Instant::now();
        c.spawn(role);
        c.wait();
        assert_eq!(c.procs[0].status, Some(2), "{}", c.dump());
        let err = c.procs[0].stderr();
        assert!(
            err.contains(&format!("{var}: 'no.such.host.invalid' does not resolve")),
            "{err}"
        );
        assert!(t.elapsed() < Duration::from_secs(10));
    }
}

#[test]
fn a_node_the_scheduler_cannot_reach_fails_within_seconds() {
    // The worker advertises 127.0.0.2 but listens on 127.0.0.1 only: the scheduler's
    // connection back is refused.
    let mut c = Cluster::new(1, 1, &["connect"], &[], LIMIT);
    c.spawn("scheduler");
    let t = Instant::now();
    let w = c.spawn_with(
        "worker",
        &["connect"],
        &[("DMLC_NODE_HOST", "127.0.0.2"), ("DMLC_BIND_HOST", "127.0.0.1")],
    );
    // its exit, not the start of its error line: the line is written in pieces
    c.wait_until("the worker's exit", |c| c.exited(w));
    let took = t.elapsed();
    assert_ne!(c.procs[w].status, Some(0), "{}", c.dump());
    let err = c.procs[w].stderr();
    assert!(err.contains("psrs worker: error"), "{}", c.dump());
    assert!(
        err.contains("cannot connect back to this node at 127.0.0.2:") && err.contains("DMLC_NODE_HOST"),
        "{}",
        c.dump()
    );
    assert!(took < Duration::from_secs(15), "took {took:?}");
    // the scheduler logs who it waits for every 5 s and waits on (PS_JOIN_TIMEOUT 60):
    // its first such line may come after the worker gave up (6 s) on a loaded machine
    c.wait_for_output(0, "the scheduler's waiting line", |s| {
        s.contains("waiting for nodes to register: 0/1 servers")
    });
    c.kill_all();
}

#[test]
fn a_waiting_node_says_what_it_waits_for() {
    // no scheduler at all
    let mut c = Cluster::new(1, 1, &["connect"], &[], LIMIT);
    let w = c.spawn("worker");
    c.wait_for_output(w, "a waiting line", |s| {
        s.contains("waiting for the scheduler at 127.0.0.1:") && s.contains("nothing listens there yet")
    });
    // the scheduler comes up: the worker registers and says what it now waits for
    c.spawn("scheduler");
    c.wait_for_output(w, "a registered line", |s| {
        s.contains("registered with the scheduler") && s.contains("(1 servers and 1 workers)")
    });
    c.kill_all();
}

fn running_with_cmdline(needle: &str) -> usize {
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| std::fs::read(e.ok()?.path().join("cmdline")).ok())
        .filter(|c| String::from_utf8_lossy(c).replace('\0', " ").trim() == needle)
        .count()
}

#[test]
fn local_sh_leaves_nothing_behind_on_sigterm_and_exits_143() {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/local.sh");
    let (node, timer) = ("sleep 1661", "sleep 1777");
    let mut child = std::process::Command::new(script)
        .args(["1", "1", "sleep", "1661"])
        .env("PSRS_TIMEOUT", "1777")
        .spawn()
        .unwrap();
    let t = Instant::now();
    while running_with_cmdline(node) < 3 || running_with_cmdline(timer) < 1 {
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "local.sh did not start its nodes"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let st = std::process::Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(st.success());
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(143));
    // local.sh sends SIGKILL and exits without waiting: each process is gone once the
    // kernel has run its exit, which a loaded machine may delay (a zombie has no
    // command line, so it does not count)
    let t = Instant::now();
    while running_with_cmdline(node) + running_with_cmdline(timer) > 0 && t.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(running_with_cmdline(node), 0, "nodes left behind");
    assert_eq!(running_with_cmdline(timer), 0, "the timer was left behind");
}

#[test]
fn roles_come_from_slurm_task_numbers_when_dmlc_role_is_unset() {
    // what srun -n 5 gives each task (no Slurm needed: the variables are all psrs reads)
    let mut c = Cluster::new(2, 2, &["kv-test", "--keys", "500", "--repeat", "3"], &[], LIMIT);
    for procid in 0..5 {
        let p = procid.to_string();
        let env = [
            ("DMLC_ROLE", ""),
            ("DMLC_NUM_WORKER", ""),
            ("DMLC_PS_ROOT_URI", ""),
            ("SLURM_PROCID", p.as_str()),
            ("SLURM_NTASKS", "5"),
            ("SLURM_JOB_NODELIST", "127.0.0.1"),
        ];
        c.spawn_with("ignored", &["kv-test", "--keys", "500", "--repeat", "3"], &env);
    }
    c.wait_success();
    assert_eq!(c.all_stdout().matches("kv-test ok").count(), 2, "{}", c.dump());
    let logs: String = c.procs.iter().map(|p| p.stderr()).collect();
    for id in ["server[8]", "server[10]", "worker[9]", "worker[11]"] {
        assert!(logs.contains(id), "{id}\n{}", c.dump());
    }
}
