//! The transport a van runs over. A trait, so another transport than ZMQ can be added.

use bytes::Bytes;
use std::io;
use std::time::Duration;

/// Moves multipart messages between nodes. Implementations are shared between the
/// receiving thread and every sending thread.
pub trait Transport: Send + Sync {
    /// Binds the receiving endpoint on `host:port` (`port` 0 = any free port) and
    /// returns the bound port.
    fn bind(&self, host: &str, port: u16) -> io::Result<u16>;
    /// Opens a connection to the peer known as `peer` at `host:port`, replacing any
    /// earlier connection under that key.
    fn connect(&self, peer: i32, host: &str, port: u16) -> io::Result<()>;
    /// Closes the connection to `peer`, if any.
    fn disconnect(&self, peer: i32);
    /// True if a connection to `peer` is open.
    fn is_connected(&self, peer: i32) -> bool;
    /// Sends `frames` as one message to `peer`; returns the bytes sent. The frames are
    /// not copied.
    fn send(&self, peer: i32, frames: Vec<Bytes>) -> io::Result<usize>;
    /// Waits at most `timeout` for the next message and returns its frames (without
    /// any transport envelope), or `None` on timeout.
    fn recv(&self, timeout: Duration) -> io::Result<Option<Vec<Bytes>>>;
    /// Closes every socket. Later calls fail.
    fn close(&self);
}
