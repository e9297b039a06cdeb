//! Why the van could not join the cluster, leave it, or hand state to the standbys, by
//! kind: the caller decides by the kind (a refusal or a timeout is the cluster's
//! shape or credentials, an I/O failure this host's), never by the message.

use crate::config::ConfigError;
use crate::failover::FailoverError;

/// An error of the van.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum VanError {
    /// The configuration cannot work (names the variable): an unknown van type, TLS
    /// credentials that cannot be read.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// Scheduler failover refused the step: no lock service for `PS_ELECTION=etcd`,
    /// a scheduler that is not active.
    #[error(transparent)]
    Failover(#[from] FailoverError),
    /// This host could not do its part: bind the port, open a connection to the
    /// scheduler, start a thread, send a message.
    #[error("{0}")]
    Io(String),
    /// The scheduler refused this node (its credentials, or its registration).
    #[error("{0}")]
    Refused(String),
    /// The scheduler did not answer in time: no node table within the join timeout,
    /// no answer to a goodbye, or the cluster did not complete.
    #[error("{0}")]
    Timeout(String),
    /// The scheduler is up but cannot reach this node (the advertised address is
    /// wrong or firewalled).
    #[error("{0}")]
    Unreachable(String),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_text_is_the_message_and_the_kind_is_the_variant() {
        let e = VanError::Timeout("no node table from the scheduler".into());
        assert_eq!(e.to_string(), "no node table from the scheduler");
        let f = VanError::from(FailoverError::NoLockService);
        assert!(matches!(f, VanError::Failover(FailoverError::NoLockService)));
        assert_eq!(f.to_string(), FailoverError::NoLockService.to_string());
        let c = VanError::from(ConfigError {
            role: None,
            var: "DMLC_PS_VAN_TYPE".into(),
            reason: "unknown van type 'x' (zmq or tcp)".into(),
        });
        assert_eq!(c.to_string(), "DMLC_PS_VAN_TYPE: unknown van type 'x' (zmq or tcp)");
    }
}
