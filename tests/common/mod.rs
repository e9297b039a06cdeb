//! Test harness: launches real psrs processes on 127.0.0.1 with a free port, captures
//! their output to files, enforces a hard time limit, and kills every process it
//! started when dropped.
#![allow(dead_code)]

pub mod etcd;
pub mod fake_http;
pub mod jobs;
pub mod logs;
pub mod netns;
pub mod pslite;
pub mod tls;
pub mod training;

pub use etcd::ports::free_port;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Writes a secret file (a cluster secret, a key) readable by its owner alone: nodes
/// refuse one that group or others may read.
pub fn write_private(path: &Path, bytes: impl AsRef<[u8]>) {
    use std::os::unix::fs::OpenOptionsExt;
    let mut f = fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)
        .unwrap();
    std::io::Write::write_all(&mut f, bytes.as_ref()).unwrap();
    fs::set_permissions(path, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
}

/// `env` with `PS_HEARTBEAT_TIMEOUT` set to `secs` (added if absent): for a run in
/// which no node may die. On a loaded 2-core machine a process can go unscheduled for
/// a second; with a short timeout it is declared dead (and stops, evicted) although
/// nothing failed, which is not what such a run checks.
pub fn with_heartbeat_timeout(
    env: &[(&'static str, &'static str)],
    secs: &'static str,
) -> Vec<(&'static str, &'static str)> {
    let mut out: Vec<_> = env
        .iter()
        .copied()
        .filter(|(k, _)| *k != "PS_HEARTBEAT_TIMEOUT")
        .collect();
    out.push(("PS_HEARTBEAT_TIMEOUT", secs));
    out
}

/// The TCP van's framing of one message as a node writes it on a plain link (magic,
/// frame count, lengths, frames): what an intruder sends to a node's port.
pub fn tcp_frame(m: &ps_core::message::Message) -> Vec<u8> {
    let mut frames = vec![m.encode_meta()];
    frames.extend(m.data.iter().cloned());
    let mut out = b"PSRS".to_vec();
    out.extend_from_slice(&(frames.len() as u32).to_le_bytes());
    for f in &frames {
        out.extend_from_slice(&(f.len() as u64).to_le_bytes());
    }
    for f in &frames {
        out.extend_from_slice(f);
    }
    out
}

/// `python3`, for the jobs' Python runners; fails naming the package when it is not
/// installed.
pub fn python3() -> &'static str {
    assert!(
        Command::new("python3").arg("-V").output().is_ok(),
        "python3 is not installed: apt-get install python3"
    );
    "python3"
}

/// The psrs binary under test.
pub fn psrs_bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_psrs"))
}

/// One launched process.
pub struct Proc {
    /// `scheduler`, `server` or `worker`.
    pub role: String,
    /// Index in launch order.
    pub name: String,
    child: Child,
    out: PathBuf,
    err: PathBuf,
    /// Exit status once reaped.
    pub status: Option<i32>,
}

impl Proc {
    /// Captured stdout so far.
    pub fn stdout(&self) -> String {
        fs::read_to_string(&self.out).unwrap_or_default()
    }
    /// Captured stderr so far.
    pub fn stderr(&self) -> String {
        fs::read_to_string(&self.err).unwrap_or_default()
    }
    /// The OS pid.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }
}

/// A local cluster of psrs processes.
pub struct Cluster {
    /// The scheduler's port.
    pub port: u16,
    /// Every process, in launch order (scheduler first).
    pub procs: Vec<Proc>,
    dir: tempfile::TempDir,
    env: Vec<(String, String)>,
    args: Vec<String>,
    deadline: Instant,
    servers: usize,
    workers: usize,
    in_scratch: bool,
}

impl Cluster {
    /// Starts a scheduler, `servers` servers and `workers` workers, each running
    /// `psrs ARGS` with `env` added, killed after `limit` at the latest.
    pub fn start(servers: usize, workers: usize, args: &[&str], env: &[(&str, &str)], limit: Duration) -> Cluster {
        let mut c = Cluster::new(servers, workers, args, env, limit);
        c.spawn("scheduler");
        for _ in 0..servers {
            c.spawn("server");
        }
        for _ in 0..workers {
            c.spawn("worker");
        }
        c
    }

