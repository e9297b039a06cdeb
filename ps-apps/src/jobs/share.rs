//! Whole workers for real-valued shares, over time. Fair time's ideal split is
//! real-valued (4.6 / 5.4 of 10 workers); rounding it once holds 5 / 5 and leaves one
//! job 8% short for good, while re-rounding a noisy estimate flaps between 5 / 5 and
//! 4 / 6. Instead each job keeps a credit: the worker-seconds it was owed,
//! `∫ (ideal − workers) dt` (the ideal of each interval as it was at its start). One
//! worker moves from the job owed least to the job owed most when the two credits are
//! 2H apart (H, the hysteresis, in worker-seconds) and the move keeps both jobs between
//! the floor and the ceiling of their ideal shares: so 4.6 / 5.4 alternates 5 / 5 for
//! 2H / 0.4 s and 4 / 6 for 2H / 0.6 s (60% and 40% of the time), each job gets its
//! ideal share on average, over any window a job is off by about 2H worker-seconds at
//! most, and an ideal that wobbles around 5.0 moves nobody. Credits are bounded by
//! ±2H (a job that cannot take a worker does not pile up a debt). When the jobs, the
//! number of workers or the ideal change so much that a job is outside its floor and
//! ceiling, the split jumps at once to the given whole split (the fair-time mode's own
//! rounding) and the credits start again from 0. Pure; time is passed in (ms).

use std::collections::BTreeMap;

/// The default hysteresis H, worker-seconds.
pub const DEFAULT_HYSTERESIS_WS: f64 = 2.0;

const EPS: f64 = 1e-9;

/// The split over time.
#[derive(Clone, Debug, PartialEq)]
pub struct TimeShare<J: Ord + Copy> {
    hysteresis_ws: f64,
    counts: BTreeMap<J, usize>,
    credit: BTreeMap<J, f64>,
    /// The ideal as of `at_ms` (it holds for the interval that starts there).
    ideal: BTreeMap<J, f64>,
    at_ms: Option<u64>,
}

impl<J: Ord + Copy> TimeShare<J> {
    /// A split moving one worker when credits are `2·hysteresis_ws` apart (at least
    /// 0.01 worker-seconds).
    pub fn new(hysteresis_ws: f64) -> TimeShare<J> {
        TimeShare {
            hysteresis_ws: if hysteresis_ws.is_finite() {
                hysteresis_ws.max(0.01)
            } else {
                DEFAULT_HYSTERESIS_WS
            },
            counts: BTreeMap::new(),
            credit: BTreeMap::new(),
            ideal: BTreeMap::new(),
            at_ms: None,
        }
    }

    /// Each job's credit (worker-seconds it is owed; for reports and tests).
    pub fn credit(&self, job: J) -> f64 {
        self.credit.get(&job).copied().unwrap_or(0.0)
    }

    /// The workers each job gets at `now_ms` for the real-valued shares `ideal` (of `n`
    /// workers): the present split, one worker moved if the credits call for it, or
    /// `whole` (a whole split summing to `n`, computed only when needed) when the
    /// present one no longer fits.
    pub fn update(
        &mut self,
        now_ms: u64,
        ideal: &BTreeMap<J, f64>,
        n: usize,
        whole: impl FnOnce() -> BTreeMap<J, usize>,
    ) -> BTreeMap<J, usize> {
        let h = self.hysteresis_ws;
        let dt = self.at_ms.map_or(0.0, |t| now_ms.saturating_sub(t) as f64 / 1000.0);
        self.at_ms = Some(now_ms);
        let same_jobs = ideal.len() == self.counts.len() && ideal.keys().all(|j| self.counts.contains_key(j));
        for (j, &c) in &self.counts {
            if let Some(&x) = self.ideal.get(j) {
                let e = self.credit.entry(*j).or_insert(0.0);
                *e = (*e + (x - c as f64) * dt).clamp(-2.0 * h, 2.0 * h);
            }
        }
        self.ideal = ideal.clone();
        let fits = same_jobs
            && self.counts.values().sum::<usize>() == n
            && ideal.iter().all(|(j, &x)| {
                let c = self.counts[j] as f64;
                c >= x.floor() - EPS && c <= x.ceil() + EPS
            });
        if !fits {
            self.counts = whole();
            self.credit.clear();
            return self.counts.clone();
        }
        // may take one worker more (below its ceiling) / give one (above its floor, and
        // keeping one while there are workers for every job)
        let takes = |j: &J| (self.counts[j] as f64) + 1.0 <= ideal[j].ceil() + EPS;
        let gives = |j: &J| self.counts[j] > 1 && (self.counts[j] as f64) - 1.0 >= ideal[j].floor() - EPS;
        let most = ideal
            .keys()
            .filter(|j| takes(j))
            .max_by(|a, b| self.credit(**a).total_cmp(&self.credit(**b)));
        let least = ideal
            .keys()
            .filter(|j| gives(j))
            .min_by(|a, b| self.credit(**a).total_cmp(&self.credit(**b)));
        if let (Some(&to), Some(&from)) = (most, least) {
            if to != from && self.credit(to) - self.credit(from) >= 2.0 * h - EPS {
                *self.counts.get_mut(&from).expect("a job") -= 1;
                *self.counts.get_mut(&to).expect("a job") += 1;
            }
        }
        self.counts.clone()
    }
}

#[cfg(test)]
#[path = "share_tests.rs"]
mod tests;
