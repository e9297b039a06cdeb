//! A job's figures: what it did (tasks, passes, loss and accuracy per pass, its query
//! rate), tallied while it runs and kept in the job table once it ended, so a finished
//! job shows what it did rather than zeros. Pure: the scheduler feeds it finished tasks
//! and evaluations.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// One pass of a training job.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct PassFigures {
    /// The pass (1 = the first).
    pub pass: u64,
    /// Mean training loss over the pass's examples (null when no task of the pass
    /// reported one).
    pub loss: Option<f64>,
    /// Test accuracy of the model after the pass (null until evaluated, or without a
    /// test set).
    pub accuracy: Option<f64>,
}

/// What a job did, as `GET /jobs/ID` shows it. A query is a task (a batch of records).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct JobFigures {
    /// Tasks finished (over every pass).
    pub tasks_done: u64,
    /// Tasks in all (over every pass).
    pub tasks_total: u64,
    /// Tasks handed out: above `tasks_done` at the end only when a task ran twice (a
    /// timeout, a lost reply, a dead worker's task run again).
    pub tasks_dispatched: u64,
    /// Passes completed.
    pub passes_done: u64,
    /// Passes in all.
    pub passes: u64,
    /// Queries finished per second: over the last 10 s while the job runs (see
    /// [`super::rate::RateWindow`]), over its whole run once it ended.
    pub queries_per_s: f64,
    /// Mean seconds per query: over the last 10 s while it runs, over its whole run
    /// once it ended; null before the first finished query.
    pub seconds_per_query: Option<f64>,
    /// When its first query finished (ms since the Unix epoch).
    pub first_query_ms: Option<u64>,
    /// When its first query was handed to a worker (ms since the Unix epoch).
    #[serde(default)]
    pub first_task_ms: Option<u64>,
    /// Training jobs: each pass's loss and test accuracy, in pass order.
    pub per_pass: Vec<PassFigures>,
}

impl JobFigures {
    /// The loss of the latest pass that has one.
    pub fn last_loss(&self) -> Option<f64> {
        self.per_pass.iter().rev().find_map(|p| p.loss)
    }
}

/// Running sums of one pass.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
struct PassTally {
    loss_sum: f64,
    examples: u64,
    accuracy: Option<f64>,
}

/// A running job's tallies (not stored: after a scheduler restart the passes done
/// before it keep the figures saved in the table).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Tally {
    passes: BTreeMap<u64, PassTally>,
    /// Tasks handed out.
    pub dispatched: u64,
    /// Sum of the finished queries' times, ms.
    took_sum_ms: u64,
    /// Queries finished.
    finished: u64,
    /// When the first query finished.
    pub first_query_ms: Option<u64>,
    /// When the first query was handed out.
    pub first_task_ms: Option<u64>,
}

impl Tally {
    /// A tally going on from figures saved before (a resumed job).
    pub fn resume(saved: &JobFigures) -> Tally {
        let mut t = Tally::default();
        for p in &saved.per_pass {
            let e = t.passes.entry(p.pass.saturating_sub(1)).or_default();
            e.accuracy = p.accuracy;
            if let Some(l) = p.loss {
                // one example standing for the pass: its mean loss carries over
                e.loss_sum = l;
                e.examples = 1;
            }
        }
        t.first_query_ms = saved.first_query_ms;
        t.first_task_ms = saved.first_task_ms;
        t
    }

    /// A query was handed out at `now_ms`.
    pub fn handed_out(&mut self, now_ms: u64) {
        self.dispatched += 1;
        self.first_task_ms.get_or_insert(now_ms);
    }

    /// A query of pass `epoch` (from 0) finished at `now_ms` after `took_ms`, with
    /// `examples` examples and a loss summing to `loss_sum` (training; 0 otherwise).
    pub fn finished(&mut self, epoch: u64, now_ms: u64, took_ms: u64, examples: u64, loss_sum: f64) {
        self.first_query_ms.get_or_insert(now_ms);
        self.took_sum_ms += took_ms;
        self.finished += 1;
        let p = self.passes.entry(epoch).or_default();
        p.loss_sum += loss_sum;
        p.examples += examples;
    }

    /// The test accuracy after pass `epoch` (from 0).
    pub fn evaluated(&mut self, epoch: u64, accuracy: f64) {
        self.passes.entry(epoch).or_default().accuracy = Some(accuracy);
    }

    /// Each pass seen, in order.
    pub fn per_pass(&self) -> Vec<PassFigures> {
        self.passes
            .iter()
            .map(|(&e, p)| PassFigures {
                pass: e + 1,
                loss: (p.examples > 0).then(|| p.loss_sum / p.examples as f64),
                accuracy: p.accuracy,
            })
            .collect()
    }

    /// Mean seconds per query over the whole run.
    pub fn mean_seconds_per_query(&self) -> Option<f64> {
        (self.finished > 0).then(|| self.took_sum_ms as f64 / self.finished as f64 / 1000.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passes_average_their_own_examples() {
        let mut t = Tally::default();
        t.finished(0, 100, 50, 10, 20.0);
        t.finished(0, 150, 150, 30, 30.0);
        t.finished(1, 200, 100, 10, 5.0);
        t.evaluated(0, 0.75);
        let p = t.per_pass();
        assert_eq!(p.len(), 2);
        assert_eq!((p[0].pass, p[0].loss, p[0].accuracy), (1, Some(1.25), Some(0.75)));
        assert_eq!((p[1].pass, p[1].loss, p[1].accuracy), (2, Some(0.5), None));
        assert_eq!(t.first_query_ms, Some(100));
        assert_eq!(t.mean_seconds_per_query(), Some(0.1));
        let f = JobFigures {
            per_pass: p,
            ..Default::default()
        };
        assert_eq!(f.last_loss(), Some(0.5));
        let back = Tally::resume(&f);
        assert_eq!(back.per_pass(), f.per_pass, "a resumed tally shows the saved passes");
    }
}
