//! The transport a van runs over. A trait, so another transport than ZMQ can be added
//! (`DMLC_PS_VAN_TYPE` picks one: `tcp`, the default, or `zmq`, ps-lite's). Each
//! transport has its own wire format: it encodes and decodes the messages it carries.

use super::authz::Origin;
use crate::message::{Message, WireError};
use bytes::Bytes;
use std::io;
use std::sync::Arc;

/// Receives each incoming message's frames (without any transport envelope) and the
/// sending link's [`Origin`] (its certificate, and the node id its messages bound it
/// to), which the van checks every message against ([`super::authz`]); None for a
/// transport that keeps no state per link (the ZMQ van). Called from the transport's
/// own threads; messages from one link arrive in order, with the same origin.
pub type Deliver = Arc<dyn Fn(Vec<Bytes>, Option<&mut Origin>) + Send + Sync>;

/// What process a peer is, as far as a transport that can talk to ps-lite needs to know.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum PeerKind {
    /// A psrs process (or one not known to be ps-lite).
    #[default]
    Psrs,
    /// A ps-lite process (its node table entry has no incarnation).
    PsLite,
}

impl PeerKind {
    /// What the process behind a node table entry is: a ps-lite process has no
    /// incarnation (psrs's are never 0).
    pub fn of(node: &crate::node::Node) -> PeerKind {
        if node.incarnation == 0 {
            PeerKind::PsLite
        } else {
            PeerKind::Psrs
        }
    }
}

/// Moves multipart messages between nodes. Shared by every sending thread.
pub trait Transport: Send + Sync {
    /// The frames `msg` goes out as. Default: psrs's own header
    /// ([`Message::encode_meta`]), then the data frames, not copied.
    fn encode(&self, msg: &Message) -> Vec<Bytes> {
        let mut frames = Vec::with_capacity(msg.data.len() + 1);
        frames.push(msg.encode_meta());
        frames.extend(msg.data.iter().cloned());
        frames
    }
    /// The message in `frames` as this transport delivered them; bytes that are not
    /// one are a [`WireError`] (never a panic). Default: [`Message::decode`].
    fn decode(&self, frames: Vec<Bytes>) -> Result<Message, WireError> {
        Message::decode(frames)
    }
    /// True if this transport speaks ps-lite's wire protocol, so that a peer may be a
    /// ps-lite process (which never repeats or answers psrs's extras).
    fn speaks_pslite(&self) -> bool {
        false
    }
    /// This node's id and incarnation, once it has an id (the ZMQ transport's sockets
    /// identify the node by them). Default: nothing to do.
    fn set_local_node(&self, _id: i32, _incarnation: u64) {}
    /// What the peer under `key` is (the ZMQ transport shows a ps-lite peer the
    /// identity ps-lite reads). Default: nothing to do.
    fn set_peer_kind(&self, _key: i32, _kind: PeerKind) {}
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
    /// Like [`Transport::send`], but never waits for the link's connection to open:
    /// the message waits for it instead, and is lost if it cannot be opened (a
    /// failure to open is then returned at once for a short while). For a van's own
    /// threads (heartbeats, ticks, answers), which must not stall on a peer that is
    /// cut off. Transports whose connections never block send at once.
    fn send_nowait(&self, peer: i32, frames: Vec<Bytes>) -> io::Result<usize> {
        self.send(peer, frames)
    }
    /// Like [`Transport::send_nowait`], but the message may wait in the link's queue until
    /// the link is flushed ([`Transport::flush_link`]), the calling thread blocks in
    /// one of ps-core's waits ([`crate::van::cork`]), another message is sent on the
    /// link at once, or the queue is full. For a sender that knows an answer is on its
    /// way whose arrival flushes the link. Transports without queues send at once.
    fn send_lazy(&self, peer: i32, frames: Vec<Bytes>) -> io::Result<usize> {
        self.send(peer, frames)
    }
    /// Like [`Transport::send_nowait`], but never waits for the peer either: a message
    /// to a link whose socket has not taken what was written before (or whose queue
    /// is full) is dropped with [`io::ErrorKind::WouldBlock`], and what the socket
    /// does not take at once is written in the background. For messages a later one
    /// supersedes (the scheduler candidates' state stream and beats), whose sender
    /// must not stall behind a peer that stopped taking bytes (a link that dropped
    /// packets backs off its retransmissions for seconds after it heals).
    /// Transports whose sends never wait for the peer send at once.
    fn send_if_room(&self, peer: i32, frames: Vec<Bytes>) -> io::Result<usize> {
        self.send_nowait(peer, frames)
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
