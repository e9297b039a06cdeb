//! A job's query rate over the last 10 seconds (seed 002): each finished query is
//! recorded with the time it took; seconds per query is their mean over the window, and
//! queries per second their count over the window. Time is passed in (ms).

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

    /// Mean seconds per query over the window at `now_ms`; None if none finished.
    pub fn seconds_per_query(&mut self, now_ms: u64) -> Option<f64> {
        self.expire(now_ms);
        if self.done.is_empty() {
            return None;
        }
        let sum: u64 = self.done.iter().map(|&(_, took)| took).sum();
        Some(sum as f64 / self.done.len() as f64 / 1000.0)
    }

    /// Queries finished per second over the window at `now_ms` (the window is the time
    /// since the start while that is shorter than 10 s); 0 before the start.
    pub fn queries_per_s(&mut self, now_ms: u64) -> f64 {
        self.expire(now_ms);
        let Some(start) = self.started_ms else { return 0.0 };
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
        assert_eq!(w.queries_per_s(11_000), 0.1);
        assert_eq!(w.seconds_per_query(12_000), None);
    }

    #[test]
    fn start_is_inferred_from_the_first_query() {
        let mut w = RateWindow::default();
        w.record(5_000, 2_000);
        w.start(4_000);
        assert_eq!(w.queries_per_s(5_000), 1000.0 / 2000.0 * 1.0);
    }
}
