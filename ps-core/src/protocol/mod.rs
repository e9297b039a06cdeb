//! Protocol decisions as plain state machines with no sockets, threads or clocks:
//! who gets which id, whether a barrier is complete, who is dead, which message to
//! resend. Time is passed in as milliseconds, so every rule is unit-tested
//! deterministically; the van is a thin shell that feeds them events.

pub mod barrier;
pub mod barrier_ask;
pub mod course;
pub mod error;
pub mod join_backoff;
pub mod liveness;
pub mod membership;
pub mod peers;
pub mod resender;
pub mod scheduler;
pub mod shared;

pub use error::ProtocolError;
