//! One server's shard of the model under the three update rules of the design: a
//! version number, the parameters of a contiguous key range, and the rule deciding
//! which pushed gradients are accepted and when they are applied. No sockets, no
//! clock: time comes in as milliseconds, so the rules are unit-tested exactly.
//!
//! - **Sync** (seed 001): a push carries the version the worker computed on. A push
//!   for another version is rejected (the worker re-pulls and retries). Each worker
//!   contributes at most one gradient per version; when `grads_per_version` distinct
//!   workers (capped at the live workers) have pushed, or `timeout_ms` has passed since
//!   the first push of the version, the averaged gradient is applied and the version
//!   bumped.
//! - **Async**: every push is applied at once; the version counts updates.
//! - **Bounded staleness**: like async, but a push computed on a version more than
//!   `staleness` updates old is rejected.

use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;

/// The update rule.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub enum Mode {
    /// Synchronous SGD on model versions.
    Sync {
        /// Distinct workers' gradients that complete a version.
        grads_per_version: usize,
        /// Apply what has arrived this long after a version's first push (0 = never).
        timeout_ms: u64,
    },
    /// Apply every push at once.
    Async,
    /// Apply at once, reject pushes more than `staleness` versions old.
    Bounded {
        /// Largest accepted age of a push, in versions.
        staleness: u64,
    },
}

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

/// What happened to a push.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PushOutcome {
    /// Taken; `applied` if it completed an update (the version moved).
    Accepted {
        /// The version moved because of this push.
        applied: bool,
    },
    /// Computed on the wrong version; the shard is at `current`.
    Rejected {
        /// The shard's version.
        current: u64,
    },
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
    /// Model version (number of applied updates).
    pub version: u64,
    velocity: Vec<f32>,
    accum: Vec<f32>,
    contributors: BTreeSet<i32>,
    first_push_ms: Option<u64>,
    /// The update rule.
    pub mode: Mode,
    /// The optimizer.
    pub sgd: Sgd,
    live_workers: usize,
}

impl Shard {
    /// A shard starting at key `begin` with initial `params`.
    pub fn new(begin: u64, params: Vec<f32>, mode: Mode, sgd: Sgd, live_workers: usize) -> Shard {
        let n = params.len();
        Shard {
            begin,
            params,
            version: 0,
            velocity: if sgd.momentum != 0.0 { vec![0.0; n] } else { Vec::new() },
            accum: vec![0.0; n],
            contributors: BTreeSet::new(),
            first_push_ms: None,
            mode,
            sgd,
            live_workers: live_workers.max(1),
        }
    }

    /// Number of keys.
    pub fn len(&self) -> usize {
        self.params.len()
    }

    /// True if the shard holds no keys.
    pub fn is_empty(&self) -> bool {
        self.params.is_empty()
    }

    /// Sets how many workers are alive (caps the gradients a sync version waits for);
    /// returns true if that completed the current version.
    pub fn set_live_workers(&mut self, n: usize, now_ms: u64) -> bool {
        self.live_workers = n.max(1);
        self.maybe_apply(now_ms)
    }

    fn needed(&self) -> usize {
        match self.mode {
            Mode::Sync { grads_per_version, .. } => grads_per_version.min(self.live_workers).max(1),
            _ => 1,
        }
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
        match offsets {
            Some(o) if o.len() != vals.len() => return Err(PushError::LengthMismatch),
            Some(o) => {
                if let Some(&bad) = o.iter().find(|&&k| k >= self.params.len() as u64) {
                    return Err(PushError::KeyOutOfRange(bad + self.begin));
                }
            }
            None if vals.len() != self.params.len() => return Err(PushError::LengthMismatch),
            None => {}
        }
        let accept = match self.mode {
            Mode::Sync { .. } => version == self.version && !self.contributors.contains(&worker),
            Mode::Async => true,
            Mode::Bounded { staleness } => self.version.saturating_sub(version) <= staleness && version <= self.version,
        };
        if !accept {
            return Ok(PushOutcome::Rejected { current: self.version });
        }
        match offsets {
            Some(o) => o.iter().zip(vals).for_each(|(&k, v)| self.accum[k as usize] += v),
            None => self.accum.iter_mut().zip(vals).for_each(|(a, v)| *a += v),
        }
        self.contributors.insert(worker);
        self.first_push_ms.get_or_insert(now_ms);
        Ok(PushOutcome::Accepted {
            applied: self.maybe_apply(now_ms),
        })
    }

    /// Applies a sync version whose timeout passed; true if the version moved.
    pub fn tick(&mut self, now_ms: u64) -> bool {
        self.maybe_apply(now_ms)
    }

    fn maybe_apply(&mut self, now_ms: u64) -> bool {
        let n = self.contributors.len();
        if n == 0 {
            return false;
        }
        let timed_out = match (self.mode, self.first_push_ms) {
            (Mode::Sync { timeout_ms, .. }, Some(t)) => timeout_ms > 0 && now_ms >= t + timeout_ms,
            _ => false,
        };
        if n < self.needed() && !timed_out {
            return false;
        }
        if n < self.needed() {
            log::debug!(
                "version {} applied on timeout with {n} of {} gradients",
                self.version,
                self.needed()
            );
        }
        self.apply(n);
        true
    }

    fn apply(&mut self, n: usize) {
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
        self.contributors.clear();
        self.first_push_ms = None;
        self.version += 1;
    }

