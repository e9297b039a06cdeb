//! The TCP van's reading side: one reader thread per accepted connection, which runs
//! the handshake, answers a shared-memory offer (inside TLS when on), parses messages
//! from a buffered read (many per `read`) and hands each to the van with the link's
//! [`Origin`] (its certificate, and the node id it is bound to: the van drops what
//! they do not allow, once it has decoded the header, [`crate::van::authz`]); its
//! handlers' sends are corked until its buffer runs dry ([`super::cork`]).

use super::guard::{Guard, Incoming, Permit};
use super::link::MAGIC;
use super::shm::{self, Shm, ShmReceiver};
use super::spin_read::FrameRead;
use super::stream::Stream;
use crate::config::Limits;
use crate::van::authz::Origin;
use crate::van::cork;
use crate::van::transport::Deliver;
use bytes::Bytes;
use parking_lot::Mutex;
use std::collections::HashMap;
use std::io;
use std::net::Shutdown;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Reads one message; `Ok(None)` at a clean end of stream.
pub(crate) fn read_message(r: &mut impl FrameRead, limits: &Limits) -> io::Result<Option<Vec<Bytes>>> {
    let mut shm = ShmReceiver::none();
    loop {
        match read_message_shm(r, limits, &mut shm)? {
            Step::Message(m) => return Ok(Some(m)),
            Step::End => return Ok(None),
            Step::Answer(_) => {}
        }
    }
}

/// What the next read brought.
enum Step {
    /// A message.
    Message(Vec<Bytes>),
    /// A shared-memory offer, decided: send this byte back on the link.
    Answer(u8),
    /// The clean end of the stream.
    End,
}

/// Reads one message, deciding a shared-memory offer and resolving descriptor frames
/// through `shm` on the way; a message with a bad descriptor is dropped (logged by
/// `shm`) and the next one read.
fn read_message_shm(r: &mut impl FrameRead, limits: &Limits, shm: &mut ShmReceiver) -> io::Result<Step> {
    loop {
        let mut head = [0u8; 8];
        match r.read_exact(&mut head) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(Step::End),
            Err(e) => return Err(e),
        }
        let bad = |why: String| io::Error::new(io::ErrorKind::InvalidData, why);
        let magic = u32::from_le_bytes(head[..4].try_into().expect("4 bytes"));
        let n = u32::from_le_bytes(head[4..].try_into().expect("4 bytes"));
        if magic == shm::wire::OFFER_MAGIC {
            return Ok(Step::Answer(shm.on_offer(r, n)?));
        }
        if head[0] == 0x16 && head[1] == 0x03 {
            return Err(bad(
                "a TLS client: the peer has security on (PS_TLS_* or PS_SECRET_FILE) and this node has not".into(),
            ));
        }
        if magic != MAGIC {
            return Err(bad(format!("not a psrs stream (magic {magic:#x})")));
        }
        limits.check_message(n as usize, 0).map_err(|e| bad(e.to_string()))?;
        let mut lens = vec![0u8; 8 * n as usize];
        r.read_exact(&mut lens)?;
        let mut lens: Vec<u64> = lens
            .chunks_exact(8)
            .map(|c| u64::from_le_bytes(c.try_into().expect("8 bytes")))
            .collect();
        let marks = shm::wire::unmark(&mut lens);
        let total = lens.iter().try_fold(0u64, |a, &l| a.checked_add(l)).unwrap_or(u64::MAX);
        limits
            .check_message(n as usize, total)
            .map_err(|e| bad(e.to_string()))?;
        let mut frames = Vec::with_capacity(n as usize);
        for len in lens {
            frames.push(Bytes::from(r.read_frame(len as usize)?));
        }
        if shm.resolve(&mut frames, marks) {
            return Ok(Step::Message(frames));
        }
    }
}

/// Reads the accepted connection number `id` until it ends, then closes it.
pub(super) fn serve(id: u64, incoming: Arc<Mutex<HashMap<u64, Stream>>>, stream: Stream, ctx: Serve) {
    read_all(stream, ctx);
    if let Some(s) = incoming.lock().remove(&id) {
        let _ = s.shutdown(Shutdown::Both);
    }
}

/// What a reader thread needs besides its stream.
pub(super) struct Serve {
    pub(super) deliver: Deliver,
    pub(super) stop: Arc<AtomicBool>,
    pub(super) guard: Arc<Guard>,
    pub(super) permit: Permit,
    pub(super) spin: Duration,
    pub(super) shm: Arc<Shm>,
}

pub(super) fn read_all(stream: Stream, ctx: Serve) {
    let Serve {
        deliver,
        stop,
        guard,
        permit,
        spin,
        shm,
    } = ctx;
    let Ok(addr) = stream.peer_addr() else { return };
    let peer = addr.to_string();
    let mut shm = shm.incoming(addr);
    let mut r: Incoming = match guard.accept(stream, addr, permit, spin) {
        Ok(r) => r,
        Err(e) if !e.counts_against_peer() => {
            // a probe, or a peer that gave up: not worth a warning
            log::debug!("connection from {peer}: {e}");
            return;
        }
        Err(e) => {
            log::warn!("refused a connection from {peer}: {e}");
            return;
        }
    };
    let limits = guard.limits().clone();
    let mut origin = Origin::new(r.cert().cloned());
    // the handlers' sends are written when the buffer runs dry (SpinRead flushes)
    cork::begin();
    while !stop.load(Ordering::Relaxed) {
        match read_message_shm(&mut r, &limits, &mut shm) {
            Ok(Step::Message(frames)) => {
                deliver(frames, Some(&mut origin));
                cork::flush_if_due(); // a full queue is written outside the handler
            }
            Ok(Step::Answer(byte)) => {
                if let Err(e) = r.reply(&[byte]) {
                    log::debug!("shared-memory answer to {peer} not sent: {e}");
                    break;
                }
            }
            Ok(Step::End) => break,
            Err(e) => {
                if !stop.load(Ordering::Relaxed) && e.kind() != io::ErrorKind::ConnectionReset {
                    log::warn!("dropped a malformed message from {peer} and closed the connection: {e}");
                }
                break;
            }
        }
    }
    cork::flush();
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::van::tcp::link::write_message;
    use std::io::Write;
    use std::net::{TcpListener, TcpStream};

    #[test]
    fn frames_round_trip_and_garbage_is_an_error() {
        let frames = vec![
            Bytes::from_static(b"meta"),
            Bytes::new(),
            Bytes::from(vec![7u8; 100_000]),
        ];
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let mut w = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (mut r, _) = l.accept().unwrap();
        write_message(&mut w, &frames).unwrap();
        assert_eq!(read_message(&mut r, &Limits::default()).unwrap().unwrap(), frames);
        w.write_all(b"GET / HTTP/1.0\r\n\r\n").unwrap();
        assert!(read_message(&mut r, &Limits::default()).is_err());
        let mut huge = Vec::new();
        huge.extend_from_slice(&MAGIC.to_le_bytes());
        huge.extend_from_slice(&1u32.to_le_bytes());
        huge.extend_from_slice(&u64::MAX.to_le_bytes());
        assert!(read_message(&mut &huge[..], &Limits::default()).is_err());
        let mut many = Vec::new();
        many.extend_from_slice(&MAGIC.to_le_bytes());
        many.extend_from_slice(&u32::MAX.to_le_bytes());
        assert!(read_message(&mut &many[..], &Limits::default()).is_err());
        assert!(read_message(&mut &b""[..], &Limits::default()).unwrap().is_none());
    }
}
