//! Shared memory between co-located nodes on the TCP van (issue 13; as BytePS does for
//! local servers). Large frames to a peer on the same host are copied once into a
//! region the peer has mapped, and the TCP stream carries a 24-byte descriptor in
//! their place; the receiver hands them up as zero-copy [`bytes::Bytes`] whose drop
//! gives the span back. Any other peer, or any failure, uses plain TCP.
//!
//! Parts: [`wire`] (offer, descriptor, marks, layout) and [`alloc`] (the sender's span
//! allocator) are pure and unit-tested; [`region`] (memfd and mappings) and [`link`]
//! (the offer on a new link, placing and resolving frames) are the shell.
//!
//! # Wire
//!
//! Connections are one-directional (the connecting side writes messages, after the
//! handshake of [`super::guard`]). Before the first message with a frame of at least
//! `PS_SHM_MIN_BYTES` on a link, *only* when shared memory is on (`PS_SHM`) and the
//! peer's address is this host's (loopback or one of its interfaces), the connecting
//! side creates a region (a sealed `memfd` of `PS_SHM_MB` MiB) and writes, through the
//! link (so sealed with a secret), between two messages:
//!
//! ```text
//! offer  = "PSRO" (u32 LE) | 72 (u32 LE) | version 1 (u32 LE) | boot_id (36 bytes)
//!          | pid (u32 LE) | fd (u32 LE) | region size (u64 LE) | token (16 bytes)
//! answer = one byte, 1 accept / 0 refuse, on the socket's reverse direction (plain)
//! ```
//!
//! The accepting side accepts after checking that the boot id is its own, the peer's
//! address is local, `/proc/<pid>/fd/<fd>` is a regular memfd sealed against shrinking
//! of the offered size, and the mapped region starts with `PSRSSHM1` and the token.
//! Links that only carry small messages (the scheduler's, control traffic) never
//! offer: offering right after the handshake delayed a 1+2+2 cluster's start by about
//! 20 ms (median 45 ms against 25 ms over 8 launches). Only after "accept" does the
//! sender put frames of at least `PS_SHM_MIN_BYTES` in the region: such a frame's length in the message header (see
//! [`super::tcp_transport`]) has bit 63 set ([`wire::SHM_BIT`]) and its 24-byte body is
//!
//! ```text
//! descriptor = slot (u32 LE) | 0 (u32) | offset in the data area (u64 LE) | len (u64 LE)
//! ```
//!
//! A region is: `PSRSSHM1` | token (16) | pad to 64 | one `u32` release flag per slot |
//! pad to a page | data area ([`wire::Layout`]). The sender sets a slot's flag to 1
//! when it lends the span; the receiver stores 0 when the last `Bytes` over the span is
//! dropped; the sender's allocator takes spans whose flag is 0 back before it places
//! the next frames. When no span is free the frame goes over TCP (never a stall). A
//! marked frame that does not decode, names a slot or span outside the region, or
//! arrives on a link without a region, drops its message (logged, counted in
//! [`ShmStats::bad_messages`]); the link stays up.

pub mod alloc;
pub mod link;
pub mod region;
pub mod wire;

pub use link::{Shm, ShmLink, ShmReceiver, ShmSender};

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// Default `PS_SHM_MB`: region size per link, MiB. Pages are only allocated when
/// written, and the allocator reuses the lowest spans first.
pub const DEFAULT_REGION_MB: u64 = 128;
/// Default `PS_SHM_MIN_BYTES`: smaller frames go over TCP.
pub const DEFAULT_MIN_BYTES: usize = 64 << 10;
/// The bounds of `PS_SHM_MB`.
pub const REGION_MB_RANGE: std::ops::RangeInclusive<u64> = 1..=4096;

/// The shared-memory settings (`PS_SHM`, `PS_SHM_MB`, `PS_SHM_MIN_BYTES`), read by
/// [`crate::Config`]. Only the TCP van uses them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ShmConfig {
    /// `PS_SHM`: 1 (default) offers and accepts shared memory with peers on this host.
    pub enabled: bool,
    /// `PS_SHM_MB`: the region each outgoing link offers, MiB (1-4096, default 128).
    pub region_mb: u64,
    /// `PS_SHM_MIN_BYTES`: frames of at least this many bytes go through the region
    /// (default 64 KiB; 256 up to the region's size).
    pub min_bytes: usize,
}

impl Default for ShmConfig {
    fn default() -> Self {
        ShmConfig {
            enabled: true,
            region_mb: DEFAULT_REGION_MB,
            min_bytes: DEFAULT_MIN_BYTES,
        }
    }
}

impl ShmConfig {
    /// The region's size in bytes.
    pub fn region_bytes(&self) -> u64 {
        self.region_mb << 20
    }

    /// Checks the bounds; the error names the variable.
    pub fn validate(&self) -> Result<(), (&'static str, String)> {
        if !REGION_MB_RANGE.contains(&self.region_mb) {
            return Err(("PS_SHM_MB", format!("{} is outside 1..=4096 MiB", self.region_mb)));
        }
        if self.min_bytes < 256 || self.min_bytes as u64 > self.region_bytes() {
            return Err((
                "PS_SHM_MIN_BYTES",
                format!(
                    "{} is outside 256..={} (the region, PS_SHM_MB)",
                    self.min_bytes,
                    self.region_bytes()
                ),
            ));
        }
        Ok(())
    }
}

/// Same-host counters of one transport (part of [`crate::van::VanStats`]): links over
/// Unix sockets ([`crate::van::stream`]) and shared memory.
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

#[cfg(test)]
mod tests;