    /// True if a pull that wants a version newer than `after` must wait: the shard is
    /// exactly at `after` and a sync update is still collecting. A shard behind (it was
    /// restored from an older checkpoint) or ahead answers at once.
    pub fn pull_must_wait(&self, after: Option<u64>) -> bool {
        matches!(self.mode, Mode::Sync { .. }) && after == Some(self.version)
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

#[cfg(test)]
mod tests {
    use super::*;

    const SGD: Sgd = Sgd {
        lr: 0.5,
        momentum: 0.0,
        weight_decay: 0.0,
    };

    fn sync(k: usize, timeout: u64) -> Shard {
        Shard::new(
            100,
            vec![1.0, 2.0, 3.0],
            Mode::Sync {
                grads_per_version: k,
                timeout_ms: timeout,
            },
            SGD,
            k,
        )
    }

    #[test]
    fn sync_applies_the_average_once_enough_workers_pushed() {
        let mut s = sync(2, 0);
        assert_eq!(
            s.push(9, 0, None, &[1.0, 1.0, 1.0], 0),
            Ok(PushOutcome::Accepted { applied: false })
        );
        assert!(s.pull_must_wait(Some(0)));
        // the same worker again for the same version: rejected
        assert_eq!(
            s.push(9, 0, None, &[5.0, 5.0, 5.0], 1),
            Ok(PushOutcome::Rejected { current: 0 })
        );
        assert_eq!(
            s.push(11, 0, None, &[3.0, 3.0, 3.0], 2),
            Ok(PushOutcome::Accepted { applied: true })
        );
        assert_eq!(s.version, 1);
        // mean gradient 2.0, lr 0.5
        assert_eq!(s.params, vec![0.0, 1.0, 2.0]);
        assert!(!s.pull_must_wait(Some(0)));
        // a push on the old version is rejected with the current one
        assert_eq!(
            s.push(9, 0, None, &[1.0; 3], 3),
            Ok(PushOutcome::Rejected { current: 1 })
        );
    }

    #[test]
    fn sync_timeout_applies_partial_versions() {
        let mut s = sync(3, 100);
        s.push(9, 0, Some(&[1]), &[2.0], 50).unwrap();
        assert!(!s.tick(149));
        assert!(s.tick(150));
        assert_eq!(s.params, vec![1.0, 1.0, 3.0]);
        assert_eq!(s.version, 1);
        assert!(!s.tick(1000), "nothing pending");
    }

    #[test]
    fn fewer_live_workers_complete_a_version() {
        let mut s = sync(3, 0);
        s.push(9, 0, None, &[1.0; 3], 0).unwrap();
        s.push(11, 0, None, &[1.0; 3], 0).unwrap();
        assert_eq!(s.version, 0);
        assert!(s.set_live_workers(2, 10));
        assert_eq!(s.version, 1);
    }

    #[test]
    fn async_and_bounded_staleness() {
        let mut a = Shard::new(0, vec![0.0; 2], Mode::Async, SGD, 4);
        assert_eq!(
            a.push(9, 0, None, &[2.0, 2.0], 0),
            Ok(PushOutcome::Accepted { applied: true })
        );
        assert_eq!(
            a.push(11, 0, None, &[2.0, 2.0], 0),
            Ok(PushOutcome::Accepted { applied: true })
        );
        assert_eq!((a.version, a.params.clone()), (2, vec![-2.0, -2.0]));
        let mut b = Shard::new(0, vec![0.0], Mode::Bounded { staleness: 1 }, SGD, 4);
        b.push(9, 0, None, &[1.0], 0).unwrap();
        b.push(9, 1, None, &[1.0], 0).unwrap();
        assert_eq!(b.push(11, 0, None, &[1.0], 0), Ok(PushOutcome::Rejected { current: 2 }));
        assert_eq!(
            b.push(11, 1, None, &[1.0], 0),
            Ok(PushOutcome::Accepted { applied: true })
        );
        assert_eq!(
            b.push(11, 7, None, &[1.0], 0),
            Ok(PushOutcome::Rejected { current: 3 }),
            "from the future"
        );
        assert!(!b.pull_must_wait(Some(3)));
    }

    #[test]
    fn bad_pushes_are_errors_not_panics() {
        let mut s = sync(1, 0);
        assert_eq!(s.push(9, 0, Some(&[3]), &[1.0], 0), Err(PushError::KeyOutOfRange(103)));
        assert_eq!(s.push(9, 0, Some(&[0, 1]), &[1.0], 0), Err(PushError::LengthMismatch));
        assert_eq!(s.push(9, 0, None, &[1.0], 0), Err(PushError::LengthMismatch));
        assert_eq!(s.values(Some(&[5])), Err(PushError::KeyOutOfRange(105)));
        assert_eq!(s.values(Some(&[2, 0])), Ok(vec![3.0, 1.0]));
    }

    #[test]
    fn momentum_and_weight_decay() {
        let sgd = Sgd {
            lr: 1.0,
            momentum: 0.5,
            weight_decay: 0.0,
        };
        let mut s = Shard::new(0, vec![0.0], Mode::Async, sgd, 1);
        s.push(9, 0, None, &[1.0], 0).unwrap();
        s.push(9, 1, None, &[1.0], 0).unwrap();
        // v1 = 1, p = -1; v2 = 0.5 + 1 = 1.5, p = -2.5
        assert_eq!(s.params, vec![-2.5]);
        let sgd = Sgd {
            lr: 0.1,
            momentum: 0.0,
            weight_decay: 1.0,
        };
        let mut s = Shard::new(0, vec![10.0], Mode::Async, sgd, 1);
        s.push(9, 0, None, &[0.0], 0).unwrap();
        assert!((s.params[0] - 9.0).abs() < 1e-6);
    }
}
