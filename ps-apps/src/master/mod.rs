//! The master (seed 000): a dataset of RecordIO files cut into tasks of chunks, the
//! todo / pending / done / failed queues, dispatch, timeouts and retries, passes over
//! the data, and persistence of every change before the reply leaves.

mod config;
mod queues;
mod service;
mod store;

pub use config::MasterConfig;
pub use queues::{Chunk, Reply, Task, TaskEntry, TaskQueues};
pub use service::{Master, MasterRequest, MasterResponse, QueueSnapshot, TaskReport};
pub use store::{FileStore, MemStore, Store};
