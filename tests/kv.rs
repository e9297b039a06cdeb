//! KV push/pull on real processes, as ps-lite's test_kv_app, and exactly-once delivery
//! under message loss.

mod common;

use common::Cluster;
use std::time::Duration;

const LIMIT: Duration = Duration::from_secs(120);

fn ok_lines(c: &Cluster) -> usize {
    c.all_stdout().matches("kv-test ok").count()
}

#[test]
fn fifty_pushes_then_pull_equals_fifty_times() {
    let mut c = Cluster::start(1, 1, &["kv-test", "--keys", "10000", "--repeat", "50"], &[], LIMIT);
    c.wait_success();
    assert!(
        c.all_stdout().contains("checked 10000 values = 50 x pushed"),
        "{}",
        c.dump()
    );
}

#[test]
fn several_workers_and_servers_sum_exactly() {
    let mut c = Cluster::start(2, 3, &["kv-test", "--keys", "10000", "--repeat", "50"], &[], LIMIT);
    c.wait_success();
    assert_eq!(ok_lines(&c), 3, "{}", c.dump());
    assert!(c.all_stdout().contains("= 150 x pushed"));
}

#[test]
fn uneven_lengths_round_trip() {
    let mut c = Cluster::start(
        3,
        2,
        &["kv-test", "--keys", "3000", "--repeat", "10", "--uneven"],
        &[],
        LIMIT,
    );
    c.wait_success();
    assert_eq!(ok_lines(&c), 2, "{}", c.dump());
    // lens 1,2,3,1,2,3... over 3000 keys
    assert!(
        c.all_stdout().contains("checked 6000 values = 20 x pushed"),
        "{}",
        c.dump()
    );
}

#[test]
fn empty_single_key_and_invalid_requests() {
    let mut c = Cluster::start(
        2,
        2,
        &["kv-test", "--keys", "100", "--repeat", "2", "--edge-cases"],
        &[],
        LIMIT,
    );
    c.wait_success();
    let out = c.all_stdout();
    assert_eq!(out.matches("kv-test edge cases ok").count(), 2, "{}", c.dump());
    assert!(
        out.contains("unsorted keys refused: keys must be sorted ascending"),
        "{out}"
    );
    assert!(
        out.contains("mismatched values refused: values do not match keys: 3 values for 2 keys"),
        "{out}"
    );
}

#[test]
fn dropped_messages_are_resent_and_applied_exactly_once() {
    let env = [("PS_RESEND", "1"), ("PS_RESEND_TIMEOUT", "200"), ("PS_DROP_MSG", "20")];
    let mut c = Cluster::start(2, 2, &["kv-test", "--keys", "10000", "--repeat", "50"], &env, LIMIT);
    c.wait_success();
    assert_eq!(ok_lines(&c), 2, "{}", c.dump());
    assert!(c.all_stdout().contains("= 100 x pushed"));
    // the loss really happened, and was repaired by resending
    let mut drops = 0;
    let mut resent = 0;
    for p in &c.procs {
        for line in p.stderr().lines().filter(|l| l.contains(" traffic: ")) {
            let field = |name: &str| -> u64 {
                line.split(name)
                    .nth(1)
                    .and_then(|s| s.trim_start().split(|c: char| !c.is_ascii_digit()).next()?.parse().ok())
                    .unwrap_or(0)
            };
            drops += field("injected drops ");
            resent += field("resent ");
        }
    }
    assert!(
        drops > 10 && resent >= drops,
        "drops {drops} resent {resent}\n{}",
        c.dump()
    );
}

#[test]
fn tcp_transport_sums_exactly_and_survives_loss() {
    let env = [("DMLC_PS_VAN_TYPE", "tcp")];
    let mut c = Cluster::start(
        2,
        3,
        &["kv-test", "--keys", "10000", "--repeat", "50", "--uneven"],
        &env,
        LIMIT,
    );
    c.wait_success();
    assert_eq!(ok_lines(&c), 3, "{}", c.dump());
    let env = [
        ("DMLC_PS_VAN_TYPE", "tcp"),
        ("PS_RESEND", "1"),
        ("PS_RESEND_TIMEOUT", "200"),
        ("PS_DROP_MSG", "20"),
    ];
    let mut c = Cluster::start(
        1,
        2,
        &["kv-test", "--keys", "5000", "--repeat", "20", "--edge-cases"],
        &env,
        LIMIT,
    );
    c.wait_success();
    assert_eq!(ok_lines(&c), 2, "{}", c.dump());
}
