//! The messages of a replacement's catch-up, between replicas (customer
//! `FORWARD_CUSTOMER`, never a push, told apart by the message head):
//! - `OP_FETCH` (request, newcomer → source): `range` = the key range to copy.
//! - `OP_COPY` (answer): frame 0 a [`CopyHead`] (the range and the request ids the
//!   source applied in it), frame 1 the application's copy of the range.
//! - `OP_REJOINED` (request, newcomer → every server and worker, to the app's own
//!   customer id): it holds all its ranges again.

use super::dedup::{Outcome, RequestId};
use super::wire::{decode_head, encode_head};
use crate::kv::error::KvError;
use bytes::Bytes;
use serde::{Deserialize, Serialize};

/// Head of a copy request.
pub const OP_FETCH: i32 = i32::MIN + 1;
/// Head of a copy.
pub const OP_COPY: i32 = i32::MIN + 2;
/// Head of the rejoin notice (reserved: applications must not use it as a command).
pub const OP_REJOINED: i32 = i32::MIN + 3;

/// Largest copy header accepted (the dedup window's cap of ids).
const MAX_COPY_HEAD_BYTES: u64 = 64 << 20;

/// What a copy holds besides the application's state.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CopyHead {
    /// The key range (server rank) copied.
    pub range: usize,
    /// The request ids applied in the range that the source remembers, with the
    /// answers they got.
    pub ids: Vec<(RequestId, Outcome)>,
}

impl CopyHead {
    /// The header as a frame.
    pub fn encode(&self) -> Bytes {
        encode_head(self)
    }

    /// Decodes the first frame of a copy ([`KvError::BadHeader`] if it cannot).
    pub fn decode(frames: &[Bytes]) -> Result<CopyHead, KvError> {
        decode_head(frames, MAX_COPY_HEAD_BYTES, "copy")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_garbage_is_an_error() {
        let id = RequestId {
            origin: 9,
            incarnation: 7,
            customer: 0,
            timestamp: 42,
            range: 2,
        };
        let h = CopyHead {
            range: 2,
            ids: vec![(id, Outcome { status: 0, version: 3 })],
        };
        assert_eq!(CopyHead::decode(&[h.encode()]), Ok(h));
        assert!(CopyHead::decode(&[]).is_err());
        assert!(CopyHead::decode(&[Bytes::from_static(b"\x05\x01")]).is_err());
    }
}
