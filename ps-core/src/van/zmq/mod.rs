//! The ZMQ van, speaking ps-lite's wire protocol: ps-lite's socket pattern and
//! identities (`identity`), its protobuf header `PBMeta` with psrs's extras in fields
//! ps-lite skips (`pb`), the mapping between that header and psrs's [`crate::Meta`]
//! (`codec`, pure), the signature ps-lite's resender acknowledges by (`ack`), and the
//! sockets (`transport`). A ps-lite program (a worker built on
//! ps-lite, MXNet's `kvstore_dist`) can join a psrs cluster on this van, and a psrs
//! node a ps-lite cluster (docs/pslite.md).

pub mod ack;
pub mod codec;
pub mod identity;
pub mod pb;
mod transport;

pub use transport::ZmqTransport;
