//! A job's query rate over the last 10 seconds: each finished query is
//! recorded with the time it took; seconds per query is their mean over the window, and
//! queries per second their count over the window. A job whose queries take longer than
//! the window is not shown at 0 while it progresses: with fewer than two queries in
//! the window, the rate is that of the interval between the last two (decaying while
//! no new one finishes) and seconds per query the last one's. Time is passed in (ms).

use std::collections::VecDeque;

/// The window the fair-time scheduler looks at.
pub const WINDOW_MS: u64 = 10_000;

/// Finished queries of one job in the last [`WINDOW_MS`].
#[derive(Clone, Debug, Default)]
pub struct RateWindow {
    /// (finish time ms, took ms), oldest first.
    done: VecDeque<(u64, u64)>,
    /// When the job started running (the window is shorter before 10 s have passed).
    started_ms: Option<u64>,
    /// The last two finished queries (finish time ms, took ms), oldest first: kept
    /// beyond the window for jobs slower than it.
    last: VecDeque<(u64, u64)>,
}

impl RateWindow {
    /// Marks the job as running from `now_ms` (only the first call counts).
    pub fn start(&mut self, now_ms: u64) {
        self.started_ms.get_or_insert(now_ms);
    }

    /// A query finished at `now_ms` after `took_ms`.
    pub fn record(&mut self, now_ms: u64, took_ms: u64) {
        self.start(now_ms.saturating_sub(took_ms));
        self.done.push_back((now_ms, took_ms));
        self.last.push_back((now_ms, took_ms));
        if self.last.len() > 2 {
            self.last.pop_front();
        }
        self.expire(now_ms);
    }

    fn expire(&mut self, now_ms: u64) {
        while let Some(&(t, _)) = self.done.front() {
            if t + WINDOW_MS <= now_ms {
                self.done.pop_front();
            } else {
                break;
            }
        }
    }

    /// Mean seconds per query over the window at `now_ms` (the last query's if none
    /// finished in it); None if none finished yet.
    pub fn seconds_per_query(&mut self, now_ms: u64) -> Option<f64> {
        self.expire(now_ms);
        if self.done.is_empty() {
            return self.last.back().map(|&(_, took)| took as f64 / 1000.0);
        }
        let sum: u64 = self.done.iter().map(|&(_, took)| took).sum();
        Some(sum as f64 / self.done.len() as f64 / 1000.0)
    }

    /// Queries finished per second over the window at `now_ms` (the window is the time
    /// since the start while that is shorter than 10 s); 0 before the first query.
    /// With fewer than two queries in the window (queries slower than it): one query
    /// per the longer of the last interval between two finishes and the time since the
    /// last one (the time since the start when only one ever finished).
    pub fn queries_per_s(&mut self, now_ms: u64) -> f64 {
        self.expire(now_ms);
        let Some(start) = self.started_ms else { return 0.0 };
        if self.done.len() < 2 {
            let Some(&(t_last, _)) = self.last.back() else {
                return 0.0;
            };
            let prev = if self.last.len() == 2 { self.last[0].0 } else { start };
            let interval = t_last.saturating_sub(prev).max(now_ms.saturating_sub(t_last)).max(1);
            return 1000.0 / interval as f64;
        }
        let span = now_ms.saturating_sub(start).clamp(1, WINDOW_MS);
        self.done.len() as f64 * 1000.0 / span as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn window_of_ten_seconds() {
        let mut w = RateWindow::default();
        assert_eq!(w.seconds_per_query(0), None);
        assert_eq!(w.queries_per_s(0), 0.0);
        w.start(0);
        w.record(1_000, 1_000);
        w.record(2_000, 500);
        assert_eq!(w.seconds_per_query(2_000), Some(0.75));
        assert_eq!(w.queries_per_s(2_000), 1.0, "2 queries in the first 2 s");
        assert_eq!(w.queries_per_s(4_000), 0.5);
        // the first query leaves the window 10 s after it finished
        assert_eq!(w.seconds_per_query(10_999), Some(0.75));
        assert_eq!(w.seconds_per_query(11_000), Some(0.5));
        // one query left in the window: the last interval (1 s) or the time since the
        // last finish, whichever is longer
        assert_eq!(w.queries_per_s(11_000), 1.0 / 9.0);
        assert_eq!(w.seconds_per_query(12_000), Some(0.5), "the last query's, not none");
    }

    #[test]
    fn a_job_slower_than_the_window_never_shows_zero() {
        let mut w = RateWindow::default();
        w.start(0);
        assert_eq!(w.queries_per_s(5_000), 0.0, "nothing finished yet");
        // one query every 15 s
        for k in 1..=4u64 {
            w.record(15_000 * k, 15_000);
        }
        let at_finish = w.queries_per_s(60_000);
        assert!((at_finish - 1.0 / 15.0).abs() < 1e-9, "{at_finish}");
        assert!(
            (w.queries_per_s(70_000) - 1.0 / 15.0).abs() < 1e-9,
            "before the next is due"
        );
        assert!(
            (w.queries_per_s(90_000) - 1.0 / 30.0).abs() < 1e-9,
            "decays while nothing finishes"
        );
        assert_eq!(w.seconds_per_query(70_000), Some(15.0));
    }

    #[test]
    fn start_is_inferred_from_the_first_query() {
        let mut w = RateWindow::default();
        w.record(5_000, 2_000);
        w.start(4_000);
        assert_eq!(w.queries_per_s(5_000), 1000.0 / 2000.0 * 1.0);
    }
}
