//! ps-lite's nodes in psrs clusters, on the ZMQ van (which speaks ps-lite's wire
//! protocol). ps-lite's side runs ps-lite's library (built once into target/ps-lite,
//! tests/common/pslite.rs) under two kinds of program:
//! - psrs's own program against ps-lite's public API, `tests/pslite/pslite_peer.cc`,
//!   in every role: a ps-lite worker checking KV semantics (exact sums after a barrier
//!   by group, timestamps in flight, ZPush/ZPull/ZPushPull, key slicing, customer and
//!   app ids, lens) against psrs's scheduler and servers; ps-lite's scheduler and
//!   servers (KVServerDefaultHandle, checking each request's KVMeta) with psrs workers
//!   (`psrs kv-test`, exact sums); every role mixed under either scheduler; SimpleApp;
//!   PS_RESEND across both. These need only ps-lite's library source, and run in CI.
//! - ps-lite's own unmodified test programs (test_connection, test_simple_app,
//!   test_kv_app, test_kv_app_multi_workers) as the workers of a psrs scheduler and
//!   psrs servers, each passing its own checks. They need the programs' sources,
//!   which a full checkout of ps-lite has (`PSLITE_SRC`), so they are ignored by
//!   default; `scripts/test.sh` runs them (`-- --ignored`) where the sources are, and
//!   lists them as skipped where they are not.
//!
//! A machine that cannot build what a test needs fails it naming what is missing.

mod common;

use common::pslite::programs;
use common::Cluster;
use std::time::Duration;

const LIMIT: Duration = Duration::from_secs(90);

/// Every node speaks ps-lite's wire (an empty PS_SECRET_FILE is unset: a secret would
/// need the TCP van).
const ENV: [(&str, &str); 2] = [("DMLC_PS_VAN_TYPE", "zmq"), ("PS_SECRET_FILE", "")];

/// `pslite_peer kv` and `psrs kv-test` with the same keys, values and pushes: the
/// workers' sums add up over both kinds.
const PEER_KV: [&str; 5] = ["kv", "--keys", "2000", "--repeat", "20"];
const PSRS_KV: [&str; 5] = ["kv-test", "--keys", "2000", "--repeat", "20"];

/// A cluster description for psrs's and `pslite_peer`'s processes, built first (its
/// time limit then counts no build).
fn peer_cluster(args: &[&str], env: &[(&str, &str)]) -> Cluster {
    common::pslite::peer();
    Cluster::new(2, 2, args, env, LIMIT)
}

/// Asserts that each of `nodes` printed `OK: node N answered 100 requests`.
fn answered_100(c: &Cluster, ok: &str, nodes: &[i32]) {
    let out = c.all_stdout();
    for node in nodes {
        let line = format!("{ok}: node {node} answered 100 requests");
        assert!(out.contains(&line), "no {line:?}\n{}", c.dump());
    }
}

