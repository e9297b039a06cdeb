//! A node waiting at a barrier, and when to ask again: a scheduler that starts acting
//! anew (another process, or the same process under a new term after it lost its
//! lease) starts its barrier counts empty, so a request made of any earlier one is
//! lost with them. Pure: the node passes in the scheduler it follows now.

/// A barrier request and the scheduler it was made of, `S` naming that scheduler
/// (the van's: its process incarnation and the epoch it acts under).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BarrierAsk<S> {
    group: i32,
    asked: S,
    /// Sends that failed since the last one that went out (more than 0: the last
    /// request was not sent).
    failed: u32,
}

impl<S: PartialEq + Copy> BarrierAsk<S> {
    /// A request for `group`'s barrier, made of `scheduler`.
    pub fn new(group: i32, scheduler: S) -> BarrierAsk<S> {
        BarrierAsk {
            group,
            asked: scheduler,
            failed: 0,
        }
    }

    /// The request just made could not be sent: [`BarrierAsk::again`] asks for it
    /// again (a node that passed a barrier it never asked for would leave the others
    /// waiting for it there).
    /// Returns how many sends in a row failed now, this one included.
    pub fn unsent(&mut self) -> u32 {
        self.failed = self.failed.saturating_add(1);
        self.failed
    }

    /// The request just made was sent: the run of failed sends ends.
    pub fn sent(&mut self) {
        self.failed = 0;
    }

    /// Sends that failed since the last one that went out (0: the last one went out).
    pub fn failed_sends(&self) -> u32 {
        self.failed
    }

    /// The barrier's group.
    pub fn group(&self) -> i32 {
        self.group
    }

    /// The node follows `scheduler` now: true when the request must be made again
    /// (of it: another scheduler acts, or the last request was not sent); the caller
    /// then makes it and reports the send ([`BarrierAsk::sent`] or
    /// [`BarrierAsk::unsent`]).
    pub fn again(&mut self, scheduler: S) -> bool {
        if scheduler == self.asked && self.failed == 0 {
            return false;
        }
        self.asked = scheduler;
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn asked_again_of_each_scheduler_that_acts_anew() {
        // (scheduler process, term)
        let mut b = BarrierAsk::new(7, (11u64, 1u64));
        assert_eq!(b.group(), 7);
        assert!(!b.again((11, 1)));
        // another process took over
        assert!(b.again((12, 2)));
        assert!(!b.again((12, 2)));
        // the first one won again: the same process as before, a new term
        assert!(b.again((11, 3)));
        assert!(!b.again((11, 3)));
    }

    #[test]
    fn a_request_not_sent_is_made_again_until_it_is() {
        let mut b = BarrierAsk::new(7, (11u64, 1u64));
        assert_eq!(b.unsent(), 1, "the first failure of a run");
        assert!(b.again((11, 1)), "the same scheduler, asked again");
        assert_eq!(b.unsent(), 2);
        assert_eq!(b.failed_sends(), 2);
        assert!(b.again((11, 1)));
        b.sent();
        assert_eq!(b.failed_sends(), 0);
        assert!(!b.again((11, 1)), "sent at last: nothing more to ask");
        // a later failure starts a new run
        assert!(b.again((12, 2)));
        assert_eq!(b.unsent(), 1);
    }
}
