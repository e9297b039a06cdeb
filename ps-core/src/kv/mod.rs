//! The key-value layer: workers push and pull sorted `u64` keys with dense values of a
//! plain-old-data type `V`; each server owns one contiguous key range.

pub mod error;
pub mod handles;
pub mod key_cache;
mod lazy;
pub mod pairs;
pub mod range;
pub mod replication;
pub mod reply;
pub mod request;
pub mod sarray;
pub mod server;
pub mod store;
mod store_copy;
pub mod worker;
mod worker_state;

pub use error::KvError;
pub use pairs::KVPairs;
pub use range::{server_key_ranges, KeyRange};
pub use reply::{Callback, ServerReply};
pub use request::{KVMeta, KVResponder, ReqHandle};
pub use sarray::SArray;
pub use server::KVServer;
pub use worker::{KVWorker, KvRequest};
