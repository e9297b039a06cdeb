//! What a KV worker gets back: each server's answer, and the callback called once
//! every server answered.

use super::error::KvError;
use super::pairs::KVPairs;
use bytemuck::Pod;

/// One server's answer to a request.
#[derive(Clone, Debug, PartialEq)]
pub struct ServerReply<V: Pod> {
    /// Server rank.
    pub rank: usize,
    /// Status (0 = ok; the application defines positive values).
    pub status: i32,
    /// Version the server sent back.
    pub version: u64,
    /// Pulled values (empty for a push).
    pub data: KVPairs<V>,
}

/// Called once when every server answered (or one refused the request).
pub type Callback<V> = Box<dyn FnOnce(Result<&[ServerReply<V>], &KvError>) + Send>;
