//! The accepting side of a TLS link, on rustls's unbuffered API. Ciphertext is read
//! from the socket into the link's own buffer, up to [`IN_BYTES`] per `read`, and each
//! record is decrypted where it lies. (Rustls's buffered API copies what it reads into a
//! buffer of its own, 4 KiB per call, and zero-fills that buffer again each time it
//! empties and grows back.) Plaintext is read as a stream (message heads) or as whole
//! frames, which take each record's plaintext straight into the frame; within a large
//! frame an empty socket is polled briefly before the reader sleeps
//! ([`SpinRead::read_in_frame`]), as on a plaintext link. A few bytes go back inside TLS:
//! the link's confirmation and shared-memory answers.

use super::handshake::{deadline_left, io_failed, tls_failed, Failed};
use crate::van::tcp::spin_read::{SpinRead, DIRECT_FRAME_BYTES};
use crate::van::tcp::stream::Stream;
use rustls::server::UnbufferedServerConnection;
use rustls::unbuffered::{ConnectionState, EncodeError, EncryptError, InsufficientSizeError};
use rustls::ServerConfig;
use std::io::{self, Read, Write};
use std::sync::Arc;
use std::time::Instant;

/// The ciphertext buffer's size: one `read` takes up to this much.
pub const IN_BYTES: usize = 80 << 10;

/// The largest record rustls accepts (16 KiB of plaintext, 2 KiB of expansion, a 5-byte
/// header): what must fit after the unprocessed bytes before the next read.
const MAX_RECORD: usize = 16 * 1024 + 2048 + 5;

/// What one step of the connection brought.
#[derive(Debug, PartialEq, Eq)]
enum Step {
    /// A record's plaintext went to the sink.
    Plain,
    /// The connection needs more ciphertext from the peer.
    NeedsInput,
    /// TLS bytes wait in `out` for the peer.
    Transmit,
    /// The application's bytes were encrypted into `out`.
    Encrypted,
    /// The peer ended the session.
    Closed,
}

/// The accepting side of one TLS link.
pub struct Acceptor {
    conn: UnbufferedServerConnection,
    /// Ciphertext from the socket; `[start, end)` not processed yet.
    inbuf: Box<[u8]>,
    start: usize,
    end: usize,
    /// Plaintext decrypted but not read yet, from `plain_at`.
    plain: Vec<u8>,
    plain_at: usize,
    /// TLS bytes for the peer (handshake, alerts, answers).
    out: Vec<u8>,
    /// The peer ended the session (or its socket): reads return 0.
    ended: bool,
}

fn bad(e: impl std::fmt::Display) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, e.to_string())
}

/// Appends what `write` writes into a buffer of `need` bytes to `out`, growing it as asked.
fn append(out: &mut Vec<u8>, mut write: impl FnMut(&mut [u8]) -> Result<usize, InsufficientSizeError>) {
    let at = out.len();
    let mut room = 1024;
    loop {
        out.resize(at + room, 0);
        match write(&mut out[at..]) {
            Ok(n) => {
                out.truncate(at + n);
                return;
            }
            Err(InsufficientSizeError { required_size }) => room = required_size,
        }
    }
}

impl Acceptor {
    /// A connection of the server side, before its handshake.
    pub fn new(config: Arc<ServerConfig>) -> Result<Acceptor, rustls::Error> {
        Ok(Acceptor {
            conn: UnbufferedServerConnection::new(config)?,
            inbuf: vec![0u8; IN_BYTES].into_boxed_slice(),
            start: 0,
            end: 0,
            plain: Vec::new(),
            plain_at: 0,
            out: Vec::new(),
            ended: false,
        })
    }

    /// The certificates the peer presented (after the handshake).
    pub fn peer_certificates(&self) -> Option<&[rustls::pki_types::CertificateDer<'static>]> {
        self.conn.peer_certificates()
    }

