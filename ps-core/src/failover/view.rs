//! A node's view of the active scheduler: which candidate, under which epoch, when it
//! was last heard, and the newest state sequence number it has seen from it.

use super::epoch::Epoch;

/// What a message from a scheduler means to a node.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Heard {
    /// From the active scheduler: take it.
    Current,
    /// A better epoch than the one followed: this candidate is now the active one;
    /// reconnect to it (and repeat pending requests). Take the message.
    Switched {
        /// The epoch followed before.
        from: Epoch,
    },
    /// A worse epoch (an old active, fenced off): drop the message.
    Fenced,
}

/// The node side of failover.
#[derive(Clone, Debug)]
pub struct ActiveView {
    timeout_ms: u64,
    epoch: Epoch,
    last_heard_ms: u64,
    seen_seq: u64,
    echo_ms: u64,
}

impl ActiveView {
    /// A view that expects candidate `first` to be active (epoch term 0 until it is
    /// heard), with the silence timeout `timeout_ms` (0 = never lost), at `now_ms`.
    pub fn new(first: usize, timeout_ms: u64, now_ms: u64) -> ActiveView {
        ActiveView {
            timeout_ms,
            epoch: Epoch {
                term: 0,
                candidate: first as u32,
            },
            last_heard_ms: now_ms,
            seen_seq: 0,
            echo_ms: 0,
        }
    }

    /// The message just taken ([`Heard::Current`] or [`Heard::Switched`]) was sent at
    /// `sent_ms` by the active scheduler's clock: the lease echo the node's heartbeats
    /// carry ([`super::Lease`]). An older send time does not move it back; a switch to
    /// another epoch starts it afresh.
    pub fn took(&mut self, heard: Heard, sent_ms: u64) {
        match heard {
            Heard::Current => self.echo_ms = self.echo_ms.max(sent_ms),
            Heard::Switched { .. } => self.echo_ms = sent_ms,
            Heard::Fenced => {}
        }
    }

    /// The send time of the newest message taken from the scheduler followed.
    pub fn echo_ms(&self) -> u64 {
        self.echo_ms
    }

    /// A message from scheduler epoch `from`, stamped with state sequence `seq`, at
    /// `now_ms`.
    pub fn on_message(&mut self, from: Epoch, seq: u64, now_ms: u64) -> Heard {
        let out = if from == self.epoch {
            Heard::Current
        } else if from > self.epoch {
            let old = self.epoch;
            self.epoch = from;
            Heard::Switched { from: old }
        } else {
            return Heard::Fenced;
        };
        self.last_heard_ms = now_ms;
        self.seen_seq = self.seen_seq.max(seq);
        out
    }

    /// The epoch followed.
    pub fn epoch(&self) -> Epoch {
        self.epoch
    }

    /// Index of the candidate followed.
    pub fn active(&self) -> usize {
        self.epoch.candidate as usize
    }

    /// The newest state sequence number seen from any active scheduler.
    pub fn seen_seq(&self) -> u64 {
        self.seen_seq
    }

    /// Milliseconds since the active scheduler was last heard.
    pub fn silence_ms(&self, now_ms: u64) -> u64 {
        now_ms.saturating_sub(self.last_heard_ms)
    }

    /// True when the active scheduler has been silent for longer than the timeout.
    pub fn lost(&self, now_ms: u64) -> bool {
        self.timeout_ms > 0 && self.silence_ms(now_ms) > self.timeout_ms
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn e(term: u64, candidate: u32) -> Epoch {
        Epoch { term, candidate }
    }

    #[test]
    fn follows_the_best_epoch_and_fences_the_rest() {
        let mut v = ActiveView::new(0, 1000, 0);
        assert_eq!(v.on_message(e(1, 0), 3, 10), Heard::Switched { from: e(0, 0) });
        assert_eq!(v.on_message(e(1, 0), 5, 20), Heard::Current);
        v.took(Heard::Current, 18);
        v.took(Heard::Current, 12);
        v.took(Heard::Fenced, 50);
        assert_eq!(v.echo_ms(), 18, "the newest send time taken");
        assert_eq!(v.seen_seq(), 5);
        assert!(!v.lost(1020));
        assert!(v.lost(1021));
        assert_eq!(v.silence_ms(1021), 1001);
        // the standby took over
        assert_eq!(v.on_message(e(2, 1), 5, 1500), Heard::Switched { from: e(1, 0) });
        assert_eq!(v.active(), 1);
        assert!(!v.lost(1600));
        // the old active comes back: fenced, and it does not count as heard
        assert_eq!(v.on_message(e(1, 0), 9, 2600), Heard::Fenced);
        assert_eq!(v.seen_seq(), 5);
        assert!(v.lost(2600));
        // two standbys won the same term: the lower index wins
        assert_eq!(v.on_message(e(3, 2), 6, 2700), Heard::Switched { from: e(2, 1) });
        assert_eq!(v.on_message(e(3, 1), 6, 2710), Heard::Switched { from: e(3, 2) });
        assert_eq!(v.on_message(e(3, 2), 6, 2720), Heard::Fenced);
    }

    #[test]
    fn zero_timeout_is_never_lost() {
        let v = ActiveView::new(0, 0, 0);
        assert!(!v.lost(u64::MAX));
    }
}
