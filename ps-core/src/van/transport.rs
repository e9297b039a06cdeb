//! The transport a van runs over. A trait, so another transport than ZMQ can be added
//! (`DMLC_PS_VAN_TYPE` picks one: `tcp`, the default, or `zmq`, ps-lite's). Each
//! transport has its own wire format: it encodes and decodes the messages it carries.

use crate::message::{Message, WireError};
use crate::tls::Roles;
use bytes::Bytes;
use std::io;
use std::sync::Arc;

/// Receives each incoming message's frames (without any transport envelope) and the
/// roles the sending link's certificate names, which bound what it may register
/// ([`super::screen`]; None: no certificate, or a scheduler's, which may send
/// anything). Called from the transport's own threads; messages from one peer arrive
/// in order.
pub type Deliver = Arc<dyn Fn(Vec<Bytes>, Option<&Roles>) + Send + Sync>;

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
    /// The shared-memory counters, for a transport that has a shared-memory path.
    fn shm_stats(&self) -> Option<Arc<super::stats::ShmStats>> {
        None
    }
}
