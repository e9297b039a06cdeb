//! Why a cluster secret is refused.

/// A refused cluster secret, by kind.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum AuthError {
    /// The secret is shorter than `min` bytes ([`MIN_SECRET_BYTES`](super::secret::MIN_SECRET_BYTES)):
    /// too easy to guess (bad input).
    #[error("the secret has {len} bytes; it needs at least {min} (e.g. `head -c 32 /dev/urandom | base64`)")]
    TooShort {
        /// The secret's length in bytes.
        len: usize,
        /// The shortest length accepted.
        min: usize,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_text_is_the_message_and_the_kind_is_the_variant() {
        let e = AuthError::TooShort { len: 3, min: 16 };
        assert_eq!(
            e.to_string(),
            "the secret has 3 bytes; it needs at least 16 (e.g. `head -c 32 /dev/urandom | base64`)"
        );
    }
}
