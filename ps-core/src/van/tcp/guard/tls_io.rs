//! rustls over the van's own socket I/O: the handshakes, run blocking within a
//! deadline (a peer sending a byte at a time does not extend it); sealing messages
//! into TLS records kept in the connection, which the link hands the socket without
//! blocking ([`super::super::wire`]); and reading plaintext (and whole frames, copied
//! straight from the decrypted records) from a connection through a buffered socket.

use super::super::stream::Stream;
use bytes::Bytes;
use rustls::{AlertDescription, ClientConnection, Connection, ServerConnection};
use std::io::{self, BufRead, IoSlice, Read, Write};
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
    RefusedUs(AlertDescription),
    /// The deadline passed.
    Silent,
    /// The peer closed or reset the connection.
    Closed(String),
    /// A local socket error.
    Io(io::Error),
}

fn deadline_left(deadline: Instant) -> Option<Duration> {
    deadline.checked_duration_since(Instant::now()).filter(|d| !d.is_zero())
}

fn io_failed(e: io::Error) -> Failed {
    match e.kind() {
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut => Failed::Silent,
        io::ErrorKind::UnexpectedEof | io::ErrorKind::ConnectionReset | io::ErrorKind::BrokenPipe => {
            Failed::Closed(e.to_string())
        }
        _ => Failed::Io(e),
    }
}

fn tls_failed(e: rustls::Error) -> Failed {
    match e {
        rustls::Error::AlertReceived(a) => Failed::RefusedUs(a),
        other => Failed::Refused(other.to_string()),
    }
}

/// Runs `conn`'s handshake on the blocking `tcp` until it completes or `deadline`.
pub fn handshake(conn: &mut Connection, tcp: &mut Stream, deadline: Instant) -> Result<(), Failed> {
    while conn.is_handshaking() || conn.wants_write() {
        let left = deadline_left(deadline).ok_or(Failed::Silent)?;
        tcp.set_read_timeout(Some(left)).map_err(Failed::Io)?;
        tcp.set_write_timeout(Some(left)).map_err(Failed::Io)?;
        if conn.wants_write() {
            conn.write_tls(tcp).map_err(io_failed)?;
            continue;
        }
        match conn.read_tls(tcp).map_err(io_failed)? {
            0 => return Err(Failed::Closed("closed during the TLS handshake".into())),
            _ => {
                if let Err(e) = conn.process_new_packets() {
                    // the alert rustls queued tells the peer why
                    let _ = conn.write_tls(tcp);
                    return Err(tls_failed(e));
                }
            }
        }
    }
    Ok(())
}

/// Reads one plaintext byte from `conn` within `deadline` (the dialer waiting for
/// [`ACCEPTED`], or a shared-memory offer's answer).
pub fn read_byte(conn: &mut ClientConnection, tcp: &mut Stream, deadline: Instant) -> Result<u8, Failed> {
    let mut b = [0u8; 1];
    loop {
        match conn.reader().read(&mut b) {
            Ok(1) => return Ok(b[0]),
            Ok(_) => return Err(Failed::Closed("the peer ended the TLS session".into())),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
            Err(e) => return Err(io_failed(e)),
        }
        let left = deadline_left(deadline).ok_or(Failed::Silent)?;
        tcp.set_read_timeout(Some(left)).map_err(Failed::Io)?;
        if conn.read_tls(tcp).map_err(io_failed)? == 0 {
            return Err(Failed::Closed("closed before confirming the link".into()));
        }
        conn.process_new_packets().map_err(tls_failed)?;
    }
}

/// Seals `bufs` (whole messages) into TLS records, which wait inside `conn` until
/// written (`write_tls`).
pub fn seal(conn: &mut ClientConnection, bufs: &[Bytes]) -> io::Result<()> {
    let mut slices: Vec<IoSlice<'_>> = bufs.iter().filter(|b| !b.is_empty()).map(|b| IoSlice::new(b)).collect();
    let mut rest = &mut slices[..];
    while !rest.is_empty() {
        let n = conn.writer().write_vectored(rest)?;
        if n == 0 {
            return Err(io::Error::new(
                io::ErrorKind::WriteZero,
                "the TLS connection takes no more",
            ));
        }
        IoSlice::advance_slices(&mut rest, n);
    }
    Ok(())
}

/// Waits until `conn` holds plaintext, feeding it from `from` (a buffered socket):
/// false at the end of the session (a clean close; an unclean one is an error).
fn fill(conn: &mut ServerConnection, from: &mut impl Read) -> io::Result<bool> {
    let bad = |e: rustls::Error| io::Error::new(io::ErrorKind::InvalidData, e.to_string());
    loop {
        match conn.reader().fill_buf() {
            Ok(b) => return Ok(!b.is_empty()),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
            Err(e) => return Err(e),
        }
        if conn.read_tls(from)? == 0 {
            // the reader now says whether the session was closed properly
            conn.process_new_packets().map_err(bad)?;
            return match conn.reader().fill_buf() {
                Ok(b) => Ok(!b.is_empty()),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(false),
                Err(e) => Err(e),
            };
        }
        conn.process_new_packets().map_err(bad)?;
    }
}

/// Reads plaintext from `conn`, feeding it from `from` (a buffered socket) when it
/// has none; 0 at the end of the session.
pub fn read_plain(conn: &mut ServerConnection, from: &mut impl Read, out: &mut [u8]) -> io::Result<usize> {
    if out.is_empty() || !fill(conn, from)? {
        return Ok(0);
    }
    conn.reader().read(out)
}

/// Reads the next `len` bytes of plaintext into a new buffer, copied straight from
/// the decrypted records (no zero-filling of the buffer first).
pub fn read_frame(conn: &mut ServerConnection, from: &mut impl Read, len: usize) -> io::Result<Vec<u8>> {
    let mut buf = Vec::with_capacity(len);
    while buf.len() < len {
        if !fill(conn, from)? {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "connection closed mid-message",
            ));
        }
        let mut r = conn.reader();
        let chunk = r.fill_buf()?;
        let n = chunk.len().min(len - buf.len());
        buf.extend_from_slice(&chunk[..n]);
        r.consume(n);
    }
    Ok(buf)
}

/// Writes `bytes` inside TLS on the blocking `tcp` (the shared-memory answer).
pub fn write_plain(conn: &mut ServerConnection, tcp: &mut Stream, bytes: &[u8]) -> io::Result<()> {
    conn.writer().write_all(bytes)?;
    while conn.wants_write() {
        conn.write_tls(tcp)?;
    }
    Ok(())
}
