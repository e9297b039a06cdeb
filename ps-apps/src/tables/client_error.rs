//! Why a request of a worker to the parameter tables failed, and how the key-value
//! layer's errors and the servers' statuses map to it.

use super::wire::STATUS_UNDECLARED;
use ps_core::kv::{KvError, ServerReply};

/// Why a table request failed.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum ClientError {
    /// These servers hold no model (a replacement with nothing to restore): a lookup
    /// fails with this; declare the model to them again
    /// ([`super::client::TableClient::redeclare`])
    /// and look up again. (Steps and pulls declare it again themselves.)
    #[error("servers {0:?} hold no model")]
    Undeclared(Vec<usize>),
    /// A server refused the request (bad input, another model): its reason.
    #[error("{0}")]
    Refused(String),
    /// The cluster failed (no answer in time, a node unreachable).
    #[error("{0}")]
    Cluster(String),
}

/// The client error of a key-value error: a server's refusal or bad input is
/// [`ClientError::Refused`], the rest [`ClientError::Cluster`].
pub(crate) fn kv_failure(e: KvError) -> ClientError {
    match e {
        KvError::Server(_, why) => ClientError::Refused(why),
        KvError::Unsorted(_) | KvError::BadLength(_) => ClientError::Refused(e.to_string()),
        other => ClientError::Cluster(other.to_string()),
    }
}

/// `Err(Undeclared)` naming the servers of `replies` that hold no model.
pub(crate) fn undeclared(replies: &[ServerReply<f32>]) -> Result<(), ClientError> {
    let none: Vec<usize> = replies
        .iter()
        .filter(|r| r.status == STATUS_UNDECLARED)
        .map(|r| r.rank)
        .collect();
    if none.is_empty() {
        Ok(())
    } else {
        Err(ClientError::Undeclared(none))
    }
}
