//! The master (Paddle's master design): a dataset of RecordIO files cut into tasks of chunks, the
//! todo / pending / done / failed queues, dispatch, timeouts and retries, passes over
//! the data, and persistence of every change before the reply leaves.

//!
//! Layers: [`TaskQueues`] is the pure state machine (time passed in as milliseconds,
//! no I/O); [`Master`] wraps it with a [`Store`] and persists every change before the
//! reply; [`MasterRequest`] / [`MasterResponse`] are the wire types answered by
//! [`Master::handle`], so the network shell only decodes, calls and encodes.

mod codec;
mod config;
mod error;
#[cfg(feature = "etcd")]
pub mod etcd_store;
mod queues;
mod service;
mod store;
mod store_set;
mod wire;

pub use codec::{decode_queues, encode_queues};
pub use config::{MasterConfig, Planted as MasterPlanted};
pub use error::{MasterError, StoreError};
pub use queues::{Attempt, Chunk, Counted, GivenUp, Reply, Task, TaskEntry, TaskQueues};
pub use service::{index_dataset, Master};
pub use store::{FileStore, MemStore, ReplicatedStore, Store};
pub use store_set::{ReplicateFn, ReplicatedSet};
pub use wire::{MasterRequest, MasterResponse, QueueSnapshot, TaskReport};

#[cfg(test)]
mod dead_worker_tests;
#[cfg(test)]
mod sim_tests;
#[cfg(test)]
mod test_data;
