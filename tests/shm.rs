//! Shared memory and Unix sockets between co-located nodes (TCP van): a real
//! local cluster pushes and pulls 1 MB and 16 MB values and checks every value, and the
//! nodes' traffic lines say whether the frames went through shared memory and the
//! links through Unix sockets.

mod common;

use common::Cluster;
use std::time::Duration;

const LIMIT: Duration = Duration::from_secs(180);

/// Sums of the `field` counters (e.g. `shm sent `) over every node's traffic line; an
/// `N` in `field` stands for any number (`unix links out N in `).
fn traffic(c: &Cluster, field: &str) -> u64 {
    let (before, after) = field.split_once('N').unwrap_or((field, ""));
    c.procs
        .iter()
        .flat_map(|p| {
            p.stderr()
                .lines()
                .filter(|l| l.contains(" traffic: "))
                .map(String::from)
                .collect::<Vec<_>>()
        })
        .map(|l| {
            let rest = l.split(before).nth(1).unwrap_or("");
            let rest = if after.is_empty() {
                rest
            } else {
                rest.trim_start_matches(|c: char| c.is_ascii_digit())
                    .strip_prefix(after)
                    .unwrap_or("")
            };
            rest.split(|c: char| !c.is_ascii_digit())
                .next()
                .and_then(|n| n.parse::<u64>().ok())
                .unwrap_or(0)
        })
        .sum()
}

/// kv-test with `keys` f32 values per push (1 server: one value frame of 4 × keys
/// bytes), 2 workers, 4 pushes each; every pulled value is checked exactly.
fn run(keys: usize, env: &[(&str, &str)]) -> Cluster {
    let keys = keys.to_string();
    let mut env = env.to_vec();
    env.push(("DMLC_PS_VAN_TYPE", "tcp"));
    let mut c = Cluster::start(1, 2, &["kv-test", "--keys", &keys, "--repeat", "4"], &env, LIMIT);
    c.wait_success();
    let want = format!("checked {keys} values = 8 x pushed");
    assert_eq!(c.all_stdout().matches(&want).count(), 2, "{}", c.dump());
    assert_eq!(traffic(&c, "bad descriptors "), 0, "{}", c.dump());
    c
}

#[test]
fn one_and_sixteen_mb_values_go_through_shared_memory() {
    for keys in [1 << 18, 1 << 22] {
        let c = run(keys, &[]);
        let (sent, recv) = (traffic(&c, "shm sent "), traffic(&c, "shm received "));
        // each worker: the key list once, 4 pushes, 1 pull answer; each value frame
        // is 4 * keys bytes (1 MiB, 16 MiB)
        assert!(
            sent >= 2 * 5 + 2,
            "only {sent} frames through shared memory\n{}",
            c.dump()
        );
        assert_eq!(sent, recv, "{}", c.dump());
        let bytes = traffic(&c, "frames ");
        assert!(bytes >= (2 * 5 * 4 * keys) as u64, "{bytes} B\n{}", c.dump());
        assert!(traffic(&c, "shm links out ") >= 4, "{}", c.dump());
    }
}

#[test]
fn co_located_nodes_link_over_unix_sockets_unless_ps_local_socket_is_0() {
    let c = run(1000, &[]);
    let (out, inn) = (traffic(&c, "unix links out "), traffic(&c, "unix links out N in "));
    // at least: each worker to the scheduler and the server, the server to the scheduler
    assert!(out >= 5, "only {out} links over Unix sockets\n{}", c.dump());
    assert_eq!(out, inn, "every link is counted at both ends\n{}", c.dump());
    let c = run(1000, &[("PS_LOCAL_SOCKET", "0")]);
    assert_eq!(traffic(&c, "unix links out "), 0, "{}", c.dump());
    assert_eq!(traffic(&c, "unix links out N in "), 0, "{}", c.dump());
}

#[test]
fn ps_shm_0_sends_everything_over_tcp() {
    let c = run(1 << 18, &[("PS_SHM", "0")]);
    assert_eq!(traffic(&c, "shm sent "), 0, "{}", c.dump());
    assert_eq!(traffic(&c, "shm received "), 0, "{}", c.dump());
    assert_eq!(traffic(&c, "shm links out "), 0, "{}", c.dump());
}

#[test]
fn tls_clusters_use_it_and_a_full_region_falls_back_to_tcp() {
    let env = [("PS_SECRET", "a-cluster-secret-of-some-length")];
    let c = run(1 << 18, &env);
    assert!(traffic(&c, "shm sent ") >= 2 * 5, "{}", c.dump());
    // a region smaller than one value: everything falls back to TCP, nothing is lost
    let env = [("PS_SHM_MB", "1")];
    let c = run(1 << 18, &env);
    assert_eq!(traffic(&c, "shm sent "), 0, "{}", c.dump());
    // "shm sent 0 frames 0 B (N over TCP: region full)"
    assert!(traffic(&c, "B (") >= 2 * 5, "fallbacks counted\n{}", c.dump());
}
