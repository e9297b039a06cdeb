//! Why a model could not be built, or data does not fit it, by kind: the caller decides
//! by the kind (an option to fix, a dataset that does not fit or cannot be read),
//! never by the message.

use crate::recordio::{MalformedExample, RecordIoError};

/// An error of the model room (model files have their own, `ModelFileError`).
#[derive(Debug, thiserror::Error)]
pub enum ModelError {
    /// An option or size is invalid: an unknown model name, a size of 0, too many
    /// parameters, an optimizer setting out of range (bad input; names it).
    #[error("{0}")]
    Invalid(String),
    /// Examples do not fit the model: another feature count, sparse data for a dense
    /// model, a label that is no class (bad input; names the data).
    #[error("{0}")]
    Misfit(String),
    /// A dataset holds no records or examples (names it).
    #[error("{0}")]
    Empty(String),
    /// A dataset file cannot be read; its [`RecordIoError`] says the kind.
    #[error(transparent)]
    Data(#[from] RecordIoError),
    /// A record is not an example.
    #[error(transparent)]
    Example(#[from] MalformedExample),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_text_is_the_message_and_the_kind_is_the_variant() {
        let e = ModelError::Empty("t.rio holds no examples".into());
        assert_eq!(e.to_string(), "t.rio holds no examples");
        let m = ModelError::from(MalformedExample("sparse indices and values differ in length".into()));
        assert!(matches!(m, ModelError::Example(_)));
        assert_eq!(
            m.to_string(),
            MalformedExample("sparse indices and values differ in length".into()).to_string()
        );
    }
}
