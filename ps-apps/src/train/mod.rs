//! Distributed training on the parameter server: the server-side shard rules
//! (sync / async / bounded staleness), checkpoints, and the worker's minibatch loop.

pub mod checkpoint;
pub mod exchange;
pub mod minibatch;
pub mod shard;
