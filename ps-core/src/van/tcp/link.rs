//! The TCP van's outgoing links: one per peer, its connection and its queue of
//! messages waiting to be written ([`super::cork`], lazy sends), each batch handed to
//! the socket in one vectored write that never blocks ([`super::wire`]); a reader
//! thread leaves what the socket did not take to the drain ([`super::drain`]).
//! The message header is the wire format of [`super::transport`].

use super::drain::{Drain, Unwritten};
use super::guard::{Guard, Outgoing};
use super::shm::{self, Shm, ShmLink};
use super::stream;
use super::wire::{wait_writable, Wire};
use crate::van::authz::Expect;
use crate::van::cork;
use crate::van::stats::ShmStats;
use bytes::Bytes;
use parking_lot::{Mutex, MutexGuard};
use std::io;
#[cfg(test)]
use std::io::{IoSlice, Write};
use std::net::{Shutdown, ToSocketAddrs};
use std::os::fd::RawFd;
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

/// The first 4 bytes of every message on a TCP link.
pub(super) const MAGIC: u32 = u32::from_le_bytes(*b"PSRS");

/// A peer's outgoing connection (opened at the first send) and its queue.
pub(super) struct Peer {
    pub(super) addr: String,
    /// What the peer's certificate must show.
    pub(super) expect: Expect,
    /// Where to count a connection over a Unix socket, if the connection may be one
    /// when the peer is on this host (`PS_LOCAL_SOCKET`); None: TCP only.
    pub(super) local_socket: Option<Arc<ShmStats>>,
    pub(super) stream: Option<Wire>,
    /// Messages queued by a corked thread ([`cork`]), headers and frames in order.
    pub(super) queued: Vec<Bytes>,
    /// Messages sent while the connection is being opened, each its frames: they
    /// are queued once it is open, when shared memory can be offered for them.
    pub(super) waiting: Vec<Vec<Bytes>>,
    pub(super) queued_bytes: usize,
    pub(super) queued_msgs: usize,
    pub(super) shm: ShmLink,
    /// The connection is being opened in the background ([`super::opening`]): what
    /// is sent meanwhile waits in `waiting`.
    pub(super) opening: bool,
    /// The last failure to open the connection: when, and the error.
    pub(super) failed: Option<(Instant, io::ErrorKind, String)>,
}

impl Peer {
    pub(super) fn new(addr: String, expect: Expect, local_socket: Option<Arc<ShmStats>>) -> Peer {
        Peer {
            addr,
            expect,
            local_socket,
            stream: None,
            queued: Vec::new(),
            waiting: Vec::new(),
            queued_bytes: 0,
            queued_msgs: 0,
            shm: ShmLink::NotOffered,
            opening: false,
            failed: None,
        }
    }

    /// Queues a message on the open connection, its large frames placed in shared
    /// memory first when the link has it ([`Shm::place`]; an offer goes straight to
    /// the socket, so it is made only while no bytes wait before it).
    pub(super) fn queue(&mut self, shm: &Shm, mut frames: Vec<Bytes>) {
        let wire = self.stream.as_mut().expect("queued on an open connection");
        let marks = if wire.pending() && matches!(self.shm, ShmLink::NotOffered) {
            0
        } else {
            shm.place(&mut self.shm, wire.conn(), &mut frames)
        };
        self.queued.push(header(&frames, marks));
        self.queued_bytes += frames.iter().map(|f| f.len()).sum::<usize>();
        self.queued.extend(frames);
        self.queued_msgs += 1;
    }

    /// True once the queue reached [`cork::MAX_QUEUED_BYTES`] or
    /// [`cork::MAX_QUEUED_MSGS`].
    pub(super) fn queue_full(&self) -> bool {
        self.queued_bytes >= cork::MAX_QUEUED_BYTES || self.queued_msgs >= cork::MAX_QUEUED_MSGS
    }

