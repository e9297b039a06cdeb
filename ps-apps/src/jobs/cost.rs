//! A job's cost for fair time: its seconds per query on each of its workers (the
//! scheduler's hand-out to the worker's report: the worker's whole cycle per query),
//! smoothed per worker by an exponentially weighted moving average over time (a query
//! `t` seconds old weighs `exp(-t/τ)`, whatever the queries' pace), and averaged over
//! the workers with equal weight, each worker's weight fading once it stops working on
//! the job (a worker that left 3τ ago counts 5%). Per worker, so the few queries of a
//! worker that just moved in (or a slower machine) weigh as one worker's, not as the
//! whole job's; smoothed, so one slow query does not move workers. Pure; time is passed
//! in (ms).

use super::assign::WorkerId;
use std::collections::BTreeMap;

/// The default time constant τ of the smoothing, ms.
pub const DEFAULT_TAU_MS: u64 = 20_000;

/// One worker's smoothed seconds per query.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Ewma {
    /// Σ weight·seconds, as of `at_ms`.
    sum: f64,
    /// Σ weight, as of `at_ms`.
    weight: f64,
    at_ms: u64,
}

impl Ewma {
    fn decay(&self, now_ms: u64, tau_ms: u64) -> f64 {
        (-(now_ms.saturating_sub(self.at_ms) as f64) / tau_ms.max(1) as f64).exp()
    }
}

/// A job's smoothed seconds per query, per worker.
#[derive(Clone, Debug, PartialEq)]
pub struct CostEstimate {
    tau_ms: u64,
    per_worker: BTreeMap<WorkerId, Ewma>,
}

impl Default for CostEstimate {
    fn default() -> Self {
        CostEstimate::new(DEFAULT_TAU_MS)
    }
}

impl CostEstimate {
    /// An estimate smoothing with time constant `tau_ms`.
    pub fn new(tau_ms: u64) -> CostEstimate {
        CostEstimate {
            tau_ms: tau_ms.max(1),
            per_worker: BTreeMap::new(),
        }
    }

    /// `worker` finished a query at `now_ms` that took it `seconds` (non-finite or
    /// negative values are ignored).
    pub fn record(&mut self, worker: WorkerId, now_ms: u64, seconds: f64) {
        if !seconds.is_finite() || seconds < 0.0 {
            return;
        }
        let tau = self.tau_ms;
        let e = self.per_worker.entry(worker).or_insert(Ewma {
            sum: 0.0,
            weight: 0.0,
            at_ms: now_ms,
        });
        let d = e.decay(now_ms, tau);
        e.sum = e.sum * d + seconds;
        e.weight = e.weight * d + 1.0;
        e.at_ms = e.at_ms.max(now_ms);
    }

    /// Forgets `worker` (it died).
    pub fn forget(&mut self, worker: WorkerId) {
        self.per_worker.remove(&worker);
    }

    /// One worker's smoothed seconds per query.
    pub fn worker(&self, worker: WorkerId) -> Option<f64> {
        self.per_worker
            .get(&worker)
            .filter(|e| e.weight > 0.0)
            .map(|e| e.sum / e.weight)
    }

    /// The job's seconds per query at `now_ms`: the mean of its workers' smoothed
    /// figures, each weighing `min(1, its decayed weight)` (a worker with a query in the
    /// last τ counts fully, one gone for long fades out); None before any query.
    pub fn seconds_per_query(&self, now_ms: u64) -> Option<f64> {
        let (mut num, mut den) = (0.0, 0.0);
        for e in self.per_worker.values().filter(|e| e.weight > 0.0) {
            let w = (e.weight * e.decay(now_ms, self.tau_ms)).min(1.0);
            num += w * e.sum / e.weight;
            den += w;
        }
        (den > 1e-12).then(|| num / den)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: Option<f64>, b: f64) -> bool {
        a.is_some_and(|a| (a - b).abs() < 1e-9)
    }

    #[test]
    fn smoothing_follows_time_not_the_number_of_queries() {
        let mut c = CostEstimate::new(10_000);
        assert_eq!(c.seconds_per_query(0), None);
        c.record(9, 0, 2.0);
        assert!(close(c.seconds_per_query(0), 2.0));
        // one slow query moves the estimate by its weight only
        c.record(9, 1_000, 2.0);
        c.record(9, 2_000, 8.0);
        let w = [(-0.2f64).exp(), (-0.1f64).exp(), 1.0];
        let want = (2.0 * w[0] + 2.0 * w[1] + 8.0) / (w[0] + w[1] + w[2]);
        assert!(close(c.worker(9), want), "{:?} {want}", c.worker(9));
        // a τ later, a new cost dominates: 1 - exp(-1) of the way after a τ of queries
        for k in 1..=100 {
            c.record(9, 2_000 + 100 * k, 4.0);
        }
        let v = c.worker(9).unwrap();
        assert!((3.9..4.1).contains(&v), "{v}");
        // the same history sampled twice as often gives the same figure
        let (mut a, mut b) = (CostEstimate::new(10_000), CostEstimate::new(10_000));
        for k in 0..200u64 {
            a.record(1, k * 100, if k < 100 { 1.0 } else { 3.0 });
        }
        for k in 0..400u64 {
            b.record(1, k * 50, if k < 200 { 1.0 } else { 3.0 });
        }
        let (x, y) = (a.worker(1).unwrap(), b.worker(1).unwrap());
        assert!((x - y).abs() < 0.02, "{x} {y}");
    }

    #[test]
    fn workers_weigh_alike_and_those_gone_fade() {
        let mut c = CostEstimate::new(10_000);
        // worker 9 finished 10 queries of 1 s, worker 11 (just moved in) one of 3 s
        for k in 0..10 {
            c.record(9, 1_000 * k, 1.0);
        }
        c.record(11, 9_000, 3.0);
        assert!(
            close(c.seconds_per_query(9_000), 2.0),
            "{:?}",
            c.seconds_per_query(9_000)
        );
        // worker 11 leaves the job; 30 s later it weighs exp(-3)
        for k in 10..40 {
            c.record(9, 1_000 * k, 1.0);
        }
        let v = c.seconds_per_query(39_000).unwrap();
        let w = (-3.0f64).exp();
        assert!((v - (1.0 + 3.0 * w) / (1.0 + w)).abs() < 1e-3, "{v}");
        c.forget(11);
        assert!(close(c.seconds_per_query(39_000), 1.0));
        // bad figures are ignored
        c.record(9, 39_500, f64::NAN);
        c.record(9, 39_500, -1.0);
        assert!(close(c.seconds_per_query(39_000), 1.0));
    }
}
