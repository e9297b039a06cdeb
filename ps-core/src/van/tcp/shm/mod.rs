//! Shared memory between co-located nodes on the TCP van (as BytePS does for local
//! servers). Large frames to a peer on the same host are copied once into a
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
//! [`super::transport`]) has bit 63 set ([`wire::SHM_BIT`]) and its 24-byte body is
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
//! [`ShmStats::bad_messages`](crate::van::stats::ShmStats::bad_messages)); the link stays up.

pub mod alloc;
pub mod error;
pub mod link;
pub mod region;
pub mod wire;

pub use error::ShmError;
pub use link::{Shm, ShmLink, ShmReceiver, ShmSender};

#[cfg(test)]
mod tests;
