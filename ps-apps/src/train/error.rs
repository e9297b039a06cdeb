//! Why training failed, by kind: the caller decides by the kind (data to fix, a
//! scheduler or server that does not answer, a file that cannot be written), never by
//! the message.

use crate::model::{ModelError, ModelFileError};
use crate::recordio::RecordIoError;
use crate::stats::StatsError;
use ps_core::kv::KvError;
use ps_core::PostofficeError;

/// An error of training (the master's client, the worker, the server, checkpoints).
#[derive(Debug, thiserror::Error)]
pub enum TrainError {
    /// The exchange with the servers failed (the key-value layer's kind).
    #[error(transparent)]
    Kv(#[from] KvError),
    /// An app could not register with the postoffice.
    #[error(transparent)]
    Register(#[from] PostofficeError),
    /// The scheduler did not answer within the patience (unreachable, or restarting
    /// for too long).
    #[error("{0}")]
    Unanswered(String),
    /// A message from the scheduler or a worker does not decode.
    #[error("{0}")]
    Malformed(String),
    /// The master refused the request or answered something unexpected (its text).
    #[error("{0}")]
    Master(String),
    /// The model or its options are invalid, or data does not fit it (see
    /// [`ModelError`]'s kinds).
    #[error(transparent)]
    Model(#[from] ModelError),
    /// A model file could not be written.
    #[error(transparent)]
    ModelFile(#[from] ModelFileError),
    /// A dataset file cannot be read (see [`RecordIoError`]'s kinds).
    #[error(transparent)]
    Data(#[from] RecordIoError),
    /// A record of the dataset is not an example, or does not fit the model (names
    /// the file and chunk when known).
    #[error("{0}")]
    BadData(String),
    /// A checkpoint file could not be read or written (names it).
    #[error("{0}")]
    CheckpointIo(String),
    /// A checkpoint file is corrupt, or a shard cannot be encoded (names it).
    #[error("{0}")]
    CorruptCheckpoint(String),
    /// The statistics server could not start.
    #[error(transparent)]
    Stats(#[from] StatsError),
    /// A thread could not be started (the operating system's reason).
    #[error("{0}")]
    Thread(String),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_text_is_the_message_and_the_kind_is_the_variant() {
        let e = TrainError::Unanswered("the scheduler did not answer for 2s: no answer within 2s".into());
        assert_eq!(
            e.to_string(),
            "the scheduler did not answer for 2s: no answer within 2s"
        );
        let kv = TrainError::from(KvError::Transport("no reply to request 3 within 1s".into()));
        assert!(matches!(kv, TrainError::Kv(KvError::Transport(_))));
        assert_eq!(kv.to_string(), "no reply to request 3 within 1s");
    }
}
