//! The version rule of a server shard, apart from what the shard stores and how it
//! applies an update: which pushes are taken, when the gradients collected for a
//! version must be applied, and which pulls wait. `psrs train`'s [`Shard`] and the
//! parameter tables of `psrs.torch` ([`crate::tables`]) keep one each, so both train
//! on model versions by the same rule.
//!
//! - **Sync**: a push carries the version the worker computed on; a push
//!   for another version, or a second one from the same worker for this version, is
//!   rejected. The version is complete when `grads_per_version` distinct workers have
//!   pushed, or every worker that is neither dead nor idle has, or `timeout_ms` has
//!   passed since its first push. A worker is idle from its idle notice (it holds no
//!   task) until its next push.
//! - **Async**: every push is taken and applied at once.
//! - **Bounded staleness**: like async, but a push computed on a version more than
//!   `staleness` updates old is rejected.
//!
//! [`Shard`]: super::shard::Shard

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

/// Whether a push was taken.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Admit {
    /// Taken: the caller adds its gradient to the version's collection.
    Accepted,
    /// Computed on the wrong version (or a second push for this version); the shard
    /// is at `current`.
    Rejected {
        /// The shard's version.
        current: u64,
    },
}

/// What a range's primary answered a push it forwarded to the range's other copies.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PrimaryAnswer {
    /// It took the gradient.
    pub taken: bool,
    /// Its version after the push.
    pub version: u64,
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

/// A shard's version number and the rule that moves it.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Versions {
    /// Model version: the number of applied updates.
    pub version: u64,
    /// The update rule.
    pub mode: Mode,
    contributors: BTreeSet<i32>,
    first_push_ms: Option<u64>,
    num_workers: usize,
    /// Workers declared dead (set from the node table).
    dead: BTreeSet<i32>,
    /// Workers that said they hold no task, until their next push. Not kept in a
    /// checkpoint: a restored shard learns it again from the workers' notices.
    #[serde(skip)]
    idle: BTreeSet<i32>,
}

impl Versions {
    /// Version 0 of a shard trained by `num_workers` workers under `mode`.
    pub fn new(mode: Mode, num_workers: usize) -> Versions {
        Versions {
            version: 0,
            mode,
            contributors: BTreeSet::new(),
            first_push_ms: None,
            num_workers: num_workers.max(1),
            dead: BTreeSet::new(),
            idle: BTreeSet::new(),
        }
    }

    /// Sets the workers declared dead (a sync version stops waiting for them). An id
    /// that leaves the set was taken over by a replacement, which starts idle: it is
    /// waited for from its first push on, not while it starts up.
    pub fn set_dead_workers(&mut self, dead: &BTreeSet<i32>) {
        if *dead != self.dead {
            let replaced: Vec<i32> = self.dead.difference(dead).copied().collect();
            self.idle.extend(replaced);
            self.dead = dead.clone();
        }
    }

    /// The cluster has `n` worker ids (workers joined beyond `DMLC_NUM_WORKER`): a sync
    /// version waits for each live one. A new id starts idle unless it already pushed.
    /// The count never shrinks (a departed worker is among the dead).
    pub fn set_num_workers(&mut self, n: usize) {
        for rank in self.num_workers..n {
            let id = ps_core::node::worker_rank_to_id(rank);
            if !self.contributors.contains(&id) {
                self.idle.insert(id);
            }
        }
        self.num_workers = self.num_workers.max(n);
    }

