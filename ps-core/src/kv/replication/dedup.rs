//! The window of request ids a replica remembers (pure): a push resent during a
//! failover reaches a replica that may have applied it already (forwarded by the dead
//! primary); the window says so, and what the first application answered.

use rustc_hash::FxHashMap as HashMap;
use serde::{Deserialize, Serialize};
use std::collections::VecDeque;

/// Names one worker request's part for one key range, the same on every replica and
/// on every resend.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct RequestId {
    /// The worker's node id.
    pub origin: i32,
    /// The worker process's incarnation (a replacement worker restarts timestamps).
    pub incarnation: u64,
    /// The worker's customer.
    pub customer: i32,
    /// The request's timestamp.
    pub timestamp: i32,
    /// The key range (server rank) of this part.
    pub range: i32,
}

/// What applying a push answered: the status and version sent back.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Outcome {
    /// Response status.
    pub status: i32,
    /// Response version.
    pub version: u64,
}

/// Request ids applied in the last `ttl_ms` milliseconds (at most `cap` of them; the
/// oldest are forgotten first).
pub struct DedupWindow {
    ttl_ms: u64,
    cap: usize,
    seen: HashMap<RequestId, Outcome>,
    order: VecDeque<(u64, RequestId)>,
}

impl DedupWindow {
    /// A window of `ttl_ms` milliseconds and at most `cap` ids.
    pub fn new(ttl_ms: u64, cap: usize) -> DedupWindow {
        DedupWindow {
            ttl_ms,
            cap: cap.max(1),
            seen: HashMap::default(),
            order: VecDeque::new(),
        }
    }

    /// What `id` answered when it was applied, if it was (within the window).
    pub fn get(&self, id: &RequestId) -> Option<Outcome> {
        self.seen.get(id).copied()
    }

    /// Records that `id` was applied at `now_ms` with `outcome`; forgets ids older
    /// than the window, and the oldest past the cap.
    pub fn record(&mut self, id: RequestId, outcome: Outcome, now_ms: u64) {
        while let Some(&(t, old)) = self.order.front() {
            if now_ms.saturating_sub(t) < self.ttl_ms && self.order.len() < self.cap {
                break;
            }
            self.order.pop_front();
            self.seen.remove(&old);
        }
        if self.seen.insert(id, outcome).is_none() {
            self.order.push_back((now_ms, id));
        }
    }

    /// Ids remembered.
    pub fn len(&self) -> usize {
        self.seen.len()
    }

    /// True if no id is remembered.
    pub fn is_empty(&self) -> bool {
        self.seen.is_empty()
    }

    /// The remembered ids of `range` with their outcomes and times, oldest first (for
    /// a replica copying the range).
    pub fn of_range(&self, range: i32) -> Vec<(u64, RequestId, Outcome)> {
        self.order
            .iter()
            .filter(|(_, id)| id.range == range)
            .filter_map(|&(t, id)| self.seen.get(&id).map(|&o| (t, id, o)))
            .collect()
    }
}

/// How long a replica remembers a request id.
pub const DEDUP_WINDOW_MS: u64 = 120_000;

/// At most this many request ids per replica (the oldest are forgotten first).
pub const DEDUP_CAP: usize = 1 << 20;

#[cfg(test)]
mod tests {
    use super::*;

    fn id(ts: i32, range: i32) -> RequestId {
        RequestId {
            origin: 9,
            incarnation: 1,
            customer: 0,
            timestamp: ts,
            range,
        }
    }
    const OK: Outcome = Outcome { status: 0, version: 3 };

    #[test]
    fn an_applied_id_is_remembered_with_its_outcome() {
        let mut w = DedupWindow::new(1000, 100);
        assert_eq!(w.get(&id(1, 0)), None);
        w.record(id(1, 0), OK, 0);
        assert_eq!(w.get(&id(1, 0)), Some(OK));
        // another range, another worker incarnation: different requests
        assert_eq!(w.get(&id(1, 1)), None);
        let mut other = id(1, 0);
        other.incarnation = 2;
        assert_eq!(w.get(&other), None);
        // recording twice keeps one entry
        w.record(id(1, 0), OK, 5);
        assert_eq!(w.len(), 1);
    }

    #[test]
    fn ids_expire_after_the_window_and_past_the_cap() {
        let mut w = DedupWindow::new(1000, 3);
        w.record(id(1, 0), OK, 0);
        w.record(id(2, 0), OK, 500);
        w.record(id(3, 0), OK, 1200); // id 1 is 1200 ms old: forgotten
        assert_eq!(w.get(&id(1, 0)), None);
        assert_eq!(w.get(&id(2, 0)), Some(OK));
        w.record(id(4, 0), OK, 1300);
        w.record(id(5, 0), OK, 1400); // cap 3: the oldest (2) goes
        assert_eq!(w.get(&id(2, 0)), None);
        assert_eq!(w.len(), 3);
    }

    #[test]
    fn ids_of_one_range_oldest_first() {
        let mut w = DedupWindow::new(1000, 10);
        w.record(id(1, 0), OK, 1);
        w.record(id(2, 1), OK, 2);
        w.record(id(3, 0), OK, 3);
        let got: Vec<i32> = w.of_range(0).iter().map(|(_, i, _)| i.timestamp).collect();
        assert_eq!(got, vec![1, 3]);
    }
}
