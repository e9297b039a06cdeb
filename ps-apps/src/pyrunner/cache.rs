//! Which jobs' models a worker's runner holds: every running job whose model a runner
//! runs is warmed (loaded in the background) as soon as the worker hears of it, the
//! job the worker is assigned to first, so a worker moved to a job finds its model
//! ready; within a memory budget, the models least recently used (by a query, or since
//! they became ready) are dropped first, never the assigned job's or one still loading.
//! A model dropped for the budget, or whose load failed, is not warmed again in the
//! background: only when the worker is assigned to its job (a failed one after
//! [`RETRY_MS`]). A load that takes longer than its limit is given up (the runner is
//! killed: a loader thread cannot be stopped otherwise). Pure: the worker passes in the
//! scheduler's list of jobs, the runner's status and the time, and carries out the
//! [`Action`]s.

use super::protocol::{ModelState, ModelStatus, UserModel};
use std::collections::{BTreeMap, BTreeSet};

/// How long after a failed load the assigned job's model is tried again.
pub const RETRY_MS: u64 = 1000;

/// A running job whose model a runner runs, as the scheduler lists it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WarmJob {
    /// The job.
    pub job: u32,
    /// Its model.
    pub model: UserModel,
    /// A load that takes longer than this (ms) is given up.
    pub load_limit_ms: u64,
}

/// What the worker does to its runner.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Action {
    /// Start loading the job's model in the background.
    Warm(u32, UserModel),
    /// Forget the job's model (its job ended, or it made room under the budget).
    Drop(u32),
    /// The job's model has been loading longer than its limit: kill the runner (its
    /// other models go with it) and report the load failed.
    GiveUp(u32),
}

#[derive(Clone, Debug, PartialEq)]
struct Held {
    state: ModelState,
    /// When the worker asked for it.
    asked_ms: u64,
    /// Its last query, or when it became ready.
    last_used_ms: u64,
    /// Its memory: measured once ready, estimated while loading.
    bytes: u64,
}

/// The models a runner holds and the budget they share.
#[derive(Clone, Debug, Default)]
pub struct ModelCache {
    budget: u64,
    held: BTreeMap<u32, Held>,
    /// Sizes measured, by job (a model loaded again is expected to take as much).
    sizes: BTreeMap<u32, u64>,
    /// Jobs not warmed in the background (dropped for the budget, or no room).
    declined: BTreeSet<u32>,
    /// Jobs whose load failed, and when (reported once each).
    failed: BTreeMap<u32, u64>,
}

impl ModelCache {
    /// A cache whose ready models take at most `budget_bytes` together (0: no limit;
    /// the assigned job's model is loaded even beyond it).
    pub fn new(budget_bytes: u64) -> ModelCache {
        ModelCache {
            budget: budget_bytes,
            ..Default::default()
        }
    }

    /// The jobs whose models are ready.
    pub fn ready(&self) -> Vec<u32> {
        self.held
            .iter()
            .filter(|(_, h)| h.state == ModelState::Ready)
            .map(|(&j, _)| j)
            .collect()
    }

    /// Bytes the held models take (estimates for those loading).
    pub fn used_bytes(&self) -> u64 {
        self.held.values().map(|h| h.bytes).sum()
    }

    /// Takes in the runner's status at `now_ms` (the truth: a model it does not list is
    /// not held, e.g. after the runner was replaced). Returns the loads that failed
    /// since last seen, with their errors, each once.
    pub fn observe(&mut self, report: &[ModelStatus], now_ms: u64) -> Vec<(u32, String)> {
        let listed: BTreeSet<u32> = report.iter().map(|m| m.job).collect();
        self.held.retain(|j, _| listed.contains(j));
        let mut failures = Vec::new();
        for m in report {
            let estimate = self.estimate(m.job);
            let h = self.held.entry(m.job).or_insert(Held {
                state: ModelState::Loading,
                asked_ms: now_ms,
                last_used_ms: now_ms,
                bytes: estimate,
            });
            if m.state == ModelState::Ready && h.state != ModelState::Ready {
                h.last_used_ms = now_ms.saturating_sub(m.ready_ago_ms.unwrap_or(0));
            }
            if m.state == ModelState::Ready {
                h.bytes = m.bytes;
                self.sizes.insert(m.job, m.bytes);
            }
            if m.state == ModelState::Failed {
                h.bytes = 0;
                if h.state != ModelState::Failed || !self.failed.contains_key(&m.job) {
                    self.failed.insert(m.job, now_ms);
                    failures.push((m.job, m.error.clone().unwrap_or_else(|| "the load failed".into())));
                }
            }
            h.state = m.state;
        }
        failures
    }

