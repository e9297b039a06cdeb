//! A node's side of the embedded election: which scheduler it follows (the best epoch
//! heard), when it took the active one's last message (its lease echo), the newest
//! state sequence it saw, and its vote. A node votes for a candidate only when it has
//! heard nothing from the scheduler it follows for the vote timeout (or, at once, the
//! candidate is the scheduler whose message it took last, with no vote since, running
//! again for a newer term: no other scheduler's lease counts this node), for a newer
//! epoch owned by that candidate, and (unless it has been without a scheduler far
//! longer) only for one holding every state the node saw; voting, it follows the
//! candidate's epoch at once, fencing every older scheduler. So a node that took a
//! message sent at `t` by the active scheduler votes for no other candidate before `t`
//! plus the timeout, which is what the active scheduler's lease ([`super::Lease`])
//! counts on.
//!
//! The epoch a node follows never goes back: a node that voted for a campaign that
//! did not win takes no message of an older epoch again (a late message of the
//! scheduler it left would otherwise lend that scheduler a lease again while the
//! winner counts the same node). Its vote binds it for one timeout; then it may vote
//! again, and the scheduler it left, hearing its heartbeats name the newer term, runs
//! for a newer term itself ([`super::Candidacy`]).

use super::epoch::{candidate_key, Epoch};
use super::terms::owner;
use crate::message::{Command, Message};

/// What a message from a scheduler means to a node.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Heard {
    /// From the active scheduler: take it.
    Current,
    /// A better epoch than the one followed (or the first word of the candidate this
    /// node voted for): this candidate is now the active one; reconnect to it (and
    /// repeat pending requests). Take the message.
    Switched {
        /// The epoch followed before.
        from: Epoch,
    },
    /// A worse epoch (an old active, fenced off): drop the message.
    Fenced,
}

/// A vote: granted or not, the epoch the node follows afterwards and the newest
/// state sequence it has seen.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ballot {
    /// The vote is for the candidate that asked.
    pub granted: bool,
    /// The epoch the node follows after answering.
    pub epoch: Epoch,
    /// The newest state sequence the node saw from an active scheduler.
    pub seen_seq: u64,
}

impl Ballot {
    /// The VOTE answering scheduler candidate `candidate`'s campaign (`pre`: its
    /// pre-vote, answered in a message marked as a request, as the question was).
    pub fn reply(&self, candidate: usize, pre: bool) -> Message {
        let mut v = Message::control(candidate_key(candidate), Command::Vote);
        v.meta.request = pre;
        v.meta.control.granted = self.granted;
        v.meta.control.term = self.epoch.term;
        v.meta.control.candidate = self.epoch.candidate;
        v.meta.control.seq = self.seen_seq;
        v
    }
}

/// The node side of failover.
#[derive(Clone, Debug)]
pub struct Follower {
    n: usize,
    timeout_ms: u64,
    epoch: Epoch,
    /// The epoch followed before a vote (the active one is not heard yet).
    voted_from: Option<Epoch>,
    last_heard_ms: u64,
    seen_seq: u64,
    echo_ms: u64,
}

/// A node votes for a candidate that holds less than it has seen only after this many
/// vote timeouts without any scheduler: every candidate holding the newest state is
/// then taken as lost for good (its state is lost with it, see the operations guide),
/// and waiting longer would stall the cluster forever. Long enough that a partition
/// or a restart never passes for a loss.
pub const STALE_VOTE_TIMEOUTS: u64 = 30;

impl Follower {
    /// A node of a cluster with `n` scheduler candidates that expects candidate
    /// `first` to be active (epoch term 0 until it is heard), losing it after
    /// `timeout_ms` of silence (0 = never lost, never votes), at `now_ms`.
    pub fn new(first: usize, n: usize, timeout_ms: u64, now_ms: u64) -> Follower {
        Follower {
            n: n.max(1),
            timeout_ms,
            epoch: Epoch {
                term: 0,
                candidate: first as u32,
            },
            voted_from: None,
            last_heard_ms: now_ms,
            seen_seq: 0,
            echo_ms: 0,
        }
    }

