//! deploy/ssh/launch.py, the SSH launcher.
//!
//! - Against a fake `ssh` (a script that drops the host and runs the command here, as
//!   sshd would run it remotely): roles, variables, output prefixes, a failing node
//!   taking the others down. Runs anywhere.
//! - Against real `sshd`s (Debian's openssh-server), one per network namespace (see
//!   `common::netns`), key-only login: a training job across two hosts; arguments and
//!   variables with spaces and quotes arriving intact; a host that refuses the
//!   connection or the key (one line each, nothing started); Ctrl-C to the launcher's
//!   process group and SIGTERM to the launcher stopping every remote process, checked
//!   in each namespace. These need root: `#[ignore]`d, CI runs them with `--ignored`.

mod common;

use common::netns::Net;
use common::{free_port, psrs_bin, training};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const LAUNCH: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/deploy/ssh/launch.py");

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
    Command::new(LAUNCH)
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
        .expect("run deploy/ssh/launch.py (needs python3)")
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

/// Hosts in network namespaces, an sshd (key-only login) in those that serve, and the
/// keys. Drop stops the sshds and anything left in the namespaces, by pid.
struct Hosts {
    net: Net,
    dir: tempfile::TempDir,
    sshds: Vec<(usize, Child)>,
}

fn run_ok(args: &[&str]) {
    let out = Command::new(args[0])
        .args(&args[1..])
        .output()
        .unwrap_or_else(|e| panic!("{}: {e} (apt-get install openssh-server openssh-client)", args[0]));
    assert!(
        out.status.success(),
        "{} failed: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
}

impl Hosts {
    /// `n` namespaces; those in `serving` run an sshd on port 22.
    fn start(n: usize, serving: &[usize]) -> Hosts {
        let net = Net::create(n)
            .unwrap_or_else(|e| panic!("cannot make network namespaces (run as root with iproute2 and nftables): {e}"));
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o755)).unwrap();
        for key in ["host_key", "id", "other_id"] {
            let f = d.join(key).display().to_string();
            run_ok(&["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", &f]);
        }
        std::fs::copy(d.join("id.pub"), d.join("authorized_keys")).unwrap();
        assert!(
            Path::new("/usr/sbin/sshd").exists(),
            "/usr/sbin/sshd is absent: apt-get install openssh-server (scripts/install-deps.sh does)"
        );
        std::fs::create_dir_all("/run/sshd").unwrap();
        let mut h = Hosts {
            net,
            dir,
            sshds: Vec::new(),
        };
        for &i in serving {
            let cfg = h.dir.path().join(format!("sshd_config{i}"));
            std::fs::write(
                &cfg,
                format!(
                    "Port 22\nHostKey {d}/host_key\nAuthorizedKeysFile {d}/authorized_keys\n\
                     PubkeyAuthentication yes\nPasswordAuthentication no\nKbdInteractiveAuthentication no\n\
                     PermitRootLogin prohibit-password\nUsePAM no\nStrictModes no\nPidFile {d}/sshd{i}.pid\n",
                    d = h.dir.path().display()
                ),
            )
            .unwrap();
            let child = Command::new("ip")
                .args(["netns", "exec", &h.net.ns(i), "/usr/sbin/sshd", "-D", "-e", "-f"])
                .arg(&cfg)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap();
            h.sshds.push((i, child));
        }
        // every sshd answers a login before the tests go on
        for &i in serving {
            let t = Instant::now();
            loop {
                let out = h.ssh_cmd(&h.key()).arg(h.net.ip(i)).arg("true").output().unwrap();
                if out.status.success() {
                    break;
                }
                assert!(
                    t.elapsed() < Duration::from_secs(10),
                    "sshd in {} does not accept the key: {}",
                    h.net.ns(i),
                    String::from_utf8_lossy(&out.stderr)
                );
                std::thread::sleep(Duration::from_millis(100));
            }
        }
        h
    }

    fn key(&self) -> PathBuf {
        self.dir.path().join("id")
    }

    fn ssh_line(&self, key: &Path) -> String {
        format!(
            "ssh -i {} -o BatchMode=yes -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o LogLevel=ERROR -o ConnectTimeout=5",
            key.display()
        )
    }

    /// `ssh` with `key`, run from namespace 0.
    fn ssh_cmd(&self, key: &Path) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &self.net.ns(0)]);
        c.args(self.ssh_line(key).split(' '));
        c
    }

    /// launch.py started in namespace 0 in its own process group, output to files.
    fn launch(&self, hosts: &[usize], key: &Path, args: &[&str], env: &[(&str, &str)]) -> Child {
        let list: String = hosts.iter().map(|&i| self.net.ip(i) + "\n").collect();
        let file = self.dir.path().join("hosts");
        std::fs::write(&file, list).unwrap();
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &self.net.ns(0), "python3", LAUNCH, "--hosts"])
            .arg(&file)
            .args(["--port", &free_port().to_string(), "--workdir"])
            .arg(self.dir.path())
            .args(args)
            .env("PSRS_SSH", self.ssh_line(key))
            .env("PS_JOIN_TIMEOUT", "30")
            .env_remove("DMLC_ROLE")
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(self.dir.path().join("out")).unwrap())
            .stderr(std::fs::File::create(self.dir.path().join("err")).unwrap())
            .process_group(0);
        for (k, v) in env {
            c.env(k, v);
        }
        c.spawn().unwrap()
    }

    fn output(&self) -> (String, String) {
        let read = |f: &str| std::fs::read_to_string(self.dir.path().join(f)).unwrap_or_default();
        (read("out"), read("err"))
    }

    /// Waits at most `limit` for `child`; kills it (by pid) if it is still running.
    fn wait(&self, child: &mut Child, limit: Duration) -> Option<i32> {
        let t = Instant::now();
        loop {
            if let Some(st) = child.try_wait().unwrap() {
                return st.code();
            }
            if t.elapsed() > limit {
                let _ = child.kill();
                let _ = child.wait();
                let (out, err) = self.output();
                panic!("launch.py still running after {limit:?}\nstdout:\n{out}\nstderr:\n{err}");
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn run(
        &self,
        hosts: &[usize],
        args: &[&str],
        env: &[(&str, &str)],
        limit: Duration,
    ) -> (Option<i32>, String, String) {
        let mut child = self.launch(hosts, &self.key(), args, env);
        let code = self.wait(&mut child, limit);
        let (out, err) = self.output();
        (code, out, err)
    }

    /// Processes in namespace `i` other than its sshd listener: (pid, command line).
    fn strays(&self, i: usize) -> Vec<(u32, String)> {
        let listener: Vec<u32> = self
            .sshds
            .iter()
            .filter(|(n, _)| *n == i)
            .map(|(_, c)| c.id())
            .collect();
        let out = Command::new("ip")
            .args(["netns", "pids", &self.net.ns(i)])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout)
            .split_whitespace()
            .filter_map(|p| p.parse::<u32>().ok())
            .filter(|p| !listener.contains(p))
            .map(|p| {
                let cmd = std::fs::read(format!("/proc/{p}/cmdline")).unwrap_or_default();
                (p, String::from_utf8_lossy(&cmd).replace('\0', " "))
            })
            .filter(|(_, cmd)| !cmd.is_empty())
            .collect()
    }

    /// Asserts that within 10 s nothing but the sshd listeners runs in namespaces `hosts`.
    fn assert_nothing_left(&self, hosts: &[usize]) {
        let t = Instant::now();
        loop {
            let left: Vec<_> = hosts.iter().flat_map(|&i| self.strays(i)).collect();
            if left.is_empty() {
                return;
            }
            assert!(t.elapsed() < Duration::from_secs(10), "still running: {left:?}");
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for Hosts {
    fn drop(&mut self) {
        for i in 0..3 {
            for (p, _) in self.strays(i) {
                let _ = Command::new("kill").args(["-9", &p.to_string()]).status();
            }
        }
        for (_, c) in &mut self.sshds {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

#[test]
#[ignore = "needs root (network namespaces, sshd); CI runs it with --ignored"]
fn training_across_two_hosts_over_real_ssh() {
    let h = Hosts::start(2, &[0, 1]);
    let job = training::small_job(h.dir.path(), 1);
    let bin = psrs_bin().display().to_string();
    let mut args = vec!["-s", "2", "-n", "2", "--", &bin];
    args.extend(job.iter().map(|s| s.as_str()));
    let (code, out, err) = h.run(&[0, 1], &args, &[], Duration::from_secs(120));
    let text = format!("{out}\n{err}");
    assert_eq!(code, Some(0), "{text}");
    assert!(text.contains("progress: 20/20 tasks"), "{text}");
    assert!(text.contains("final test accuracy"), "{text}");
    // server 0 and worker 0 on the first host, server 1 and worker 1 on the second
    assert!(text.contains(&format!("server 1@{}: ", h.net.ip(1))), "{text}");
    assert!(text.contains(&format!("worker 1@{}: ", h.net.ip(1))), "{text}");
    h.assert_nothing_left(&[0, 1]);
}

#[test]
#[ignore = "needs root (network namespaces, sshd); CI runs it with --ignored"]
fn arguments_and_variables_with_spaces_and_quotes_arrive_intact() {
    let h = Hosts::start(2, &[0, 1]);
    let tricky = [
        "two words",
        "it's",
        "\"double\"",
        "$HOME `id` $(id)",
        "back\\slash; semi & amp | pipe",
        "  lead and trail  ",
        "",
        "star * ?",
    ];
    let value = "it's \"quoted\" $HOME `id` a  b\\c";
    let script =
        "for a in \"$@\"; do printf 'arg<%s>\\n' \"$a\"; done; printf 'env<%s>\\n' \"$PS_TEST_QUOTED\" \"$EXTRA_VAR\"";
    let mut args = vec![
        "-s",
        "1",
        "-n",
        "1",
        "--env",
        "EXTRA_VAR=x  y 'z'",
        "--",
        "sh",
        "-c",
        script,
        "sh",
    ];
    args.extend(tricky);
    let (code, out, err) = h.run(&[0, 1], &args, &[("PS_TEST_QUOTED", value)], Duration::from_secs(30));
    assert_eq!(code, Some(0), "{out}\n{err}");
    for tag in [
        format!("scheduler 0@{}", h.net.ip(0)),
        format!("server 0@{}", h.net.ip(0)),
        format!("worker 0@{}", h.net.ip(1)),
    ] {
        let lines: Vec<&str> = out
            .lines()
            .filter_map(|l| l.strip_prefix(&format!("{tag}: ")))
            .collect();
        let want: Vec<String> = tricky
            .iter()
            .map(|a| format!("arg<{a}>"))
            .chain([format!("env<{value}>"), "env<x  y 'z'>".to_string()])
            .collect();
        assert_eq!(lines, want, "{tag}\n{out}\n{err}");
    }
}

#[test]
#[ignore = "needs root (network namespaces, sshd); CI runs it with --ignored"]
fn a_host_that_refuses_is_one_line_and_nothing_starts() {
    // namespace 2 runs no sshd: its port 22 refuses the connection
    let h = Hosts::start(3, &[0, 1]);
    let args = ["-s", "1", "-n", "2", "--", "sh", "-c", "echo started; exec sleep 300"];
    let (code, out, err) = h.run(&[0, 1, 2], &args, &[], Duration::from_secs(60));
    assert_eq!(code, Some(255), "{out}\n{err}");
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), 1, "{err}");
    assert!(lines[0].contains(&h.net.ip(2)) && lines[0].contains("refused"), "{err}");
    assert!(!out.contains("started"), "{out}");
    h.assert_nothing_left(&[0, 1]);

    // a key the hosts do not accept: one line per host
    let other = h.dir.path().join("other_id");
    let mut child = h.launch(&[0, 1], &other, &args, &[]);
    let code = h.wait(&mut child, Duration::from_secs(60));
    let (out, err) = h.output();
    assert_eq!(code, Some(255), "{out}\n{err}");
    assert_eq!(err.lines().count(), 2, "{err}");
    assert!(
        err.lines().all(|l| l.contains("Permission denied (publickey)")),
        "{err}"
    );
    h.assert_nothing_left(&[0, 1]);
}

/// Starts 1 + 2 + 2 sleeping nodes over two hosts, waits until all five run, sends
/// `signal` (to the process group when `group`), and checks the launcher's status and
/// that every remote process is gone on each host.
fn stop_with(signal: &str, group: bool, status: Option<i32>) {
    let h = Hosts::start(2, &[0, 1]);
    // the workers ignore SIGTERM (and so do their children): killed after the grace period
    let args = [
        "-s",
        "2",
        "-n",
        "2",
        "--",
        "sh",
        "-c",
        "if [ \"$DMLC_ROLE\" = worker ]; then trap '' TERM; fi; echo started; sleep 300 & wait",
    ];
    let mut child = h.launch(&[0, 1], &h.key(), &args, &[]);
    let t = Instant::now();
    while h.output().0.matches("started").count() < 5 {
        assert!(
            t.elapsed() < Duration::from_secs(30),
            "nodes did not start: {:?}",
            h.output()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    for i in 0..2 {
        assert!(!h.strays(i).is_empty(), "nothing runs in namespace {i}");
    }
    let target = if group {
        format!("-{}", child.id())
    } else {
        child.id().to_string()
    };
    run_ok(&["kill", &format!("-{signal}"), "--", &target]);
    let code = h.wait(&mut child, Duration::from_secs(30));
    let (out, err) = h.output();
    assert_eq!(code, status, "{out}\n{err}");
    h.assert_nothing_left(&[0, 1]);
}

#[test]
#[ignore = "needs root (network namespaces, sshd); CI runs it with --ignored"]
fn ctrl_c_stops_every_remote_process() {
    stop_with("INT", true, Some(130));
}

#[test]
#[ignore = "needs root (network namespaces, sshd); CI runs it with --ignored"]
fn sigterm_stops_every_remote_process() {
    stop_with("TERM", false, Some(143));
}

#[test]
#[ignore = "needs root (network namespaces, sshd); CI runs it with --ignored"]
fn a_killed_launcher_leaves_nothing_running() {
    // killed by the signal: no exit status
    stop_with("KILL", false, None);
}
