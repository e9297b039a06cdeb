//! Why a protocol decision could not be taken: the state it was given is not valid.

/// An error of the protocol's state machines.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ProtocolError {
    /// The node table handed over by the active scheduler does not decode (corrupt
    /// state); nothing was changed.
    #[error("the node table from the active scheduler: {0}")]
    CorruptTable(String),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_text_is_the_message_and_the_kind_is_the_variant() {
        let e = ProtocolError::CorruptTable("io error: unexpected end of file".into());
        assert_eq!(
            e.to_string(),
            "the node table from the active scheduler: io error: unexpected end of file"
        );
    }
}
