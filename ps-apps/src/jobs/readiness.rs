//! Where a running job's model is ready: each worker's Python runner reports the
//! models it holds with every request, and the scheduler keeps, per job and worker,
//! how far the load got, when the model became ready (the scheduler's clock: the
//! report's age subtracted) and what the load cost. A worker is given the job's
//! queries only where the model is ready. Pure; time is passed in (ms).

use super::assign::WorkerId;
use super::view::ModelView;
use crate::pyrunner::{ModelState, ModelStatus};
use std::collections::BTreeMap;

/// One job's model on one worker.
#[derive(Clone, Debug, PartialEq)]
struct OnWorker {
    status: ModelStatus,
    /// When it became ready, ms since the Unix epoch.
    ready_ms: Option<u64>,
}

/// One job's model on every worker that holds it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Readiness {
    on: BTreeMap<WorkerId, OnWorker>,
    first_ready_ms: Option<u64>,
}

impl Readiness {
    /// `worker` reported at `now_ms` that its runner holds the model as `status` (None:
    /// it does not hold it, e.g. dropped for room or its runner was replaced).
    pub fn report(&mut self, worker: WorkerId, status: Option<&ModelStatus>, now_ms: u64) {
        let Some(s) = status else {
            self.on.remove(&worker);
            return;
        };
        let was_ready = self
            .on
            .get(&worker)
            .and_then(|o| o.ready_ms.filter(|_| o.status.state == ModelState::Ready));
        let ready_ms = match s.state {
            ModelState::Ready => Some(was_ready.unwrap_or_else(|| now_ms.saturating_sub(s.ready_ago_ms.unwrap_or(0)))),
            _ => None,
        };
        if let Some(t) = ready_ms {
            self.first_ready_ms = Some(self.first_ready_ms.map_or(t, |f| f.min(t)));
        }
        self.on.insert(
            worker,
            OnWorker {
                status: s.clone(),
                ready_ms,
            },
        );
    }

    /// Whether `worker`'s runner has the model ready.
    pub fn is_ready(&self, worker: WorkerId) -> bool {
        self.on
            .get(&worker)
            .is_some_and(|o| o.status.state == ModelState::Ready)
    }

    /// Whether any worker has it ready.
    pub fn any_ready(&self) -> bool {
        self.on.values().any(|o| o.status.state == ModelState::Ready)
    }

    /// The state on `worker`, if its runner holds the model.
    pub fn state(&self, worker: WorkerId) -> Option<ModelState> {
        self.on.get(&worker).map(|o| o.status.state)
    }

    /// Forgets `worker` (it died).
    pub fn forget(&mut self, worker: WorkerId) {
        self.on.remove(&worker);
    }

    /// When a worker first had the model ready (kept after that worker is gone).
    pub fn first_ready_ms(&self) -> Option<u64> {
        self.first_ready_ms
    }

    /// The model on each worker, by worker.
    pub fn views(&self) -> Vec<ModelView> {
        self.on
            .iter()
            .map(|(&w, o)| ModelView {
                worker: w,
                state: o.status.state,
                ready_ms: o.ready_ms,
                load_s: o.status.load_s,
                cpu_s: o.status.cpu_s,
                bytes: o.status.bytes,
                rss_growth: o.status.rss_growth,
                error: o.status.error.clone(),
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn st(state: ModelState, ago: Option<u64>) -> ModelStatus {
        ModelStatus {
            job: 2,
            state,
            error: None,
            bytes: 100,
            rss_growth: 200,
            load_s: 3.0,
            cpu_s: 2.0,
            ready_ago_ms: ago,
        }
    }

    #[test]
    fn ready_times_are_the_schedulers_and_kept_while_ready() {
        let mut r = Readiness::default();
        r.report(9, Some(&st(ModelState::Loading, None)), 1_000);
        assert!(!r.is_ready(9) && !r.any_ready());
        assert_eq!(r.state(9), Some(ModelState::Loading));
        // ready 300 ms before the worker said so
        r.report(9, Some(&st(ModelState::Ready, Some(300))), 5_000);
        r.report(11, Some(&st(ModelState::Ready, Some(0))), 5_500);
        r.report(9, Some(&st(ModelState::Ready, Some(2_300))), 7_000);
        let v = r.views();
        assert_eq!((v[0].worker, v[0].ready_ms, v[0].load_s), (9, Some(4_700), 3.0));
        assert_eq!((v[1].worker, v[1].ready_ms), (11, Some(5_500)));
        assert_eq!(r.first_ready_ms(), Some(4_700));
        // dropped, then loaded again: a new ready time; the first stays
        r.report(9, None, 8_000);
        assert!(!r.is_ready(9));
        r.report(9, Some(&st(ModelState::Ready, Some(100))), 9_000);
        assert_eq!(r.views()[0].ready_ms, Some(8_900));
        r.forget(9);
        r.forget(11);
        assert!(r.views().is_empty());
        assert_eq!(r.first_ready_ms(), Some(4_700));
    }
}
