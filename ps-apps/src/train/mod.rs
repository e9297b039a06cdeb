//! Distributed training on the parameter server: the shard rules (sync / async /
//! bounded staleness), checkpoints, the parameter layout and exchange, the worker's
//! minibatch loop, and the three roles (coordinator, server, worker).

pub mod checkpoint;
pub mod coordinator;
pub mod error;
pub mod exchange;
pub mod kv_exchange;
pub mod layout;
pub mod master_client;
pub mod master_retry;
pub mod minibatch;
pub mod pacer;
mod range_copy;
pub mod resend;
pub mod server;
mod server_state;
pub mod shard;
pub mod task_loop;
pub mod versions;
pub mod worker;

pub use error::TrainError;