    /// A message from scheduler epoch `from`, stamped with state sequence `seq` and
    /// sent at `sent_ms` (the scheduler's clock), at `now_ms`.
    pub fn on_message(&mut self, from: Epoch, seq: u64, sent_ms: u64, now_ms: u64) -> Heard {
        let out = if from == self.epoch {
            match self.voted_from.take() {
                // the first word of the candidate this node voted for: it won
                Some(old) => Heard::Switched { from: old },
                None => Heard::Current,
            }
        } else if from > self.epoch {
            let old = self.voted_from.take().unwrap_or(self.epoch);
            self.epoch = from;
            self.echo_ms = 0;
            Heard::Switched { from: old }
        } else {
            return Heard::Fenced;
        };
        self.last_heard_ms = now_ms;
        self.seen_seq = self.seen_seq.max(seq);
        self.echo_ms = self.echo_ms.max(sent_ms);
        out
    }

    /// A candidate asks whether this node would vote for it as the active scheduler
    /// of `want` (holding state `seq`) before it campaigns: the answer of
    /// [`Follower::on_campaign`] without taking it (the node stays with the scheduler
    /// it follows, its term unchanged). A node that heard its scheduler within the
    /// timeout refuses any other candidate, so a candidate cut off with a minority
    /// never campaigns, and never unseats an active scheduler a majority hears with a
    /// newer term. The scheduler whose message this node took last (no vote since;
    /// an active one without its lease, whose answers to heartbeats still reach this
    /// node, or one that saw a node bound to a campaign that did not win), running
    /// again for a newer term, is not kept waiting: no other scheduler's lease rests
    /// on this node. A node that voted since, or never heard a scheduler, waits the
    /// timeout for every candidate.
    /// A yes names `want` as its epoch (what the node would follow), a no the epoch
    /// the node follows.
    pub fn on_pre_campaign(&self, want: Epoch, seq: u64, now_ms: u64) -> Ballot {
        let granted = self.would_vote(want, seq, now_ms);
        Ballot {
            granted,
            epoch: if granted { want } else { self.epoch },
            seen_seq: self.seen_seq,
        }
    }

    fn would_vote(&self, want: Epoch, seq: u64, now_ms: u64) -> bool {
        let silence = self.silence_ms(now_ms);
        let fresh = seq >= self.seen_seq || silence > self.timeout_ms.saturating_mul(STALE_VOTE_TIMEOUTS);
        self.timeout_ms > 0
            && want > self.epoch
            && want.term > self.epoch.term
            && owner(want.term, self.n) == want.candidate as usize
            && (silence > self.timeout_ms || self.heard_last(want.candidate))
            && fresh
    }

    /// True when candidate `c` is the scheduler this node took its last message from
    /// (under the epoch it follows, with no vote since).
    fn heard_last(&self, c: u32) -> bool {
        self.voted_from.is_none() && self.epoch.term > 0 && self.epoch.candidate == c
    }

    /// A candidate asks for this node's vote as the active scheduler of `want`,
    /// holding state `seq`, in a message sent at `sent_ms`; at `now_ms`.
    pub fn on_campaign(&mut self, want: Epoch, seq: u64, sent_ms: u64, now_ms: u64) -> Ballot {
        let granted = self.would_vote(want, seq, now_ms);
        if granted {
            self.voted_from.get_or_insert(self.epoch);
            self.epoch = want;
            self.last_heard_ms = now_ms;
            self.echo_ms = sent_ms;
        }
        Ballot {
            granted,
            epoch: self.epoch,
            seen_seq: self.seen_seq,
        }
    }

    /// The epoch followed (or voted for).
    pub fn epoch(&self) -> Epoch {
        self.epoch
    }

    /// Index of the candidate followed.
    pub fn active(&self) -> usize {
        self.epoch.candidate as usize
    }

    /// Index of the candidate last heard as the active scheduler (not one this node
    /// only voted for since): where its link to the scheduler points.
    pub fn heard_active(&self) -> usize {
        self.voted_from.unwrap_or(self.epoch).candidate as usize
    }

    /// The newest state sequence number seen from an active scheduler.
    pub fn seen_seq(&self) -> u64 {
        self.seen_seq
    }

    /// The send time of the newest message taken from the scheduler followed: the
    /// lease echo its heartbeats carry.
    pub fn echo_ms(&self) -> u64 {
        self.echo_ms
    }

    /// Milliseconds since the scheduler followed was last heard (or voted for).
    pub fn silence_ms(&self, now_ms: u64) -> u64 {
        now_ms.saturating_sub(self.last_heard_ms)
    }

    /// True when the scheduler followed has been silent for longer than the timeout.
    pub fn lost(&self, now_ms: u64) -> bool {
        self.timeout_ms > 0 && self.silence_ms(now_ms) > self.timeout_ms
    }

