//! Bugs the simulator plants on purpose in the production code: each switch brings
//! back one wrong behaviour that real runs showed, so that ps-sim's tests can prove a
//! seed finds it (and passes without it). All are off by default; no variable or
//! flag turns one on, only a [`super::Config`] built by the simulator.

/// The planted bugs of a node's postoffice and van (all off: the production code).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Planted {
    /// An acting scheduler's liveness counts a node's silence from its last heartbeat
    /// even when that was before this scheduler started acting: one that has just
    /// taken over, or got its lease back after a cut, declares dead the nodes it could
    /// not hear, though they were alive (and had just voted for it).
    pub silence_before_acting: bool,
    /// A scheduler candidate campaigns without asking for pre-votes first: one cut off
    /// with a minority raises its term again and again, and at the heal the nodes that
    /// hear that term leave the scheduler the majority had, which must win again
    /// (leadership changes twice after a heal, as real partitions once showed by
    /// another way: a winner the nodes did not hear from in time).
    pub no_pre_vote: bool,
}
