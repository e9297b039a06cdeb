//! `scripts/local.sh` at scale: the scheduler's port is chosen outside the kernel's
//! ephemeral port range (where the other nodes' listeners and connections would race
//! for it), and a 64-node cluster (1 scheduler, 16 servers, 47 workers) starts and
//! passes its barriers ten times in a row.

mod common;

use common::psrs_bin;
use std::process::{Command, Output};
use std::time::Instant;

const SCRIPT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/local.sh");

fn local_sh(servers: &str, workers: &str, cmd: &[&str]) -> Output {
    let dir = tempfile::tempdir().unwrap();
    let mut c = Command::new("bash");
    c.args([SCRIPT, servers, workers])
        .args(cmd)
        .env("PSRS_TIMEOUT", "60")
        .env("PSRS_LAUNCH_LOG", "1")
        .env_remove("DMLC_PS_ROOT_PORT");
    // PSRS_TEST_SECRET: every node gets it as its cluster secret (as tests/common does)
    if let Ok(secret) = std::env::var("PSRS_TEST_SECRET") {
        let f = dir.path().join("cluster.secret");
        common::write_private(&f, secret);
        c.env("PS_SECRET_FILE", f).env_remove("PS_SECRET");
    }
    c.output().unwrap()
}

#[test]
fn the_scheduler_port_is_outside_the_ephemeral_range() {
    let range = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range").unwrap();
    let r: Vec<u32> = range.split_whitespace().map(|x| x.parse().unwrap()).collect();
    for _ in 0..20 {
        let out = local_sh("0", "1", &["true"]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{err}");
        let port: u32 = err
            .lines()
            .find_map(|l| l.split("scheduler at 127.0.0.1:").nth(1))
            .unwrap_or_else(|| panic!("no port in {err}"))
            .trim()
            .parse()
            .unwrap();
        assert!(
            !(r[0]..=r[1]).contains(&port),
            "port {port} is inside the ephemeral range {range}"
        );
        assert!(port >= 1024, "{port}");
    }
}

#[test]
fn sixty_four_nodes_pass_their_barriers_ten_times_in_a_row() {
    let bin = psrs_bin().display().to_string();
    let cmd = [bin.as_str(), "barrier", "--rounds", "2", "--max-delay-ms", "0"];
    let mut times = Vec::new();
    for run in 0..10 {
        let t = Instant::now();
        let out = local_sh("16", "47", &cmd);
        times.push(t.elapsed().as_secs_f64());
        let (o, e) = (
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr),
        );
        assert!(out.status.success(), "run {run}: {:?}\n{e}", out.status);
        assert_eq!(o.matches("barrier leave").count(), 64 * 2, "run {run}\n{o}");
        assert!(!e.contains("Address already in use"), "run {run}\n{e}");
    }
    let s: Vec<String> = times.iter().map(|t| format!("{t:.2}")).collect();
    println!("64-node clusters, seconds from launch to exit: {}", s.join(" "));
}