    /// Processes what was read until a record's plaintext went to `sink`, more input
    /// is needed, TLS bytes wait to be sent, the session ended, or (with `app`) the
    /// application's bytes were encrypted into `out`.
    fn step(&mut self, sink: &mut dyn FnMut(&[u8]), app: Option<&[u8]>) -> Result<Step, rustls::Error> {
        loop {
            let status = self.conn.process_tls_records(&mut self.inbuf[self.start..self.end]);
            let mut discard = status.discard;
            let step = match status.state {
                Err(e) => {
                    self.start += discard;
                    return Err(e);
                }
                Ok(ConnectionState::ReadTraffic(mut r)) => {
                    while let Some(record) = r.next_record() {
                        let record = record?;
                        discard += record.discard;
                        sink(record.payload);
                    }
                    Some(Step::Plain)
                }
                Ok(ConnectionState::EncodeTlsData(mut e)) => {
                    let mut done = Ok(());
                    append(&mut self.out, |buf| match e.encode(buf) {
                        Ok(n) => Ok(n),
                        Err(EncodeError::InsufficientSize(s)) => Err(s),
                        Err(EncodeError::AlreadyEncoded) => {
                            done = Err(rustls::Error::General("a TLS record encoded twice".into()));
                            Ok(0)
                        }
                    });
                    done?;
                    None
                }
                Ok(ConnectionState::TransmitTlsData(t)) => {
                    t.done(); // the caller sends `out` before the next step
                    Some(Step::Transmit)
                }
                Ok(ConnectionState::WriteTraffic(mut w)) => match app {
                    Some(bytes) => {
                        let mut done = Ok(());
                        append(&mut self.out, |buf| match w.encrypt(bytes, buf) {
                            Ok(n) => Ok(n),
                            Err(EncryptError::InsufficientSize(s)) => Err(s),
                            Err(EncryptError::EncryptExhausted) => {
                                done = Err(rustls::Error::EncryptError);
                                Ok(0)
                            }
                        });
                        done?;
                        Some(Step::Encrypted)
                    }
                    None => Some(Step::NeedsInput),
                },
                Ok(ConnectionState::BlockedHandshake) => Some(Step::NeedsInput),
                Ok(ConnectionState::PeerClosed) | Ok(ConnectionState::Closed) => Some(Step::Closed),
                Ok(other) => {
                    self.start += discard;
                    return Err(rustls::Error::General(format!("unexpected TLS state {other:?}")));
                }
            };
            self.start += discard;
            if let Some(step) = step {
                return Ok(step);
            }
        }
    }

    /// Makes room for at least one more record after the unprocessed bytes; the free
    /// part of the buffer.
    fn room(&mut self) -> &mut [u8] {
        if self.start == self.end {
            self.start = 0;
            self.end = 0;
        } else if self.inbuf.len() - self.end < MAX_RECORD {
            self.inbuf.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
        }
        &mut self.inbuf[self.end..]
    }

    /// Runs the server side of the handshake on the blocking `tcp` until it completes
    /// (the dialer's certificate checked) or `deadline`.
    pub fn handshake(&mut self, tcp: &mut Stream, deadline: Instant) -> Result<(), Failed> {
        let mut early = Vec::new();
        loop {
            let step = match self.step(&mut |p| early.extend_from_slice(p), None) {
                Ok(step) => step,
                Err(e) => {
                    self.send_alert(tcp);
                    return Err(tls_failed(e));
                }
            };
            match step {
                Step::Transmit => {
                    let left = deadline_left(deadline).ok_or(Failed::Silent)?;
                    tcp.set_write_timeout(Some(left)).map_err(Failed::Io)?;
                    tcp.write_all(&self.out).map_err(io_failed)?;
                    self.out.clear();
                }
                Step::NeedsInput if !self.conn.is_handshaking() => break,
                Step::NeedsInput => {
                    let left = deadline_left(deadline).ok_or(Failed::Silent)?;
                    tcp.set_read_timeout(Some(left)).map_err(Failed::Io)?;
                    let n = tcp.read(self.room()).map_err(io_failed)?;
                    if n == 0 {
                        return Err(Failed::Closed("closed during the TLS handshake".into()));
                    }
                    self.end += n;
                }
                Step::Plain | Step::Encrypted => {}
                Step::Closed => return Err(Failed::Closed("ended the TLS session during its handshake".into())),
            }
        }
        self.plain = early;
        Ok(())
    }

    /// Sends the alert rustls queued after an error (why the peer was refused), if the
    /// socket takes it.
    fn send_alert(&mut self, tcp: &mut Stream) {
        self.out.clear();
        if let Ok(Step::Transmit) = self.step(&mut |_| {}, None) {
            let _ = tcp.write_all(&self.out);
        }
        self.out.clear();
    }