    /// True while written bytes wait for the socket.
    pub(super) fn pending(&self) -> bool {
        self.stream.as_ref().is_some_and(Wire::pending)
    }

    /// Puts every queued message behind what waits for the socket (opening the
    /// connection first if needed) and hands the socket what it takes without blocking:
    /// true when nothing waits any more. On failure the connection is dropped, to be
    /// reopened by the next send, and the messages not written are lost (as a failed
    /// send's).
    pub(super) fn write_queued(&mut self, guard: &Guard) -> io::Result<bool> {
        if self.opening {
            // the thread opening the connection writes the queue once it is open
            return Ok(true);
        }
        let queued = std::mem::take(&mut self.queued);
        (self.queued_bytes, self.queued_msgs) = (0, 0);
        if queued.is_empty() && !self.pending() {
            return Ok(true);
        }
        if self.stream.is_none() {
            self.stream = Some(Wire::new(self.open_now(guard)?));
        }
        let wire = self.stream.as_mut().expect("just opened");
        let r = wire.push(queued).and_then(|()| wire.write_now());
        if r.is_err() {
            self.drop_stream();
        }
        r
    }

    /// Opens the connection on this thread (see [`open`]); a failure is remembered
    /// (see [`Peer::recent_failure`]).
    pub(super) fn open_now(&mut self, guard: &Guard) -> io::Result<Outgoing> {
        let r = open(&self.addr, &self.expect, guard, self.local_socket.as_deref());
        self.failed = match &r {
            Ok(_) => None,
            Err(e) => Some((Instant::now(), e.kind(), e.to_string())),
        };
        r
    }

    /// Drops the connection (what waits on it is lost); the next send reconnects and
    /// offers shared memory again.
    pub(super) fn drop_stream(&mut self) {
        if let Some(w) = self.stream.take() {
            let _ = w.shutdown(Shutdown::Both);
        }
        self.shm = ShmLink::NotOffered;
    }
}

/// How long a reader thread goes on writing a link the socket did not take at once
/// before it leaves the rest to the drain: long enough for a fast peer to take a few
/// MB (no hand-over), short enough that two readers writing to each other under full
/// sockets each go back to reading soon.
const READER_WRITE_BUDGET: Duration = Duration::from_millis(20);

/// A thread waiting for a full socket looks again at least this often.
const WAIT_SLICE: Duration = Duration::from_millis(100);

/// One outgoing link: the peer's connection and its queue.
pub(super) struct Link {
    pub(super) peer: Mutex<Peer>,
    pub(super) guard: Arc<Guard>,
    drain: Arc<Drain>,
    me: Weak<Link>,
}

impl Link {
    pub(super) fn new(
        addr: String,
        expect: Expect,
        local_socket: Option<Arc<ShmStats>>,
        guard: &Arc<Guard>,
        drain: &Arc<Drain>,
    ) -> Arc<Link> {
        Arc::new_cyclic(|me| Link {
            peer: Mutex::new(Peer::new(addr, expect, local_socket)),
            guard: Arc::clone(guard),
            drain: Arc::clone(drain),
            me: me.clone(),
        })
    }

