//! A cluster server: polls the scheduler for the training jobs whose shards it should
//! hold, starts a [`TrainServer`] on each new job's own KV app (its parameters
//! initialized from the job's seed, or restored from the job's checkpoint if this node
//! replaced a dead server), keeps each job's sync quorum at the number of workers the
//! job has, and drops a job's shards (freeing their memory) a few seconds after the
//! job left the list, so tasks in flight on a cancelled job end normally.

use super::error::JobsError;
use super::table::JobNum;
use super::wire::{job_app, JobsRequest, JobsResponse, ServerJob};
use super::worker::{call, PATIENCE};
use super::UpdateRule;
use crate::train::layout::Layout;
use crate::train::server::{ServerOptions, TrainServer};
use crate::train::shard::Sgd;
use crate::train::versions::Mode;
use ps_core::Postoffice;
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long a job's shards outlive its leaving the scheduler's list.
pub const GRACE: Duration = Duration::from_secs(5);

struct Hosted {
    _server: TrainServer,
    workers: Arc<AtomicUsize>,
    gone_since: Option<Instant>,
}

fn start(po: &Arc<Postoffice>, work_dir: &Path, j: &ServerJob) -> Result<Hosted, JobsError> {
    let s = &j.spec;
    let mode = match s.mode {
        UpdateRule::Sync => Mode::Sync {
            grads_per_version: j.workers.max(1),
            timeout_ms: s.sync_timeout_ms,
        },
        UpdateRule::Async => Mode::Async,
        UpdateRule::Bounded => Mode::Bounded { staleness: s.staleness },
    };
    let workers = Arc::new(AtomicUsize::new(j.workers));
    let opts = ServerOptions {
        mode,
        sgd: Sgd {
            lr: s.lr,
            momentum: s.momentum,
            weight_decay: s.weight_decay,
        },
        checkpoint_dir: Some(work_dir.join(format!("job-{}-checkpoints", j.job))),
        checkpoint_every: s.checkpoint_every.max(1),
        quorum: Some(Arc::clone(&workers)),
    };
    let layout = Layout::new(j.model.num_params(), po.num_servers());
    let server = TrainServer::start(po, job_app(j.job), &layout, &j.model.init(s.seed), opts)?;
    Ok(Hosted {
        _server: server,
        workers,
        gone_since: None,
    })
}

/// Runs the server until the scheduler stays unreachable for [`PATIENCE`]
/// ([`JobsError::Train`] of kind `TrainError::Unanswered`).
pub fn run(po: &Arc<Postoffice>, work_dir: &Path) -> Result<(), JobsError> {
    let app = super::worker::client(po)?;
    let mut hosted: BTreeMap<JobNum, Hosted> = BTreeMap::new();
    loop {
        let hosting = hosted
            .iter()
            .filter(|(_, h)| h.gone_since.is_none())
            .map(|(&j, _)| j)
            .collect();
        match call(&app, &JobsRequest::ServerPoll { hosting }, PATIENCE)? {
            JobsResponse::Servers(jobs) => {
                for j in &jobs {
                    match hosted.get_mut(&j.job) {
                        Some(h) => {
                            h.workers.store(j.workers, Ordering::Relaxed);
                            h.gone_since = None;
                        }
                        None => match start(po, work_dir, j) {
                            Ok(h) => {
                                log::info!("job j{}: serving its shard ({})", j.job, j.model.name());
                                hosted.insert(j.job, h);
                            }
                            Err(e) => log::error!("job j{}: cannot serve its shard: {e}", j.job),
                        },
                    }
                }
                let now = Instant::now();
                for (num, h) in hosted.iter_mut() {
                    if !jobs.iter().any(|j| j.job == *num) {
                        h.gone_since.get_or_insert(now);
                    }
                }
                let before = hosted.len();
                hosted.retain(|num, h| {
                    let keep = !matches!(h.gone_since, Some(t) if now.duration_since(t) >= GRACE);
                    if !keep {
                        log::info!("job j{num} ended: its shard is freed");
                    }
                    keep
                });
                if hosted.len() != before {
                    log::debug!("{} job shard(s) held", hosted.len());
                }
            }
            JobsResponse::Error(e) => log::warn!("scheduler: {e}"),
            other => log::warn!("unexpected scheduler answer {other:?}"),
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}