    /// True when no scheduler has been heard for longer than `wait_ms` (a node's
    /// `PS_JOIN_TIMEOUT`; 0: wait for ever): none is coming back (the cluster ended or
    /// cannot be reached), and the node gives up.
    pub fn given_up(&self, now_ms: u64, wait_ms: u64) -> bool {
        wait_ms > 0 && self.lost(now_ms) && self.silence_ms(now_ms) > wait_ms
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn e(term: u64, candidate: u32) -> Epoch {
        Epoch { term, candidate }
    }

    /// A node of a 2-candidate cluster that follows term 1 and saw state 5 at 100.
    fn node() -> Follower {
        let mut f = Follower::new(0, 2, 1000, 0);
        assert_eq!(f.on_message(e(1, 0), 5, 90, 100), Heard::Switched { from: e(0, 0) });
        f
    }

    #[test]
    fn follows_the_best_epoch_and_echoes_its_send_times() {
        let mut f = node();
        assert_eq!(f.echo_ms(), 90);
        assert_eq!(f.on_message(e(1, 0), 4, 80, 120), Heard::Current);
        assert_eq!(f.echo_ms(), 90, "an older send time does not move the echo back");
        assert_eq!(f.seen_seq(), 5);
        assert_eq!(f.on_message(e(0, 1), 9, 500, 130), Heard::Fenced);
        assert_eq!((f.seen_seq(), f.echo_ms()), (5, 90));
        assert!(
            !f.lost(1120) && f.lost(1121),
            "silent for the timeout after the last message"
        );
    }

    #[test]
    fn gives_up_only_after_the_wait_without_any_scheduler() {
        let mut f = node();
        // heard at 100: lost after 1100, given up after 100 + 5000
        assert!(!f.given_up(1200, 5000), "lost, still waiting for a scheduler");
        assert!(!f.given_up(5100, 5000) && f.given_up(5101, 5000));
        assert!(!f.given_up(1_000_000, 0), "a wait of 0 waits for ever");
        // a word from a scheduler starts the wait again
        assert_eq!(f.on_message(e(1, 0), 6, 5000, 5050), Heard::Current);
        assert!(!f.given_up(10_000, 5000) && f.given_up(10_051, 5000));
    }

    #[test]
    fn votes_only_when_the_active_is_lost_and_only_once_per_term() {
        let mut f = node();
        // the active was heard 900 ms ago: no vote
        let b = f.on_campaign(e(2, 1), 5, 1000, 1000);
        assert!(!b.granted);
        assert_eq!(b.epoch, e(1, 0));
        // lost: the vote goes to candidate 1 for term 2, and the node follows it
        let b = f.on_campaign(e(2, 1), 5, 1150, 1200);
        assert_eq!(
            b,
            Ballot {
                granted: true,
                epoch: e(2, 1),
                seen_seq: 5
            }
        );
        assert_eq!(f.echo_ms(), 1150);
        // the old active is fenced from now on
        assert_eq!(f.on_message(e(1, 0), 6, 1210, 1210), Heard::Fenced);
        // no second vote before the timeout passes again, not even for a newer term
        assert!(!f.on_campaign(e(3, 0), 9, 1300, 1300).granted);
        // until it heard the winner, its link to the scheduler stays with the one before
        assert_eq!((f.active(), f.heard_active()), (1, 0));
        // the winner's first message switches the node to it
        assert_eq!(f.on_message(e(2, 1), 6, 1400, 1400), Heard::Switched { from: e(1, 0) });
        assert_eq!(f.heard_active(), 1);
        assert_eq!(f.on_message(e(2, 1), 7, 1410, 1410), Heard::Current);
    }

    #[test]
    fn a_vote_for_a_campaign_that_did_not_win_binds_for_one_timeout_and_never_goes_back() {
        let mut f = node();
        // voted for candidate 0's term 3 at 1200; its campaign never wins
        assert!(f.on_campaign(e(3, 0), 5, 1150, 1200).granted);
        // the active scheduler of term 2 stays fenced, long after the vote too
        assert_eq!(f.on_message(e(2, 1), 6, 2100, 2200), Heard::Fenced);
        assert_eq!(f.on_message(e(2, 1), 6, 9000, 9000), Heard::Fenced);
        assert_eq!((f.epoch(), f.echo_ms(), f.heard_active()), (e(3, 0), 1150, 0));
        // bound for one timeout after the vote; then free to vote for a newer term,
        // of the scheduler it left too
        assert!(!f.on_campaign(e(4, 1), 5, 2100, 2200).granted);
        assert!(f.on_campaign(e(4, 1), 6, 2201, 2201).granted);
        assert_eq!(f.on_message(e(4, 1), 6, 2300, 2300), Heard::Switched { from: e(1, 0) });
        assert_eq!(f.on_message(e(2, 1), 7, 2400, 2400), Heard::Fenced);
    }

    #[test]
    fn a_pre_vote_is_answered_without_taking_the_term() {
        let mut f = node();
        // the active was heard 900 ms ago: no
        let b = f.on_pre_campaign(e(2, 1), 5, 1000);
        assert!(!b.granted);
        assert_eq!(b.epoch, e(1, 0));
        // lost: yes, naming the epoch asked for, but the node stays with its scheduler
        let b = f.on_pre_campaign(e(2, 1), 5, 1200);
        assert!(b.granted);
        assert_eq!(b.epoch, e(2, 1));
        assert_eq!(f.epoch(), e(1, 0));
        assert!(f.lost(1200));
        assert_eq!(f.on_message(e(1, 0), 6, 1210, 1210), Heard::Current);
        // and a candidate missing state the node saw gets no yes either
        assert!(!f.on_pre_campaign(e(2, 1), 4, 2300).granted);
    }

    #[test]
    fn the_scheduler_followed_running_again_gets_the_vote_at_once() {
        let mut f = node();
        // heard candidate 0 at 100; at 200 it runs again for term 3 (it lost its
        // lease): yes, without waiting for its silence
        assert!(f.on_pre_campaign(e(3, 0), 5, 200).granted);
        // another candidate still waits for the timeout, and a candidate missing
        // state the node saw still gets no vote
        assert!(!f.on_pre_campaign(e(2, 1), 5, 200).granted);
        assert!(!f.on_pre_campaign(e(3, 0), 4, 200).granted);
        let b = f.on_campaign(e(3, 0), 5, 210, 220);
        assert!(b.granted);
        assert_eq!((f.epoch(), f.echo_ms()), (e(3, 0), 210));
        // bound to it: another candidate waits a timeout after the vote
        assert!(!f.on_campaign(e(4, 1), 5, 1000, 1000).granted);
        assert!(f.on_campaign(e(4, 1), 5, 1300, 1300).granted);
    }

    #[test]
    fn the_immediate_vote_goes_only_to_the_scheduler_last_heard() {
        // a node that never heard a scheduler waits the timeout even for the one it
        // expects first
        let f = Follower::new(0, 2, 1000, 0);
        assert!(!f.on_pre_campaign(e(1, 0), 0, 10).granted);
        assert!(f.on_pre_campaign(e(1, 0), 0, 1001).granted);
        // a node that voted for candidate 0's term 3 and never heard it win is bound
        // for one timeout, to candidate 0's next campaigns too
        let mut g = node();
        assert!(g.on_campaign(e(3, 0), 5, 1200, 1200).granted);
        assert!(!g.on_pre_campaign(e(5, 0), 5, 1300).granted);
        assert!(!g.on_campaign(e(5, 0), 5, 1300, 1300).granted);
        assert!(g.on_campaign(e(5, 0), 5, 2201, 2201).granted);
    }

    #[test]
    fn a_term_belongs_to_one_candidate_and_must_be_newer() {
        let mut f = node();
        assert!(
            !f.on_campaign(e(3, 1), 5, 2000, 2000).granted,
            "term 3 is candidate 0's"
        );
        assert!(!f.on_campaign(e(1, 1), 5, 2000, 2000).granted, "not newer");
        assert!(
            f.on_campaign(e(3, 0), 5, 2000, 2000).granted,
            "the old active may run again"
        );
    }

    #[test]
    fn a_candidate_missing_state_the_node_saw_waits_for_the_stale_timeout() {
        let mut f = node();
        assert!(!f.on_campaign(e(2, 1), 4, 2000, 2000).granted);
        assert!(!f.on_campaign(e(2, 1), 4, 30_100, 30_100).granted);
        assert!(
            f.on_campaign(e(2, 1), 4, 30_101, 30_101).granted,
            "thirty timeouts without a scheduler"
        );
    }

    #[test]
    fn zero_timeout_never_loses_nor_votes() {
        let mut f = Follower::new(0, 2, 0, 0);
        assert!(!f.lost(u64::MAX));
        assert!(!f.on_campaign(e(2, 1), 0, 10, u64::MAX).granted);
    }
}