    /// Decrypts the next record into `sink`, reading the socket (`src`) as needed, and
    /// sends what the connection has for the peer on `back` (a key update's answer):
    /// false at the end of the session. `in_frame`: the read is in the middle of a
    /// large frame (an empty socket is polled before the reader sleeps).
    fn next_record(
        &mut self,
        src: &mut SpinRead,
        back: &mut Stream,
        sink: &mut dyn FnMut(&[u8]),
        in_frame: bool,
    ) -> io::Result<bool> {
        loop {
            if self.ended {
                return Ok(false);
            }
            match self.step(sink, None).map_err(bad)? {
                Step::Plain => return Ok(true),
                Step::Transmit => {
                    back.write_all(&self.out)?;
                    self.out.clear();
                }
                Step::NeedsInput => {
                    let read = loop {
                        let room = self.room();
                        let r = if in_frame {
                            src.read_in_frame(room)
                        } else {
                            src.read(room)
                        };
                        match r {
                            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                            r => break r?,
                        }
                    };
                    if read == 0 {
                        if self.start < self.end {
                            return Err(io::Error::new(
                                io::ErrorKind::UnexpectedEof,
                                "connection closed in the middle of a TLS record",
                            ));
                        }
                        self.ended = true;
                    }
                    self.end += read;
                }
                Step::Closed => self.ended = true,
                Step::Encrypted => {}
            }
        }
    }

    /// Reads plaintext into `out`: at least one byte, or 0 at the end of the session.
    pub fn read(&mut self, src: &mut SpinRead, back: &mut Stream, out: &mut [u8]) -> io::Result<usize> {
        if out.is_empty() {
            return Ok(0);
        }
        while self.plain_at == self.plain.len() {
            self.plain.clear();
            self.plain_at = 0;
            let mut plain = std::mem::take(&mut self.plain);
            let more = self.next_record(src, back, &mut |p| plain.extend_from_slice(p), false);
            self.plain = plain;
            if !more? {
                return Ok(0);
            }
        }
        let n = out.len().min(self.plain.len() - self.plain_at);
        out[..n].copy_from_slice(&self.plain[self.plain_at..self.plain_at + n]);
        self.plain_at += n;
        Ok(n)
    }

    /// Reads the next `len` bytes of plaintext into a new buffer, each record's
    /// plaintext copied straight into it (the buffer grows as records arrive: `len`
    /// is the peer's word).
    pub fn read_frame(&mut self, src: &mut SpinRead, back: &mut Stream, len: usize) -> io::Result<Vec<u8>> {
        let mut frame = crate::van::tcp::spin_read::frame_buffer(len);
        let have = (self.plain.len() - self.plain_at).min(len);
        frame.extend_from_slice(&self.plain[self.plain_at..self.plain_at + have]);
        self.plain_at += have;
        while frame.len() < len {
            // what was decrypted is all in the frame: the rest comes from new records
            self.plain.clear();
            self.plain_at = 0;
            let mut rest = std::mem::take(&mut self.plain);
            let large = len - frame.len() >= DIRECT_FRAME_BYTES;
            let mut sink = |p: &[u8]| {
                let n = p.len().min(len - frame.len());
                frame.extend_from_slice(&p[..n]);
                rest.extend_from_slice(&p[n..]);
            };
            let more = self.next_record(src, back, &mut sink, large);
            self.plain = rest;
            if !more? {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "connection closed mid-message",
                ));
            }
        }
        Ok(frame)
    }

    /// Writes `bytes` inside TLS on the blocking `back` (the link's confirmation, a
    /// shared-memory answer).
    pub fn write(&mut self, back: &mut Stream, bytes: &[u8]) -> io::Result<()> {
        loop {
            let mut plain = std::mem::take(&mut self.plain);
            let step = self.step(&mut |p| plain.extend_from_slice(p), Some(bytes));
            self.plain = plain;
            match step.map_err(bad)? {
                Step::Encrypted => {
                    back.write_all(&self.out)?;
                    self.out.clear();
                    return Ok(());
                }
                Step::Transmit => {
                    back.write_all(&self.out)?;
                    self.out.clear();
                }
                Step::Plain => {}
                Step::NeedsInput => return Err(bad("the TLS handshake has not finished")),
                Step::Closed => self.ended = true,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn append_grows_to_what_the_writer_asks_and_keeps_what_was_there() {
        let mut out = b"ab".to_vec();
        let mut calls = 0;
        append(&mut out, |buf| {
            calls += 1;
            if buf.len() < 3000 {
                return Err(InsufficientSizeError { required_size: 3000 });
            }
            buf[..3].copy_from_slice(b"xyz");
            Ok(3)
        });
        assert_eq!(out, b"abxyz");
        assert_eq!(calls, 2);
    }
}