    pub(super) fn lock(&self) -> parking_lot::MutexGuard<'_, Peer> {
        self.peer.lock()
    }

    /// Writes `p`'s queue (see [`Peer::write_queued`]) as far as the socket takes it
    /// without blocking, and hands the rest to the drain: the caller never waits.
    pub(super) fn write_or_hand_over(&self, mut p: MutexGuard<'_, Peer>) -> io::Result<()> {
        if p.write_queued(&self.guard)? {
            return Ok(());
        }
        drop(p);
        if let Some(me) = self.me.upgrade() {
            self.drain.add(me);
        }
        Ok(())
    }

    /// Writes `p`'s queue (see [`Peer::write_queued`]). What the socket does not take
    /// at once: any thread but a reader waits, without the link's lock, until the
    /// socket took it all (back-pressure on an application that outruns its peer). A
    /// reader thread (one that corks) goes on writing for at most
    /// [`READER_WRITE_BUDGET`] (handing over costs the drain's wake-up), then hands
    /// the rest to the drain and goes back to reading; to a link already waiting on
    /// the drain it hands over at once.
    pub(super) fn write_out(&self, mut p: MutexGuard<'_, Peer>) -> io::Result<()> {
        let was_waiting = p.pending();
        if p.write_queued(&self.guard)? {
            return Ok(());
        }
        drop(p);
        let reader = cork::active();
        cork::wake_now(); // waiting for the peer: nobody waits on this thread meanwhile
        if !(reader && was_waiting) && self.write_while_taken(reader.then_some(READER_WRITE_BUDGET))? {
            return Ok(());
        }
        if let Some(me) = self.me.upgrade() {
            self.drain.add(me);
        }
        Ok(())
    }

    /// Waits for the socket and writes more until nothing waits (true) or `budget`
    /// (None: no limit) ran out (false).
    fn write_while_taken(&self, budget: Option<Duration>) -> io::Result<bool> {
        let end = budget.map(|b| Instant::now() + b);
        loop {
            let Some(fd) = self.waiting_fd() else {
                return Ok(true);
            };
            let wait = match end {
                Some(end) => match end.saturating_duration_since(Instant::now()) {
                    left if left.is_zero() => return Ok(false),
                    left => left.min(WAIT_SLICE),
                },
                None => WAIT_SLICE,
            };
            let _ = wait_writable(&[fd], wait); // interrupted: look again
            let mut p = self.lock();
            if p.stream.is_none() {
                return Err(io::Error::new(
                    io::ErrorKind::BrokenPipe,
                    "the connection broke while writing",
                ));
            }
            if p.write_queued(&self.guard)? {
                return Ok(true);
            }
        }
    }
}

impl Unwritten for Link {
    /// The socket of this link's connection while bytes wait for it.
    fn waiting_fd(&self) -> Option<RawFd> {
        self.lock().stream.as_ref().filter(|w| w.pending()).map(Wire::fd)
    }

    /// Hands the socket more of what waits (the drain): true when nothing waits any
    /// more or the connection failed (logged; it is dropped).
    fn write_more(&self) -> bool {
        let mut p = self.lock();
        match p.write_queued(&self.guard) {
            Ok(done) => done,
            Err(e) => {
                log::warn!("connection to {} dropped, its unwritten messages lost: {e}", p.addr);
                true
            }
        }
    }
}

impl cork::Flush for Link {
    fn flush_queued(&self) {
        let p = self.peer.lock();
        let n = p.queued_msgs;
        if let Err(e) = self.write_out(p) {
            log::debug!("{n} queued messages to {} not sent: {e}", self.lock().addr);
        }
    }
}

/// Connects to `addr` (2 s limit) and runs the opening side of the handshake, the
/// peer's certificate checked against `expect`: through its Unix socket when `local`
/// is given (counted there) and `addr` is on this host and has one
/// ([`super::stream`]), over TCP otherwise.
pub(super) fn open(addr: &str, expect: &Expect, guard: &Guard, local: Option<&ShmStats>) -> io::Result<Outgoing> {
    cork::wake_now(); // connecting and the handshake may block
    let sa = addr
        .to_socket_addrs()?
        .next()
        .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, format!("cannot resolve {addr}")))?;
    let s = stream::connect(sa, local.is_some(), Some(Duration::from_secs(2)))?;
    if let Some(stats) = local.filter(|_| s.is_local()) {
        stats.unix_out.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }
    s.set_write_timeout(Some(Duration::from_secs(60)))?;
    guard.connect(s, addr, expect)
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

/// Writes `bufs` whole, in as few vectored writes as the kernel takes, then flushes
/// (tests).
#[cfg(test)]
fn write_all(stream: &mut impl Write, bufs: &[Bytes]) -> io::Result<()> {
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
