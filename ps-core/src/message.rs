//! The wire message: a [`Meta`] header (serde + bincode) followed by data frames
//! (`bytes::Bytes`), carried as one ZMQ multipart message. Data frames are never copied
//! on the way through; decoding untrusted bytes returns an error, never panics, and
//! allocates at most [`MAX_META_BYTES`] for the header.

use crate::node::Node;
use bincode::Options;
use bytes::Bytes;
use serde::{Deserialize, Serialize};
use std::fmt;

/// Largest encoded [`Meta`] accepted from the wire.
pub const MAX_META_BYTES: u64 = 1 << 20;
/// Most data frames one message may carry.
pub const MAX_DATA_FRAMES: usize = 64;
/// The group of a BARRIER release that names none: it releases every barrier the node
/// waits at (ps-lite's scheduler releases a node's barriers this way).
pub const RELEASE_ALL: i32 = 0;

/// Control commands exchanged by vans.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
pub enum Command {
    /// Not a control message: application data for a customer.
    #[default]
    Empty,
    /// Ask the receiving thread to stop (sent by a van to itself).
    Terminate,
    /// Node → scheduler: register me. Scheduler → nodes: the node table.
    AddNode,
    /// Node → scheduler: I reached a barrier (request). Scheduler → node: released.
    Barrier,
    /// Acknowledges the message whose signature is `msg_sig`.
    Ack,
    /// Node → scheduler: I am alive. Scheduler → node: its reply.
    Heartbeat,
    /// Scheduler → nodes: the nodes in `nodes` were declared dead.
    NodeDead,
    /// Active scheduler → standby: its whole state, sequence `seq` (data frames: the
    /// node table, then the application's state, each possibly empty).
    Sync,
    /// Between scheduler candidates: I am alive, following `term`/`candidate`, and hold
    /// the state up to `seq` (a standby's ack of a `Sync`).
    PeerBeat,
    /// Worker → scheduler: goodbye, I leave the cluster (request). Scheduler → worker:
    /// you are out (reply); the others get a NODE_DEAD with `reason` "left".
    Leave,
    /// Scheduler candidate → node: vote for me as the active scheduler of
    /// `term`/`candidate`; I hold the state up to `seq` (sent at `lease_ms`).
    Campaign,
    /// Node → scheduler candidate: the answer to a `Campaign` (`granted`), with the
    /// epoch the node follows afterwards and the newest state sequence it has seen.
    Vote,
}

/// The control part of a message.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct Control {
    /// The command.
    pub cmd: Command,
    /// Nodes carried by ADD_NODE and NODE_DEAD.
    pub nodes: Vec<Node>,
    /// The group a BARRIER is over (a release of [`RELEASE_ALL`] names none).
    pub barrier_group: i32,
    /// The signature an ACK acknowledges.
    pub msg_sig: u64,
    /// Why an ADD_NODE was refused (empty otherwise).
    pub reason: String,
    /// Failover epoch: the term of the scheduler that sent this (scheduler messages),
    /// or of the scheduler the sender follows (node heartbeats). 0 = none.
    pub term: u64,
    /// Failover epoch: the candidate index of the active scheduler of `term`.
    pub candidate: u32,
    /// Scheduler messages: the sending scheduler's own candidate index.
    pub origin: u32,
    /// Scheduler messages: the state sequence the sender holds. Node heartbeats: the
    /// newest one the node has seen.
    pub seq: u64,
    /// Node heartbeats: milliseconds since the node last heard its active scheduler.
    pub silence_ms: u64,
    /// Scheduler messages: the sender's clock when it sent this (ms). Node
    /// heartbeats: the newest such time of a message the node took from the
    /// scheduler it follows (the active scheduler's lease is counted from it).
    pub lease_ms: u64,
    /// A `Vote`: the vote is granted.
    pub granted: bool,
    /// Node heartbeats: the fingerprint of the node's view of the voters' processes
    /// ([`crate::failover::view`]); 0 = none.
    pub view: u64,
}

