//! [`ParamExchange`] over a `KVWorker<f32>`: one request covers every shard, each
//! carrying its own version (push: the version the gradient was computed on; pull:
//! `after + 1`, 0 for "answer now").

use super::exchange::{ParamExchange, Pulled, ShardReply};
use super::layout::Layout;
use ps_core::kv::{KVPairs, KVWorker, KvRequest, SArray, ServerReply};
use std::time::{Duration, Instant};

/// How long a pull waits for an answer before it is sent again.
const ATTEMPT: Duration = Duration::from_secs(3);

/// How often a waiting request checks whether a server was replaced.
const POLL: Duration = Duration::from_millis(50);

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
    /// The server incarnations the last idle notice went to (None: none since the
    /// last push), so a notice is sent once per idle spell, and again to a replaced
    /// server.
    idle_sent: Option<Vec<u64>>,
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
            idle_sent: None,
        }
    }

    /// Per server rank: the incarnation of the process holding its id (0 if unknown).
    fn server_incarnations(&self) -> Vec<u64> {
        let mut inc = vec![0; self.num_shards()];
        for n in self.kv.postoffice().nodes() {
            let is_server = ps_core::node::id_role(n.id) == Some(ps_core::Role::Server);
            if let Some(r) = ps_core::node::id_to_rank(n.id).filter(|_| is_server) {
                if let Some(slot) = inc.get_mut(r) {
                    *slot = n.incarnation;
                }
            }
        }
        inc
    }

    /// Sends the request `make` builds until it is answered, for at most the timeout.
    /// It is sent again when a server was replaced since it was sent (the dead one may
    /// have acknowledged it and never answered), and, if `idempotent` (a pull), also
    /// after [`ATTEMPT`] without an answer; a push is not, as a slow server would then
    /// apply it twice.
    fn exchange(&self, idempotent: bool, make: impl Fn() -> KvRequest<f32>) -> Result<Vec<ServerReply<f32>>, String> {
        let start = Instant::now();
        loop {
            let servers = self.server_incarnations();
            let sent = Instant::now();
            let ts = self.kv.request(make(), None).map_err(|e| e.to_string())?;
            loop {
                if let Some(r) = self.kv.try_wait(ts, POLL) {
                    return r.map_err(|e| e.to_string());
                }
                if start.elapsed() >= self.timeout {
                    self.kv.abandon(ts);
                    return Err(format!(
                        "the servers did not answer request {ts} within {:?}",
                        self.timeout
                    ));
                }
                let replaced = self.server_incarnations() != servers;
                if replaced || (idempotent && sent.elapsed() >= ATTEMPT) {
                    let why = if replaced { "a server was replaced" } else { "no answer" };
                    log::warn!("request {ts}: {why} after {:?}; sending it again", sent.elapsed());
                    self.kv.abandon(ts);
                    break;
                }
            }
        }
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

    fn pull(&mut self, keys: Option<&[u64]>, after: &[Option<u64>]) -> Result<Pulled, String> {
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
    ) -> Result<Vec<ShardReply>, String> {
        self.idle_sent = None;
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

    /// Sends the idle notice to every server, without waiting for the answers (a dead
    /// server must not hold the worker); only once per idle spell, unless a server was
    /// replaced since (the replacement does not know).
    fn idle(&mut self) -> Result<(), String> {
        let servers = self.server_incarnations();
        if self.idle_sent.as_ref() == Some(&servers) {
            return Ok(());
        }
        let mut req = KvRequest::new(KVPairs::<f32>::default(), CMD_IDLE, false, false);
        req.only = vec![true; self.num_shards()];
        let ts = self.kv.request(req, None).map_err(|e| e.to_string())?;
        self.kv.abandon(ts);
        self.idle_sent = Some(servers);
        Ok(())
    }
}
