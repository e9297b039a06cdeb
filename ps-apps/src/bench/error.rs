//! Why a benchmark run failed, by kind.

use ps_core::kv::KvError;

/// An error of a benchmark run.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum BenchError {
    /// A request to the servers failed (the key-value layer's kind).
    #[error(transparent)]
    Kv(#[from] KvError),
    /// A pull answered another number of bytes than was pushed: the cluster returned
    /// wrong data.
    #[error("pulled {got} bytes, expected {want}")]
    WrongSize {
        /// Bytes pulled.
        got: u64,
        /// Bytes pushed.
        want: u64,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_text_is_the_message_and_the_kind_is_the_variant() {
        assert_eq!(
            BenchError::WrongSize { got: 3, want: 4 }.to_string(),
            "pulled 3 bytes, expected 4"
        );
        let kv = BenchError::from(KvError::Transport("no reply".into()));
        assert!(matches!(kv, BenchError::Kv(_)));
        assert_eq!(kv.to_string(), "no reply");
    }
}