/// The message header.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct Meta {
    /// Application-defined head (SimpleApp command, KV command).
    pub head: i32,
    /// The application the message belongs to.
    pub app_id: i32,
    /// The customer within the application.
    pub customer_id: i32,
    /// Request timestamp, unique per customer; a response carries its request's.
    pub timestamp: i32,
    /// Sender node id.
    pub sender: i32,
    /// Receiver node id.
    pub recver: i32,
    /// True for a request, false for a response.
    pub request: bool,
    /// KV: a push.
    pub push: bool,
    /// KV: a pull.
    pub pull: bool,
    /// True for SimpleApp messages.
    pub simple_app: bool,
    /// Application-defined 64-bit field (KV model version, etc.).
    pub version: u64,
    /// Status of a response: 0 = ok; the application defines the rest (KV: negative =
    /// the request was invalid, with the reason in the first data frame).
    pub status: i32,
    /// KV key caching: a signature naming the key list of this request (0 = none).
    /// With an empty key frame, the receiver uses the list it cached under it.
    pub key_sig: u64,
    /// KV: the server key range (by server rank) a request is about, echoed in its
    /// response; with replication a server may answer for a range it took over.
    pub range: i32,
    /// The sender process's incarnation (see `Node::incarnation`).
    pub incarnation: u64,
    /// The incarnation of the process this message is for; 0: whichever process holds
    /// `recver`. Responses carry their request's sender incarnation, the scheduler's
    /// control messages the node table's. A process drops (after acknowledging) a
    /// message for another incarnation: it was meant for an earlier holder of its id.
    pub recver_incarnation: u64,
    /// The control part; `cmd == Empty` for data messages.
    pub control: Control,
}

impl Meta {
    /// True for control messages.
    pub fn is_control(&self) -> bool {
        self.control.cmd != Command::Empty
    }
}

/// A message: header plus zero-copy data frames.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Message {
    /// The header.
    pub meta: Meta,
    /// The data frames, passed through without copying.
    pub data: Vec<Bytes>,
}

/// Why bytes from the wire were not a message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WireError {
    /// No frames at all.
    Empty,
    /// The header did not decode.
    BadMeta(String),
    /// Too many data frames.
    TooManyFrames(usize),
}

impl fmt::Display for WireError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WireError::Empty => write!(f, "empty message"),
            WireError::BadMeta(e) => write!(f, "malformed message header: {e}"),
            WireError::TooManyFrames(n) => {
                write!(f, "message has {n} data frames, more than {MAX_DATA_FRAMES}")
            }
        }
    }
}

impl std::error::Error for WireError {}

/// Bytes reserved for an encoded header: a data message's takes 30-60.
const META_CAPACITY: usize = 64;

fn codec() -> impl Options {
    bincode::DefaultOptions::new()
        .with_limit(MAX_META_BYTES)
        .reject_trailing_bytes()
}

impl Message {
    /// A control message `cmd` to `recver`, every other field at its default.
    pub fn control(recver: i32, cmd: Command) -> Message {
        Message {
            meta: Meta {
                recver,
                control: Control {
                    cmd,
                    ..Default::default()
                },
                ..Default::default()
            },
            data: Vec::new(),
        }
    }

    /// Encodes the header into its frame.
    pub fn encode_meta(&self) -> Bytes {
        // into a buffer of a data message's usual size: `serialize` would first walk
        // the header once more just to size its buffer exactly (the limit applies to
        // decoding untrusted bytes, not to our own headers)
        let mut buf = Vec::with_capacity(META_CAPACITY);
        // the same bytes as `codec()` writes
        bincode::DefaultOptions::new()
            .serialize_into(&mut buf, &self.meta)
            .expect("Meta always serializes");
        Bytes::from(buf)
    }

