//! [`ParamExchange`] over a `KVWorker<f32>`: one request covers every shard, each
//! carrying its own version (push: the version the gradient was computed on; pull:
//! `after + 1`, 0 for "answer now").

use super::exchange::{ParamExchange, Pulled, ShardReply};
use super::layout::Layout;
use super::resend::{exchange_all, IdleNotice, Outgoing};
use ps_core::kv::{KVPairs, KVWorker, KvError, KvRequest, SArray, ServerReply};
use std::time::Duration;

/// Push response status: the gradient was rejected (stale version).
pub const STATUS_REJECTED: i32 = 1;

/// Request command (message head) of a worker's idle notice: it holds no task, so sync
/// versions must not wait for its gradient until it pushes again. No keys, no values.
pub const CMD_IDLE: i32 = 1;

/// Talks to the training servers.
pub struct KvExchange {
    kv: KVWorker<f32>,
    layout: Layout,
    all_keys: SArray<u64>,
    timeout: Duration,
    idle: IdleNotice,
}

impl KvExchange {
    /// An exchange for `layout` over `kv`; a request unanswered after `timeout` fails.
    pub fn new(kv: KVWorker<f32>, layout: Layout, timeout: Duration) -> KvExchange {
        let all_keys = layout.all_keys().into();
        KvExchange {
            kv,
            layout,
            all_keys,
            timeout,
            idle: IdleNotice::default(),
        }
    }

    /// Sends the request `make` builds until it is answered ([`exchange_all`]).
    fn exchange(&self, idempotent: bool, make: impl Fn() -> KvRequest<f32>) -> Result<Vec<ServerReply<f32>>, KvError> {
        let out = Outgoing {
            idempotent,
            make: &make,
        };
        let mut replies = exchange_all(&self.kv, self.timeout, &[out], &|| false)?;
        Ok(replies.pop().unwrap_or_default())
    }

    fn keys_for(&self, keys: Option<&[u64]>) -> SArray<u64> {
        match keys {
            None => self.all_keys.clone(),
            Some(k) => k.iter().map(|&i| self.layout.key(i)).collect::<Vec<_>>().into(),
        }
    }
}

impl ParamExchange for KvExchange {
    fn num_shards(&self) -> usize {
        self.kv.ranges().len()
    }

    fn pull(&mut self, keys: Option<&[u64]>, after: &[Option<u64>]) -> Result<Pulled, KvError> {
        let keys = self.keys_for(keys);
        let replies = self.exchange(true, || {
            let kvs = KVPairs {
                keys: keys.clone(),
                ..Default::default()
            };
            let mut req = KvRequest::new(kvs, 0, false, true);
            req.versions = after.iter().map(|a| a.map_or(0, |v| v + 1)).collect();
            req
        })?;
        let mut versions = vec![0; self.num_shards()];
        let mut parts = Vec::with_capacity(replies.len());
        for r in replies {
            versions[r.rank] = r.version;
            parts.push(r.data);
        }
        let values = KVPairs::concat(parts).vals.to_vec();
        Ok(Pulled { values, versions })
    }

    fn push(
        &mut self,
        keys: Option<&[u64]>,
        grads: &[f32],
        versions: &[u64],
        send: &[bool],
    ) -> Result<Vec<ShardReply>, KvError> {
        self.idle.end();
        let kvs = KVPairs {
            keys: self.keys_for(keys),
            vals: SArray::copy_from(grads),
            lens: SArray::empty(),
        };
        let parts = kvs.slice(self.kv.ranges(), true);
        let only: Vec<bool> = send.iter().zip(&parts).map(|(&s, p)| s && !p.keys.is_empty()).collect();
        let replies = self.exchange(false, || {
            let mut req = KvRequest::new(kvs.clone(), 0, true, false);
            req.versions = versions.to_vec();
            req.only = only.clone();
            req
        })?;
        let mut out = vec![ShardReply::Skipped; self.num_shards()];
        for r in replies {
            out[r.rank] = if r.status == STATUS_REJECTED {
                ShardReply::Rejected(r.version)
            } else {
                ShardReply::Accepted
            };
        }
        Ok(out)
    }

    /// Sends the idle notice ([`IdleNotice`]).
    fn idle(&mut self) -> Result<(), KvError> {
        self.idle.send(&self.kv, CMD_IDLE)
    }
}
