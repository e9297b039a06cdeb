//! The cluster over time, for the dashboard's charts: once a second, each running
//! job's query rate and workers and each worker's job; and events (a node died, a
//! scheduler took over, a job was submitted or ended) with their times. Bounded (the
//! last hour); pure: the scheduler passes the time and the figures in. Not stored: a
//! scheduler that takes over starts a new history, marked by its takeover event.

use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet, VecDeque};

/// How often a sample is taken.
pub const EVERY_MS: u64 = 1000;
/// Samples (and events) kept.
pub const CAP: usize = 3600;

/// What happened.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum EventKind {
    /// A node was declared dead.
    NodeDead,
    /// This scheduler became the active one.
    Takeover,
    /// A job was submitted.
    Submitted,
    /// A job ended (done, failed or cancelled).
    Ended,
}

/// An event on the time axis.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Event {
    /// When, seconds since the Unix epoch.
    pub t: f64,
    /// What kind.
    pub kind: EventKind,
    /// One line, e.g. `worker 13 died`.
    pub text: String,
}

/// One running job at one sample.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct JobPoint {
    /// Queries finished per second over the last window.
    pub queries_per_s: f64,
    /// Workers allocated.
    pub workers: usize,
}

#[derive(Clone, Debug, PartialEq)]
struct Sample {
    t_ms: u64,
    jobs: BTreeMap<String, JobPoint>,
    workers: BTreeMap<i32, Option<String>>,
}

/// One job's series, aligned with [`Chart::t`] (null where it was not running).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct JobSeries {
    /// Queries per second.
    pub queries_per_s: Vec<Option<f64>>,
    /// Workers.
    pub workers: Vec<Option<f64>>,
}

/// The history as `GET /history` answers it (columns for the charts).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Chart {
    /// Sample times, seconds since the Unix epoch.
    pub t: Vec<f64>,
    /// Each job's series, by id.
    pub jobs: BTreeMap<String, JobSeries>,
    /// Each worker's job at each sample (null: idle, or not alive), by node id.
    pub worker_jobs: BTreeMap<String, Vec<Option<String>>>,
    /// The events, oldest first.
    pub events: Vec<Event>,
}

/// The samples and events.
#[derive(Clone, Debug, Default)]
pub struct History {
    samples: VecDeque<Sample>,
    events: VecDeque<Event>,
}

impl History {
    /// Whether a sample is due at `now_ms`.
    pub fn due(&self, now_ms: u64) -> bool {
        self.samples.back().is_none_or(|s| now_ms >= s.t_ms + EVERY_MS)
    }

    /// Takes a sample: the running jobs' points, each live worker's job.
    pub fn sample(&mut self, now_ms: u64, jobs: BTreeMap<String, JobPoint>, workers: BTreeMap<i32, Option<String>>) {
        self.samples.push_back(Sample {
            t_ms: now_ms,
            jobs,
            workers,
        });
        while self.samples.len() > CAP {
            self.samples.pop_front();
        }
    }

    /// Records an event.
    pub fn event(&mut self, now_ms: u64, kind: EventKind, text: String) {
        self.events.push_back(Event {
            t: now_ms as f64 / 1000.0,
            kind,
            text,
        });
        while self.events.len() > CAP {
            self.events.pop_front();
        }
    }

    /// The columns for the charts.
    pub fn chart(&self) -> Chart {
        let n = self.samples.len();
        let ids: BTreeSet<&String> = self.samples.iter().flat_map(|s| s.jobs.keys()).collect();
        let workers: BTreeSet<i32> = self.samples.iter().flat_map(|s| s.workers.keys().copied()).collect();
        let mut jobs = BTreeMap::new();
        for id in ids {
            let mut js = JobSeries {
                queries_per_s: Vec::with_capacity(n),
                workers: Vec::with_capacity(n),
            };
            for s in &self.samples {
                let p = s.jobs.get(id);
                js.queries_per_s.push(p.map(|p| p.queries_per_s));
                js.workers.push(p.map(|p| p.workers as f64));
            }
            jobs.insert(id.clone(), js);
        }
        let worker_jobs = workers
            .into_iter()
            .map(|w| {
                let col = self
                    .samples
                    .iter()
                    .map(|s| s.workers.get(&w).cloned().flatten())
                    .collect();
                (w.to_string(), col)
            })
            .collect();
        Chart {
            t: self.samples.iter().map(|s| s.t_ms as f64 / 1000.0).collect(),
            jobs,
            worker_jobs,
            events: self.events.iter().cloned().collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn point(q: f64, w: usize) -> JobPoint {
        JobPoint {
            queries_per_s: q,
            workers: w,
        }
    }

    #[test]
    fn series_are_aligned_with_gaps_where_a_job_did_not_run() {
        let mut h = History::default();
        assert!(h.due(0));
        h.sample(
            1_000,
            [("j1".to_string(), point(5.0, 2))].into(),
            [(9, Some("j1".to_string())), (11, None)].into(),
        );
        assert!(!h.due(1_999) && h.due(2_000));
        h.event(1_500, EventKind::Submitted, "j2 submitted".into());
        h.sample(
            2_000,
            [("j1".to_string(), point(4.0, 1)), ("j2".to_string(), point(1.0, 1))].into(),
            [(9, Some("j1".to_string())), (11, Some("j2".to_string()))].into(),
        );
        h.event(2_500, EventKind::NodeDead, "worker 11 died".into());
        h.sample(
            3_000,
            [("j2".to_string(), point(2.0, 1))].into(),
            [(9, Some("j2".to_string()))].into(),
        );
        let c = h.chart();
        assert_eq!(c.t, vec![1.0, 2.0, 3.0]);
        assert_eq!(c.jobs["j1"].queries_per_s, vec![Some(5.0), Some(4.0), None]);
        assert_eq!(c.jobs["j2"].workers, vec![None, Some(1.0), Some(1.0)]);
        assert_eq!(c.worker_jobs["11"], vec![None, Some("j2".to_string()), None]);
        assert_eq!(c.events.len(), 2);
        assert_eq!((c.events[1].t, c.events[1].kind), (2.5, EventKind::NodeDead));
        let json = serde_json::to_value(&c).unwrap();
        assert_eq!(json["events"][1]["kind"], "node-dead");
    }

    #[test]
    fn bounded() {
        let mut h = History::default();
        for i in 0..(CAP as u64 + 10) {
            h.sample(i * EVERY_MS, BTreeMap::new(), BTreeMap::new());
            h.event(i, EventKind::Ended, String::new());
        }
        let c = h.chart();
        assert_eq!((c.t.len(), c.events.len()), (CAP, CAP));
        assert_eq!(c.t[0], 10.0);
    }
}
