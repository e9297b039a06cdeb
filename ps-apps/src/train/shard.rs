//! One server's shard of the model under the three update rules of the design: a
//! version number, the parameters of a contiguous key range, and the rule deciding
//! which pushed gradients are accepted and when they are applied. No sockets, no
//! clock: time comes in as milliseconds, so the rules are unit-tested exactly.
//!
//! - **Sync** (seed 001): a push carries the version the worker computed on. A push
//!   for another version is rejected (the worker re-pulls and retries). Each worker
//!   contributes at most one gradient per version; when `grads_per_version` distinct
//!   workers have pushed, or every worker that is neither dead nor idle has, or
//!   `timeout_ms` has passed since the first push of the version, the averaged gradient
//!   is applied and the version bumped. A worker is *idle* from its idle notice (it
//!   holds no task: it waits at the end of a pass, or the job is over) until its next
//!   push; a version never waits for an idle or dead worker's gradient.
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
        /// Distinct workers' gradients that complete a version ([`EVERY_LIVE_WORKER`]:
        /// one from each live worker, however many join or leave).
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

/// A sync `grads_per_version` that waits for every worker neither dead, departed nor
/// idle (the count follows workers joining and leaving the job).
pub const EVERY_LIVE_WORKER: usize = usize::MAX;

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
    num_workers: usize,
    /// Workers declared dead (set from the node table).
    #[serde(default)]
    dead: BTreeSet<i32>,
    /// Workers that said they hold no task, until their next push. Not kept in a
    /// checkpoint: a restored shard learns it again from the workers' notices.
    #[serde(skip)]
    idle: BTreeSet<i32>,
}

impl Shard {
    /// A shard starting at key `begin` with initial `params`.
    pub fn new(begin: u64, params: Vec<f32>, mode: Mode, sgd: Sgd, num_workers: usize) -> Shard {
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
            num_workers: num_workers.max(1),
            dead: BTreeSet::new(),
            idle: BTreeSet::new(),
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

    /// Sets the workers declared dead (a sync version stops waiting for them). An id
    /// that leaves the set was taken over by a replacement, which starts idle: it is
    /// waited for from its first push on, not while it starts up. Returns true if that
    /// completed the current version.
    pub fn set_dead_workers(&mut self, dead: &BTreeSet<i32>, now_ms: u64) -> bool {
        if *dead != self.dead {
            let replaced: Vec<i32> = self.dead.difference(dead).copied().collect();
            self.idle.extend(replaced);
            self.dead = dead.clone();
        }
        self.maybe_apply(now_ms)
    }

    /// The cluster has `n` worker ids (workers joined the running job beyond
    /// `DMLC_NUM_WORKER`): a sync version waits for each live one. A new id starts
    /// idle (it is waited for from its first push on, not while it starts up), unless
    /// it already pushed. The count never shrinks (a departed worker is among the dead).
    pub fn set_num_workers(&mut self, n: usize) {
        for rank in self.num_workers..n {
            let id = ps_core::node::worker_rank_to_id(rank);
            if !self.contributors.contains(&id) {
                self.idle.insert(id);
            }
        }
        self.num_workers = self.num_workers.max(n);
    }

    /// `worker` holds no task (it waits for the others to finish the pass, or the job
    /// is over): a sync version no longer waits for its gradient, until it pushes
    /// again. Returns true if that completed the current version.
    pub fn set_idle(&mut self, worker: i32, now_ms: u64) -> bool {
        self.idle.insert(worker);
        self.maybe_apply(now_ms)
    }

    /// The workers marked idle (a replica's copy carries them: checkpoints do not).
    pub fn idle_workers(&self) -> &BTreeSet<i32> {
        &self.idle
    }

    /// Replaces the set of idle workers (installing a replica's copy).
    pub fn set_idle_workers(&mut self, idle: BTreeSet<i32>) {
        self.idle = idle;
    }

    /// True if `worker` is marked idle.
    pub fn is_idle(&self, worker: i32) -> bool {
        self.idle.contains(&worker)
    }

    /// Gradients the current version needs: `grads_per_version`, or fewer when every
    /// worker that is neither dead nor idle has already contributed.
    fn needed(&self) -> usize {
        match self.mode {
            Mode::Sync { grads_per_version, .. } => {
                let gone = self
                    .dead
                    .union(&self.idle)
                    .filter(|w| !self.contributors.contains(w))
                    .count();
                let expected = self.num_workers.saturating_sub(gone);
                grads_per_version.min(expected).max(1)
            }
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
        // any push, even a rejected one, shows the worker is training again
        self.idle.remove(&worker);
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
#[path = "shard_tests.rs"]
mod tests;