/// How many lines of `c`'s processes' stdout contain `what`.
fn lines(c: &Cluster, what: &str) -> usize {
    c.all_stdout().lines().filter(|l| l.contains(what)).count()
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
fn a_ps_lite_worker_passes_against_a_psrs_scheduler_and_psrs_servers() {
    let mut c = peer_cluster(&["kv-test", "--apps", "2"], &ENV);
    c.spawn("scheduler");
    for _ in 0..2 {
        c.spawn("server");
    }
    let mut args = PEER_KV.to_vec();
    args.extend(["--lens", "--apps", "2"]);
    for _ in 0..2 {
        c.spawn_peer("worker", &args);
    }
    c.wait_success();
    let ok = "keys = 20 x 2 workers' pushes after a barrier, own keys of 2 customers (slices in flight, push-pull), key ranges of 2 servers, lens, app 1's own store";
    assert_eq!(lines(&c, ok), 2, "{}", c.dump());
}

/// ps-lite's test_simple_app's exchange (the scheduler's 100 requests to every node,
/// each node counting what it answered): under a psrs scheduler with psrs servers and
/// ps-lite workers, or under ps-lite's scheduler with every other role mixed.
fn simple_app(pslite_scheduler: bool) {
    let mut c = peer_cluster(&["simple-app", "--scheduler-sends", "--requests", "100"], &ENV);
    let peer = ["simple", "--requests", "100"];
    if pslite_scheduler {
        c.spawn_peer("scheduler", &peer);
        c.spawn("server");
        c.spawn_peer("server", &peer);
        c.spawn("worker");
        c.spawn_peer("worker", &peer);
    } else {
        c.spawn("scheduler");
        for _ in 0..2 {
            c.spawn("server");
        }
        for _ in 0..2 {
            c.spawn_peer("worker", &peer);
        }
    }
    c.wait_success();
    let pslite_nodes = if pslite_scheduler { 3 } else { 2 };
    assert_eq!(lines(&c, "answered 100 requests"), 5, "{}", c.dump());
    assert_eq!(lines(&c, "pslite_peer simple ok"), pslite_nodes, "{}", c.dump());
}

#[test]
fn ps_lite_simple_app_nodes_answer_a_psrs_scheduler() {
    simple_app(false);
}

#[test]
fn psrs_simple_app_nodes_answer_ps_lite_scheduler() {
    simple_app(true);
}

#[test]
fn psrs_workers_get_exact_sums_from_ps_lite_scheduler_and_servers() {
    let mut c = peer_cluster(&PSRS_KV, &ENV);
    c.spawn_peer("scheduler", &PEER_KV);
    for _ in 0..2 {
        c.spawn_peer("server", &PEER_KV);
    }
    for _ in 0..2 {
        c.spawn("worker");
    }
    c.wait_success();
    assert_eq!(lines(&c, "kv-test ok"), 2, "{}", c.dump());
    assert_eq!(lines(&c, "checked 2000 values = 40 x pushed"), 2, "{}", c.dump());
    assert_eq!(lines(&c, "pslite_peer server ok"), 2, "KVMeta checked\n{}", c.dump());
}

/// One ps-lite and one psrs server, one ps-lite and one psrs worker pushing the same
/// keys, under a psrs scheduler or ps-lite's: each worker's sums count both workers.
fn every_role_mixed(pslite_scheduler: bool) {
    let mut c = peer_cluster(&PSRS_KV, &ENV);
    if pslite_scheduler {
        c.spawn_peer("scheduler", &PEER_KV);
    } else {
        c.spawn("scheduler");
    }
    c.spawn("server");
    c.spawn_peer("server", &PEER_KV);
    c.spawn_peer("worker", &PEER_KV);
    c.spawn("worker");
    c.wait_success();
    assert_eq!(
        lines(&c, "pslite_peer ok: worker"),
        1,
        "ps-lite's worker checked its sums\n{}",
        c.dump()
    );
    assert_eq!(
        lines(&c, "checked 2000 values = 40 x pushed"),
        1,
        "psrs's worker checked its sums\n{}",
        c.dump()
    );
    assert_eq!(lines(&c, "pslite_peer server ok"), 1, "{}", c.dump());
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
    // signature; a resend psrs applied twice would break the ps-lite workers' sums
    //
    // The timeout is ps-lite's default, 1 s. ps-lite's own shutdown stops its receiving
    // thread before its resender: an ACK still on its way then is never taken, and the
    // resender's last look at its buffer, logging the overdue message, fails ps-lite's
    // `CHECK(ready_)` in `my_node()` and aborts the process. Under two busy loops an ACK
    // came that late even at 1 s (a ps-lite worker aborted so at its Finalize); ps-lite's
    // nodes among themselves are no safer from it. So the peer program waits two resend
    // timeouts before Finalize while PS_RESEND is on (`SettleResends`).
    let mut env = ENV.to_vec();
    env.extend([("PS_RESEND", "1"), ("PS_RESEND_TIMEOUT", "1000")]);
    // (one customer per worker: ps-lite's resender tells messages apart by app, sender,
    // receiver and timestamp, not by customer)
    let mut c = peer_cluster(&["kv-test"], &env);
    c.spawn("scheduler");
    for _ in 0..2 {
        c.spawn_with("server", &["kv-test"], &[("PS_DROP_MSG", "10")]);
    }
    let mut args = PEER_KV.to_vec();
    args.extend(["--customers", "1"]);
    for _ in 0..2 {
        c.spawn_peer("worker", &args);
    }
    c.wait_success();
    assert_eq!(lines(&c, "own keys of 1 customer ("), 2, "{}", c.dump());
    let resends: usize = c.procs[3..]
        .iter()
        .map(|p| p.stderr().matches("Resend (retry=").count())
        .sum();
    assert!(resends > 0, "ps-lite resent what psrs dropped\n{}", c.dump());
}

// ps-lite's own test programs, unmodified, as the workers of a psrs cluster.

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
#[ignore = "needs ps-lite's test programs' sources (PSLITE_SRC or shared/peers/ps-lite/tests/*.cc)"]
fn test_connection_joins_a_psrs_cluster_and_finalizes() {
    let c = pslite_workers(2, 2, 2, &["kv-test"], "test_connection", &[]);
    assert_eq!(c.procs.len(), 5);
}

#[test]
#[ignore = "needs ps-lite's test programs' sources (PSLITE_SRC or shared/peers/ps-lite/tests/*.cc)"]
fn test_kv_app_checks_the_values_it_pulls_from_psrs_servers() {
    // beside a psrs worker pushing keys no ps-lite test program uses
    programs();
    let mut c = Cluster::new(2, 3, &["kv-test"], &ENV, LIMIT);
    c.spawn("scheduler");
    for _ in 0..2 {
        c.spawn("server");
    }
    for _ in 0..2 {
        c.spawn_pslite("worker", "test_kv_app", &[]);
    }
    c.spawn_with(
        "worker",
        &["kv-test", "--own-keys", "--keys", "2000", "--repeat", "20"],
        &[],
    );
    c.wait_success();
    assert_eq!(checked(&c), 2, "{}", c.dump());
    assert_eq!(lines(&c, "checked 2000 values = 20 x pushed"), 1, "{}", c.dump());
}

#[test]
#[ignore = "needs ps-lite's test programs' sources (PSLITE_SRC or shared/peers/ps-lite/tests/*.cc)"]
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
#[ignore = "needs ps-lite's test programs' sources (PSLITE_SRC or shared/peers/ps-lite/tests/*.cc)"]
fn test_simple_app_exchanges_its_requests_with_psrs_nodes() {
    let args = ["simple-app", "--scheduler-sends", "--requests", "100"];
    let c = pslite_workers(2, 2, 2, &args, "test_simple_app", &[]);
    answered_100(&c, "simple-app ok", &[1, 8, 10]);
}
