//! ps-lite's own programs in psrs clusters, on the ZMQ van (which speaks ps-lite's wire
//! protocol): ps-lite's unmodified test programs as the workers of a psrs scheduler
//! and psrs servers, each passing its own checks; psrs workers (`psrs kv-test`, exact
//! sums) against ps-lite's scheduler and servers; and clusters with ps-lite's and
//! psrs's servers and workers side by side, under either scheduler. ps-lite is built
//! once into target/ps-lite (tests/common/pslite.rs); a machine that cannot build it
//! fails these tests naming what is missing.

mod common;

use common::pslite::programs;
use common::Cluster;
use std::time::Duration;

const LIMIT: Duration = Duration::from_secs(90);

/// Every node speaks ps-lite's wire (an empty PS_SECRET_FILE is unset: a secret would
/// need the TCP van).
const ENV: [(&str, &str); 2] = [("DMLC_PS_VAN_TYPE", "zmq"), ("PS_SECRET_FILE", "")];

/// A psrs scheduler and `servers` psrs servers running `psrs PSRS_ARGS`, and ps-lite's
/// `program PROGRAM_ARGS` as `workers` worker processes of a cluster of
/// `cluster_workers` workers (ps-lite counts one per customer).
fn pslite_workers(
    servers: usize,
    cluster_workers: usize,
    workers: usize,
    psrs_args: &[&str],
    program: &str,
    program_args: &[&str],
) -> Cluster {
    programs();
    let mut c = Cluster::new(servers, cluster_workers, psrs_args, &ENV, LIMIT);
    c.spawn("scheduler");
    for _ in 0..servers {
        c.spawn("server");
    }
    for _ in 0..workers {
        c.spawn_pslite("worker", program, program_args);
    }
    c.wait_success();
    c
}

/// Lines ps-lite's KV test programs log once their checks of the pulled values passed
/// (a failed check aborts the program instead).
fn checked(c: &Cluster) -> usize {
    c.procs.iter().map(|p| p.stderr().matches("error: 0, 0").count()).sum()
}

#[test]
fn a_machine_without_the_debian_packages_is_told_which_are_missing() {
    // (then every test here fails with that line: none is skipped)
    let bare = tempfile::tempdir().unwrap();
    let missing = common::pslite::missing_packages(bare.path(), std::ffi::OsStr::new(""));
    assert_eq!(
        missing,
        ["g++", "make", "protobuf-compiler", "libprotobuf-dev", "libzmq3-dev"]
    );
    let e = common::pslite::missing_packages_error(&missing[3..]);
    assert!(
        e.contains("libprotobuf-dev, libzmq3-dev are missing") && e.contains("install-deps"),
        "{e}"
    );
    let here =
        common::pslite::missing_packages(std::path::Path::new("/"), &std::env::var_os("PATH").unwrap_or_default());
    assert!(here.is_empty(), "{}", common::pslite::missing_packages_error(&here));
}

#[test]
fn test_connection_joins_a_psrs_cluster_and_finalizes() {
    let c = pslite_workers(2, 2, 2, &["kv-test"], "test_connection", &[]);
    assert_eq!(c.procs.len(), 5);
}

#[test]
fn test_kv_app_checks_the_values_it_pulls_from_psrs_servers() {
    let c = pslite_workers(2, 2, 2, &["kv-test"], "test_kv_app", &[]);
    assert_eq!(checked(&c), 2, "{}", c.dump());
}

#[test]
fn test_kv_app_multi_workers_runs_two_customers_in_one_process_on_psrs_servers() {
    // as ps-lite's tests/local_multi_workers.sh: two workers in the cluster, one
    // process whose two threads register one each
    let c = pslite_workers(2, 2, 1, &["kv-test"], "test_kv_app_multi_workers", &["worker"]);
    assert_eq!(checked(&c), 2, "{}", c.dump());
    let table = c.procs[0].stderr();
    let line = table
        .lines()
        .find(|l| l.contains("node table"))
        .unwrap_or_default()
        .to_string();
    let at = |id: &str| {
        line.split(", ")
            .find(|n| n.contains(id))
            .and_then(|n| n.split('@').nth(1))
            .map(str::to_string)
    };
    assert_eq!(at("worker[9]"), at("worker[11]"), "both workers at one address: {line}");
}