    /// A cluster description with nothing started yet.
    pub fn new(servers: usize, workers: usize, args: &[&str], env: &[(&str, &str)], limit: Duration) -> Cluster {
        Cluster {
            port: free_port(),
            procs: Vec::new(),
            dir: tempfile::tempdir().unwrap(),
            env: env.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
            args: args.iter().map(|s| s.to_string()).collect(),
            deadline: Instant::now() + limit,
            servers,
            workers,
            in_scratch: false,
        }
    }

    /// Runs the processes started from now on in the scratch directory ([`Cluster::dir`])
    /// instead of the test's working directory, so a test can see what they leave in
    /// their working directory.
    pub fn run_in_scratch(&mut self) {
        self.in_scratch = true;
    }

    /// A scratch directory that lives as long as the cluster.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// Starts one more process of `role` with the cluster's arguments; returns its index.
    pub fn spawn(&mut self, role: &str) -> usize {
        let args = self.args.clone();
        self.spawn_with(role, &args.iter().map(|s| s.as_str()).collect::<Vec<_>>(), &[])
    }

    /// Starts one more process of `role` running `psrs ARGS` with extra `env`.
    pub fn spawn_with(&mut self, role: &str, args: &[&str], env: &[(&str, &str)]) -> usize {
        self.spawn_wrapped(role, &[], args, env)
    }

    /// Starts one more process of `role` running `PREFIX... psrs ARGS` with extra `env`
    /// (e.g. `ip netns exec NS`, which execs psrs in place, so the pid is psrs's).
    pub fn spawn_wrapped(&mut self, role: &str, prefix: &[String], args: &[&str], env: &[(&str, &str)]) -> usize {
        let mut cmd = match prefix.split_first() {
            Some((first, rest)) => {
                let mut c = Command::new(first);
                c.args(rest).arg(psrs_bin());
                c
            }
            None => Command::new(psrs_bin()),
        };
        cmd.args(args);
        self.spawn_command(role, cmd, env)
    }

    /// Starts `cmd` (any program: psrs, or one of ps-lite's) as one more process of
    /// `role`, with the cluster's `DMLC_*` variables and environment and extra `env`.
    pub fn spawn_command(&mut self, role: &str, mut cmd: Command, env: &[(&str, &str)]) -> usize {
        let i = self.procs.len();
        let name = format!("{i}-{role}");
        let out = self.dir.path().join(format!("{name}.out"));
        let err = self.dir.path().join(format!("{name}.err"));
        cmd.env("DMLC_ROLE", role)
            .env("DMLC_PS_ROOT_URI", "127.0.0.1")
            .env("DMLC_PS_ROOT_PORT", self.port.to_string())
            .env("DMLC_NUM_SERVER", self.servers.to_string())
            .env("DMLC_NUM_WORKER", self.workers.to_string())
            .env("DMLC_NODE_HOST", "127.0.0.1")
            .env("PS_JOIN_TIMEOUT", "60")
            .env_remove("RUST_LOG")
            .stdin(Stdio::null())
            .stdout(fs::File::create(&out).unwrap())
            .stderr(fs::File::create(&err).unwrap());
        if let Ok(v) = std::env::var("PSRS_TEST_VERBOSE") {
            cmd.env("PS_VERBOSE", v);
        }
        // PSRS_TEST_SECRET: every node gets it as its cluster secret (in a file)
        if let Ok(secret) = std::env::var("PSRS_TEST_SECRET") {
            let f = self.dir.path().join("cluster.secret");
            if !f.exists() {
                // written once, before the first process starts: others read it
                write_private(&f, secret);
            }
            cmd.env("PS_SECRET_FILE", f).env_remove("PS_SECRET");
        }
        for (k, v) in self.env.iter() {
            cmd.env(k, v);
        }
        for (k, v) in env {
            cmd.env(k, v);
        }
        if self.in_scratch {
            cmd.current_dir(self.dir.path());
        }
        let child = cmd
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {:?}: {e}", cmd.get_program()));
        self.procs.push(Proc {
            role: role.to_string(),
            name,
            child,
            out,
            err,
            status: None,
        });
        i
    }