    /// `worker` holds no task: a sync version no longer waits for its gradient, until
    /// it pushes again.
    pub fn set_idle(&mut self, worker: i32) {
        self.idle.insert(worker);
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

    /// A push from `worker` computed on `version`. Any push, even a rejected one, ends
    /// the worker's idle spell; an accepted one counts it as a contributor of the
    /// current version.
    pub fn admit(&mut self, worker: i32, version: u64, now_ms: u64) -> Admit {
        self.idle.remove(&worker);
        let accept = match self.mode {
            Mode::Sync { .. } => version == self.version && !self.contributors.contains(&worker),
            Mode::Async => true,
            Mode::Bounded { staleness } => self.version.saturating_sub(version) <= staleness && version <= self.version,
        };
        if !accept {
            return Admit::Rejected { current: self.version };
        }
        self.contributors.insert(worker);
        self.first_push_ms.get_or_insert(now_ms);
        Admit::Accepted
    }

    /// A copy that follows its range's primary takes `worker`'s gradient for the
    /// current version because the primary took it, whatever its own rule would say;
    /// it ends the worker's idle spell, as any push does.
    pub fn take(&mut self, worker: i32, now_ms: u64) {
        self.idle.remove(&worker);
        self.contributors.insert(worker);
        self.first_push_ms.get_or_insert(now_ms);
    }

    /// A push the primary refused still ends `worker`'s idle spell.
    pub fn heard(&mut self, worker: i32) {
        self.idle.remove(&worker);
    }

    /// True under sync SGD: a version is applied when enough gradients arrived or on
    /// a timeout, which depends on when they arrive, so a copy of the shard must
    /// follow its primary's decisions ([`Versioned::follow_primary`]) rather than make
    /// its own.
    pub fn decides_by_time(&self) -> bool {
        matches!(self.mode, Mode::Sync { .. })
    }

    /// True if a copy under this rule applies versions only when its range's primary
    /// did: when another server is that primary (`primary_elsewhere`, as
    /// `Holders::followed` names the ranges) and the rule decides by time. Such a copy
    /// leaves idle notices, dead workers and timeouts to the primary.
    pub fn follows_primary(&self, primary_elsewhere: bool) -> bool {
        primary_elsewhere && self.decides_by_time()
    }

    /// Workers whose gradients the current version collected so far.
    pub fn collected(&self) -> usize {
        self.contributors.len()
    }

    /// `Some(n)` if the gradients collected (from `n` workers) must be applied now: the
    /// caller applies their mean, then calls [`Versions::advance`].
    pub fn due(&self, now_ms: u64) -> Option<usize> {
        let n = self.contributors.len();
        if n == 0 {
            return None;
        }
        let timed_out = match (self.mode, self.first_push_ms) {
            (Mode::Sync { timeout_ms, .. }, Some(t)) => timeout_ms > 0 && now_ms >= t + timeout_ms,
            _ => false,
        };
        let needed = self.needed();
        if n < needed && !timed_out {
            return None;
        }
        if n < needed {
            log::debug!(
                "version {} applied on timeout with {n} of {needed} gradients",
                self.version
            );
        }
        Some(n)
    }

    /// The collected gradients were applied: the next version starts.
    pub fn advance(&mut self) {
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
}

/// A shard that moves from version to version by a [`Versions`] rule: the rule's events
/// (a dead or idle worker, time passing), each followed by applying the version they
/// completed. `psrs train`'s shards and `psrs.torch`'s tables implement the two
/// required methods.
pub trait Versioned {
    /// The shard's rule.
    fn rule_mut(&mut self) -> &mut Versions;

    /// Applies the mean of the gradients collected from `n` workers (the caller then
    /// starts the next version).
    fn apply_collected(&mut self, n: usize);

    /// Applies the collected gradients if the rule says they are due; true if the
    /// version moved.
    fn maybe_apply(&mut self, now_ms: u64) -> bool {
        let Some(n) = self.rule_mut().due(now_ms) else {
            return false;
        };
        self.apply_collected(n);
        self.rule_mut().advance();
        true
    }

    /// Applies what the current version collected (the mean of its gradients, if
    /// any) and starts the next one, whatever the rule says: a copy that follows its
    /// primary does it when the primary did. False when nothing was collected (the
    /// version number only moves on).
    fn apply_now(&mut self) -> bool {
        let n = self.rule_mut().collected();
        if n > 0 {
            self.apply_collected(n);
        }
        self.rule_mut().advance();
        n > 0
    }

    /// A sync push that the range's primary applied first, on a copy that follows it
    /// (a backup), with what the primary answered; `take` adds the (checked) gradient
    /// to what this copy collects. The copy does what the primary did: the versions
    /// the primary applied since without a push (on timeout, a worker dead or idle)
    /// are applied first with what was collected for them, then the gradient is taken
    /// whatever this copy's rule says, and the version applied if the primary applied
    /// it on this push. So every copy applies the same gradients to the same versions.
    fn follow_primary(
        &mut self,
        worker: i32,
        version: u64,
        primary: PrimaryAnswer,
        now_ms: u64,
        take: impl FnOnce(&mut Self),
    ) -> PushOutcome {
        if !primary.taken {
            self.rule_mut().heard(worker);
            return PushOutcome::Rejected {
                current: self.rule_mut().version,
            };
        }
        while self.rule_mut().version < version {
            if !self.apply_now() {
                log::warn!(
                    "a copy: the primary moved past version {} with no gradient here",
                    self.rule_mut().version - 1
                );
            }
        }
        let current = self.rule_mut().version;
        if current > version {
            log::warn!("a copy: a gradient for version {version} the primary took, at version {current}");
            return PushOutcome::Rejected { current };
        }
        self.rule_mut().take(worker, now_ms);
        take(self);
        let applied = primary.version > current && self.apply_now();
        PushOutcome::Accepted { applied }
    }

    /// Sets the workers declared dead ([`Versions::set_dead_workers`]); true if that
    /// completed the current version.
    fn set_dead_workers(&mut self, dead: &BTreeSet<i32>, now_ms: u64) -> bool {
        self.rule_mut().set_dead_workers(dead);
        self.maybe_apply(now_ms)
    }

    /// `worker` holds no task ([`Versions::set_idle`]); true if that completed the
    /// current version.
    fn set_idle(&mut self, worker: i32, now_ms: u64) -> bool {
        self.rule_mut().set_idle(worker);
        self.maybe_apply(now_ms)
    }

    /// Applies a sync version whose timeout passed; true if the version moved.
    fn tick(&mut self, now_ms: u64) -> bool {
        self.maybe_apply(now_ms)
    }
}
