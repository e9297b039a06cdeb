//! What the van reports to the layer above it.

use crate::message::Message;
use crate::node::Node;

/// Upcalls from the van's receiving thread to the layer above (the postoffice).
pub trait VanHandler: Send + Sync {
    /// A data message for a customer.
    fn on_data(&self, msg: Message);
    /// The scheduler released this node from `group`'s barrier
    /// ([`crate::message::RELEASE_ALL`]: from every barrier it waits at).
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
