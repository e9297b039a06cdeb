//! Distributed training on the parameter server: the server-side shard rules
//! (sync / async / bounded staleness), checkpoints, and the worker loop.

pub mod checkpoint;
pub mod shard;
