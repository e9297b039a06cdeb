//! What entitles a scheduler candidate to be the active one: the [`Election`] trait
//! and its two rules. [`Majority`] (embedded, the default) lets a standby take over
//! when the active one is silent and a majority of the nodes agree; [`Leased`] (e.g.
//! etcd, `PS_ELECTION=etcd`) makes the holder of a lease-backed lock the active one,
//! under the term the lock service hands out. Both are pure: the lock itself is held
//! by a shell that reports its state through [`Leased::on_lock`].

use super::epoch::Epoch;

/// Why a standby that lost the active scheduler does not take over (yet).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// Fewer than a majority of the live nodes report the active one silent too: it is
    /// alive and only this standby was cut off from it.
    NoMajority {
        /// Nodes reporting the silence.
        have: usize,
        /// Nodes needed.
        need: usize,
    },
    /// A node has seen a state newer than the one this standby holds: taking over
    /// would redo or lose work. Waits to be caught up by an active scheduler.
    Stale {
        /// The state sequence held here.
        mine: u64,
        /// The newest one a node saw.
        seen: u64,
    },
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refusal::NoMajority { have, need } => write!(
                f,
                "only {have} of the {need} nodes needed report the active scheduler silent"
            ),
            Refusal::Stale { mine, seen } => write!(
                f,
                "this standby holds state {mine} but a node saw state {seen}; waiting to be caught up"
            ),
        }
    }
}

/// What a standby knows when it considers taking over (gathered by
/// `Candidate::tick`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Facts {
    /// Milliseconds since the active scheduler was last heard.
    pub silence_ms: u64,
    /// How long this standby must have lost the active one before it may take over
    /// (the timeout plus its rank's extra wait); 0 = never.
    pub wait_ms: u64,
    /// The epoch followed.
    pub followed: Epoch,
    /// The state sequence this standby holds.
    pub held_seq: u64,
    /// The newest state sequence any node reported seeing.
    pub seen_seq: u64,
    /// Nodes that recently reported the active one silent past the timeout.
    pub silent_witnesses: usize,
    /// Live nodes in the node table followed.
    pub live_nodes: usize,
}

/// A standby's verdict at a tick.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Vote {
    /// Keep following.
    Wait,
    /// The active one is lost but this standby may not take over.
    Refuse(Refusal),
    /// Take over under this term.
    Win(u64),
}

/// A rule deciding which candidate is active.
pub trait Election: Send + std::fmt::Debug {
    /// A standby's verdict given `f`.
    fn standby(&mut self, f: &Facts) -> Vote;
    /// False when the active candidate may no longer act (its lock is lost): it steps
    /// down at once.
    fn may_act(&self) -> bool {
        true
    }
    /// True when the shell should hold or seek the external lock now, for a candidate
    /// following `followed`.
    fn wants_lock(&self, _followed: Epoch) -> bool {
        false
    }
    /// True when the state a new active needs is kept by the lock service (read from it
    /// on takeover) instead of streamed between candidates.
    fn external_state(&self) -> bool {
        false
    }
    /// The shell's latest view of the external lock (ignored by rules without one).
    fn on_lock(&mut self, _lock: Lock) {}
}

/// The embedded rule: a standby takes over when it has not heard the active one for
/// the wait, no node saw a state newer than its own, and a majority of the live nodes
/// report the active one silent too. The new term is the followed one plus one.
#[derive(Clone, Copy, Debug, Default)]
pub struct Majority;

impl Election for Majority {
    fn standby(&mut self, f: &Facts) -> Vote {
        if f.wait_ms == 0 || f.silence_ms <= f.wait_ms {
            return Vote::Wait;
        }
        if f.seen_seq > f.held_seq {
            return Vote::Refuse(Refusal::Stale {
                mine: f.held_seq,
                seen: f.seen_seq,
            });
        }
        let need = if f.live_nodes == 0 { 0 } else { f.live_nodes / 2 + 1 };
        if f.silent_witnesses < need {
            return Vote::Refuse(Refusal::NoMajority {
                have: f.silent_witnesses,
                need,
            });
        }
        Vote::Win(f.followed.term + 1)
    }
}

