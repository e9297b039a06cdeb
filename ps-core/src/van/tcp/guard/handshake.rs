//! What both sides of a TLS link's handshake share: the byte that confirms a link, how
//! a handshake fails, and its deadline (a peer sending a byte at a time does not extend
//! it).

use std::io;
use std::time::{Duration, Instant};

/// The byte the accepting side sends, inside TLS, once it has verified the dialer's
/// certificate: the dialer knows its credentials were accepted (in TLS 1.3 the
/// client's handshake ends before the server has checked its certificate).
pub const ACCEPTED: u8 = 1;

/// How a handshake failed.
#[derive(Debug)]
pub enum Failed {
    /// The peer's bytes or certificate were refused (one line).
    Refused(String),
    /// The peer refused ours (the alert it sent).
    RefusedUs(rustls::AlertDescription),
    /// The deadline passed.
    Silent,
    /// The peer closed or reset the connection.
    Closed(String),
    /// A local socket error.
    Io(io::Error),
}

/// What is left of the time until `deadline`; None once it has passed.
pub fn deadline_left(deadline: Instant) -> Option<Duration> {
    deadline.checked_duration_since(Instant::now()).filter(|d| !d.is_zero())
}

/// A socket error during a handshake, by what it means for the peer.
pub fn io_failed(e: io::Error) -> Failed {
    match e.kind() {
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut => Failed::Silent,
        io::ErrorKind::UnexpectedEof | io::ErrorKind::ConnectionReset | io::ErrorKind::BrokenPipe => {
            Failed::Closed(e.to_string())
        }
        _ => Failed::Io(e),
    }
}

/// A TLS error during a handshake: the peer's alert, or what was wrong with its bytes.
pub fn tls_failed(e: rustls::Error) -> Failed {
    match e {
        rustls::Error::AlertReceived(a) => Failed::RefusedUs(a),
        other => Failed::Refused(other.to_string()),
    }
}
