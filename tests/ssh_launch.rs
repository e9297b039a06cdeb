//! scripts/launch.py against a fake `ssh` (a script that drops the host and runs the
//! command locally, as sshd would run it remotely): roles, variables, output prefixes,
//! and a failing node taking the others down.

mod common;

use common::{free_port, psrs_bin};
use std::os::unix::fs::PermissionsExt;
use std::process::Command;

fn launch(dir: &std::path::Path, args: &[&str]) -> std::process::Output {
    let ssh = dir.join("fake-ssh");
    std::fs::write(
        &ssh,
        "#!/bin/sh\n# fake-ssh HOST COMMAND: run COMMAND here\nshift\nexec sh -c \"$*\"\n",
    )
    .unwrap();
    std::fs::set_permissions(&ssh, std::fs::Permissions::from_mode(0o755)).unwrap();
    let hosts = dir.join("hosts");
    std::fs::write(&hosts, "# two names of this machine\n127.0.0.1\nlocalhost\n").unwrap();
    let port = free_port().to_string();
    Command::new(concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/launch.py"))
        .args([
            "--hosts",
            hosts.to_str().unwrap(),
            "-s",
            "1",
            "-n",
            "2",
            "--port",
            &port,
            "--",
        ])
        .arg(psrs_bin())
        .args(args)
        .env("PSRS_SSH", ssh.to_str().unwrap())
        .env("PS_JOIN_TIMEOUT", "30")
        .env_remove("DMLC_ROLE")
        .output()
        .expect("run scripts/launch.py (needs python3)")
}

#[test]
fn launch_py_runs_kv_test_over_fake_ssh_and_stops_on_failure() {
    let dir = tempfile::tempdir().unwrap();
    let out = launch(dir.path(), &["kv-test", "--keys", "500", "--repeat", "3"]);
    let text = String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{text}");
    assert_eq!(text.matches("kv-test ok").count(), 2, "{text}");
    assert!(
        text.contains("server 0@127.0.0.1: ") && text.contains("worker 0@localhost: "),
        "{text}"
    );
    // a bad argument: every node fails, launch.py exits with its status
    let out = launch(dir.path(), &["kv-test", "--keys", "-5"]);
    assert!(!out.status.success());
}
