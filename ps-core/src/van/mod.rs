//! The van: moves messages between nodes over a [`Transport`], runs the receiving
//! thread, and handles the control messages (ADD_NODE, BARRIER, HEARTBEAT, ACK,
//! NODE_DEAD, TERMINATE). On the scheduler it also owns the node table, the barrier
//! counts and the dead-node detector, as plain state machines from
//! [`crate::protocol`]. Everything above it is reached through [`VanHandler`].

pub mod cork;
pub mod guard;
pub mod join_watch;
#[cfg(test)]
mod local_socket_tests;
pub mod lock_service;
mod shell;
pub mod shm;
pub mod spin_read;
pub mod stream;
mod tcp_accept;
#[cfg(test)]
mod tcp_cross_tests;
mod tcp_drain;
mod tcp_link;
mod tcp_read;
pub mod tcp_transport;
mod tcp_wire;
#[cfg(test)]
pub(crate) mod test_transport;
pub mod transport;
pub mod zmq_transport;

pub use lock_service::LockService;
pub use shell::{Van, VanStats};
pub use tcp_transport::TcpTransport;
pub use transport::{Deliver, Transport};
pub use zmq_transport::ZmqTransport;

use crate::message::Message;
use crate::node::Node;

/// Upcalls from the van's receiving thread to the layer above (the postoffice).
pub trait VanHandler: Send + Sync {
    /// A data message for a customer.
    fn on_data(&self, msg: Message);
    /// The scheduler released this node from `group`'s barrier.
    fn on_barrier_released(&self, group: i32);
    /// The scheduler declared these nodes dead.
    fn on_nodes_dead(&self, nodes: &[i32]);
    /// These workers left the cluster on their own (goodbye): gone, not dead.
    fn on_nodes_left(&self, nodes: &[i32]);
    /// The node table changed (ready, or a replacement joined); `revived` are the ids
    /// a new process took while they were dead.
    fn on_nodes_changed(&self, table: &[Node], revived: &[i32]);
    /// The scheduler declared this process dead, or refused it when it registered
    /// again: it may not go on (its tasks went to others, its id to a replacement).
    fn on_evicted(&self, reason: &str);
}
