//! A cluster worker's warm-up of the models its Python runner runs: the scheduler's
//! list of running jobs whose models a runner runs, the job the worker is assigned to,
//! and the runner's status go into the [`ModelCache`]'s decisions, which this shell
//! carries out on the runner (warm, drop, or kill a runner whose load hung) before each
//! request to the scheduler; the runner's status goes with the request.

use super::spec::InferSpec;
use super::table::JobNum;
use super::user_infer::LOAD_TIMEOUT;
use crate::pyrunner::{Action, ModelCache, ModelStatus, RunnerSlot, WarmJob};
use std::time::{Duration, Instant};

/// How long a request to the runner about its models (warm, drop, status) may take; the
/// runner's main thread answers them while its loader thread builds models.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(60);

/// The worker's side of warming models.
pub struct Warmup {
    cache: ModelCache,
    catalog: Vec<WarmJob>,
    version: u64,
    assigned: Option<JobNum>,
    started: Instant,
}

impl Warmup {
    /// No list yet (version 0), models within `budget_bytes` (0: no limit).
    pub fn new(budget_bytes: u64) -> Warmup {
        Warmup {
            cache: ModelCache::new(budget_bytes),
            catalog: Vec::new(),
            version: 0,
            assigned: None,
            started: Instant::now(),
        }
    }

    fn now_ms(&self) -> u64 {
        self.started.elapsed().as_millis() as u64
    }

    /// The version of the scheduler's list this worker has.
    pub fn version(&self) -> u64 {
        self.version
    }

    /// The scheduler's list of jobs to warm, and its version.
    pub fn set_catalog(&mut self, version: u64, jobs: &[(JobNum, InferSpec)]) {
        self.version = version;
        self.catalog = jobs
            .iter()
            .filter_map(|(job, spec)| {
                spec.user_model().map(|model| WarmJob {
                    job: *job,
                    model,
                    load_limit_ms: Duration::from_millis(spec.task_timeout_ms)
                        .max(LOAD_TIMEOUT)
                        .as_millis() as u64,
                })
            })
            .collect();
    }

    /// The job the worker works on (its model is never dropped for room, and is warmed
    /// first).
    pub fn assign(&mut self, job: Option<JobNum>) {
        self.assigned = job;
    }

    /// A query of `job` just ran.
    pub fn used(&mut self, job: JobNum) {
        let now = self.now_ms();
        self.cache.used(job, now);
    }

    /// Brings the runner's models in line with the list: asks the runner what it holds,
    /// carries out the cache's decisions, and returns what the runner holds (for the
    /// scheduler) and the loads that failed since last time (job, one-line reason).
    pub fn step(&mut self, slot: &mut RunnerSlot) -> (Vec<ModelStatus>, Vec<(JobNum, String)>) {
        let mut failed = Vec::new();
        let report = match slot.status(REQUEST_TIMEOUT) {
            Ok(s) => s.models,
            Err(e) => {
                log::warn!("the Python runner's status: {e}");
                Vec::new()
            }
        };
        let now = self.now_ms();
        failed.extend(self.cache.observe(&report, now));
        let actions = self.cache.plan(&self.catalog, self.assigned, now);
        if actions.is_empty() {
            return (report, failed);
        }
        for a in actions {
            match a {
                Action::Warm(job, model) => {
                    log::info!("job j{job}: warming its model in the Python runner");
                    if let Err(e) = slot.warm(job, &model, LOAD_TIMEOUT) {
                        log::warn!("job j{job}: warming its model: {e}");
                        self.cache.failed(job, self.now_ms());
                        failed.push((job, e.to_string()));
                    }
                }
                Action::Drop(job) => {
                    log::info!("job j{job}: its model leaves the Python runner");
                    if let Err(e) = slot.drop_model(job, REQUEST_TIMEOUT) {
                        log::warn!("job j{job}: dropping its model: {e}");
                    }
                }
                Action::GiveUp(job) => {
                    let limit = self
                        .catalog
                        .iter()
                        .find(|w| w.job == job)
                        .map_or(0, |w| w.load_limit_ms);
                    let why = format!("loading the model took longer than {:.0} s", limit as f64 / 1000.0);
                    log::warn!("job j{job}: {why}; the Python runner is killed");
                    slot.kill();
                    failed.push((job, why));
                }
            }
        }
        let report = slot.status(REQUEST_TIMEOUT).map(|s| s.models).unwrap_or_default();
        let now = self.now_ms();
        failed.extend(self.cache.observe(&report, now));
        (report, failed)
    }
}
