//! The header of a push forwarded from one replica to another, and of its
//! acknowledgement: the first data frame (bincode, bounded decode); a forward's key,
//! value and length frames follow.

use super::dedup::RequestId;
use crate::kv::error::KvError;
use bincode::Options;
use bytes::Bytes;
use serde::{Deserialize, Serialize};

/// Largest header accepted.
const MAX_HEAD_BYTES: u64 = 4096;

/// What a forwarded push (or its acknowledgement) is about.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ForwardHead {
    /// The worker request it came from.
    pub id: RequestId,
    /// The worker's command.
    pub cmd: i32,
    /// The worker's version.
    pub version: u64,
    /// What the holder that applied it first answered the worker.
    pub answered: super::dedup::Outcome,
}

/// `head` as a frame (bincode).
pub(super) fn encode_head<T: Serialize>(head: &T) -> Bytes {
    Bytes::from(
        bincode::DefaultOptions::new()
            .serialize(head)
            .expect("a header always serializes"),
    )
}

/// Decodes the first of `frames` as a `what` header of at most `limit` bytes;
/// [`KvError::BadHeader`] when it is missing or does not decode.
pub(super) fn decode_head<T: serde::de::DeserializeOwned>(
    frames: &[Bytes],
    limit: u64,
    what: &str,
) -> Result<T, KvError> {
    let first = frames
        .first()
        .ok_or_else(|| KvError::BadHeader(format!("{what} without a header frame")))?;
    bincode::DefaultOptions::new()
        .with_limit(limit)
        .reject_trailing_bytes()
        .deserialize(first)
        .map_err(|e| KvError::BadHeader(format!("malformed {what} header: {e}")))
}

impl ForwardHead {
    /// The header as a frame.
    pub fn encode(&self) -> Bytes {
        encode_head(self)
    }

    /// Decodes the first frame of `frames` ([`KvError::BadHeader`] if it cannot).
    pub fn decode(frames: &[Bytes]) -> Result<ForwardHead, KvError> {
        decode_head(frames, MAX_HEAD_BYTES, "forward")
    }
}

/// The customer id replicas use among themselves for forwards and acknowledgements
/// (per app; workers never use it).
pub const FORWARD_CUSTOMER: i32 = 1 << 30;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_garbage_is_an_error() {
        let h = ForwardHead {
            id: RequestId {
                origin: 9,
                incarnation: 7,
                customer: 0,
                timestamp: 42,
                range: 2,
            },
            cmd: 3,
            version: 11,
            answered: crate::kv::replication::Outcome { status: 1, version: 12 },
        };
        assert_eq!(ForwardHead::decode(&[h.encode()]), Ok(h));
        assert_eq!(
            ForwardHead::decode(&[]),
            Err(KvError::BadHeader("forward without a header frame".into()))
        );
        assert!(ForwardHead::decode(&[Bytes::from_static(b"\x01")]).is_err());
    }
}
