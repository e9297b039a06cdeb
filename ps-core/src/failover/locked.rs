//! One scheduler candidate under an external lock service (`PS_ELECTION=etcd`), as a
//! pure state machine: the candidate holding the lock is the active scheduler under
//! the lock's term (etcd: the revision at which it was acquired, so every later
//! holder has a higher one); one that loses the lock steps down at once. The first
//! candidate seeks the lock at start; a standby only after it followed an active
//! one, so a standby started early never leads an empty cluster. The state lives in
//! the lock service, not in the candidates. The lock itself is held by a shell that
//! reports it through [`LockCandidate::on_lock`].

use super::epoch::Epoch;

/// The lock as its shell last saw it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lock {
    /// Not held (not sought yet, or waiting for it).
    Free,
    /// Held by this candidate, under the lock service's term.
    Held(u64),
    /// Was held, and the lease expired or could not be renewed: acting is unsafe.
    Lost,
}

/// What a candidate must do after [`LockCandidate::tick`] or a message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LockDecision {
    /// Nothing changes.
    Nothing,
    /// This candidate now holds the lock: active under this epoch (read the state
    /// from the lock service).
    TakeOver(Epoch),
    /// This candidate lost the lock, or heard a better epoch: it must not act.
    StepDown(Epoch),
}

/// A scheduler candidate under the lock-service election.
#[derive(Clone, Debug)]
pub struct LockCandidate {
    me: usize,
    primary: bool,
    lock: Lock,
    active: bool,
    epoch: Epoch,
    seq: u64,
}

impl LockCandidate {
    /// Candidate `me`; `primary` (the first candidate) seeks the lock at once.
    pub fn new(me: usize, primary: bool) -> LockCandidate {
        LockCandidate {
            me,
            primary,
            lock: Lock::Free,
            active: false,
            epoch: Epoch::default(),
            seq: 0,
        }
    }

    /// True while this candidate holds the lock and acts.
    pub fn is_active(&self) -> bool {
        self.active
    }

    /// The epoch followed (this candidate's own while active).
    pub fn epoch(&self) -> Epoch {
        self.epoch
    }

    /// The state sequence saved last.
    pub fn seq(&self) -> u64 {
        self.seq
    }

    /// Active only: the sequence number of a new state about to be saved.
    pub fn next_seq(&mut self) -> u64 {
        self.seq += 1;
        self.seq
    }

    /// Another candidate or a node follows `from`: a standby follows a better epoch;
    /// an active candidate steps down before it.
    pub fn on_epoch(&mut self, from: Epoch) -> LockDecision {
        if from <= self.epoch {
            return LockDecision::Nothing;
        }
        self.epoch = from;
        if self.active {
            self.active = false;
            return LockDecision::StepDown(from);
        }
        LockDecision::Nothing
    }

    /// True when the shell should hold or seek the lock now.
    pub fn wants_lock(&self) -> bool {
        self.primary || self.epoch.term > 0
    }

    /// The lock as the shell sees it now.
    pub fn on_lock(&mut self, lock: Lock) {
        self.lock = lock;
    }

    /// Periodic check: a standby holding the lock under a term above the one it
    /// follows takes over; an active one without the lock steps down.
    pub fn tick(&mut self) -> LockDecision {
        match (self.active, self.lock) {
            (true, Lock::Held(_)) => LockDecision::Nothing,
            (true, _) => {
                self.active = false;
                LockDecision::StepDown(self.epoch)
            }
            (false, Lock::Held(term)) if term > self.epoch.term => {
                self.active = true;
                self.epoch = Epoch {
                    term,
                    candidate: self.me as u32,
                };
                LockDecision::TakeOver(self.epoch)
            }
            (false, _) => LockDecision::Nothing,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_holder_is_active_and_a_lost_lock_steps_down() {
        let mut a = LockCandidate::new(0, true);
        assert!(a.wants_lock() && !a.is_active());
        assert_eq!(a.tick(), LockDecision::Nothing);
        a.on_lock(Lock::Held(17));
        let e = Epoch { term: 17, candidate: 0 };
        assert_eq!(a.tick(), LockDecision::TakeOver(e));
        assert!(a.is_active());
        assert_eq!(a.next_seq(), 1);
        a.on_lock(Lock::Lost);
        assert_eq!(a.tick(), LockDecision::StepDown(e));
        assert!(!a.is_active());

        let mut b = LockCandidate::new(1, false);
        assert!(
            !b.wants_lock(),
            "a standby seeks the lock only once it followed an active"
        );
        assert_eq!(b.on_epoch(e), LockDecision::Nothing);
        assert!(b.wants_lock());
        b.on_lock(Lock::Held(4));
        assert_eq!(
            b.tick(),
            LockDecision::Nothing,
            "a term not above the followed one is no win"
        );
        b.on_lock(Lock::Held(30));
        assert_eq!(b.tick(), LockDecision::TakeOver(Epoch { term: 30, candidate: 1 }));
        // a node follows a newer holder: step down
        let newer = Epoch { term: 40, candidate: 0 };
        assert_eq!(b.on_epoch(newer), LockDecision::StepDown(newer));
        assert_eq!(b.on_epoch(e), LockDecision::Nothing);
    }
}
