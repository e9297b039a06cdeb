//! How a worker exchanges parameters with the server shards, as a trait, so the
//! minibatch loop can be tested against an in-process fake and run against KV.

use ps_core::kv::KvError;

/// The servers' answer to one push, per shard.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ShardReply {
    /// The gradient was taken.
    Accepted,
    /// Rejected: the shard is at this version; re-pull and retry.
    Rejected(u64),
    /// Nothing was sent to this shard.
    Skipped,
}

/// Parameters pulled from every shard.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Pulled {
    /// Values, in the order of the keys asked for (all keys: parameter order).
    pub values: Vec<f32>,
    /// Each shard's version when it answered.
    pub versions: Vec<u64>,
}

/// The worker's side of the parameter server.
pub trait ParamExchange {
    /// Number of server shards.
    fn num_shards(&self) -> usize;
    /// Pulls the values of `keys` (sorted; `None` = every parameter). For each shard
    /// with `after[s] = Some(v)`, the shard answers only once its version moved past
    /// `v` (sync SGD: the update this worker contributed to was applied). A failed
    /// exchange is the key-value layer's [`KvError`].
    fn pull(&mut self, keys: Option<&[u64]>, after: &[Option<u64>]) -> Result<Pulled, KvError>;
    /// Pushes gradients `grads` of `keys` (`None` = every parameter) to the shards with
    /// `send[s]`, tagged with `versions[s]`. A failed exchange is the key-value layer's
    /// [`KvError`].
    fn push(
        &mut self,
        keys: Option<&[u64]>,
        grads: &[f32],
        versions: &[u64],
        send: &[bool],
    ) -> Result<Vec<ShardReply>, KvError>;
    /// Tells the shards this worker holds no task (it waits at the end of a pass, or
    /// the job is over): sync versions stop waiting for its gradient until it pushes
    /// again. Cheap to call repeatedly. An exchange whose shards never wait for a
    /// worker's gradient has nothing to do (the default).
    fn idle(&mut self) -> Result<(), KvError> {
        Ok(())
    }
}
