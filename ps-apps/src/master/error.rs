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

/// Why a [`Store`](super::Store) could not load or save its state (the message names
/// the file or service).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct StoreError(pub String);

impl From<String> for StoreError {
    fn from(message: String) -> StoreError {
        StoreError(message)
    }
}

/// The scheduler's van could not hand the state to the standbys (this scheduler is
/// not active, or its lock is lost): the save fails with that reason.
impl From<ps_core::failover::FailoverError> for StoreError {
    fn from(e: ps_core::failover::FailoverError) -> StoreError {
        StoreError(e.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_text_is_the_message_and_the_kind_is_the_variant() {
        let e = MasterError::from(StoreError("the store is unavailable".into()));
        assert!(matches!(e, MasterError::Store(_)));
        assert_eq!(e.to_string(), "the store is unavailable");
        assert_eq!(MasterError::Config("x".into()).to_string(), "x");
        let inactive = StoreError::from(ps_core::failover::FailoverError::NotScheduler("replicates state"));
        assert_eq!(inactive.0, "only a scheduler replicates state");
    }
}
