//! A worker's runner: started on first use, holding one job's model at a time (loaded
//! once, kept while the worker stays on that job), replaced by a fresh process after
//! any error that leaves it unusable (it died, hung past its deadline, or broke the
//! protocol). An error raised by the user's code only fails that request.

use super::error::RunnerError;
use super::process::{Runner, RunnerConfig};
use super::protocol::{self, Inputs, UserModel};
use std::time::Duration;

/// The worker's runner and what it has loaded.
pub struct RunnerSlot {
    cfg: RunnerConfig,
    runner: Option<Runner>,
    loaded: Option<(u32, UserModel)>,
}

impl RunnerSlot {
    /// A slot that starts its runner with `cfg` on first use.
    pub fn new(cfg: RunnerConfig) -> RunnerSlot {
        RunnerSlot {
            cfg,
            runner: None,
            loaded: None,
        }
    }

    /// The job whose model the live runner holds.
    pub fn loaded(&mut self) -> Option<u32> {
        if !self.runner.as_mut().is_some_and(Runner::alive) {
            self.runner = None;
            self.loaded = None;
        }
        self.loaded.as_ref().map(|l| l.0)
    }

    /// The runner's process id, if one runs.
    pub fn pid(&self) -> Option<u32> {
        self.runner.as_ref().map(Runner::pid)
    }

    fn settle<T>(&mut self, out: Result<T, RunnerError>) -> Result<T, RunnerError> {
        if let Err(e) = &out {
            if e.is_fatal() {
                self.runner = None;
                self.loaded = None;
            }
        }
        out
    }

    fn runner(&mut self, timeout: Duration) -> Result<&mut Runner, RunnerError> {
        if self.runner.is_none() {
            self.loaded = None;
            self.runner = Some(Runner::start(&self.cfg, timeout)?);
        }
        Ok(self.runner.as_mut().expect("set above"))
    }

    fn live(&mut self) -> Result<&mut Runner, RunnerError> {
        self.runner
            .as_mut()
            .ok_or_else(|| RunnerError::Died("no runner holds a model: load one first".into()))
    }

    /// Makes the runner hold `model` for `job` (nothing to do if it does), starting
    /// the runner if needed; the start and the load each get `timeout`.
    pub fn load(&mut self, job: u32, model: &UserModel, timeout: Duration) -> Result<(), RunnerError> {
        if self.loaded() == Some(job) && self.loaded.as_ref().is_some_and(|l| &l.1 == model) {
            return Ok(());
        }
        self.loaded = None;
        let threads = self.cfg.threads;
        let out = self
            .runner(timeout)
            .and_then(|r| r.request(protocol::load(job, model, threads), timeout))
            .and_then(|f| protocol::reply(&f).map(|_| ()));
        let out = self.settle(out);
        if out.is_ok() {
            self.loaded = Some((job, model.clone()));
        }
        out
    }

    /// The loaded TorchScript model's logits for `x` (`rows × cols`): the logits
    /// (row-major) and the number of classes.
    pub fn forward(
        &mut self,
        x: &[f32],
        rows: usize,
        cols: usize,
        timeout: Duration,
    ) -> Result<(Vec<f32>, usize), RunnerError> {
        let out = self
            .live()
            .and_then(|r| r.request(protocol::forward(x, rows, cols), timeout))
            .and_then(|f| protocol::logits(&f, rows));
        self.settle(out)
    }

    /// The loaded function's outputs for `inputs`, one list of CSV fields each.
    pub fn call(&mut self, inputs: &Inputs, timeout: Duration) -> Result<Vec<Vec<String>>, RunnerError> {
        let out = self
            .live()
            .and_then(|r| r.request(protocol::call(inputs), timeout))
            .and_then(|f| protocol::outputs(&f, inputs.len()));
        self.settle(out)
    }
}
