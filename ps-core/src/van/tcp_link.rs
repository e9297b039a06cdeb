//! The TCP van's outgoing links: one per peer, its connection and its queue of
//! messages waiting to be written ([`super::cork`], lazy sends), each batch written
//! in one vectored write. The message header is the wire format of
//! [`super::tcp_transport`].

use super::cork;
use super::guard::{Guard, Outgoing};
use super::shm::{self, ShmLink};
use bytes::Bytes;
use parking_lot::Mutex;
use std::io::{self, IoSlice, Write};
use std::net::{Shutdown, TcpStream, ToSocketAddrs};
use std::sync::Arc;
use std::time::Duration;

/// The first 4 bytes of every message on a TCP link.
pub(super) const MAGIC: u32 = u32::from_le_bytes(*b"PSRS");

/// Socket options of every TCP link: no Nagle delay.
pub(super) fn tune(s: &TcpStream) {
    let _ = s.set_nodelay(true);
}

/// A peer's outgoing connection (opened at the first send) and its queue.
pub(super) struct Peer {
    pub(super) addr: String,
    pub(super) stream: Option<Outgoing>,
    /// Messages queued by a corked thread ([`cork`]), headers and frames in order.
    pub(super) queued: Vec<Bytes>,
    pub(super) queued_bytes: usize,
    pub(super) queued_msgs: usize,
    pub(super) shm: ShmLink,
}

impl Peer {
    pub(super) fn new(addr: String) -> Peer {
        Peer {
            addr,
            stream: None,
            queued: Vec::new(),
            queued_bytes: 0,
            queued_msgs: 0,
            shm: ShmLink::NotOffered,
        }
    }

    /// Writes every queued message in one vectored write (opening the connection
    /// first if needed); on failure the connection is dropped, to be reopened by the
    /// next send, and the queued messages are lost (as a failed send's).
    pub(super) fn write_queued(&mut self, guard: &Guard) -> io::Result<()> {
        let queued = std::mem::take(&mut self.queued);
        (self.queued_bytes, self.queued_msgs) = (0, 0);
        if queued.is_empty() {
            return Ok(());
        }
        cork::wake_now(); // the write may block on a slow peer
        if self.stream.is_none() {
            self.stream = Some(open(&self.addr, guard)?);
        }
        let stream = self.stream.as_mut().expect("just opened");
        let r = write_all(stream, &queued);
        if r.is_err() {
            // reconnect (and offer shared memory again) on the next send
            self.stream = None;
            self.shm = ShmLink::NotOffered;
        }
        r
    }
}

/// One outgoing link: the peer's connection and its queue.
pub(super) struct Link {
    pub(super) peer: Mutex<Peer>,
    pub(super) guard: Arc<Guard>,
}

impl Link {
    pub(super) fn new(addr: String, guard: &Arc<Guard>) -> Arc<Link> {
        Arc::new(Link {
            peer: Mutex::new(Peer::new(addr)),
            guard: Arc::clone(guard),
        })
    }

    pub(super) fn lock(&self) -> parking_lot::MutexGuard<'_, Peer> {
        self.peer.lock()
    }
}

impl cork::Flush for Link {
    fn flush_queued(&self) {
        let mut p = self.peer.lock();
        let n = p.queued_msgs;
        if let Err(e) = p.write_queued(&self.guard) {
            log::debug!("{n} queued messages to {} not sent: {e}", p.addr);
        }
    }
}

/// Connects to `addr` (2 s limit) and runs the opening side of the handshake.
pub(super) fn open(addr: &str, guard: &Guard) -> io::Result<Outgoing> {
    cork::wake_now(); // connecting and the handshake may block
    let sa = addr
        .to_socket_addrs()?
        .next()
        .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, format!("cannot resolve {addr}")))?;
    let s = TcpStream::connect_timeout(&sa, Duration::from_secs(2))?;
    tune(&s);
    s.set_write_timeout(Some(Duration::from_secs(60)))?;
    guard.connect(s, addr)
}

/// The header of a message of `frames` whose frames `i` with bit i of `marks` are
/// shared-memory descriptors.
pub(super) fn header(frames: &[Bytes], marks: u128) -> Bytes {
    let mut header = Vec::with_capacity(8 + 8 * frames.len());
    header.extend_from_slice(&MAGIC.to_le_bytes());
    header.extend_from_slice(&(frames.len() as u32).to_le_bytes());
    for (i, f) in frames.iter().enumerate() {
        header.extend_from_slice(&shm::wire::mark(f.len() as u64, i < 128 && marks >> i & 1 == 1).to_le_bytes());
    }
    Bytes::from(header)
}

/// Writes `bufs` whole, in as few vectored writes as the kernel takes, then flushes.
pub(super) fn write_all(stream: &mut impl Write, bufs: &[Bytes]) -> io::Result<()> {
    let mut slices: Vec<IoSlice<'_>> = bufs.iter().filter(|b| !b.is_empty()).map(|b| IoSlice::new(b)).collect();
    let mut rest = &mut slices[..];
    while !rest.is_empty() {
        let n = stream.write_vectored(rest)?;
        if n == 0 {
            return Err(io::Error::new(io::ErrorKind::WriteZero, "connection closed"));
        }
        IoSlice::advance_slices(&mut rest, n);
    }
    stream.flush()
}

/// Writes one plain message (tests).
#[cfg(test)]
pub(super) fn write_message(stream: &mut impl Write, frames: &[Bytes]) -> io::Result<()> {
    let mut bufs = vec![header(frames, 0)];
    bufs.extend(frames.iter().cloned());
    write_all(stream, &bufs)
}

pub(super) trait FlushClose {
    /// Flushes and half-closes.
    fn flush_and_close(self) -> io::Result<()>;
}

impl FlushClose for Outgoing {
    /// Flushes and half-closes, so the last messages reach the peer before it sees EOF.
    fn flush_and_close(mut self) -> io::Result<()> {
        self.flush()?;
        self.shutdown(Shutdown::Write)
    }
}