    /// Decodes frames (header first, then data) received from the wire.
    pub fn decode(mut frames: Vec<Bytes>) -> Result<Message, WireError> {
        if frames.is_empty() {
            return Err(WireError::Empty);
        }
        let meta_frame = frames.remove(0);
        if frames.len() > MAX_DATA_FRAMES {
            return Err(WireError::TooManyFrames(frames.len()));
        }
        let meta: Meta = codec()
            .deserialize(&meta_frame)
            .map_err(|e| WireError::BadMeta(e.to_string()))?;
        Ok(Message { meta, data: frames })
    }

    /// Total bytes of the data frames.
    pub fn data_len(&self) -> usize {
        self.data.iter().map(|d| d.len()).sum()
    }
}

impl fmt::Display for Message {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let m = &self.meta;
        write!(f, "{}->{} ", m.sender, m.recver)?;
        if m.is_control() {
            write!(f, "{:?}", m.control.cmd)?;
            if m.control.cmd == Command::Barrier {
                write!(f, "(group {})", m.control.barrier_group)?;
            }
        } else {
            write!(
                f,
                "app {} cust {} ts {} {}",
                m.app_id,
                m.customer_id,
                m.timestamp,
                if m.request { "req" } else { "resp" }
            )?;
        }
        write!(f, " {} frames {} B", self.data.len(), self.data_len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::node::Role;
    use proptest::prelude::*;

    fn sample() -> Message {
        Message {
            meta: Meta {
                head: 3,
                app_id: 1,
                customer_id: 2,
                timestamp: 77,
                sender: 9,
                recver: 8,
                request: true,
                push: true,
                control: Control {
                    cmd: Command::AddNode,
                    nodes: vec![Node {
                        role: Role::Server,
                        id: 8,
                        hostname: "127.0.0.1".into(),
                        port: 4000,
                        is_recovery: false,
                        incarnation: 5,
                        cert: 0,
                    }],
                    ..Default::default()
                },
                ..Default::default()
            },
            data: vec![Bytes::from_static(b"abc"), Bytes::from(vec![0u8; 1000])],
        }
    }

    #[test]
    fn round_trips() {
        let m = sample();
        let mut frames = vec![m.encode_meta()];
        frames.extend(m.data.iter().cloned());
        assert_eq!(Message::decode(frames).unwrap(), m);
    }

    #[test]
    fn the_header_bytes_are_the_documented_encoding() {
        // encode_meta skips bincode's sizing pass; the bytes stay those of `codec()`
        let mut control = sample();
        control.meta.control.cmd = Command::AddNode;
        control.meta.control.reason = "a reason".into();
        control.meta.control.seq = u64::MAX;
        for m in [sample(), control, Message::default()] {
            assert_eq!(m.encode_meta().to_vec(), codec().serialize(&m.meta).unwrap());
        }
    }

    #[test]
    fn rejects_garbage_and_trailing_bytes() {
        assert_eq!(Message::decode(vec![]), Err(WireError::Empty));
        assert!(Message::decode(vec![Bytes::from_static(b"\xff\xff\xff\xff\xff")]).is_err());
        let mut meta = sample().encode_meta().to_vec();
        meta.push(0);
        assert!(Message::decode(vec![Bytes::from(meta)]).is_err());
        let many = vec![Bytes::new(); MAX_DATA_FRAMES + 2];
        let mut frames = vec![sample().encode_meta()];
        frames.extend(many);
        assert!(matches!(Message::decode(frames), Err(WireError::TooManyFrames(_))));
    }

    proptest! {
        #[test]
        fn decoding_random_bytes_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
            let _ = Message::decode(vec![Bytes::from(bytes)]);
        }

        #[test]
        fn decoding_mutated_headers_never_panics(pos in 0usize..200, val in any::<u8>(), cut in 0usize..200) {
            let mut meta = sample().encode_meta().to_vec();
            let n = meta.len();
            meta[pos % n] = val;
            meta.truncate(cut.min(n));
            let _ = Message::decode(vec![Bytes::from(meta), Bytes::from_static(b"x")]);
        }
    }
}
