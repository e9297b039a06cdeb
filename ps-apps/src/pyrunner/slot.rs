//! A worker's runner: started on first use, holding the models of several jobs (each
//! loaded once, in the background while the runner serves another job's queries, or
//! waited for), replaced by a fresh process after any error that leaves it unusable
//! (it died, hung past its deadline, or broke the protocol); a fresh process holds no
//! model. An error raised by the user's code only fails that request.

use super::error::RunnerError;
use super::process::{Runner, RunnerConfig};
use super::protocol::{self, Inputs, ModelStatus, UserModel};
use std::time::Duration;

/// What a runner holds, as its `status` reply says.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RunnerStatus {
    /// Every model held (loading, ready or failed), by job.
    pub models: Vec<ModelStatus>,
    /// The process's resident memory, bytes (0 with no runner).
    pub rss: u64,
}

/// The worker's runner.
pub struct RunnerSlot {
    cfg: RunnerConfig,
    runner: Option<Runner>,
}

impl RunnerSlot {
    /// A slot that starts its runner with `cfg` on first use.
    pub fn new(cfg: RunnerConfig) -> RunnerSlot {
        RunnerSlot { cfg, runner: None }
    }

    /// Whether a live runner is there (a dead one is forgotten).
    pub fn running(&mut self) -> bool {
        if !self.runner.as_mut().is_some_and(Runner::alive) {
            self.runner = None;
        }
        self.runner.is_some()
    }

    /// The runner's process id, if one runs.
    pub fn pid(&self) -> Option<u32> {
        self.runner.as_ref().map(Runner::pid)
    }

    /// Kills the runner (every model it holds goes with it); the next request starts a
    /// new one.
    pub fn kill(&mut self) {
        self.runner = None;
    }

    fn settle<T>(&mut self, out: Result<T, RunnerError>) -> Result<T, RunnerError> {
        if let Err(e) = &out {
            if e.is_fatal() {
                self.runner = None;
            }
        }
        out
    }

    fn runner(&mut self, timeout: Duration) -> Result<&mut Runner, RunnerError> {
        if !self.running() {
            let mut r = Runner::start(&self.cfg, timeout)?;
            if !self.cfg.preload.is_empty() {
                let f = r.request(protocol::preload(&self.cfg.preload), timeout)?;
                protocol::reply(&f)?;
            }
            self.runner = Some(r);
        }
        Ok(self.runner.as_mut().expect("set above"))
    }

    /// Starts the runner if none runs (it imports the configured modules at once, in the
    /// background), waiting up to `timeout` for its greeting.
    pub fn start(&mut self, timeout: Duration) -> Result<(), RunnerError> {
        let out = self.runner(timeout).map(|_| ());
        self.settle(out)
    }

    fn live(&mut self) -> Result<&mut Runner, RunnerError> {
        if !self.running() {
            return Err(RunnerError::Died("no runner holds a model: load one first".into()));
        }
        Ok(self.runner.as_mut().expect("running"))
    }

    /// Sends `frame` to the runner (starting one if needed), expecting a plain `ok`.
    fn ask(&mut self, frame: Vec<u8>, timeout: Duration) -> Result<(), RunnerError> {
        let out = self
            .runner(timeout)
            .and_then(|r| r.request(frame, timeout))
            .and_then(|f| protocol::reply(&f).map(|_| ()));
        self.settle(out)
    }

    /// Makes the runner hold `model` for `job` and waits until it is loaded (nothing to
    /// wait for if it is), starting the runner if needed; the start and the load each
    /// get `timeout`. A load that raised is [`RunnerError::Raised`].
    pub fn load(&mut self, job: u32, model: &UserModel, timeout: Duration) -> Result<(), RunnerError> {
        self.ask(protocol::load(job, model, self.cfg.threads), timeout)
    }

    /// Asks the runner to load `model` for `job` in the background (a model it holds or
    /// is loading for `job` is kept), starting the runner if needed (within `timeout`).
    pub fn warm(&mut self, job: u32, model: &UserModel, timeout: Duration) -> Result<(), RunnerError> {
        self.ask(protocol::warm(job, model, self.cfg.threads), timeout)
    }

    /// Makes the runner forget `job`'s model (nothing to do without a runner).
    pub fn drop_model(&mut self, job: u32, timeout: Duration) -> Result<(), RunnerError> {
        if !self.running() {
            return Ok(());
        }
        self.ask(protocol::drop_model(job), timeout)
    }

    /// The runner's models and memory (none without a runner).
    pub fn status(&mut self, timeout: Duration) -> Result<RunnerStatus, RunnerError> {
        if !self.running() {
            return Ok(RunnerStatus::default());
        }
        let out = self
            .live()
            .and_then(|r| r.request(protocol::status(), timeout))
            .and_then(|f| protocol::models(&f))
            .map(|(models, rss)| RunnerStatus { models, rss });
        self.settle(out)
    }

    /// `job`'s TorchScript model's logits for `x` (`rows × cols`): the logits
    /// (row-major) and the number of classes.
    pub fn forward(
        &mut self,
        job: u32,
        x: &[f32],
        rows: usize,
        cols: usize,
        timeout: Duration,
    ) -> Result<(Vec<f32>, usize), RunnerError> {
        let out = self
            .live()
            .and_then(|r| r.request(protocol::forward(job, x, rows, cols), timeout))
            .and_then(|f| protocol::logits(&f, rows));
        self.settle(out)
    }

    /// `job`'s function's outputs for `inputs`, one list of CSV fields each.
    pub fn call(&mut self, job: u32, inputs: &Inputs, timeout: Duration) -> Result<Vec<Vec<String>>, RunnerError> {
        let out = self
            .live()
            .and_then(|r| r.request(protocol::call(job, inputs), timeout))
            .and_then(|f| protocol::outputs(&f, inputs.len()));
        self.settle(out)
    }
}
