//! What a node waiting to join the cluster tells its user, and when it gives up
//! because the scheduler evidently cannot connect back to it. Pure: the van's start
//! loop feeds it the time and what it observed.

/// What the waiting node observed at one check.
#[derive(Clone, Debug)]
pub struct JoinView {
    /// The scheduler's `host:port`.
    pub scheduler: String,
    /// This node's advertised `host:port`.
    pub me: String,
    /// A TCP connection to the scheduler's port opens (something listens there).
    pub scheduler_up: bool,
    /// A message from the scheduler arrived (it can reach this node).
    pub heard: bool,
    /// The scheduler may answer only with the node table (it may be ps-lite's, which
    /// does not welcome a registering node): its silence proves nothing.
    pub may_stay_silent: bool,
    /// Servers and workers the cluster expects.
    pub expected: (usize, usize),
}

/// What to do after a check.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum JoinEvent {
    /// Nothing new.
    Quiet,
    /// Log this progress line.
    Log(String),
    /// Give up with this one-line error.
    Fail(String),
}

/// Rate-limits the progress lines and times the "up but silent" state.
#[derive(Clone, Debug)]
pub struct JoinWatch {
    log_every_ms: u64,
    unreachable_after_ms: u64,
    next_log_ms: u64,
    up_since_ms: Option<u64>,
}

impl JoinWatch {
    /// Logs at most every `log_every_ms` (the first line after one period); fails
    /// after the scheduler was up but silent for `unreachable_after_ms`.
    pub fn new(now_ms: u64, log_every_ms: u64, unreachable_after_ms: u64) -> JoinWatch {
        JoinWatch {
            log_every_ms,
            unreachable_after_ms,
            next_log_ms: now_ms + log_every_ms,
            up_since_ms: None,
        }
    }

    /// One check at `now_ms`.
    pub fn check(&mut self, now_ms: u64, v: &JoinView) -> JoinEvent {
        if v.scheduler_up && !v.heard {
            let since = *self.up_since_ms.get_or_insert(now_ms);
            if now_ms.saturating_sub(since) >= self.unreachable_after_ms && !v.may_stay_silent {
                return JoinEvent::Fail(format!(
                    "the scheduler at {} is up but has not answered for {} s: it cannot connect back to this node at {}; set DMLC_NODE_HOST to an address of this node the scheduler can reach (and DMLC_BIND_HOST if that address is not local), and check firewalls",
                    v.scheduler,
                    self.unreachable_after_ms / 1000,
                    v.me
                ));
            }
        } else {
            self.up_since_ms = None;
        }
        if now_ms < self.next_log_ms {
            return JoinEvent::Quiet;
        }
        self.next_log_ms = now_ms + self.log_every_ms;
        JoinEvent::Log(if v.heard {
            format!(
                "registered with the scheduler at {}; waiting for the rest of the cluster ({} servers and {} workers) to join",
                v.scheduler, v.expected.0, v.expected.1
            )
        } else if v.scheduler_up && v.may_stay_silent {
            format!(
                "registered with the scheduler at {}; waiting for the node table (the scheduler must connect back to this node at {}; a ps-lite scheduler answers only once all {} servers and {} workers joined)",
                v.scheduler, v.me, v.expected.0, v.expected.1
            )
        } else if v.scheduler_up {
            format!(
                "waiting for the scheduler at {} to answer (it must connect back to this node at {})",
                v.scheduler, v.me
            )
        } else {
            format!(
                "waiting for the scheduler at {}: nothing listens there yet (is it started? are DMLC_PS_ROOT_URI and DMLC_PS_ROOT_PORT right?)",
                v.scheduler
            )
        })
    }
}

/// The scheduler's progress line while nodes register.
pub fn scheduler_waiting(have: (usize, usize), expected: (usize, usize)) -> String {
    format!(
        "waiting for nodes to register: {}/{} servers, {}/{} workers",
        have.0, expected.0, have.1, expected.1
    )
}

