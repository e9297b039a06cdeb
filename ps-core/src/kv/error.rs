//! Why a key/value request, a KV app or a replica failed, by kind: a caller decides by
//! the kind (the request's fault, the server's refusal, the cluster's failure, a
//! replica that cannot serve), never by the message.

use super::range::KeyRange;
use crate::error::PostofficeError;

/// An error of the key-value layer.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum KvError {
    /// Keys not strictly ascending at this index (bad input).
    #[error("keys must be sorted ascending and unique (key {0} is not above key {prev})", prev = .0 - 1)]
    Unsorted(usize),
    /// Value count does not fit the keys and lengths (bad input).
    #[error("values do not match keys: {0}")]
    BadLength(String),
    /// A key outside the receiving server's range.
    #[error("key {0} is outside this server's range {1}")]
    OutOfRange(u64, KeyRange),
    /// A data frame did not decode.
    #[error("malformed key/value frame: {0}")]
    BadFrame(String),
    /// The server refused the request (its reason).
    #[error("server {0} refused the request: {1}")]
    Server(i32, String),
    /// Sending failed or no reply in time.
    #[error("{0}")]
    Transport(String),
    /// Bytes that are not a whole number of values (`len` bytes, values of `size`
    /// bytes): a frame that does not decode.
    #[error("{len} bytes are not a whole number of {size}-byte values")]
    Misaligned {
        /// The bytes given.
        len: usize,
        /// The size of one value.
        size: usize,
    },
    /// The KV app could not register with the postoffice (its customer ids are taken,
    /// or its thread did not start).
    #[error(transparent)]
    Register(#[from] PostofficeError),
    /// A header between replicas is missing or does not decode (the message is
    /// dropped).
    #[error("{0}")]
    BadHeader(String),
    /// A copy of a key range does not decode or does not fit the range it is offered
    /// for; nothing was changed.
    #[error("{0}")]
    BadCopy(String),
    /// A replacement server cannot take up its key ranges (no live replica holds them,
    /// or its application cannot copy them): it does not serve.
    #[error("{0}")]
    CannotServe(String),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_text_is_the_message_and_the_kind_is_the_variant() {
        assert_eq!(
            KvError::Unsorted(3).to_string(),
            "keys must be sorted ascending and unique (key 3 is not above key 2)"
        );
        assert_eq!(
            KvError::Misaligned { len: 5, size: 8 }.to_string(),
            "5 bytes are not a whole number of 8-byte values"
        );
        let taken = KvError::from(PostofficeError::CustomerTaken {
            app_id: 0,
            customer_id: 0,
        });
        assert!(matches!(
            taken,
            KvError::Register(PostofficeError::CustomerTaken { .. })
        ));
        assert_eq!(taken.to_string(), "customer 0 of app 0 is already registered");
        assert_eq!(KvError::BadCopy("copy: x".into()).to_string(), "copy: x");
    }
}
