//! When a request to the master is sent again (pure; time in milliseconds): as soon
//! as the scheduler was replaced (its incarnation in the node table changed: the dead
//! scheduler may have taken the request and never answered), and after
//! [`ATTEMPT_MS`] without an answer. Sending again is safe: the master counts a
//! finished task once, and a task still pending on a worker that asks again goes
//! back to todo. [`super::master_client::MasterClient`] waits on it between polls;
//! the simulator's workers run it at their ticks.

/// How long one request waits for the master's answer before it is sent again (ms).
pub const ATTEMPT_MS: u64 = 5_000;

/// Why a request is sent again.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Again {
    /// The scheduler it was sent to was replaced.
    Replaced,
    /// No answer came for this many ms.
    Unanswered(u64),
}

impl std::fmt::Display for Again {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Again::Replaced => write!(f, "the scheduler was replaced"),
            Again::Unanswered(ms) => write!(f, "no answer within {ms} ms"),
        }
    }
}

/// One sending of a request: when, and to which scheduler process.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Attempt {
    sent_ms: u64,
    scheduler: u64,
}

impl Attempt {
    /// A request sent at `now_ms` while the scheduler's incarnation was `scheduler`.
    pub fn new(now_ms: u64, scheduler: u64) -> Attempt {
        Attempt {
            sent_ms: now_ms,
            scheduler,
        }
    }

    /// At `now_ms`, with the scheduler's incarnation now `scheduler`: why the request
    /// must be sent again, if it must.
    pub fn again(&self, now_ms: u64, scheduler: u64) -> Option<Again> {
        let waited = now_ms.saturating_sub(self.sent_ms);
        if scheduler != self.scheduler {
            Some(Again::Replaced)
        } else if waited >= ATTEMPT_MS {
            Some(Again::Unanswered(waited))
        } else {
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sent_again_when_the_scheduler_is_replaced() {
        let a = Attempt::new(100, 7);
        assert_eq!(a.again(150, 7), None);
        assert_eq!(a.again(150, 9), Some(Again::Replaced));
    }

    #[test]
    fn sent_again_after_the_attempt_time() {
        let a = Attempt::new(100, 7);
        assert_eq!(a.again(100 + ATTEMPT_MS - 1, 7), None);
        assert_eq!(a.again(100 + ATTEMPT_MS, 7), Some(Again::Unanswered(ATTEMPT_MS)));
        assert_eq!(a.again(0, 7), None, "a clock read before the sending waits");
    }
}