/// The scheduler's error when the cluster is still incomplete after `timeout_s`
/// seconds: how many of each role registered, and what to start.
pub fn scheduler_gave_up(have: (usize, usize), expected: (usize, usize), timeout_s: f64) -> String {
    format!(
        "only {}/{} servers and {}/{} workers registered within {timeout_s:.0} s: start the missing nodes with this scheduler's DMLC_PS_ROOT_URI/DMLC_PS_ROOT_PORT (or raise PS_JOIN_TIMEOUT)",
        have.0, expected.0, have.1, expected.1
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_scheduler_names_what_is_missing() {
        let e = scheduler_gave_up((1, 0), (2, 3), 120.0);
        assert!(
            e.starts_with("only 1/2 servers and 0/3 workers registered within 120 s"),
            "{e}"
        );
        assert!(!e.contains("is it running"), "{e}");
    }

    fn view(up: bool, heard: bool) -> JoinView {
        JoinView {
            scheduler: "10.0.0.1:9000".into(),
            me: "10.0.0.2:4000".into(),
            scheduler_up: up,
            heard,
            may_stay_silent: false,
            expected: (1, 2),
        }
    }

    #[test]
    fn a_scheduler_that_may_be_ps_lite_is_waited_for_without_failing() {
        let mut w = JoinWatch::new(0, 5000, 6000);
        let silent = JoinView {
            may_stay_silent: true,
            ..view(true, false)
        };
        let mut lines = Vec::new();
        for t in (0..60_000).step_by(500) {
            match w.check(t, &silent) {
                JoinEvent::Fail(e) => panic!("failed at {t}: {e}"),
                JoinEvent::Log(l) => lines.push(l),
                JoinEvent::Quiet => {}
            }
        }
        assert!(
            lines[0].contains("waiting for the node table") && lines[0].contains("ps-lite"),
            "{lines:?}"
        );
    }

    #[test]
    fn logs_every_period_saying_what_it_waits_for() {
        let mut w = JoinWatch::new(0, 5000, 6000);
        assert_eq!(w.check(1000, &view(false, false)), JoinEvent::Quiet);
        let JoinEvent::Log(l) = w.check(5000, &view(false, false)) else {
            panic!()
        };
        assert!(l.contains("nothing listens") && l.contains("10.0.0.1:9000"), "{l}");
        assert_eq!(w.check(9999, &view(true, true)), JoinEvent::Quiet);
        let JoinEvent::Log(l) = w.check(10_000, &view(true, true)) else {
            panic!()
        };
        assert!(l.contains("registered") && l.contains("1 servers and 2 workers"), "{l}");
    }

    #[test]
    fn fails_when_the_scheduler_is_up_but_silent_for_long() {
        let mut w = JoinWatch::new(0, 5000, 6000);
        assert_eq!(w.check(0, &view(false, false)), JoinEvent::Quiet);
        assert_eq!(w.check(1000, &view(true, false)), JoinEvent::Quiet);
        let JoinEvent::Log(l) = w.check(5000, &view(true, false)) else {
            panic!()
        };
        assert!(l.contains("connect back to this node at 10.0.0.2:4000"), "{l}");
        // down again: the clock restarts
        assert_eq!(w.check(6500, &view(false, false)), JoinEvent::Quiet);
        assert_eq!(w.check(7000, &view(true, false)), JoinEvent::Quiet);
        assert!(matches!(w.check(12_999, &view(true, false)), JoinEvent::Log(_)));
        let JoinEvent::Fail(e) = w.check(13_000, &view(true, false)) else {
            panic!()
        };
        assert!(e.contains("DMLC_NODE_HOST") && e.contains("10.0.0.2:4000") && !e.contains('\n'));
        // heard: never fails
        let mut w = JoinWatch::new(0, 5000, 6000);
        for t in (0..60_000).step_by(500) {
            assert!(!matches!(w.check(t, &view(true, true)), JoinEvent::Fail(_)));
        }
    }

    #[test]
    fn scheduler_line_counts_registrations() {
        assert_eq!(
            scheduler_waiting((1, 0), (2, 3)),
            "waiting for nodes to register: 1/2 servers, 0/3 workers"
        );
    }
}
