//! The dialing side of a TLS link, on rustls's buffered API: the handshake, run
//! blocking within a deadline; sealing messages into TLS records kept in the
//! connection, which the link hands the socket without blocking
//! ([`super::super::wire`]); and reading the accepting side's one-byte answers.

use super::handshake::{deadline_left, io_failed, tls_failed, Failed};
use crate::van::tcp::stream::Stream;
use bytes::Bytes;
use rustls::ClientConnection;
use std::io::{self, IoSlice, Read, Write};
use std::time::Instant;

/// Runs `conn`'s handshake on the blocking `tcp` until it completes or `deadline`.
pub fn handshake(conn: &mut ClientConnection, tcp: &mut Stream, deadline: Instant) -> Result<(), Failed> {
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
/// [`super::handshake::ACCEPTED`], or a shared-memory offer's answer).
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
