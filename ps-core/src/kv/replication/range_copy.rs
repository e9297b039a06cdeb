//! The application's side of a replacement server's catch-up: the state of the key
//! ranges a server holds, copied from a live replica (see [`super::catchup`]).

use crate::kv::error::KvError;

/// An application's state of the key ranges a server holds, copied to a replacement
/// server (see [`super::catchup`]). Both calls run under the lock pushes are applied under.
pub trait RangeCopy: Send {
    /// The state of key range `range` (a server rank; its keys are `keys`).
    fn snapshot(&mut self, range: usize, keys: crate::kv::range::KeyRange) -> bytes::Bytes;
    /// Replaces this server's state of `range` with `data`, a [`RangeCopy::snapshot`]
    /// taken on another replica. Malformed data is [`KvError::BadCopy`] and changes
    /// nothing.
    fn restore(&mut self, range: usize, keys: crate::kv::range::KeyRange, data: &[u8]) -> Result<(), KvError>;
}
