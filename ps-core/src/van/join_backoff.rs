//! How long a joining node waits between ADD_NODE attempts. Pure: the van's start loop
//! reports whether the last attempt reached the scheduler and sleeps what this says.
//!
//! A node started at the same moment as its scheduler usually finds nothing listening
//! yet; waiting a whole second before the next attempt made cluster start-up take a
//! second more than it needs. Failed attempts are retried after 2 ms, doubling up to
//! 250 ms; once an attempt went out, the node waits for the table (woken as soon as it
//! arrives) and repeats the request only every second.

use std::time::Duration;

/// Delay before the first retry of a failed attempt.
pub const FIRST_RETRY: Duration = Duration::from_millis(2);
/// Longest delay between failed attempts.
pub const MAX_RETRY: Duration = Duration::from_millis(250);
/// Delay between attempts that reached the scheduler (the answer wakes the node).
pub const RESEND_EVERY: Duration = Duration::from_secs(1);

/// Exponential backoff for ADD_NODE attempts.
#[derive(Clone, Debug)]
pub struct JoinBackoff {
    next: Duration,
}

impl Default for JoinBackoff {
    fn default() -> Self {
        JoinBackoff { next: FIRST_RETRY }
    }
}

impl JoinBackoff {
    /// How long to wait after an attempt; `reached` = the attempt went out to the
    /// scheduler (a failure doubles the next delay, a success resets it).
    pub fn after(&mut self, reached: bool) -> Duration {
        if reached {
            self.next = FIRST_RETRY;
            return RESEND_EVERY;
        }
        let d = self.next;
        self.next = (self.next * 2).min(MAX_RETRY);
        d
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failures_back_off_exponentially_and_a_success_resets() {
        let mut b = JoinBackoff::default();
        let waits: Vec<u64> = (0..9).map(|_| b.after(false).as_millis() as u64).collect();
        assert_eq!(waits, [2, 4, 8, 16, 32, 64, 128, 250, 250]);
        assert_eq!(b.after(true), RESEND_EVERY);
        assert_eq!(b.after(false), FIRST_RETRY);
    }
}
