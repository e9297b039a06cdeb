//! Why shared memory with a peer was not set up, by kind. Any of them leaves the link
//! on plain TCP.

/// An error of shared memory.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ShmError {
    /// A region size or an offer that is not valid: a size that is not a page
    /// multiple within the bounds, an offer of another length or version.
    #[error("{0}")]
    Invalid(String),
    /// The offer is refused: shared memory is off, a second offer on one link, a peer
    /// on another host, a file that is not the sealed region offered.
    #[error("{0}")]
    Refused(String),
    /// The offered file could not be inspected or mapped (names the file).
    #[error("{0}")]
    Io(String),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_text_is_the_message_and_the_kind_is_the_variant() {
        let e = ShmError::Refused("another host (boot id differs)".into());
        assert_eq!(e.to_string(), "another host (boot id differs)");
        assert!(matches!(e, ShmError::Refused(_)));
    }
}
