//! Why a parameter-table request or server failed, by kind: a worker's request that
//! does not fit the declared model is refused (its text travels back to the worker),
//! a declaration that does not decode is malformed, a server that cannot start fails
//! by the kind of its cause.

use crate::train::TrainError;
use ps_core::kv::KvError;

/// An error of the parameter tables.
#[derive(Debug, thiserror::Error)]
pub enum TablesError {
    /// A model's settings are invalid: an optimizer setting out of range, too many
    /// tables or rows, a server count the key layout cannot hold (bad input; names it).
    #[error("{0}")]
    Invalid(String),
    /// A request does not fit the declared model: a key of another server or table, a
    /// row past the table, values that do not match their lengths (bad input; names
    /// the key or the counts).
    #[error("{0}")]
    Misfit(String),
    /// A declaration does not decode.
    #[error("{0}")]
    Malformed(String),
    /// The KV server could not start.
    #[error(transparent)]
    Kv(#[from] KvError),
    /// The checkpoint of a replaced server cannot be read.
    #[error(transparent)]
    Train(#[from] TrainError),
    /// A thread could not be started (the operating system's reason).
    #[error("{0}")]
    Thread(String),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_text_is_the_message_and_the_kind_is_the_variant() {
        let e = TablesError::Misfit("key 7: 3 values, 4 expected".into());
        assert_eq!(e.to_string(), "key 7: 3 values, 4 expected");
        let k = TablesError::from(KvError::Transport("no reply".into()));
        assert!(matches!(k, TablesError::Kv(_)));
        assert_eq!(k.to_string(), "no reply");
    }
}
