//! How a call to a Python runner fails. The kind decides what the worker does: the
//! user's code raised (the runner lives on, the batch fails), or the runner is gone,
//! hung or broken (it is killed and started afresh for the next batch).

use std::time::Duration;

/// A failed request to a runner.
#[derive(Debug, thiserror::Error)]
pub enum RunnerError {
    /// The interpreter could not be started.
    #[error("cannot start the Python runner with {python:?}: {source} (set psrs cluster --python)")]
    Spawn {
        /// The interpreter tried.
        python: String,
        /// Why.
        source: std::io::Error,
    },
    /// The runner exited (killed, crashed, or `sys.exit` in the user's code).
    #[error("the Python runner died ({0})")]
    Died(String),
    /// The runner took longer than the allowed time; it was killed.
    #[error("the Python runner took longer than {0:.1?}; killed")]
    Timeout(Duration),
    /// The user's code raised: the exception's type and message, one line.
    #[error("{0}")]
    Raised(String),
    /// The runner said something that is not the protocol.
    #[error("the Python runner broke the protocol: {0}")]
    Protocol(String),
    /// The runner's settings are invalid (bad input; names the option).
    #[error("{0}")]
    Invalid(String),
}

impl RunnerError {
    /// Whether the runner process is unusable after this error (it is then killed and
    /// a new one started on the next request); false when only the user's code raised.
    pub fn is_fatal(&self) -> bool {
        !matches!(self, RunnerError::Raised(_))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_text_is_the_message_and_the_kind_is_the_variant() {
        let e = RunnerError::Invalid("--runner-threads must be at least 1".into());
        assert_eq!(e.to_string(), "--runner-threads must be at least 1");
        assert!(!RunnerError::Raised("ValueError: x".into()).is_fatal());
        assert!(RunnerError::Timeout(Duration::from_secs(2)).is_fatal());
    }
}
