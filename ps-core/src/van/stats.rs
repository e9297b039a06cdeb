//! The van's traffic counters, and the same-host counters of the TCP van.

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;

/// Traffic counters of one van.
#[derive(Debug, Default)]
pub struct VanStats {
    /// Messages sent.
    pub sent_msgs: AtomicU64,
    /// Bytes sent (header and data).
    pub sent_bytes: AtomicU64,
    /// Messages received and decoded.
    pub recv_msgs: AtomicU64,
    /// Bytes received.
    pub recv_bytes: AtomicU64,
    /// Received messages that did not decode (dropped).
    pub malformed: AtomicU64,
    /// Data messages dropped by `PS_DROP_MSG`.
    pub injected_drops: AtomicU64,
    /// Duplicates dropped by the resender.
    pub duplicates: AtomicU64,
    /// Messages resent.
    pub resent: AtomicU64,
    /// Messages dropped as meant for an earlier process of this node's id, or sent by
    /// a process declared dead or replaced.
    pub stale: AtomicU64,
    /// Messages refused by per-message authorization ([`crate::van::authz`]).
    pub refused: AtomicU64,
    /// Frames and bytes moved through shared memory (TCP van, peers on this host;
    /// zeros for other transports).
    pub shm: Arc<ShmStats>,
}

/// Same-host counters of one transport (part of [`crate::van::VanStats`]): links over
/// Unix sockets ([`crate::van::tcp::stream`]) and shared memory.
#[derive(Debug, Default)]
pub struct ShmStats {
    /// Outgoing connections opened over a Unix socket.
    pub unix_out: AtomicU64,
    /// Incoming connections accepted over a Unix socket.
    pub unix_in: AtomicU64,
    /// Outgoing links whose peer accepted the offer.
    pub links_out: AtomicU64,
    /// Incoming links whose offer this node accepted.
    pub links_in: AtomicU64,
    /// Frames sent through shared memory.
    pub sent_frames: AtomicU64,
    /// Bytes of those frames.
    pub sent_bytes: AtomicU64,
    /// Large frames to an accepting peer sent over TCP because no span was free.
    pub fallback_frames: AtomicU64,
    /// Frames received through shared memory.
    pub recv_frames: AtomicU64,
    /// Bytes of those frames.
    pub recv_bytes: AtomicU64,
    /// Messages dropped for a bad descriptor.
    pub bad_messages: AtomicU64,
}

impl fmt::Display for ShmStats {
    /// `unix links out N in N, shm links out N in N, sent N frames N B (N over TCP:
    /// region full), received N frames N B, bad descriptors N`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let g = |a: &AtomicU64| a.load(Relaxed);
        write!(
            f,
            "unix links out {} in {}, shm links out {} in {}, shm sent {} frames {} B ({} over TCP: region full), shm received {} frames {} B, bad descriptors {}",
            g(&self.unix_out),
            g(&self.unix_in),
            g(&self.links_out),
            g(&self.links_in),
            g(&self.sent_frames),
            g(&self.sent_bytes),
            g(&self.fallback_frames),
            g(&self.recv_frames),
            g(&self.recv_bytes),
            g(&self.bad_messages)
        )
    }
}
