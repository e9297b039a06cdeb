//! One server's shard of `psrs train`'s model: the parameters of a contiguous key
//! range, their gradient accumulator and (momentum) SGD, moved from version to version
//! by the rule of [`Versions`] (sync, async or bounded staleness). No sockets, no
//! clock: time comes in as milliseconds, so the rules are unit-tested exactly.

use super::versions::{Admit, Mode, Versioned, Versions};
pub use super::versions::{PrimaryAnswer, PushOutcome};
use serde::{Deserialize, Serialize};

/// SGD with optional momentum, applied to a shard.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Sgd {
    /// Learning rate.
    pub lr: f32,
    /// Momentum (0 = plain SGD).
    pub momentum: f32,
    /// L2 weight decay.
    pub weight_decay: f32,
}

/// Why a push could not be taken at all.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PushError {
    /// A key offset outside the shard.
    KeyOutOfRange(u64),
    /// Offsets and values of different lengths.
    LengthMismatch,
}

/// A server's shard: parameters of keys `[begin, begin + len)`.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Shard {
    /// First key of the range.
    pub begin: u64,
    /// Parameters, one per key.
    pub params: Vec<f32>,
    /// The version number and the rule that moves it.
    pub rule: Versions,
    velocity: Vec<f32>,
    accum: Vec<f32>,
    /// The optimizer.
    pub sgd: Sgd,
}

impl Shard {
    /// A shard starting at key `begin` with initial `params`.
    pub fn new(begin: u64, params: Vec<f32>, mode: Mode, sgd: Sgd, num_workers: usize) -> Shard {
        let n = params.len();
        Shard {
            begin,
            params,
            rule: Versions::new(mode, num_workers),
            velocity: if sgd.momentum != 0.0 { vec![0.0; n] } else { Vec::new() },
            accum: vec![0.0; n],
            sgd,
        }
    }

    /// The model version (number of applied updates).
    pub fn version(&self) -> u64 {
        self.rule.version
    }

    /// Number of keys.
    pub fn len(&self) -> usize {
        self.params.len()
    }

    /// True if the shard holds no keys.
    pub fn is_empty(&self) -> bool {
        self.params.is_empty()
    }

    /// A push from `worker` computed on `version`: gradient values `vals` for key
    /// offsets `offsets` (relative to `begin`, any order; `None` = every key in order).
    pub fn push(
        &mut self,
        worker: i32,
        version: u64,
        offsets: Option<&[u64]>,
        vals: &[f32],
        now_ms: u64,
    ) -> Result<PushOutcome, PushError> {
        self.check(offsets, vals)?;
        if let Admit::Rejected { current } = self.rule.admit(worker, version, now_ms) {
            return Ok(PushOutcome::Rejected { current });
        }
        self.accumulate(offsets, vals);
        Ok(PushOutcome::Accepted {
            applied: self.maybe_apply(now_ms),
        })
    }

    /// A push that the range's primary applied first, on a copy that follows it (a
    /// backup), with what the primary answered: a sync shard does what the primary
    /// did ([`Versioned::follow_primary`]); an async or bounded one applies every
    /// push it takes at once, in the order the copies share, so it pushes as the
    /// primary did.
    pub fn follow(
        &mut self,
        worker: i32,
        version: u64,
        offsets: Option<&[u64]>,
        vals: &[f32],
        primary: PrimaryAnswer,
        now_ms: u64,
    ) -> Result<PushOutcome, PushError> {
        if !self.rule.decides_by_time() {
            return self.push(worker, version, offsets, vals, now_ms);
        }
        self.check(offsets, vals)?;
        Ok(self.follow_primary(worker, version, primary, now_ms, |s| s.accumulate(offsets, vals)))
    }

    /// A copy of this shard with the version it is collecting applied (what it would
    /// serve once that version is applied): how two copies of a range are compared.
    pub fn settled(&self) -> Shard {
        let mut s = self.clone();
        if s.rule.collected() > 0 {
            s.apply_now();
        }
        s
    }

    /// Checks that `offsets` (or the whole shard) match `vals` and lie in the shard.
    fn check(&self, offsets: Option<&[u64]>, vals: &[f32]) -> Result<(), PushError> {
        match offsets {
            Some(o) if o.len() != vals.len() => Err(PushError::LengthMismatch),
            Some(o) => match o.iter().find(|&&k| k >= self.params.len() as u64) {
                Some(&bad) => Err(PushError::KeyOutOfRange(bad + self.begin)),
                None => Ok(()),
            },
            None if vals.len() != self.params.len() => Err(PushError::LengthMismatch),
            None => Ok(()),
        }
    }

    /// Adds `vals` to the gradient accumulator.
    fn accumulate(&mut self, offsets: Option<&[u64]>, vals: &[f32]) {
        match offsets {
            Some(o) => o.iter().zip(vals).for_each(|(&k, v)| self.accum[k as usize] += v),
            None => self.accum.iter_mut().zip(vals).for_each(|(a, v)| *a += v),
        }
    }

    /// True if a pull that wants a version newer than `after` must wait
    /// ([`Versions::pull_must_wait`]).
    pub fn pull_must_wait(&self, after: Option<u64>) -> bool {
        self.rule.pull_must_wait(after)
    }

    /// Values of the keys at `offsets` (`None` = all).
    pub fn values(&self, offsets: Option<&[u64]>) -> Result<Vec<f32>, PushError> {
        match offsets {
            None => Ok(self.params.clone()),
            Some(o) => o
                .iter()
                .map(|&k| {
                    self.params
                        .get(k as usize)
                        .copied()
                        .ok_or(PushError::KeyOutOfRange(k + self.begin))
                })
                .collect(),
        }
    }
}

impl Versioned for Shard {
    fn rule_mut(&mut self) -> &mut Versions {
        &mut self.rule
    }

    fn apply_collected(&mut self, n: usize) {
        let scale = 1.0 / n as f32;
        let Sgd {
            lr,
            momentum,
            weight_decay,
        } = self.sgd;
        for i in 0..self.params.len() {
            let g = self.accum[i] * scale + weight_decay * self.params[i];
            let step = if momentum != 0.0 {
                self.velocity[i] = momentum * self.velocity[i] + g;
                self.velocity[i]
            } else {
                g
            };
            self.params[i] -= lr * step;
            self.accum[i] = 0.0;
        }
    }
}

#[cfg(test)]
#[path = "shard_tests.rs"]
mod tests;
