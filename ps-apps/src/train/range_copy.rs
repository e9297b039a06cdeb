//! A training server's shards as the replication layer's [`RangeCopy`]: a replacement
//! server copies each range's whole shard (parameters, version, optimizer state, the
//! sync version in progress, the idle workers) from a live replica.

use super::server_state::State;
use super::shard::Shard;
use bincode::Options;
use bytes::Bytes;
use parking_lot::Mutex;
use ps_core::kv::replication::RangeCopy;
use ps_core::kv::{KeyRange, KvError};
use std::collections::BTreeSet;
use std::sync::Arc;

/// Largest copy accepted.
const MAX_COPY_BYTES: u64 = 16 << 30;

fn codec() -> impl Options {
    bincode::DefaultOptions::new()
        .with_limit(MAX_COPY_BYTES)
        .reject_trailing_bytes()
}

/// Copies the shards of a training server's state.
pub(super) struct ShardCopy(pub(super) Arc<Mutex<State>>);

impl RangeCopy for ShardCopy {
    fn snapshot(&mut self, range: usize, _keys: KeyRange) -> Bytes {
        let st = self.0.lock();
        let Some(rs) = st.ranges.get(&range) else {
            return Bytes::new();
        };
        let copy = (&rs.shard, rs.shard.rule.idle_workers());
        Bytes::from(codec().serialize(&copy).expect("a shard always serializes"))
    }

    fn restore(&mut self, range: usize, _keys: KeyRange, data: &[u8]) -> Result<(), KvError> {
        let (mut shard, idle): (Shard, BTreeSet<i32>) = codec()
            .deserialize(data)
            .map_err(|e| KvError::BadCopy(format!("malformed shard copy: {e}")))?;
        let mut st = self.0.lock();
        let rs = st
            .ranges
            .get_mut(&range)
            .ok_or_else(|| KvError::BadCopy(format!("range {range} is not held here")))?;
        if shard.begin != rs.shard.begin || shard.len() != rs.shard.len() {
            return Err(KvError::BadCopy(format!(
                "shard copy of range {range} covers other keys ({} from {}) than this server's ({} from {})",
                shard.len(),
                shard.begin,
                rs.shard.len(),
                rs.shard.begin
            )));
        }
        shard.rule.set_idle_workers(idle);
        rs.last_checkpoint = shard.version();
        rs.shard = shard;
        Ok(())
    }
}
