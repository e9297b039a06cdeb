//! What a training server holds: one shard per key range it serves or backs up.

use super::shard::Shard;
use ps_core::kv::{KVMeta, KVResponder, SArray};
use std::collections::BTreeMap;

/// One key range's shard (this server's own, or, with replication, one it backs up).
pub(super) struct RangeState {
    pub(super) shard: Shard,
    pub(super) held: Vec<(KVMeta, SArray<u64>)>,
    pub(super) last_checkpoint: u64,
}

/// A training server's state, shared by its request handler, its ticker and its
/// replacement's copies.
pub(super) struct State {
    /// By key range (server rank): this server's own range, and with `PS_REPLICAS`
    /// the ranges it backs up (it gets their pushes forwarded, and serves them once
    /// it is their first live holder).
    pub(super) ranges: BTreeMap<usize, RangeState>,
    /// A responder that sends (taken from a pull: a replicated push gets one that
    /// holds its answer until the other replicas applied it).
    pub(super) responder: Option<KVResponder>,
}