    /// Asking the runner to load `job`'s model failed at `now_ms` (e.g. the runner did
    /// not start): counted as a failed load.
    pub fn failed(&mut self, job: u32, now_ms: u64) {
        self.held.remove(&job);
        self.failed.insert(job, now_ms);
    }

    /// A query of `job` ran at `now_ms` (its model is the most recently used).
    pub fn used(&mut self, job: u32, now_ms: u64) {
        if let Some(h) = self.held.get_mut(&job) {
            h.last_used_ms = h.last_used_ms.max(now_ms);
        }
    }

    fn estimate(&self, job: u32) -> u64 {
        if let Some(&b) = self.sizes.get(&job) {
            return b;
        }
        let known: Vec<u64> = self.sizes.values().copied().collect();
        if known.is_empty() {
            0
        } else {
            known.iter().sum::<u64>() / known.len() as u64
        }
    }

    /// Ready models that may be dropped for room, least recently used first.
    fn evictable(&self, assigned: Option<u32>) -> Vec<u32> {
        let mut v: Vec<(u64, u32)> = self
            .held
            .iter()
            .filter(|(&j, h)| h.state == ModelState::Ready && Some(j) != assigned)
            .map(|(&j, h)| (h.last_used_ms, j))
            .collect();
        v.sort();
        v.into_iter().map(|(_, j)| j).collect()
    }

    fn evict(&mut self, job: u32, out: &mut Vec<Action>) {
        self.held.remove(&job);
        self.declined.insert(job);
        out.push(Action::Drop(job));
    }

    /// What to do at `now_ms` for the scheduler's running jobs `catalog` (in its order)
    /// when the worker is assigned to `assigned`: drop the models of jobs that ended,
    /// give up loads past their limit, drop the least recently used models while the
    /// budget is exceeded, and warm the models not held (the assigned job's first).
    pub fn plan(&mut self, catalog: &[WarmJob], assigned: Option<u32>, now_ms: u64) -> Vec<Action> {
        let mut out = Vec::new();
        let wanted: BTreeMap<u32, &WarmJob> = catalog.iter().map(|w| (w.job, w)).collect();
        for job in self.held.keys().copied().collect::<Vec<_>>() {
            if !wanted.contains_key(&job) {
                self.held.remove(&job);
                out.push(Action::Drop(job));
            }
        }
        self.declined.retain(|j| wanted.contains_key(j));
        self.failed.retain(|j, _| wanted.contains_key(j));
        self.sizes.retain(|j, _| wanted.contains_key(j));
        let late = self.held.iter().find(|(j, h)| {
            h.state == ModelState::Loading && now_ms.saturating_sub(h.asked_ms) > wanted[*j].load_limit_ms
        });
        if let Some((&job, _)) = late {
            self.held.clear();
            self.failed.insert(job, now_ms);
            out.push(Action::GiveUp(job));
            return out;
        }
        if self.budget > 0 {
            for job in self.evictable(assigned) {
                if self.used_bytes() <= self.budget {
                    break;
                }
                self.evict(job, &mut out);
            }
        }
        let order = assigned
            .filter(|a| wanted.contains_key(a))
            .into_iter()
            .chain(catalog.iter().map(|w| w.job).filter(|&j| Some(j) != assigned));
        for job in order.collect::<Vec<_>>() {
            let urgent = Some(job) == assigned;
            let retry = urgent && self.failed.get(&job).is_some_and(|&t| now_ms >= t + RETRY_MS);
            if let Some(h) = self.held.get(&job) {
                if !(h.state == ModelState::Failed && retry) {
                    continue;
                }
            } else if (self.failed.contains_key(&job) && !retry) || (self.declined.contains(&job) && !urgent) {
                continue;
            }
            let need = self.estimate(job);
            if self.budget > 0 && self.used_bytes() + need > self.budget {
                let mut room = self.budget.saturating_sub(self.used_bytes());
                let mut victims = Vec::new();
                for v in self.evictable(assigned) {
                    if room >= need {
                        break;
                    }
                    room += self.held[&v].bytes;
                    victims.push(v);
                }
                if room < need && !urgent {
                    self.declined.insert(job);
                    continue;
                }
                for v in victims {
                    self.evict(v, &mut out);
                }
            }
            self.held.insert(
                job,
                Held {
                    state: ModelState::Loading,
                    asked_ms: now_ms,
                    last_used_ms: now_ms,
                    bytes: need,
                },
            );
            self.failed.remove(&job);
            self.declined.remove(&job);
            out.push(Action::Warm(job, wanted[&job].model.clone()));
        }
        out
    }
}

#[cfg(test)]
#[path = "cache_tests.rs"]
mod tests;
