//! Why a failover step failed, by kind: the caller decides by the kind (a scheduler
//! that is not active steps aside, a lock service that is unreachable is retried),
//! never by the message.

use super::epoch::Epoch;

/// An error of scheduler failover.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum FailoverError {
    /// `PS_ELECTION=etcd` asks for a lock service this program was built without (bad
    /// input: the configuration and the build do not match).
    #[error("PS_ELECTION=etcd: this program has no etcd lock service (build psrs with `--features etcd`)")]
    NoLockService,
    /// Only a scheduler does this (the text says what: "replicates state", "keeps
    /// state"); this process is a server or a worker.
    #[error("only a scheduler {0}")]
    NotScheduler(&'static str),
    /// This scheduler is not the active one (the epoch says who is): a standby, or an
    /// old active one that stepped down. It must not act.
    #[error("this scheduler is not active ({0} is)")]
    NotActive(Epoch),
    /// The step belongs to the other election mode than this scheduler runs (the text
    /// says which part is missing).
    #[error("{0}")]
    WrongElection(&'static str),
    /// The lock service says this scheduler does not (or no longer) hold the lock:
    /// nothing was saved, and the candidate steps down.
    #[error("{0}")]
    LockLost(String),
    /// The lock service could not be reached or failed to answer (names the service
    /// and the call).
    #[error("{0}")]
    Unavailable(String),
    /// The state was not saved under the scheduler lock, for the reason inside.
    #[error("state not saved under the scheduler lock: {0}")]
    NotSaved(Box<FailoverError>),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_text_is_the_message_and_the_kind_is_the_variant() {
        let e = FailoverError::NotActive(Epoch { term: 3, candidate: 1 });
        assert_eq!(
            e.to_string(),
            format!("this scheduler is not active ({} is)", Epoch { term: 3, candidate: 1 })
        );
        assert_eq!(
            FailoverError::NotScheduler("replicates state").to_string(),
            "only a scheduler replicates state"
        );
        let lost = FailoverError::NotSaved(Box::new(FailoverError::LockLost("etcd: gone".into())));
        assert_eq!(lost.to_string(), "state not saved under the scheduler lock: etcd: gone");
        assert!(matches!(lost, FailoverError::NotSaved(inner) if matches!(*inner, FailoverError::LockLost(_))));
        assert!(FailoverError::NoLockService.to_string().contains("--features etcd"));
    }
}
