//! The van: moves messages between nodes over a [`Transport`], runs the receiving
//! thread, and handles the control messages (ADD_NODE, BARRIER, HEARTBEAT, ACK,
//! NODE_DEAD, TERMINATE). On the scheduler it also owns the node table, the barrier
//! counts and the dead-node detector, as plain state machines from
//! [`crate::protocol`]. Everything above it is reached through [`VanHandler`].

pub mod authz;
pub mod clock;
pub mod cork;
pub mod error;
pub mod factory;
mod handler;
pub mod join_watch;
mod shell;
pub mod stats;
pub mod tcp;
#[cfg(test)]
pub(crate) mod test_transport;
pub mod transport;
pub mod zmq;

pub use clock::{system_unix_ms, Clock, WallClock};
pub use error::VanError;
pub use handler::VanHandler;
pub use shell::{SchedulerWatch, Van, TICK_EVERY};
pub use stats::VanStats;
pub use tcp::TcpTransport;
pub use transport::{Deliver, PeerKind, Transport};
pub use zmq::ZmqTransport;
