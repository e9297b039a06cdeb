//! One runner process: started with the configured interpreter, spoken to through
//! two threads (one writes request frames to its stdin, one reads reply frames from its
//! stdout), so a request never blocks the worker past its deadline: a runner that does
//! not answer in time is killed. Its stderr is the worker's.

use super::error::RunnerError;
use super::protocol::{self, Frame};
use crossbeam_channel::{Receiver, RecvTimeoutError, Sender};
use std::io::{BufReader, Write};
use std::os::unix::process::ExitStatusExt;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The runner's Python source.
pub const SOURCE: &str = include_str!("runner.py");

/// What `python -c` runs: the source, handed over in the environment (so `ps` shows a
/// short command line) and taken out of it before the user's code runs.
const BOOT: &str = "import os; src = os.environ.pop('PSRS_RUNNER_SOURCE'); exec(compile(src, '<psrs runner>', 'exec'))";

/// How a worker starts its runner.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunnerConfig {
    /// The Python interpreter (a name on `PATH` or a path), e.g. a virtualenv's
    /// `bin/python` with torch installed.
    pub python: String,
    /// Threads for torch (`torch.set_num_threads`, and `OMP_NUM_THREADS` /
    /// `MKL_NUM_THREADS` in the runner's environment).
    pub threads: usize,
    /// The memory the models a worker's runner holds may take together, MB (0: no
    /// limit); beyond it the least recently used models are dropped, never the one of
    /// the job the worker is on ([`super::ModelCache`]).
    pub memory_budget_mb: u64,
    /// Python modules the runner imports in the background as soon as it starts
    /// (libraries the models use, e.g. `torch`), so loading a job's model only builds it;
    /// with any, the worker starts its runner when it starts.
    pub preload: Vec<String>,
}

impl RunnerConfig {
    /// Checks the values; [`RunnerError::Invalid`] names the option.
    pub fn validate(&self) -> Result<(), RunnerError> {
        if self.python.trim().is_empty() {
            return Err(RunnerError::Invalid("--python: name a Python interpreter".into()));
        }
        if self.threads == 0 {
            return Err(RunnerError::Invalid("--runner-threads must be at least 1".into()));
        }
        let module = |m: &str| {
            !m.is_empty()
                && m.split('.').all(|p| {
                    p.chars().next().is_some_and(|c| c.is_alphabetic() || c == '_')
                        && p.chars().all(|c| c.is_alphanumeric() || c == '_')
                })
        };
        if let Some(bad) = self.preload.iter().find(|m| !module(m)) {
            return Err(RunnerError::Invalid(format!(
                "--runner-preload: {bad:?} is not a Python module name (e.g. torch,transformers.modeling_utils)"
            )));
        }
        Ok(())
    }
}

/// A running runner process; killed when dropped.
pub struct Runner {
    child: Child,
    to: Option<Sender<Vec<u8>>>,
    from: Receiver<Result<Frame, RunnerError>>,
    pid: u32,
}

impl Runner {
    /// Starts a runner and waits up to `timeout` for its greeting.
    pub fn start(cfg: &RunnerConfig, timeout: Duration) -> Result<Runner, RunnerError> {
        let n = cfg.threads.to_string();
        let mut child = Command::new(&cfg.python)
            .args(["-u", "-c", BOOT, "psrs-runner"])
            .env("PSRS_RUNNER_SOURCE", SOURCE)
            .env("OMP_NUM_THREADS", &n)
            .env("MKL_NUM_THREADS", &n)
            .env("OPENBLAS_NUM_THREADS", &n)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|source| RunnerError::Spawn {
                python: cfg.python.clone(),
                source,
            })?;
        let mut stdin = child.stdin.take().expect("piped");
        let stdout = child.stdout.take().expect("piped");
        let (to, requests) = crossbeam_channel::unbounded::<Vec<u8>>();
        let (replies, from) = crossbeam_channel::unbounded();
        let spawn = |name: &str, f: Box<dyn FnOnce() + Send>| {
            std::thread::Builder::new()
                .name(name.into())
                .spawn(f)
                .map_err(|e| RunnerError::Died(format!("no thread for it: {e}")))
        };
        spawn(
            "runner-write",
            Box::new(move || {
                for frame in requests {
                    if stdin.write_all(&frame).and_then(|_| stdin.flush()).is_err() {
                        break; // the runner is gone: its reader reports it
                    }
                }
            }),
        )?;
        spawn(
            "runner-read",
            Box::new(move || {
                let mut r = BufReader::with_capacity(1 << 16, stdout);
                loop {
                    match protocol::read_frame(&mut r) {
                        Ok(Some(f)) => {
                            if replies.send(Ok(f)).is_err() {
                                break;
                            }
                        }
                        Ok(None) => break,
                        Err(e) => {
                            let _ = replies.send(Err(e));
                            break;
                        }
                    }
                }
            }),
        )?;
        let pid = child.id();
        let mut r = Runner {
            child,
            to: Some(to),
            from,
            pid,
        };
        let hello = protocol::reply(&r.wait_reply(timeout)?)?;
        log::info!(
            "Python runner started: pid {}, Python {}",
            hello.pid.unwrap_or(pid),
            hello.python.as_deref().unwrap_or("?")
        );
        Ok(r)
    }

    /// The runner's process id.
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// Whether the process still runs.
    pub fn alive(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// Sends one request frame and waits up to `timeout` for its reply. A runner that
    /// is gone, or breaks the protocol, or does not answer in time, is killed.
    pub fn request(&mut self, frame: Vec<u8>, timeout: Duration) -> Result<Frame, RunnerError> {
        let sent = self.to.as_ref().is_some_and(|t| t.send(frame).is_ok());
        if !sent {
            return Err(RunnerError::Died(self.exit_status()));
        }
        self.wait_reply(timeout)
    }

    fn wait_reply(&mut self, timeout: Duration) -> Result<Frame, RunnerError> {
        match self.from.recv_timeout(timeout) {
            Ok(Ok(f)) => Ok(f),
            Ok(Err(e)) => {
                self.kill();
                Err(e)
            }
            Err(RecvTimeoutError::Timeout) => {
                log::warn!("Python runner {} took longer than {timeout:.1?}: killed", self.pid);
                self.kill();
                Err(RunnerError::Timeout(timeout))
            }
            Err(RecvTimeoutError::Disconnected) => Err(RunnerError::Died(self.exit_status())),
        }
    }

    /// How the process ended (waiting up to 2 s for it to end; then it is killed).
    fn exit_status(&mut self) -> String {
        let until = Instant::now() + Duration::from_secs(2);
        loop {
            match self.child.try_wait() {
                Ok(Some(s)) => {
                    return match (s.code(), s.signal()) {
                        (Some(c), _) => format!("exit status {c}"),
                        (None, Some(sig)) => format!("killed by signal {sig}"),
                        _ => s.to_string(),
                    }
                }
                Ok(None) if Instant::now() < until => std::thread::sleep(Duration::from_millis(10)),
                Ok(None) => {
                    self.kill();
                    return "closed its output; killed".into();
                }
                Err(e) => return format!("its status is unknown: {e}"),
            }
        }
    }

    /// Kills the process (by its pid, through the handle) and reaps it.
    pub fn kill(&mut self) {
        self.to = None;
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Runner {
    fn drop(&mut self) {
        self.kill();
    }
}
