//! How often a joining node repeats ADD_NODE and probes the scheduler's port. Pure:
//! the van's start loop reports whether the last attempt went out and when (in
//! milliseconds), and waits what this says.
//!
//! A node started together with its scheduler usually finds nothing listening yet.
//! Waiting a whole second before the next attempt made every such start a second
//! slower than it needs to be; a failed attempt is now retried after 2 ms, doubling up
//! to 1 s. An attempt that went out is repeated only every second (the node table
//! wakes the node as soon as it arrives). A refused connection is not an
//! authentication failure: the scheduler's door ([`crate::auth::gate`]) only counts
//! handshakes refused for what the peer sent, so fast retries cannot get a host
//! rate-limited.

use std::time::Duration;

/// Delay before the first retry of a failed attempt.
pub const FIRST_RETRY: Duration = Duration::from_millis(2);
/// Longest delay between failed attempts.
pub const MAX_RETRY: Duration = Duration::from_secs(1);
/// Delay between attempts that reached the scheduler (its answer wakes the node).
pub const RESEND_EVERY: Duration = Duration::from_secs(1);
/// Least time between two probes of the scheduler's port (each probe is a
/// connection the scheduler accepts).
pub const PROBE_EVERY_MS: u64 = 250;

/// Exponential backoff of ADD_NODE attempts, and the pace of port probes.
#[derive(Clone, Debug)]
pub struct JoinBackoff {
    next: Duration,
    last_probe: Option<(u64, bool)>,
}

impl Default for JoinBackoff {
    fn default() -> Self {
        JoinBackoff {
            next: FIRST_RETRY,
            last_probe: None,
        }
    }
}

impl JoinBackoff {
    /// How long to wait after an attempt; `reached` = the attempt went out to the
    /// scheduler. A failure doubles the next delay (up to [`MAX_RETRY`]), a success
    /// resets it and waits [`RESEND_EVERY`].
    pub fn after(&mut self, reached: bool) -> Duration {
        if reached {
            self.next = FIRST_RETRY;
            return RESEND_EVERY;
        }
        let d = self.next;
        self.next = (self.next * 2).min(MAX_RETRY);
        d
    }

    /// The last probe's answer if it is younger than [`PROBE_EVERY_MS`] at `now`;
    /// None when a new probe is due.
    pub fn recent_probe(&self, now: u64) -> Option<bool> {
        match self.last_probe {
            Some((at, up)) if now.saturating_sub(at) < PROBE_EVERY_MS => Some(up),
            _ => None,
        }
    }

    /// Records a probe of the scheduler's port made at `now`.
    pub fn probed(&mut self, now: u64, up: bool) {
        self.last_probe = Some((now, up));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failures_back_off_exponentially_and_a_success_resets() {
        let mut b = JoinBackoff::default();
        let waits: Vec<u128> = (0..11).map(|_| b.after(false).as_millis()).collect();
        assert_eq!(waits, [2, 4, 8, 16, 32, 64, 128, 256, 512, 1000, 1000]);
        assert_eq!(b.after(true), RESEND_EVERY);
        assert_eq!(b.after(false), FIRST_RETRY);
    }

    #[test]
    fn probes_are_paced() {
        let mut b = JoinBackoff::default();
        assert_eq!(b.recent_probe(0), None);
        b.probed(10, false);
        assert_eq!(b.recent_probe(11), Some(false));
        assert_eq!(b.recent_probe(259), Some(false));
        assert_eq!(b.recent_probe(260), None, "due again after PROBE_EVERY_MS");
        b.probed(260, true);
        assert_eq!(b.recent_probe(300), Some(true));
    }
}
