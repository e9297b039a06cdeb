//! The master's settings.

use super::error::MasterError;
use serde::{Deserialize, Serialize};

/// How the master cuts and times tasks.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MasterConfig {
    /// Chunks per task.
    pub chunks_per_task: usize,
    /// Passes over the data.
    pub num_epochs: u64,
    /// A task times out after this multiple of the moving average completion time…
    pub timeout_multiplier: f64,
    /// …but never sooner than this.
    pub timeout_floor_ms: u64,
    /// Timeouts (or failure reports) after which a task is given up and moved to failed.
    pub max_retries: u32,
    /// Bugs planted on purpose by the simulator's tests (none otherwise; never
    /// serialized).
    #[serde(skip)]
    pub planted: Planted,
}

/// The master's planted bugs: each brings back one wrong behaviour that real runs
/// showed, so that the simulator's tests can prove a seed finds it. All off by
/// default; no variable or flag turns one on.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Planted {
    /// A result of a task already counted from another attempt counts again: results
    /// not fenced by term and attempt, so a task handed out by two schedulers across a
    /// failover, or handed out again after a timeout, is trained twice in a pass.
    pub count_every_attempt: bool,
}

impl Default for MasterConfig {
    fn default() -> Self {
        MasterConfig {
            chunks_per_task: 1,
            num_epochs: 1,
            timeout_multiplier: 4.0,
            timeout_floor_ms: 10_000,
            max_retries: 3,
            planted: Planted::default(),
        }
    }
}

impl MasterConfig {
    /// Checks the values; the error says which one is wrong.
    pub fn validate(&self) -> Result<(), MasterError> {
        if self.chunks_per_task == 0 {
            return Err(MasterError::Config("chunks per task must be at least 1".into()));
        }
        if self.num_epochs == 0 {
            return Err(MasterError::Config("the number of epochs must be at least 1".into()));
        }
        if self.timeout_multiplier.is_nan() || self.timeout_multiplier < 1.0 {
            return Err(MasterError::Config("the timeout multiplier must be at least 1".into()));
        }
        if self.timeout_floor_ms == 0 {
            return Err(MasterError::Config("the timeout floor must be above 0 ms".into()));
        }
        Ok(())
    }
}
