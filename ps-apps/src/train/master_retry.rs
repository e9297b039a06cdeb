//! When a request to the master is sent again, and when it is given up (pure; time in
//! milliseconds): sent again as soon as another scheduler acts (its incarnation in the
//! node table changed: the dead scheduler may have taken the request and never
//! answered), or the same one acts under a new term (it dropped the answers it held
//! when it stopped acting), after [`ATTEMPT_MS`] without an answer, or [`UNSENT_MS`] after it could
//! not be sent; given up when no answer came within the caller's patience. Sending
//! again is safe: the master counts a finished task once, and a task still pending on
//! a worker that asks again goes back to todo.
//! [`super::master_client::MasterClient`] waits on it between polls; the simulator's
//! workers run it at their ticks.

/// How long one request waits for the master's answer before it is sent again (ms).
pub const ATTEMPT_MS: u64 = 5_000;

/// How long a request that could not be sent waits before it is sent again (ms).
pub const UNSENT_MS: u64 = 200;

/// The scheduler a request went to, as far as its answer is concerned: its process
/// (incarnation) and the term it acts under. An answer held by a scheduler that stops
/// acting is dropped with its campaign, so a new term, even of the same process, is
/// asked again as a new process is.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ActingScheduler {
    /// The scheduler process's incarnation.
    pub incarnation: u64,
    /// The term it acts under (as the node follows it).
    pub term: u64,
}

/// Why a request is sent again.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Again {
    /// Another scheduler acts, or the same one under a new term.
    Replaced,
    /// No answer came for this many ms.
    Unanswered(u64),
    /// It could not be sent.
    Unsent,
}

impl std::fmt::Display for Again {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Again::Replaced => write!(f, "another scheduler acts, or the same one under a new term"),
            Again::Unanswered(ms) => write!(f, "no answer within {ms} ms"),
            Again::Unsent => write!(f, "the request could not be sent"),
        }
    }
}

/// One sending of a request: when, and to which scheduler.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Attempt {
    sent_ms: u64,
    scheduler: ActingScheduler,
}

impl Attempt {
    /// A request sent at `now_ms` while `scheduler` acted.
    pub fn new(now_ms: u64, scheduler: ActingScheduler) -> Attempt {
        Attempt {
            sent_ms: now_ms,
            scheduler,
        }
    }

    /// At `now_ms`, with `scheduler` acting now: why the request must be sent again,
    /// if it must.
    pub fn again(&self, now_ms: u64, scheduler: ActingScheduler) -> Option<Again> {
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

/// The last sending of a request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Sending {
    /// It went out.
    Out(Attempt),
    /// It could not be sent, at this time.
    Unsent(u64),
}

/// What a request waiting for its answer does now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Due {
    /// Waits on.
    Wait,
    /// Is sent again, for this reason.
    Again(Again),
    /// Is given up: no answer within the patience.
    GiveUp,
}

/// One request to the master over all its sendings.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Call {
    started_ms: u64,
    patience_ms: u64,
    last: Sending,
}

impl Call {
    /// A request made at `now_ms` that waits at most `patience_ms` in all for an
    /// answer; [`Call::sent`] or [`Call::unsent`] says how its first sending went.
    pub fn new(now_ms: u64, patience_ms: u64) -> Call {
        Call {
            started_ms: now_ms,
            patience_ms,
            last: Sending::Unsent(now_ms),
        }
    }

    /// It went out at `now_ms` while `scheduler` acted.
    pub fn sent(&mut self, now_ms: u64, scheduler: ActingScheduler) {
        self.last = Sending::Out(Attempt::new(now_ms, scheduler));
    }

    /// It could not be sent at `now_ms`.
    pub fn unsent(&mut self, now_ms: u64) {
        self.last = Sending::Unsent(now_ms);
    }

    /// At `now_ms`, with `scheduler` acting now: what it does.
    pub fn due(&self, now_ms: u64, scheduler: ActingScheduler) -> Due {
        if now_ms.saturating_sub(self.started_ms) >= self.patience_ms {
            return Due::GiveUp;
        }
        match self.last {
            Sending::Out(a) => a.again(now_ms, scheduler).map_or(Due::Wait, Due::Again),
            Sending::Unsent(at) if now_ms.saturating_sub(at) >= UNSENT_MS => Due::Again(Again::Unsent),
            Sending::Unsent(_) => Due::Wait,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Scheduler process `incarnation` acting under `term`.
    fn s(incarnation: u64, term: u64) -> ActingScheduler {
        ActingScheduler { incarnation, term }
    }

    #[test]
    fn sent_again_when_another_scheduler_or_a_new_term_acts() {
        let a = Attempt::new(100, s(7, 1));
        assert_eq!(a.again(150, s(7, 1)), None);
        assert_eq!(a.again(150, s(9, 2)), Some(Again::Replaced));
        // the same process acting again under a newer term dropped its held answers
        assert_eq!(a.again(150, s(7, 3)), Some(Again::Replaced));
    }

    #[test]
    fn sent_again_after_the_attempt_time() {
        let a = Attempt::new(100, s(7, 1));
        assert_eq!(a.again(100 + ATTEMPT_MS - 1, s(7, 1)), None);
        assert_eq!(a.again(100 + ATTEMPT_MS, s(7, 1)), Some(Again::Unanswered(ATTEMPT_MS)));
        assert_eq!(a.again(0, s(7, 1)), None, "a clock read before the sending waits");
    }

    #[test]
    fn a_call_is_sent_again_as_its_attempt_says_and_given_up_after_its_patience() {
        let mut c = Call::new(0, 20_000);
        c.sent(0, s(7, 1));
        assert_eq!(c.due(100, s(7, 1)), Due::Wait);
        assert_eq!(c.due(100, s(8, 2)), Due::Again(Again::Replaced));
        assert_eq!(c.due(ATTEMPT_MS, s(7, 1)), Due::Again(Again::Unanswered(ATTEMPT_MS)));
        c.unsent(6_000);
        assert_eq!(c.due(6_000 + UNSENT_MS - 1, s(7, 1)), Due::Wait);
        assert_eq!(c.due(6_000 + UNSENT_MS, s(7, 1)), Due::Again(Again::Unsent));
        c.sent(19_000, s(7, 1));
        assert_eq!(c.due(19_999, s(7, 1)), Due::Wait);
        assert_eq!(
            c.due(20_000, s(7, 1)),
            Due::GiveUp,
            "the patience counts from the first sending"
        );
    }
}
