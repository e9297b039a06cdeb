//! Why the master or its store could not do what was asked, by kind: callers decide
//! what to do (refuse a job, retry, stop) by the kind, never by the message.

use crate::recordio::RecordIoError;

/// An error of the master.
#[derive(Debug, thiserror::Error)]
pub enum MasterError {
    /// The master's settings are invalid (the message says which one).
    #[error("{0}")]
    Config(String),
    /// A dataset file cannot be indexed: unreachable or damaged.
    #[error(transparent)]
    Dataset(#[from] RecordIoError),
    /// The stored task queues are corrupt, or the queues cannot be encoded.
    #[error("{0}")]
    Corrupt(String),
    /// The store could not load or save; the change was not made.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Why a [`Store`](super::Store) could not load or save its state, by kind.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum StoreError {
    /// The file or service failed (the message names it).
    #[error("{0}")]
    Failed(String),
    /// This scheduler no longer acts (it stepped down, or lost its lock, between its
    /// check and the save): nothing was saved, and the caller steps aside, which is
    /// no fault of the store (the message says who acts, or what the lock service said).
    #[error("{0}")]
    SteppedDown(String),
}

impl From<String> for StoreError {
    fn from(message: String) -> StoreError {
        StoreError::Failed(message)
    }
}

/// The scheduler's van could not hand the state to the standbys: a scheduler that is
/// not active, or whose lock is lost, stepped down ([`StoreError::SteppedDown`]); any
/// other reason fails the save.
impl From<ps_core::failover::FailoverError> for StoreError {
    fn from(e: ps_core::failover::FailoverError) -> StoreError {
        use ps_core::failover::FailoverError as F;
        let down = |e: &F| matches!(e, F::NotActive(_) | F::LockLost(_));
        match &e {
            F::NotSaved(inner) if down(inner) => StoreError::SteppedDown(e.to_string()),
            e if down(e) => StoreError::SteppedDown(e.to_string()),
            _ => StoreError::Failed(e.to_string()),
        }
    }
}

impl MasterError {
    /// Whether this is a save refused because the scheduler stopped acting meanwhile
    /// (the queues are unchanged, the active scheduler holds them): expected at the
    /// moment a scheduler steps down, so logged as such rather than as a failure.
    pub fn stepped_down(&self) -> bool {
        matches!(self, MasterError::Store(StoreError::SteppedDown(_)))
    }

    /// Logs this error of the master met while `doing` (e.g. "answering worker 9"): a
    /// step down ([`MasterError::stepped_down`]) as a warning, anything else as an
    /// error.
    pub fn log(&self, doing: &str) {
        match self.stepped_down() {
            true => log::warn!("master: {self}: stepped down while {doing}"),
            false => log::error!("master: {self} (while {doing})"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_text_is_the_message_and_the_kind_is_the_variant() {
        let e = MasterError::from(StoreError::Failed("the store is unavailable".into()));
        assert!(matches!(e, MasterError::Store(_)));
        assert_eq!(e.to_string(), "the store is unavailable");
        assert_eq!(MasterError::Config("x".into()).to_string(), "x");
        let inactive = StoreError::from(ps_core::failover::FailoverError::NotScheduler("replicates state"));
        assert_eq!(inactive, StoreError::Failed("only a scheduler replicates state".into()));
        assert!(!MasterError::from(inactive).stepped_down());
    }

    #[test]
    fn a_save_refused_to_a_scheduler_that_no_longer_acts_is_a_step_down_not_a_failure() {
        use ps_core::failover::{Epoch, FailoverError as F};
        let epoch = Epoch { term: 2, candidate: 1 };
        for e in [
            F::NotActive(epoch),
            F::LockLost("lease expired".into()),
            F::NotSaved(Box::new(F::LockLost("lease expired".into()))),
        ] {
            let text = e.to_string();
            let m = MasterError::from(StoreError::from(e));
            assert!(m.stepped_down(), "{m}");
            assert_eq!(m.to_string(), text);
        }
        let unreachable = F::NotSaved(Box::new(F::Unavailable("etcd: put: timed out".into())));
        assert!(!MasterError::from(StoreError::from(unreachable)).stepped_down());
    }
}