/// The lock as its shell last saw it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lock {
    /// Not held (not sought yet, or waiting for it).
    Free,
    /// Held by this candidate; the term is the lock service's (etcd: the revision at
    /// which the lock was acquired, so every later holder has a higher one).
    Held(u64),
    /// Was held, and the lease expired or could not be renewed: acting is unsafe.
    Lost,
}

/// The lock-service rule: the candidate holding the lock is active under the lock's
/// term; one that loses it steps down. The first candidate (`primary`) seeks the lock
/// at once; a standby only after it followed an active one, so a standby started early
/// never leads an empty cluster. The state lives in the lock service.
#[derive(Clone, Copy, Debug)]
pub struct Leased {
    primary: bool,
    lock: Lock,
}

impl Leased {
    /// The rule for the first candidate (`primary`) or a standby.
    pub fn new(primary: bool) -> Leased {
        Leased {
            primary,
            lock: Lock::Free,
        }
    }
}

impl Election for Leased {
    fn standby(&mut self, f: &Facts) -> Vote {
        match self.lock {
            Lock::Held(term) if term > f.followed.term => Vote::Win(term),
            _ => Vote::Wait,
        }
    }
    fn may_act(&self) -> bool {
        matches!(self.lock, Lock::Held(_))
    }
    fn wants_lock(&self, followed: Epoch) -> bool {
        self.primary || followed.term > 0
    }
    fn external_state(&self) -> bool {
        true
    }
    fn on_lock(&mut self, lock: Lock) {
        self.lock = lock;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facts() -> Facts {
        Facts {
            silence_ms: 1500,
            wait_ms: 1000,
            followed: Epoch { term: 4, candidate: 0 },
            held_seq: 7,
            seen_seq: 7,
            silent_witnesses: 2,
            live_nodes: 3,
        }
    }

    #[test]
    fn majority_needs_silence_fresh_state_and_a_majority() {
        let mut m = Majority;
        assert_eq!(m.standby(&facts()), Vote::Win(5));
        assert_eq!(
            m.standby(&Facts {
                silence_ms: 1000,
                ..facts()
            }),
            Vote::Wait
        );
        assert_eq!(m.standby(&Facts { wait_ms: 0, ..facts() }), Vote::Wait);
        assert_eq!(
            m.standby(&Facts { seen_seq: 8, ..facts() }),
            Vote::Refuse(Refusal::Stale { mine: 7, seen: 8 })
        );
        assert_eq!(
            m.standby(&Facts {
                silent_witnesses: 1,
                ..facts()
            }),
            Vote::Refuse(Refusal::NoMajority { have: 1, need: 2 })
        );
        assert!(m.may_act() && !m.external_state() && !m.wants_lock(facts().followed));
    }

    #[test]
    fn leased_follows_the_lock_not_the_silence() {
        let mut primary = Leased::new(true);
        assert!(primary.wants_lock(Epoch::default()));
        assert!(!primary.may_act());
        primary.on_lock(Lock::Held(17));
        assert!(primary.may_act());
        primary.on_lock(Lock::Lost);
        assert!(!primary.may_act(), "a lost lease forbids acting");

        let mut s = Leased::new(false);
        assert!(
            !s.wants_lock(Epoch::default()),
            "a standby seeks the lock only once it followed an active"
        );
        assert!(s.wants_lock(facts().followed));
        // silent, a majority agrees, but no lock: wait
        assert_eq!(
            s.standby(&Facts {
                silence_ms: 99_999,
                ..facts()
            }),
            Vote::Wait
        );
        s.on_lock(Lock::Held(30));
        // the lock is won: take over at once, under the lock's term
        assert_eq!(
            s.standby(&Facts {
                silence_ms: 0,
                ..facts()
            }),
            Vote::Win(30)
        );
        // a term not above the followed one (a newer active exists) is no win
        s.on_lock(Lock::Held(4));
        assert_eq!(s.standby(&facts()), Vote::Wait);
        assert!(s.external_state());
    }
}
