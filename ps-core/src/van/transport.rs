//! The transport a van runs over. A trait, so another transport than ZMQ can be added
//! (`DMLC_PS_VAN_TYPE` picks one: `tcp`, the default, or `zmq`, ps-lite's).

use super::authz::Origin;
use bytes::Bytes;
use std::io;
use std::sync::Arc;

/// Receives each incoming message's frames (without any transport envelope) and the
/// sending link's [`Origin`] (its certificate, and the node id its messages bound it
/// to), which the van checks every message against ([`super::authz`]); None for a
/// transport that keeps no state per link (the ZMQ van). Called from the transport's
/// own threads; messages from one link arrive in order, with the same origin.
pub type Deliver = Arc<dyn Fn(Vec<Bytes>, Option<&mut Origin>) + Send + Sync>;

/// Moves multipart messages between nodes. Shared by every sending thread.
pub trait Transport: Send + Sync {
    /// Binds the receiving endpoint on `host:port` (`port` 0 = any free port) and
    /// returns the bound port.
    fn bind(&self, host: &str, port: u16) -> io::Result<u16>;
    /// Starts receiving: every message is handed to `deliver`.
    fn start(&self, deliver: Deliver) -> io::Result<()>;
    /// Opens a connection to the peer known as `peer` at `host:port`, replacing any
    /// earlier connection under that key. The peer need not be up yet.
    fn connect(&self, peer: i32, host: &str, port: u16) -> io::Result<()>;
    /// Like [`Transport::connect`], to node `n` of the node table: a transport with
    /// certificates checks that the peer it dials presents one naming `n`'s role and,
    /// when the table has it, the certificate `n` registered with
    /// ([`super::authz::Expect`]). (Plain `connect` expects the role the key names.)
    fn connect_node(&self, peer: i32, n: &crate::node::Node) -> io::Result<()> {
        self.connect(peer, &n.hostname, n.port)
    }
    /// Closes the connection to `peer`, if any.
    fn disconnect(&self, peer: i32);
    /// Moves the connection known as `from` to the key `to` (replacing any connection
    /// under `to`), so a connection already open (its handshake done) is not opened
    /// again under a new key; false if this transport cannot, or `from` is not known.
    fn rekey(&self, _from: i32, _to: i32) -> bool {
        false
    }
    /// True if a connection to `peer` is open (or being opened).
    fn is_connected(&self, peer: i32) -> bool;
    /// Sends `frames` as one message to `peer`; returns the bytes sent. The frames are
    /// not copied.
    fn send(&self, peer: i32, frames: Vec<Bytes>) -> io::Result<usize>;
    /// Like [`Transport::send`], but the message may wait in the link's queue until
    /// the link is flushed ([`Transport::flush_link`]), the calling thread blocks in
    /// one of ps-core's waits ([`crate::van::cork`]), another message is sent on the
    /// link at once, or the queue is full. For a sender that knows an answer is on its
    /// way whose arrival flushes the link. Transports without queues send at once.
    fn send_lazy(&self, peer: i32, frames: Vec<Bytes>) -> io::Result<usize> {
        self.send(peer, frames)
    }
    /// Writes what waits in `peer`'s queue; from a corking thread, before its next
    /// read. Nothing to do for transports without queues.
    fn flush_link(&self, _peer: i32) {}
    /// Stops receiving and closes every socket. Later calls fail.
    fn close(&self);
    /// The fingerprint of this node's own certificate
    /// ([`crate::tls::peer::fingerprint`]; 0: the transport runs no TLS).
    fn fingerprint(&self) -> u64 {
        0
    }
    /// The shared-memory counters, for a transport that has a shared-memory path.
    fn shm_stats(&self) -> Option<Arc<super::stats::ShmStats>> {
        None
    }
}