#[test]
fn test_simple_app_exchanges_its_requests_with_psrs_nodes() {
    let args = ["simple-app", "--scheduler-sends", "--requests", "100"];
    let c = pslite_workers(2, 2, 2, &args, "test_simple_app", &[]);
    let out = c.all_stdout();
    for node in [1, 8, 10] {
        assert!(
            out.contains(&format!("simple-app ok: node {node} answered 100 requests")),
            "{}",
            c.dump()
        );
    }
}

#[test]
fn psrs_workers_get_exact_sums_from_ps_lite_scheduler_and_servers() {
    programs();
    let mut c = Cluster::new(2, 2, &["kv-test", "--keys", "2000", "--repeat", "20"], &ENV, LIMIT);
    c.spawn_pslite("scheduler", "test_kv_app", &[]);
    for _ in 0..2 {
        c.spawn_pslite("server", "test_kv_app", &[]);
    }
    for _ in 0..2 {
        c.spawn("worker");
    }
    c.wait_success();
    let out = c.all_stdout();
    assert_eq!(out.matches("kv-test ok").count(), 2, "{}", c.dump());
    assert_eq!(
        out.matches("checked 2000 values = 40 x pushed").count(),
        2,
        "{}",
        c.dump()
    );
}

/// One ps-lite and one psrs server, one ps-lite and one psrs worker, under a psrs
/// scheduler or ps-lite's.
fn every_role_mixed(pslite_scheduler: bool) {
    programs();
    let mut c = Cluster::new(
        2,
        2,
        &["kv-test", "--own-keys", "--keys", "3000", "--repeat", "30"],
        &ENV,
        LIMIT,
    );
    if pslite_scheduler {
        c.spawn_pslite("scheduler", "test_kv_app", &[]);
    } else {
        c.spawn("scheduler");
    }
    c.spawn("server");
    c.spawn_pslite("server", "test_kv_app", &[]);
    c.spawn_pslite("worker", "test_kv_app", &[]);
    c.spawn("worker");
    c.wait_success();
    assert_eq!(checked(&c), 1, "ps-lite's worker checked its values\n{}", c.dump());
    assert!(
        c.all_stdout().contains("checked 3000 values = 30 x pushed"),
        "psrs's worker checked its sums\n{}",
        c.dump()
    );
}

#[test]
fn every_role_mixed_under_a_psrs_scheduler() {
    every_role_mixed(false);
}

#[test]
fn every_role_mixed_under_ps_lite_scheduler() {
    every_role_mixed(true);
}

#[test]
fn with_ps_resend_everywhere_psrs_acknowledges_ps_lite_and_drops_its_resends() {
    // ps-lite's resender resends what psrs's servers drop (PS_DROP_MSG), and stops its
    // process after 10 resends of a message psrs does not acknowledge by ps-lite's
    // signature; a resend psrs applied twice would break test_kv_app's sums
    programs();
    let mut env = ENV.to_vec();
    env.extend([("PS_RESEND", "1"), ("PS_RESEND_TIMEOUT", "300")]);
    let mut c = Cluster::new(2, 2, &["kv-test"], &env, LIMIT);
    c.spawn("scheduler");
    for _ in 0..2 {
        c.spawn_with("server", &["kv-test"], &[("PS_DROP_MSG", "10")]);
    }
    for _ in 0..2 {
        c.spawn_pslite("worker", "test_kv_app", &[]);
    }
    c.wait_success();
    assert_eq!(checked(&c), 2, "{}", c.dump());
    let resends: usize = c.procs[3..]
        .iter()
        .map(|p| p.stderr().matches("Resend (retry=").count())
        .sum();
    assert!(resends > 0, "ps-lite resent what psrs dropped\n{}", c.dump());
}