    /// Sends process `i` the signal `sig` (`STOP`, `CONT`, ...), by its pid.
    pub fn signal(&self, i: usize, sig: &str) {
        let pid = self.procs[i].child.id().to_string();
        let ok = std::process::Command::new("kill")
            .args([&format!("-{sig}"), &pid])
            .status()
            .is_ok_and(|s| s.success());
        assert!(ok, "kill -{sig} {pid} failed");
    }

    /// Kills process `i` with SIGKILL and reaps it.
    pub fn kill(&mut self, i: usize) {
        let p = &mut self.procs[i];
        let _ = p.child.kill();
        let _ = p.child.wait();
        p.status = Some(-9);
    }

    /// Waits until every process exited or the time limit passed (then kills all and
    /// panics with every process's output). Returns nothing; check `procs[i].status`.
    pub fn wait(&mut self) {
        loop {
            let mut running = false;
            for p in self.procs.iter_mut().filter(|p| p.status.is_none()) {
                match p.child.try_wait().unwrap() {
                    Some(s) => p.status = Some(s.code().unwrap_or(-1)),
                    None => running = true,
                }
            }
            if !running {
                return;
            }
            if Instant::now() > self.deadline {
                self.kill_all();
                panic!("cluster exceeded its time limit\n{}", self.dump());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Waits, then asserts every process (not killed by the test) exited 0.
    pub fn wait_success(&mut self) {
        self.wait();
        let bad: Vec<&Proc> = self
            .procs
            .iter()
            .filter(|p| p.status != Some(0) && p.status != Some(-9))
            .collect();
        assert!(
            bad.is_empty(),
            "nodes failed: {:?}\n{}",
            bad.iter().map(|p| &p.name).collect::<Vec<_>>(),
            self.dump()
        );
    }

    /// Waits until `pred(stdout+stderr of process i)` holds, or panics at the deadline.
    pub fn wait_for_output(&mut self, i: usize, what: &str, pred: impl Fn(&str) -> bool) {
        while Instant::now() < self.deadline {
            let p = &self.procs[i];
            if pred(&(p.stdout() + &p.stderr())) {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        self.kill_all();
        panic!(
            "timed out waiting for {what} from {}\n{}",
            self.procs[i].name,
            self.dump()
        );
    }

    /// True once process `i` has exited (or was killed); reaps it.
    pub fn exited(&mut self, i: usize) -> bool {
        let p = &mut self.procs[i];
        if p.status.is_none() {
            if let Some(s) = p.child.try_wait().unwrap() {
                p.status = Some(s.code().unwrap_or(-1));
            }
        }
        p.status.is_some()
    }

    /// Polls `pred` every 10 ms until it holds, or panics at the deadline.
    pub fn wait_until(&mut self, what: &str, mut pred: impl FnMut(&mut Cluster) -> bool) {
        while Instant::now() < self.deadline {
            if pred(self) {
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        self.kill_all();
        panic!("timed out waiting for {what}\n{}", self.dump());
    }

    /// All stdout, concatenated.
    pub fn all_stdout(&self) -> String {
        self.procs.iter().map(|p| p.stdout()).collect()
    }

    /// Every process's output (the last 60 lines of stderr), for failure messages.
    pub fn dump(&self) -> String {
        self.dump_lines(60)
    }

    /// Every process's status, stdout and its last `n` lines of stderr.
    pub fn dump_lines(&self, n: usize) -> String {
        let mut s = String::new();
        for p in &self.procs {
            s += &format!(
                "===== {} (status {:?})\n--- stdout\n{}\n--- stderr\n{}\n",
                p.name,
                p.status,
                p.stdout(),
                tail(&p.stderr(), n)
            );
        }
        s
    }

    /// Kills every process still running.
    pub fn kill_all(&mut self) {
        for p in self.procs.iter_mut().filter(|p| p.status.is_none()) {
            let _ = p.child.kill();
            let _ = p.child.wait();
            p.status = Some(-9);
        }
    }
}

fn tail(s: &str, n: usize) -> String {
    let lines: Vec<&str> = s.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

impl Drop for Cluster {
    fn drop(&mut self) {
        self.kill_all();
        if std::env::var_os("PSRS_TEST_KEEP").is_some() {
            let dir = std::mem::replace(&mut self.dir, tempfile::tempdir().unwrap());
            eprintln!("kept the cluster's output in {}", dir.keep().display());
        }
    }
}
